//! Captured graphs: the define-and-run half of the engine.
//!
//! A [`Graph`] is a straight-line program over tensor *values*: inputs
//! (arguments or placeholders, tensors captured by reference, constants,
//! the gradients of inputs), then [`Node`]s in program order, each applying
//! one [`OpCall`] — the same op functions eager mode calls — to earlier
//! values. Views and in-place writes keep their eager meaning: a view node's
//! outputs alias its input's memory and a mutating node writes into its
//! inputs, so running the nodes in order reproduces eager execution exactly;
//! the passes reason about aliasing explicitly (see [`Graph::storage_root`]).
//!
//! Graphs are built by [`trace`]: every op called while a trace is active is
//! run on shape-only [`Device::Meta`](crate::tensor::Device::Meta) tensors
//! (so each op's own shape, dtype and argument rules decide the captured
//! types) and recorded. Symbolic dimensions ([`sym`]) let one graph serve
//! many batch sizes. [`exec`] runs a graph on real tensors.

#[cfg(feature = "gpu")]
pub mod bundle;
pub mod call;
pub mod control;
pub mod exec;
pub mod fused;
pub mod passes;
#[cfg(feature = "gpu")]
pub mod replay;
pub mod save;
pub mod sym;
pub mod trace;
pub mod typecheck;

use std::fmt::Write as _;
use std::sync::Arc;

pub use call::{Effect, OpCall};

use crate::tensor::{DType, Tensor};

/// Index of a value in [`Graph::values`].
pub type ValueId = usize;

/// Where a value comes from.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Producer {
    /// The graph input with this index.
    Input(usize),
    /// Output `out` of node `node`.
    Node { node: usize, out: usize },
    /// Its node was removed by a pass; nothing may read it.
    Removed,
}

/// The type of a value: its shape (dims may be symbolic, see [`sym`]), dtype
/// and whether it required grad when captured.
#[derive(Clone, Debug)]
pub struct ValueInfo {
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub requires_grad: bool,
    pub producer: Producer,
}

/// What a graph input is bound to when the graph runs.
#[derive(Clone)]
pub enum InputKind {
    /// The tensor argument with this position (a placeholder).
    Arg(usize),
    /// A tensor read by reference (parameters, buffers, optimizer state):
    /// each run reads its current contents, and in-place writes land in it.
    Ref(Tensor),
    /// Data fixed when the graph was captured (Python lists and numbers).
    Const(Tensor),
    /// The `.grad` of another input's tensor when the run starts.
    Grad(ValueId),
}

/// A graph input.
#[derive(Clone)]
pub struct Input {
    pub kind: InputKind,
    pub value: ValueId,
    pub name: Option<String>,
}

/// One op applied to earlier values.
#[derive(Clone, Debug)]
pub struct Node {
    pub call: OpCall,
    pub inputs: Vec<ValueId>,
    /// The op's outputs, then `aux` tensors it saves for its gradient
    /// (see [`trace::push_aux`]).
    pub outputs: Vec<ValueId>,
    pub aux: usize,
    /// The user's source line where the op was captured (`file:line`).
    pub loc: Option<Arc<str>>,
}

/// A side effect applied when a run ends: set the `.grad` of an input's tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct SetGrad {
    /// The input value whose tensor receives the gradient.
    pub target: ValueId,
    /// The new gradient (`None` clears it).
    pub value: Option<ValueId>,
}

/// A captured computation (see the module docs).
#[derive(Clone, Default)]
pub struct Graph {
    pub values: Vec<ValueInfo>,
    pub inputs: Vec<Input>,
    pub nodes: Vec<Node>,
    pub outputs: Vec<ValueId>,
    pub set_grads: Vec<SetGrad>,
    /// Symbolic dimensions, by symbol number.
    pub symbols: Vec<sym::Symbol>,
    /// Whether a backward pass was captured (the graph computes its own
    /// gradients, so runs do not record autograd).
    pub has_backward: bool,
    /// The device the graph runs on: that of its arguments (else of the
    /// first tensor it reads by reference; the CPU when it reads none).
    /// Its constants are copied there when a plan is made.
    pub device: crate::tensor::Device,
    /// Plans of this graph write no result over a dying buffer in place
    /// (the `inplace` pass switched off).
    pub no_inplace: bool,
    /// Plans of this graph run no independent branches side by side (the
    /// `parallel` pass switched off).
    pub no_parallel: bool,
    /// Bound leaves whose `.grad` the capture saw absent (`None`) and so
    /// treated as absent (a backward set it rather than adding to it; an
    /// optimizer skipped the parameter): the graph holds only while they
    /// still have no gradient when it runs (see [`Graph::grad_guard`]).
    /// Held apart from the inputs: a pass may drop the input of a leaf the
    /// graph never reads (an optimizer skipped it).
    pub grad_absent: Vec<LeafRef>,
}

/// A leaf tensor a graph refers to: an argument (by position) or a tensor
/// read by reference.
#[derive(Clone, Debug)]
pub enum LeafRef {
    Arg(usize),
    Tensor(Tensor),
}

impl Graph {
    /// Why this graph no longer matches the gradients it was captured with,
    /// run on `args`: a leaf whose `.grad` the capture saw absent has one
    /// now (the graph would overwrite it, or skip its update), or one whose
    /// `.grad` it reads has none. `None` when every such leaf is as captured.
    pub fn grad_guard(&self, args: &[Tensor]) -> Option<String> {
        let has_grad = |t: &Tensor| t.meta().is_some_and(|m| m.grad().is_some());
        fn bound<'a>(inp: &'a Input, args: &'a [Tensor]) -> Option<&'a Tensor> {
            match &inp.kind {
                InputKind::Ref(t) => Some(t),
                InputKind::Arg(i) => args.get(*i),
                _ => None,
            }
        }
        for leaf in &self.grad_absent {
            let t = match leaf {
                LeafRef::Arg(i) => args.get(*i),
                LeafRef::Tensor(t) => Some(t),
            };
            if let Some(t) = t.filter(|t| has_grad(t)) {
                return Some(format!(
                    "the .grad of a tensor of shape {:?} was None when traced and is set now",
                    t.shape()
                ));
            }
        }
        for inp in &self.inputs {
            if let InputKind::Grad(b) = inp.kind {
                let t = self
                    .inputs
                    .iter()
                    .find(|i| i.value == b)
                    .and_then(|i| bound(i, args));
                if let Some(t) = t.filter(|t| !has_grad(t)) {
                    return Some(format!(
                        "the .grad of a tensor of shape {:?} was set when traced and is None now",
                        t.shape()
                    ));
                }
            }
        }
        None
    }

    /// Whether a tensor this graph reads by reference had its data rebound
    /// (`t.data = u`) after rebinding epoch `epoch` (see
    /// [`crate::tensor::storage::rebind_epoch`]): the graph then reads the
    /// tensor's old storage and must be captured again.
    pub fn refs_rebound_since(&self, epoch: u64) -> bool {
        self.inputs.iter().any(|i| match &i.kind {
            InputKind::Ref(t) => t.storage().rebound_at() > epoch,
            _ => false,
        })
    }

    /// Rewrite every node's device `from` (factories, copies, control-flow
    /// bodies) to `to`, and the graph's own device when it is `from`.
    pub fn relocate_calls(&mut self, from: crate::tensor::Device, to: crate::tensor::Device) {
        for n in &mut self.nodes {
            n.call = n.call.relocated(from, to);
        }
        if self.device == from {
            self.device = to;
        }
    }

    /// Move a graph that owns its tensors (one loaded from a file) to `to`:
    /// the calls naming `calls_from` are rewritten (see [`Graph::relocate_calls`])
    /// and every tensor it holds (read by reference, or constant) is copied to
    /// `to`. Not for captured graphs, whose references are the caller's tensors.
    pub fn relocate(
        &mut self,
        calls_from: crate::tensor::Device,
        to: crate::tensor::Device,
    ) -> crate::error::Result<()> {
        for inp in &mut self.inputs {
            if let InputKind::Ref(t) | InputKind::Const(t) = &mut inp.kind {
                if t.device() != to {
                    let moved = crate::backend::transfer(t, to)?;
                    if t.requires_grad() {
                        crate::autograd::set_requires_grad(&moved, true)?;
                    }
                    *t = moved;
                }
            }
        }
        self.relocate_calls(calls_from, to);
        self.device = to;
        Ok(())
    }

    /// The value a view chain bottoms out in: the value that owns the
    /// storage `v` aliases (an input, or an output of a non-view node).
    pub fn storage_root(&self, v: ValueId) -> ValueId {
        let mut v = v;
        loop {
            match self.values[v].producer {
                Producer::Node { node, .. } if self.nodes[node].call.effect() == Effect::View => {
                    v = self.nodes[node].inputs[0];
                }
                _ => return v,
            }
        }
    }

    /// Number of values each value is read by (node inputs, outputs, effects).
    pub fn use_counts(&self) -> Vec<usize> {
        let mut n = vec![0; self.values.len()];
        for node in &self.nodes {
            for &i in &node.inputs {
                n[i] += 1;
            }
        }
        for &o in &self.outputs {
            n[o] += 1;
        }
        for s in &self.set_grads {
            n[s.target] += 1;
            if let Some(v) = s.value {
                n[v] += 1;
            }
        }
        n
    }

    /// A readable listing: inputs, nodes with types and source lines, outputs.
    pub fn dump(&self) -> String {
        let mut s = String::new();
        let ty = |v: ValueId| {
            let i = &self.values[v];
            format!(
                "{}[{}]",
                i.dtype.name(),
                i.shape
                    .iter()
                    .map(|&d| sym::dim_str(d, &self.symbols))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let _ = writeln!(s, "graph(");
        for inp in &self.inputs {
            let kind = match &inp.kind {
                InputKind::Arg(k) => format!("arg {k}"),
                InputKind::Ref(_) => "ref".to_string(),
                InputKind::Const(_) => "const".to_string(),
                InputKind::Grad(v) => format!("grad of %{v}"),
            };
            let name = inp
                .name
                .as_deref()
                .map(|n| format!(" \"{n}\""))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "  %{}: {} = input({kind}){name}",
                inp.value,
                ty(inp.value)
            );
        }
        let _ = writeln!(s, ") {{");
        for (i, n) in self.nodes.iter().enumerate() {
            let outs = n
                .outputs
                .iter()
                .map(|&o| format!("%{o}: {}", ty(o)))
                .collect::<Vec<_>>()
                .join(", ");
            let ins = n
                .inputs
                .iter()
                .map(|v| format!("%{v}"))
                .collect::<Vec<_>>()
                .join(", ");
            let lhs = if outs.is_empty() {
                String::new()
            } else {
                format!("{outs} = ")
            };
            let loc = n
                .loc
                .as_deref()
                .map(|l| format!("  # {l}"))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "  {lhs}{}({ins}) {}  (node {i}){loc}",
                n.call.name(),
                attrs(&n.call)
            );
        }
        for g in &self.set_grads {
            let v = g.value.map_or("None".to_string(), |v| format!("%{v}"));
            let _ = writeln!(s, "  %{}.grad = {v}", g.target);
        }
        let outs = self
            .outputs
            .iter()
            .map(|v| format!("%{v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(s, "  return ({outs})");
        let _ = writeln!(s, "}}");
        s
    }
}

/// The non-tensor arguments of a call, for listings (`{dim: 1, keepdim: true}`).
pub fn attrs(c: &OpCall) -> String {
    let d = format!("{c:?}");
    match d.find(['{', '(']) {
        Some(i) => d[i..].to_string(),
        None => String::new(),
    }
}
