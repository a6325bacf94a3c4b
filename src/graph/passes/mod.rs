//! Graph passes. Each pass rewrites a graph and reports what it changed;
//! each lives in its own module with its own tests and can be switched off
//! ([`PassOptions`]). [`verify`] checks the invariants every pass keeps and
//! runs after each pass in tests and in debug mode.
//!
//! Aliasing rules all passes follow: a value whose memory (its storage
//! root, see [`Graph::storage_root`]) is written in place anywhere in the
//! graph, or that aliases a graph input, is never merged with another value
//! or replaced by one; nodes that write, draw random numbers or allocate
//! uninitialised memory are never merged or folded.

pub mod cse;
pub mod dce;
pub mod epilogue;
pub mod fold;
pub mod fuse;
pub mod simplify;
pub mod verify;

use std::collections::{HashMap, HashSet};

pub use dce::prune;
pub use verify::verify;

use super::{Graph, InputKind, OpCall, Producer, ValueId};
use crate::error::Result;

/// Which passes [`optimize`] runs.
#[derive(Clone, Debug, PartialEq)]
pub struct PassOptions {
    pub dce: bool,
    pub cse: bool,
    pub fold: bool,
    pub simplify: bool,
    pub fuse: bool,
    /// Fuse `relu` / 2×2 max pooling into the convolution before them
    /// (inference graphs on the CPU, see [`epilogue`]).
    pub epilogue: bool,
    /// Memory planning may write results in place over dying buffers.
    pub inplace: bool,
    /// Plans may run independent branches side by side.
    pub parallel: bool,
    /// Run [`verify`] after every pass.
    pub verify: bool,
}

impl Default for PassOptions {
    fn default() -> Self {
        PassOptions {
            dce: true,
            cse: true,
            fold: true,
            simplify: true,
            fuse: true,
            epilogue: true,
            inplace: true,
            parallel: true,
            verify: cfg!(debug_assertions),
        }
    }
}

impl PassOptions {
    /// Every pass off (the graph runs as captured).
    pub fn none() -> PassOptions {
        PassOptions {
            dce: false,
            cse: false,
            fold: false,
            simplify: false,
            fuse: false,
            epilogue: false,
            inplace: false,
            parallel: false,
            verify: false,
        }
    }
}

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PassReport {
    pub pass: &'static str,
    /// Nodes before and after.
    pub nodes_before: usize,
    pub nodes_after: usize,
    /// A one-line summary ("merged 3 nodes", ...).
    pub detail: String,
}

/// Run the enabled passes in order (simplify, CSE, fold, DCE) to a fixed
/// point of at most a few rounds; returns the graph and one report per pass run.
///
/// With `opts.verify` the IR is verified after every pass; without, once at
/// the end — and when that fails, the passes run again verifying after
/// each, so the error still names the pass that broke the graph.
pub fn optimize(g: &Graph, opts: &PassOptions) -> Result<(Graph, Vec<PassReport>)> {
    if opts.verify {
        return optimize_checked(g, opts);
    }
    let want = verify::result_layouts(g);
    let out = optimize_checked(g, opts)?;
    if let Err(e) = verify::after_pass(&out.0, "the passes", &want) {
        let mut each = opts.clone();
        each.verify = true;
        optimize_checked(g, &each)?;
        return Err(e);
    }
    Ok(out)
}

fn optimize_checked(g: &Graph, opts: &PassOptions) -> Result<(Graph, Vec<PassReport>)> {
    let mut g = g.clone();
    let mut reports = vec![];
    // What every pass must leave as captured: the layouts of the results.
    let want = if opts.verify {
        Some(verify::result_layouts(&g))
    } else {
        None
    };
    macro_rules! pass {
        ($on:expr, $name:literal, $f:expr) => {
            if $on {
                let n0 = g.nodes.len();
                let detail = $f(&mut g);
                if let Some(want) = &want {
                    verify::after_pass(&g, concat!("the ", $name, " pass"), want)?;
                }
                reports.push(PassReport {
                    pass: $name,
                    nodes_before: n0,
                    nodes_after: g.nodes.len(),
                    detail,
                });
            }
        };
    }
    for _round in 0..3 {
        let before = g.nodes.len();
        pass!(opts.simplify, "simplify", simplify::run);
        pass!(opts.cse, "cse", cse::run);
        pass!(opts.fold, "fold", fold::run);
        pass!(opts.dce, "dce", |g: &mut Graph| {
            let n0 = g.nodes.len();
            let outs = g.outputs.clone();
            *g = prune(g, &outs, &[], true);
            format!("removed {} nodes", n0 - g.nodes.len())
        });
        if g.nodes.len() == before {
            break;
        }
    }
    // Fusion last: it needs the simplified graph and the others do not see fused nodes.
    // A graph that records autograd as it runs (see `exec::Plan`) keeps the
    // values that need grad unfused.
    let record = !g.has_backward && g.outputs.iter().any(|&o| g.values[o].requires_grad);
    pass!(opts.epilogue, "epilogue", epilogue::run);
    pass!(opts.fuse, "fuse", |g: &mut Graph| fuse::run(g, record));
    // The plan's passes are switched per graph (see `exec::Plan::new`).
    g.no_inplace = !opts.inplace;
    g.no_parallel = !opts.parallel;
    // The bodies of control-flow nodes get the same passes.
    for n in &mut g.nodes {
        match &mut n.call {
            OpCall::Cond { then_g, else_g } => {
                *then_g = optimize_sub(then_g, opts)?;
                *else_g = optimize_sub(else_g, opts)?;
            }
            OpCall::While { cond, body } => {
                *cond = optimize_sub(cond, opts)?;
                *body = optimize_sub(body, opts)?;
            }
            _ => {}
        }
    }
    Ok((g, reports))
}

fn optimize_sub(
    s: &crate::graph::call::Sub,
    opts: &PassOptions,
) -> Result<crate::graph::call::Sub> {
    let (g, _) = optimize(&s.graph().graph, opts)?;
    Ok(crate::graph::call::Sub(std::sync::Arc::new(
        crate::graph::control::SubGraph::new(g, s.graph().n_args, s.graph().n_caps),
    )))
}

// ---------------------------------------------------------------------------
// Shared rewriting helpers
// ---------------------------------------------------------------------------

/// Storage roots some node writes in place.
pub(crate) fn mutated_roots(g: &Graph) -> HashSet<ValueId> {
    let mut m = HashSet::new();
    for n in &g.nodes {
        for i in n.call.written_inputs(n.inputs.len()) {
            m.insert(g.storage_root(n.inputs[i]));
        }
    }
    m
}

/// Values whose memory is an input's (arguments, references, constants, gradients).
pub(crate) fn input_rooted(g: &Graph, v: ValueId) -> bool {
    matches!(g.values[g.storage_root(v)].producer, Producer::Input(_))
}

/// Whether `v` may be replaced by, or merged with, another value: its memory
/// is never written in place and belongs to no input.
pub(crate) fn replaceable(g: &Graph, mutated: &HashSet<ValueId>, v: ValueId) -> bool {
    !mutated.contains(&g.storage_root(v)) && !input_rooted(g, v)
}

/// Replace every read of a key of `map` by its value (node inputs, outputs, effects).
pub(crate) fn substitute(g: &mut Graph, map: &HashMap<ValueId, ValueId>) {
    if map.is_empty() {
        return;
    }
    let get = |v: ValueId| -> ValueId {
        let mut v = v;
        while let Some(&w) = map.get(&v) {
            v = w;
        }
        v
    };
    for n in &mut g.nodes {
        for i in &mut n.inputs {
            *i = get(*i);
        }
    }
    for o in &mut g.outputs {
        *o = get(*o);
    }
    for s in &mut g.set_grads {
        if let Some(v) = &mut s.value {
            *v = get(*v);
        }
    }
}

/// Drop the nodes flagged in `dead`, renumbering producers.
pub(crate) fn remove_nodes(g: &mut Graph, dead: &[bool]) {
    let nodes = std::mem::take(&mut g.nodes);
    for (i, n) in nodes.into_iter().enumerate() {
        if dead[i] {
            for &o in &n.outputs {
                g.values[o].producer = Producer::Removed;
            }
            continue;
        }
        let k = g.nodes.len();
        for (j, &o) in n.outputs.iter().enumerate() {
            g.values[o].producer = Producer::Node { node: k, out: j };
        }
        g.nodes.push(n);
    }
}

/// How a value's elements lie in memory, as far as any reader can tell: its
/// strides with those of size-1 dims zeroed (they are never stepped), or
/// nothing for an empty value (it has no elements to place); and whether
/// that is row-major order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LayoutKey {
    strides: Option<Vec<isize>>,
    dense: bool,
}

fn layout_key(t: &crate::tensor::Tensor) -> LayoutKey {
    if t.numel() == 0 {
        return LayoutKey {
            strides: None,
            dense: true,
        };
    }
    LayoutKey {
        strides: Some(
            t.shape()
                .iter()
                .zip(t.strides())
                .map(|(&d, &s)| if d == 1 { 0 } else { s })
                .collect(),
        ),
        dense: t.is_contiguous(),
    }
}

/// The layout every value has when the graph runs (eager execution's: each
/// op's own rule on shape-only tensors); `None` where unknown (every value,
/// when the graph does not type-check). A rewrite that replaces one value by
/// another must keep the layout: `view` reads strides, and outputs and
/// `.grad`s are contiguous exactly when eager makes them so.
pub(crate) fn layouts(g: &Graph) -> Vec<Option<LayoutKey>> {
    match super::exec::infer_meta(g) {
        Ok(twins) => twins.iter().map(|t| t.as_ref().map(layout_key)).collect(),
        Err(_) => vec![None; g.values.len()],
    }
}

/// Whether `a` and `b` are known to have the same layout.
pub(crate) fn same_layout(lay: &[Option<LayoutKey>], a: ValueId, b: ValueId) -> bool {
    match (lay.get(a), lay.get(b)) {
        (Some(Some(x)), Some(Some(y))) => x.strides == y.strides,
        _ => false,
    }
}

/// Whether `v` is known to be laid out in row-major order (or empty).
pub(crate) fn dense(lay: &[Option<LayoutKey>], v: ValueId) -> bool {
    matches!(lay.get(v), Some(Some(k)) if k.dense)
}

/// Add a constant input holding `t`; returns its value.
pub(crate) fn add_const(g: &mut Graph, t: crate::tensor::Tensor) -> ValueId {
    let v = g.values.len();
    g.values.push(super::ValueInfo {
        shape: t.shape().to_vec(),
        dtype: t.dtype(),
        requires_grad: false,
        producer: Producer::Input(g.inputs.len()),
    });
    g.inputs.push(super::Input {
        kind: InputKind::Const(t),
        value: v,
        name: None,
    });
    v
}

#[cfg(test)]
pub(crate) mod tests;
#[cfg(all(test, feature = "gpu"))]
mod wgsl_snapshot;
