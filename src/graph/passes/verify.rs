//! The IR verifier: the invariants every pass keeps.
//!
//! - every value a node or the graph reads is defined earlier (inputs first,
//!   then nodes in order) — so the graph is acyclic and nothing dangles;
//! - each value has exactly one producer, and its recorded producer is it;
//! - gradient inputs and `.grad` effects refer to bound inputs;
//! - shapes and dtypes: every node's shape and dtype rules, re-run on
//!   shape-only tensors from the inputs' types, give the types recorded for
//!   its outputs (symbolic dims stand at the sizes they were captured with,
//!   so a rewrite that loses track of a symbol shows too). `Plan::new` runs
//!   the same inference at each run's sizes. The shape-only tensors carry
//!   layouts, so a `view` (or an op's internal re-stride) that a rewrite left
//!   reading memory of another layout fails here too;
//! - layouts ([`after_pass`]): the graph's results and the gradients it hands
//!   to `.grad` keep the layouts they had when captured (eager's), so a pass
//!   cannot swap a contiguous copy for the strided value it was made from.

use super::{layouts, LayoutKey};
use crate::error::{Error, Result};
use crate::graph::{Graph, InputKind, Producer};

fn bad(msg: String) -> Error {
    Error::runtime("graph verifier", msg)
}

/// Check `g`'s structural invariants.
pub fn verify(g: &Graph) -> Result<()> {
    let mut defined = vec![false; g.values.len()];
    let mut inputs_bound = vec![false; g.values.len()];
    for (k, inp) in g.inputs.iter().enumerate() {
        let v = inp.value;
        if v >= g.values.len() {
            return Err(bad(format!(
                "input {k} names value %{v}, which does not exist"
            )));
        }
        if defined[v] {
            return Err(bad(format!("value %{v} is defined twice")));
        }
        if g.values[v].producer != Producer::Input(k) {
            return Err(bad(format!(
                "value %{v} is input {k} but records {:?}",
                g.values[v].producer
            )));
        }
        if let InputKind::Grad(b) = inp.kind {
            if !inputs_bound.get(b).copied().unwrap_or(false) {
                return Err(bad(format!(
                    "input {k} reads the gradient of %{b}, which is not an earlier input"
                )));
            }
        }
        defined[v] = true;
        inputs_bound[v] = true;
    }
    for (i, n) in g.nodes.iter().enumerate() {
        for &v in &n.inputs {
            if v >= g.values.len() || !defined[v] {
                return Err(bad(format!(
                    "node {i} ({}) reads %{v} before it is defined",
                    n.call.name()
                )));
            }
        }
        for (j, &o) in n.outputs.iter().enumerate() {
            if o >= g.values.len() {
                return Err(bad(format!("node {i} writes %{o}, which does not exist")));
            }
            if defined[o] {
                return Err(bad(format!(
                    "value %{o} is defined twice (again by node {i})"
                )));
            }
            if g.values[o].producer != (Producer::Node { node: i, out: j }) {
                return Err(bad(format!(
                    "value %{o} is output {j} of node {i} but records {:?}",
                    g.values[o].producer
                )));
            }
            defined[o] = true;
        }
    }
    for &o in &g.outputs {
        if o >= g.values.len() || !defined[o] {
            return Err(bad(format!("output %{o} is never defined")));
        }
    }
    for s in &g.set_grads {
        if !inputs_bound.get(s.target).copied().unwrap_or(false) {
            return Err(bad(format!(
                "a .grad effect targets %{}, which is not an input",
                s.target
            )));
        }
        if let Some(v) = s.value {
            if !defined.get(v).copied().unwrap_or(false) {
                return Err(bad(format!(
                    "a .grad effect uses %{v}, which is never defined"
                )));
            }
        }
    }
    crate::graph::exec::infer_types(g)
        .map_err(|e| bad(format!("the graph does not type-check: {e}")))
}

/// The layouts of `g`'s results: its outputs, then the values of its `.grad`
/// effects (`None` where unknown).
pub(crate) fn result_layouts(g: &Graph) -> Vec<Option<LayoutKey>> {
    let lay = layouts(g);
    let at = |v: usize| lay.get(v).cloned().flatten();
    g.outputs
        .iter()
        .map(|&o| at(o))
        .chain(g.set_grads.iter().map(|s| s.value.and_then(at)))
        .collect()
}

/// [`verify`] after `pass` ("the cse pass"), and the results' layouts
/// against `want` (from [`result_layouts`] of the graph the passes started
/// from); an error names the pass.
pub(crate) fn after_pass(g: &Graph, pass: &str, want: &[Option<LayoutKey>]) -> Result<()> {
    let named = |e: Error| match e {
        Error::Runtime {
            op: "graph verifier",
            msg,
        } => bad(format!("after {pass}: {msg}")),
        e => bad(format!("after {pass}: {e}")),
    };
    verify(g).map_err(named)?;
    let got = result_layouts(g);
    let n_out = g.outputs.len();
    for (k, (w, h)) in want.iter().zip(&got).enumerate() {
        if let (Some(w), Some(h)) = (w, h) {
            if w != h {
                let what = if k < n_out {
                    format!("output {k}")
                } else {
                    format!("the .grad effect {}", k - n_out)
                };
                return Err(bad(format!(
                    "after {pass}: {what} has layout {h:?} where the captured graph had {w:?}"
                )));
            }
        }
    }
    if want.len() != got.len() {
        return Err(bad(format!(
            "after {pass}: {} results where the captured graph had {}",
            got.len(),
            want.len()
        )));
    }
    Ok(())
}
