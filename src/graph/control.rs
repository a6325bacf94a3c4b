//! Control flow in captured graphs: `cond` (run one of two branches) and
//! `while_loop` (repeat a body while a condition holds), decided by tensor
//! data when the graph runs.
//!
//! Each branch, condition and body is captured as a [`Graph`] of its own
//! (see [`trace::begin_sub`](super::trace::begin_sub)): its arguments first
//! (the operands or loop variables), then the values of the enclosing graph
//! it reads. The enclosing graph holds one node whose inputs are those
//! values; running the node runs the sub-graphs with the executor. Bodies
//! are pure (no in-place updates of outside tensors, no `.grad` effects), so
//! the node has no effect besides its outputs.

use std::sync::{Arc, OnceLock};

use crate::autograd::GradMode;
use crate::error::{Error, Result};
use crate::tensor::{Device, Layout, Storage, Tensor};

use super::exec::Plan;
use super::Graph;

/// A captured branch, condition or loop body, and its plan once built.
pub struct SubGraph {
    pub graph: Graph,
    /// Leading arguments (operands or loop variables); the rest are captures.
    pub n_args: usize,
    /// Values of the enclosing graph it reads (arguments after the first `n_args`).
    pub n_caps: usize,
    plan: OnceLock<Arc<Plan>>,
}

impl std::fmt::Debug for SubGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "<graph: {} args, {} captured, {} nodes>",
            self.n_args,
            self.n_caps,
            self.graph.nodes.len()
        )
    }
}

impl crate::ops::call::SubBody for SubGraph {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl super::call::Sub {
    /// The sub-graph this node holds (the graph layer makes every one).
    pub fn graph(&self) -> &SubGraph {
        self.0
            .as_any()
            .downcast_ref::<SubGraph>()
            .expect("a control-flow body is a SubGraph")
    }
}

impl SubGraph {
    pub fn new(graph: Graph, n_args: usize, n_caps: usize) -> SubGraph {
        SubGraph {
            graph,
            n_args,
            n_caps,
            plan: OnceLock::new(),
        }
    }

    /// The same sub-graph with every size rewritten by `f` (the enclosing
    /// graph's symbols bound to sizes), its own symbols dropped.
    pub fn specialise(&self, f: &mut dyn FnMut(i64) -> i64) -> SubGraph {
        let mut g = self.graph.clone();
        if !g.symbols.is_empty() {
            for v in &mut g.values {
                for d in &mut v.shape {
                    *d = f(*d as i64).max(0) as usize;
                }
            }
            for n in &mut g.nodes {
                n.call.map_ints(f);
            }
            g.symbols.clear();
        }
        SubGraph::new(g, self.n_args, self.n_caps)
    }

    /// The same sub-graph with its calls' device `from` replaced by `to`
    /// (see [`Graph::relocate_calls`]).
    pub fn relocated(&self, from: Device, to: Device) -> SubGraph {
        let mut g = self.graph.clone();
        g.relocate_calls(from, to);
        SubGraph::new(g, self.n_args, self.n_caps)
    }

    fn plan(&self) -> Result<&Arc<Plan>> {
        if let Some(p) = self.plan.get() {
            return Ok(p);
        }
        let p = Arc::new(Plan::new(&self.graph, &[])?);
        Ok(self.plan.get_or_init(|| p))
    }

    /// Run on `args` (its arguments, then its captures).
    pub fn run(&self, args: &[Tensor]) -> Result<Vec<Tensor>> {
        let _no = GradMode::set(false);
        let outs = self.plan()?.run(args)?;
        // An output that is an argument itself (or a view of one) is copied,
        // so that the node's results never alias its inputs.
        outs.into_iter()
            .map(|o| {
                if args.iter().any(|a| Arc::ptr_eq(a.storage(), o.storage())) {
                    crate::ops::elementwise::clone(&o)
                } else {
                    Ok(o)
                }
            })
            .collect()
    }

    /// Shape-only tensors of its outputs' types.
    pub fn output_types(&self) -> Result<Vec<Tensor>> {
        self.graph
            .outputs
            .iter()
            .map(|&o| {
                let v = &self.graph.values[o];
                let nbytes = crate::tensor::nbytes_for("graph", &v.shape, v.dtype)?;
                Tensor::from_parts(
                    Arc::new(Storage::new_meta(nbytes)),
                    Layout::contiguous(&v.shape),
                    v.dtype,
                )
            })
            .collect()
    }
}

/// Whether a one-element condition tensor is true (non-zero).
pub fn truth(op: &'static str, t: &Tensor) -> Result<bool> {
    if t.numel() != 1 {
        return Err(Error::shape(
            op,
            format!(
                "the condition must have one element, got shape {:?} ({})",
                t.shape(),
                t.dtype()
            ),
        ));
    }
    Ok(t.item()?.to_f64() != 0.0)
}

/// Run a `cond` node: `ins` = [pred, operands.., then-captures.., else-captures..].
pub fn run_cond(then_g: &SubGraph, else_g: &SubGraph, ins: &[Tensor]) -> Result<Vec<Tensor>> {
    if ins.iter().any(|t| !t.device().has_data()) {
        return then_g.output_types();
    }
    let n_ops = then_g.n_args;
    let (pred, rest) = ins
        .split_first()
        .ok_or_else(|| Error::value("cond", "missing condition"))?;
    let (ops, caps) = rest.split_at(n_ops);
    let (then_caps, else_caps) = caps.split_at(then_g.n_caps);
    let (g, c) = if truth("cond", pred)? {
        (then_g, then_caps)
    } else {
        (else_g, else_caps)
    };
    let args: Vec<Tensor> = ops.iter().chain(c).cloned().collect();
    g.run(&args)
}

/// Run a `while_loop` node: `ins` = [carry.., cond-captures.., body-captures..].
pub fn run_while(cond: &SubGraph, body: &SubGraph, ins: &[Tensor]) -> Result<Vec<Tensor>> {
    let n = body.n_args;
    if ins.iter().any(|t| !t.device().has_data()) {
        return body.output_types();
    }
    let (carry, caps) = ins.split_at(n);
    let (cond_caps, body_caps) = caps.split_at(cond.n_caps);
    let mut cur: Vec<Tensor> = {
        let _no = GradMode::set(false);
        carry
            .iter()
            .map(crate::ops::elementwise::clone)
            .collect::<Result<_>>()?
    };
    loop {
        let args: Vec<Tensor> = cur.iter().chain(cond_caps).cloned().collect();
        let p = cond.run(&args)?;
        if !truth("while_loop", &p[0])? {
            return Ok(cur);
        }
        let args: Vec<Tensor> = cur.iter().chain(body_caps).cloned().collect();
        cur = body.run(&args)?;
    }
}
