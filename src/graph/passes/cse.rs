//! Common-subexpression elimination: a node that repeats an earlier node —
//! the same op with the same arguments on the same inputs — is dropped and
//! its outputs replaced by the earlier node's.
//!
//! Only pure ops and views are merged (never writes, random draws or
//! uninitialised allocations), only when no input's memory is written in
//! place anywhere in the graph (so both nodes read the same data), and only
//! when neither node's outputs are written later (merging would alias them).

use std::collections::HashMap;

use super::{mutated_roots, remove_nodes, substitute};
use crate::graph::{Effect, Graph, ValueId};

/// Merge repeated nodes; returns a summary.
// Nodes are rewritten in place while earlier ones are read: indices, not iterators.
#[allow(clippy::needless_range_loop)]
pub fn run(g: &mut Graph) -> String {
    let mutated = mutated_roots(g);
    let mut seen: HashMap<(String, Vec<ValueId>), usize> = HashMap::new();
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    let mut dead = vec![false; g.nodes.len()];
    let resolve = |map: &HashMap<ValueId, ValueId>, v: ValueId| {
        let mut v = v;
        while let Some(&w) = map.get(&v) {
            v = w;
        }
        v
    };
    for i in 0..g.nodes.len() {
        let n = &g.nodes[i];
        let effect = n.call.effect();
        if !matches!(effect, Effect::Pure | Effect::View) || n.call.is_random() || n.aux != 0 {
            continue;
        }
        let inputs: Vec<ValueId> = n.inputs.iter().map(|&v| resolve(&map, v)).collect();
        if inputs.iter().any(|&v| mutated.contains(&g.storage_root(v))) {
            continue;
        }
        // Fresh outputs must never be written (a view's writes would alias anyway).
        if effect == Effect::Pure
            && n.outputs
                .iter()
                .any(|&o| mutated.contains(&g.storage_root(o)))
        {
            continue;
        }
        let key = (format!("{:?}", n.call), inputs);
        match seen.get(&key) {
            Some(&j) => {
                let earlier = &g.nodes[j];
                if earlier.outputs.len() != n.outputs.len() {
                    continue;
                }
                for (&a, &b) in n.outputs.iter().zip(&earlier.outputs) {
                    map.insert(a, b);
                }
                dead[i] = true;
            }
            None => {
                seen.insert(key, i);
            }
        }
    }
    let merged = dead.iter().filter(|&&d| d).count();
    substitute(g, &map);
    remove_nodes(g, &dead);
    format!("merged {merged} repeated nodes")
}
