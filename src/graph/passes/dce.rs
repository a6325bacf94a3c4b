//! Dead-code elimination: keep only the nodes an observable result needs.
//!
//! Observable: the requested outputs, the nodes explicitly asked for (a
//! static graph's fetched operations), and — when `keep_effects` — every
//! write into memory the caller can see (arguments, tensors read by
//! reference, gradients), every `.grad` effect and every random draw (which
//! advances a generator the caller can see). A node that writes in place
//! is needed when a needed node reads the written memory later; reads
//! through views count as reads of the memory they alias. Without
//! `keep_effects` (a static graph's `Session.run`, TensorFlow's rule), a
//! write into state read by reference (a `Variable`) runs only when its node
//! is asked for: reading a variable reads its current value, and an assign
//! recorded before the read is not pulled in by it.

use std::collections::HashSet;

use crate::graph::{Effect, Graph, InputKind, Producer, ValueId};

/// The part of `g` needed for `outputs` and the nodes `keep_nodes`
/// (indices into `g.nodes`); see the module docs. Unneeded inputs are dropped.
pub fn prune(g: &Graph, outputs: &[ValueId], keep_nodes: &[usize], keep_effects: bool) -> Graph {
    let mut needed_val = vec![false; g.values.len()];
    let mut read_roots: HashSet<ValueId> = HashSet::new();
    for &o in outputs {
        needed_val[o] = true;
        read_roots.insert(g.storage_root(o));
    }
    let mut visible_roots: HashSet<ValueId> = HashSet::new();
    if keep_effects {
        for inp in &g.inputs {
            if !matches!(inp.kind, InputKind::Const(_)) {
                visible_roots.insert(inp.value);
            }
        }
        for s in &g.set_grads {
            needed_val[s.target] = true;
            if let Some(v) = s.value {
                needed_val[v] = true;
                read_roots.insert(g.storage_root(v));
            }
        }
    }
    for &o in outputs {
        visible_roots.insert(g.storage_root(o));
    }
    let keep_set: HashSet<usize> = keep_nodes.iter().copied().collect();
    let state: HashSet<ValueId> = if keep_effects {
        HashSet::new()
    } else {
        g.inputs
            .iter()
            .filter(|i| matches!(i.kind, InputKind::Ref(_)))
            .map(|i| i.value)
            .collect()
    };
    let mut needed_node = vec![false; g.nodes.len()];
    // A needed random draw needs the seeding that precedes it.
    let mut draws_later = false;
    for (i, n) in g.nodes.iter().enumerate().rev() {
        let effect = n.call.effect();
        let seeds = matches!(n.call, crate::graph::OpCall::ManualSeed { .. });
        let writes: Vec<ValueId> = n
            .call
            .written_inputs(n.inputs.len())
            .into_iter()
            .map(|k| g.storage_root(n.inputs[k]))
            .collect();
        let need = keep_set.contains(&i)
            || n.outputs.iter().any(|&o| needed_val[o])
            || writes.iter().any(|r| {
                !state.contains(r) && (read_roots.contains(r) || visible_roots.contains(r))
            })
            || (keep_effects && effect == Effect::Random && n.call.is_random())
            || (seeds && draws_later);
        if !need {
            continue;
        }
        needed_node[i] = true;
        if n.call.is_random() && !seeds {
            draws_later = true;
        }
        for &v in &n.inputs {
            needed_val[v] = true;
            read_roots.insert(g.storage_root(v));
        }
        // A needed view's output reads its base's memory.
        if effect == Effect::View {
            for &o in &n.outputs {
                read_roots.insert(g.storage_root(o));
            }
        }
    }
    // Rebuild with the kept nodes and inputs, renumbering producers.
    let mut out = Graph {
        values: g.values.clone(),
        inputs: vec![],
        nodes: vec![],
        outputs: outputs.to_vec(),
        set_grads: if keep_effects {
            g.set_grads.clone()
        } else {
            vec![]
        },
        symbols: g.symbols.clone(),
        has_backward: g.has_backward,
        device: g.device,
        no_inplace: g.no_inplace,
        no_parallel: g.no_parallel,
        grad_absent: g.grad_absent.clone(),
    };
    // An argument declaring a symbolic dimension that a kept value has (a
    // gradient of `x.sum()` is `x`'s shape without reading `x`) stays, so the
    // run can size it: the first argument with that symbol, unless a kept one has it.
    let sized = sizing_args(g, &needed_val, &needed_node);
    for inp in &g.inputs {
        let used = needed_val[inp.value]
            || matches!(inp.kind, InputKind::Grad(b) if needed_val[b])
            || outputs.contains(&inp.value)
            || sized.contains(&inp.value);
        if used {
            out.values[inp.value].producer = Producer::Input(out.inputs.len());
            out.inputs.push(inp.clone());
        }
    }
    // A kept gradient input needs the input whose gradient it reads.
    let bound: HashSet<ValueId> = out.inputs.iter().map(|i| i.value).collect();
    let mut extra = vec![];
    for inp in &out.inputs {
        if let InputKind::Grad(b) = inp.kind {
            if !bound.contains(&b) {
                extra.push(b);
            }
        }
    }
    if !extra.is_empty() {
        let mut inputs = vec![];
        for inp in &g.inputs {
            if bound.contains(&inp.value) || extra.contains(&inp.value) {
                inputs.push(inp.clone());
            }
        }
        for (k, inp) in inputs.iter().enumerate() {
            out.values[inp.value].producer = Producer::Input(k);
        }
        out.inputs = inputs;
    }
    for inp in &g.inputs {
        if !out.inputs.iter().any(|i| i.value == inp.value) {
            out.values[inp.value].producer = Producer::Removed;
        }
    }
    for (i, n) in g.nodes.iter().enumerate() {
        if needed_node[i] {
            let k = out.nodes.len();
            for (j, &o) in n.outputs.iter().enumerate() {
                out.values[o].producer = Producer::Node { node: k, out: j };
            }
            out.nodes.push(n.clone());
        } else {
            for &o in &n.outputs {
                out.values[o].producer = Producer::Removed;
            }
        }
    }
    out
}

/// Unkept argument inputs that must stay to give a symbol its size: for each
/// symbol a kept node's value has, no kept argument has it, the first
/// argument that has it.
fn sizing_args(g: &Graph, needed_val: &[bool], needed_node: &[bool]) -> HashSet<ValueId> {
    let mut out = HashSet::new();
    if g.symbols.is_empty() {
        return out;
    }
    let syms_of = |v: ValueId| -> Vec<usize> {
        g.values[v]
            .shape
            .iter()
            .filter_map(|&d| crate::graph::sym::decompose(d as i64, &g.symbols))
            .flat_map(|e| e.syms)
            .collect()
    };
    let plain = |v: ValueId| -> Vec<usize> {
        g.values[v]
            .shape
            .iter()
            .filter_map(|&d| crate::graph::sym::decompose(d as i64, &g.symbols))
            .filter(|e| e.syms.len() == 1 && e.coef == 1 && e.offset == 0)
            .map(|e| e.syms[0])
            .collect()
    };
    let mut want = vec![false; g.symbols.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        if needed_node[i] {
            for &o in &n.outputs {
                for s in syms_of(o) {
                    want[s] = true;
                }
            }
        }
    }
    let args = || {
        g.inputs
            .iter()
            .filter(|i| matches!(i.kind, InputKind::Arg(_)))
    };
    for inp in args().filter(|i| needed_val[i.value]) {
        for s in plain(inp.value) {
            want[s] = false;
        }
    }
    for inp in args() {
        for s in plain(inp.value) {
            if want[s] {
                want[s] = false;
                out.insert(inp.value);
            }
        }
    }
    out
}
