//! Constant folding: a pure node whose inputs are all constants (or that
//! has no inputs, like `zeros` or `arange`) is evaluated once, when the graph
//! is optimised, and its outputs become constants.
//!
//! Tensors read by reference (parameters) are not constants — their values
//! change between runs. Random draws, uninitialised allocations, writes and
//! strided views of a constant are not folded (a view keeps reading the
//! constant, with its layout; what is computed from it folds); nor are nodes with symbolic sizes or integer
//! arguments (`full((), s)`, `c / s`: known only when the graph runs), nor
//! constants that the graph writes.

use std::collections::HashMap;

use super::{add_const, mutated_roots, remove_nodes, substitute};
use crate::autograd::GradMode;
use crate::graph::{sym, Effect, Graph, InputKind, OpCall, ValueId};
use crate::tensor::{Device, Tensor};

/// Largest output (elements) folded: bigger constants would bloat the graph.
const MAX_FOLD: usize = 1 << 20;

/// Fold constant subexpressions; returns a summary.
pub fn run(g: &mut Graph) -> String {
    let mutated = mutated_roots(g);
    let mut known: HashMap<ValueId, Tensor> = HashMap::new();
    for inp in &g.inputs {
        if let InputKind::Const(t) = &inp.kind {
            if !mutated.contains(&inp.value) {
                known.insert(inp.value, t.clone());
            }
        }
    }
    let symbolic = |shape: &[usize]| {
        shape
            .iter()
            .any(|&d| sym::decompose(d as i64, &g.symbols).is_some())
    };
    // An integer argument that a run binds to its sizes (see `OpCall::map_ints`).
    let symbolic_args = |call: &OpCall| {
        let mut any = false;
        if !g.symbols.is_empty() {
            call.clone().map_ints(&mut |v| {
                any |= sym::decompose(v, &g.symbols).is_some();
                v
            });
        }
        any
    };
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    let mut dead = vec![false; g.nodes.len()];
    // (node, [(output value, its tensor, whether it shares an input's storage)])
    #[allow(clippy::type_complexity)]
    let mut new_consts: Vec<(usize, Vec<(ValueId, Tensor, bool)>)> = vec![];
    let _no = GradMode::set(false);
    for (i, n) in g.nodes.iter().enumerate() {
        if n.call.effect() != Effect::Pure || n.call.is_random() || n.aux != 0 {
            continue;
        }
        if n.call.factory_device().is_some_and(|d| d != Device::Cpu) {
            continue;
        }
        if !n.inputs.iter().all(|v| known.contains_key(v)) || symbolic_args(&n.call) {
            continue;
        }
        if n.outputs.iter().any(|&o| {
            let info = &g.values[o];
            mutated.contains(&g.storage_root(o))
                || symbolic(&info.shape)
                || info.shape.iter().product::<usize>() > MAX_FOLD
        }) {
            continue;
        }
        let ins: Vec<Tensor> = n.inputs.iter().map(|v| known[v].clone()).collect();
        let Ok(outs) = n.call.exec(&ins) else {
            continue; // an error is raised when the graph runs, at this node
        };
        if outs.len() != n.outputs.len() {
            continue;
        }
        for (&o, t) in n.outputs.iter().zip(&outs) {
            known.insert(o, t.clone());
        }
        // A strided view of a constant (a transpose, a column) stays a view
        // node over it: a copy would be dense, and the graph's results keep
        // the layouts they were captured with. Nodes reading it still fold.
        if outs
            .iter()
            .any(|t| !t.is_contiguous() && ins.iter().any(|x| x.shares_storage(t)))
        {
            continue;
        }
        new_consts.push((
            i,
            n.outputs
                .iter()
                .copied()
                .zip(outs)
                .map(|(o, t)| {
                    let aliases = ins.iter().any(|x| x.shares_storage(&t));
                    (o, t, aliases)
                })
                .collect(),
        ));
        dead[i] = true;
    }
    let folded = new_consts.len();
    for (_, outs) in new_consts {
        for (o, t, aliases) in outs {
            // Own memory: a folded output that is a view of a constant input
            // is copied (one made fresh keeps its buffer, and with it the
            // host copy an upload leaves on the GPU).
            let t = if aliases {
                crate::ops::elementwise::clone(&t).unwrap_or(t)
            } else {
                t
            };
            let c = add_const(g, t);
            map.insert(o, c);
        }
    }
    substitute(g, &map);
    remove_nodes(g, &dead);
    format!("folded {folded} constant nodes")
}
