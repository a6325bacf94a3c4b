//! Algebraic simplification: rewrites that remove work without changing
//! any value.
//!
//! - identities: `x + 0`, `x - 0`, `x * 1`, `x / 1`, `x ** 1`, a cast to the
//!   dtype `x` has, a reshape/view/expand/broadcast to `x`'s own shape, a
//!   `neg(neg(x))`, a transpose (or permute) undone by the next one — each
//!   result is replaced by `x` when its type equals `x`'s;
//! - chains: `reshape(reshape(x, a), b)` becomes `reshape(x, b)`;
//! - scalars: a binary op with a one-element constant becomes the
//!   scalar form of the op (PyTorch's promotion treats a 0-d tensor and a
//!   Python scalar alike);
//! - copies: `clone(x)` of a node's fresh result that nothing else reads
//!   is `x` (gradients handed to `.grad` are such copies);
//! - squeezes: a `sum`/`mean` with `keepdim` reshaped to the shape it has
//!   without `keepdim` (and read by nothing else) becomes the reduction
//!   without `keepdim`.
//!
//! A replaced value must be *replaceable* (its memory is never written in
//! place and belongs to no graph input): otherwise a later in-place write
//! would reach another tensor. An arithmetic identity (a copy in eager) is
//! also kept when the value it would be replaced by is written in place. It must also have the layout of the value it
//! is replaced by (see [`super::layouts`]): `x.t() + 0` is a contiguous copy
//! and `x.t()` is not, and a `view` of the one works where the other fails.

use std::collections::HashMap;

use super::{
    dense, layouts, mutated_roots, remove_nodes, replaceable, same_layout, substitute, LayoutKey,
};
use crate::graph::{Graph, InputKind, OpCall, Producer, ValueId};
use crate::ops::elementwise::{BinaryOp, UnaryOp};
use crate::ops::reduce::{reduce_mask, reduced_shape};
use crate::tensor::Scalar;

fn scalar_is(s: &Scalar, v: f64) -> bool {
    s.to_f64() == v
}

/// The node producing `v`, if a node does.
fn producer(g: &Graph, v: ValueId) -> Option<usize> {
    match g.values[v].producer {
        Producer::Node { node, .. } => Some(node),
        _ => None,
    }
}

/// Apply the rewrites; returns a summary.
// Nodes are rewritten in place while earlier ones are read: indices, not iterators.
#[allow(clippy::needless_range_loop)]
pub fn run(g: &mut Graph) -> String {
    let mutated = mutated_roots(g);
    // Every rewrite below keeps each value's layout, so these stay true as
    // the pass goes.
    let lay = layouts(g);
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    let mut dead = vec![false; g.nodes.len()];
    let (mut ids, mut chains, mut scalars) = (0, 0, 0);
    let resolve = |map: &HashMap<ValueId, ValueId>, v: ValueId| {
        let mut v = v;
        while let Some(&w) = map.get(&v) {
            v = w;
        }
        v
    };
    for i in 0..g.nodes.len() {
        let inputs: Vec<ValueId> = g.nodes[i]
            .inputs
            .iter()
            .map(|&v| resolve(&map, v))
            .collect();
        g.nodes[i].inputs.clone_from(&inputs);
        let n = &g.nodes[i];
        if n.outputs.len() != 1 || inputs.is_empty() {
            continue;
        }
        let out = n.outputs[0];
        let x = inputs[0];
        let same_type = |g: &Graph, a: ValueId, b: ValueId| {
            g.values[a].shape == g.values[b].shape && g.values[a].dtype == g.values[b].dtype
        };
        // 1. Identities.
        let identity = match &n.call {
            OpCall::BinaryScalar {
                op,
                s,
                reflected: false,
            } => match op {
                BinaryOp::Add | BinaryOp::Sub => scalar_is(s, 0.0),
                BinaryOp::Mul | BinaryOp::Div | BinaryOp::Pow => scalar_is(s, 1.0),
                _ => false,
            },
            OpCall::BinaryScalar {
                op: BinaryOp::Add | BinaryOp::Mul,
                s,
                reflected: true,
            } => scalar_is(
                s,
                if matches!(
                    n.call,
                    OpCall::BinaryScalar {
                        op: BinaryOp::Add,
                        ..
                    }
                ) {
                    0.0
                } else {
                    1.0
                },
            ),
            OpCall::ToDtype { dtype } => *dtype == g.values[x].dtype,
            OpCall::Reshape { .. }
            | OpCall::View { .. }
            | OpCall::Expand { .. }
            | OpCall::BroadcastTo { .. } => true,
            OpCall::Unary { op: UnaryOp::Neg } => {
                matches!(
                    producer(g, x).map(|p| &g.nodes[p].call),
                    Some(OpCall::Unary { op: UnaryOp::Neg })
                )
            }
            OpCall::Transpose { d0, d1 } => match producer(g, x).map(|p| (&g.nodes[p].call, p)) {
                Some((OpCall::Transpose { d0: e0, d1: e1 }, _)) => {
                    (d0 == e0 && d1 == e1) || (d0 == e1 && d1 == e0)
                }
                _ => false,
            },
            OpCall::MT | OpCall::TAll => {
                matches!(producer(g, x).map(|p| &g.nodes[p].call), Some(c) if *c == n.call)
            }
            _ => false,
        };
        if identity {
            // For undo pairs the result equals the *inner* input.
            let target = match &n.call {
                OpCall::Unary { .. } | OpCall::Transpose { .. } | OpCall::MT | OpCall::TAll => {
                    let p = producer(g, x).expect("checked above");
                    resolve(&map, g.nodes[p].inputs[0])
                }
                _ => x,
            };
            // `x * 1`, `x + 0`, a same-dtype cast and `-(-x)` are new tensors in
            // eager: one stands for `x` only when `x` is never written in place
            // (`y = x * 1; x.relu_()` keeps `y`). The views among the identities
            // alias `x` in eager too, and see its writes either way.
            let copies = matches!(
                n.call,
                OpCall::BinaryScalar { .. } | OpCall::ToDtype { .. } | OpCall::Unary { .. }
            );
            if same_type(g, out, target)
                && same_layout(&lay, out, target)
                && replaceable(g, &mutated, out)
                && !(copies && mutated.contains(&g.storage_root(target)))
                && !g.values[out].requires_grad
            {
                map.insert(out, target);
                dead[i] = true;
                ids += 1;
                continue;
            }
        }
        // 2. Reshape chains: the inner reshape is skipped.
        if let OpCall::Reshape { .. } = &n.call {
            if let Some(p) = producer(g, x) {
                if matches!(
                    g.nodes[p].call,
                    OpCall::Reshape { .. } | OpCall::View { .. } | OpCall::Flatten { .. }
                ) {
                    let inner = resolve(&map, g.nodes[p].inputs[0]);
                    // From a row-major value both spellings are the same view;
                    // from another layout one may copy where the other views.
                    if g.nodes[i].inputs[0] != inner && dense(&lay, inner) {
                        g.nodes[i].inputs[0] = inner;
                        chains += 1;
                    }
                }
            }
        }
        // 3. A one-element constant operand becomes a scalar.
        if let OpCall::Binary { op } = g.nodes[i].call {
            let (a, b) = (g.nodes[i].inputs[0], g.nodes[i].inputs[1]);
            // Same promotion only when `a` is not 0-d and the constant's kind
            // (bool < int < float) does not exceed `a`'s.
            let same_rule = !g.values[a].shape.is_empty()
                && g.values[b].dtype.category() <= g.values[a].dtype.category();
            if let (true, Producer::Input(k)) = (same_rule, &g.values[b].producer) {
                if let InputKind::Const(t) = &g.inputs[*k].kind {
                    if t.ndim() == 0 && !mutated.contains(&b) {
                        if let Ok(s) = t.item() {
                            g.nodes[i].call = OpCall::BinaryScalar {
                                op,
                                s,
                                reflected: false,
                            };
                            g.nodes[i].inputs.truncate(1);
                            scalars += 1;
                        }
                    }
                }
            }
        }
    }
    substitute(g, &map);
    remove_nodes(g, &dead);
    let copies = drop_copies(g, &lay);
    let squeezed = squeeze_reductions(g);
    format!("{ids} identities removed, {chains} reshape chains shortened, {scalars} constant operands made scalars, {copies} copies of dying values removed, {squeezed} keepdim reductions reshaped away")
}

/// `reshape(sum(x, dims, keepdim=True), s)` where `s` is the shape the sum
/// has without `keepdim`, and nothing else reads the keepdim result: the
/// reshape node becomes `sum(x, dims, keepdim=False)` and the first node
/// goes (likewise for `mean`). Backward passes make these pairs for every
/// bias gradient.
fn squeeze_reductions(g: &mut Graph) -> usize {
    let uses = g.use_counts();
    let mut dead = vec![false; g.nodes.len()];
    let mut n_done = 0;
    for i in 0..g.nodes.len() {
        let n = &g.nodes[i];
        if !matches!(n.call, OpCall::Reshape { .. } | OpCall::View { .. }) || n.inputs.len() != 1 {
            continue;
        }
        let (x, out) = (n.inputs[0], n.outputs[0]);
        let Some(p) = producer(g, x) else { continue };
        if dead[p] || uses[x] != 1 || g.nodes[p].outputs.len() != 1 {
            continue;
        }
        let (dims, mean, dtype) = match &g.nodes[p].call {
            OpCall::Sum {
                dims,
                keepdim: true,
                dtype,
            } => (dims.clone(), false, *dtype),
            OpCall::Mean {
                dims,
                keepdim: true,
                dtype,
            } => (dims.clone(), true, *dtype),
            _ => continue,
        };
        let src = g.nodes[p].inputs[0];
        let in_shape = &g.values[src].shape;
        // The shape the reduction has without keepdim, by the op's own rules.
        let Ok(mask) = reduce_mask("sum", dims.as_deref(), in_shape.len()) else {
            continue;
        };
        if g.values[out].shape[..] != reduced_shape(in_shape, &mask, false)[..]
            || g.values[out].dtype != g.values[x].dtype
        {
            continue;
        }
        let squeezed = if mean {
            OpCall::Mean {
                dims,
                keepdim: false,
                dtype,
            }
        } else {
            OpCall::Sum {
                dims,
                keepdim: false,
                dtype,
            }
        };
        let node = &mut g.nodes[i];
        node.call = squeezed;
        node.inputs = vec![src];
        dead[p] = true;
        n_done += 1;
    }
    if n_done > 0 {
        remove_nodes(g, &dead);
    }
    n_done
}

/// Ops whose outputs are always newly allocated (never an input returned as is).
fn allocates(c: &OpCall) -> bool {
    matches!(
        c,
        OpCall::Matmul
            | OpCall::Mm
            | OpCall::Bmm
            | OpCall::Mv
            | OpCall::Linear { .. }
            | OpCall::LinearFused { .. }
            | OpCall::Binary { .. }
            | OpCall::BinaryScalar { .. }
            | OpCall::Unary { .. }
            | OpCall::Fused { .. }
            | OpCall::Sum { .. }
            | OpCall::Mean { .. }
            | OpCall::Softmax { .. }
            | OpCall::Where
            | OpCall::WhereScalar { .. }
            | OpCall::MaskedFill { .. }
            | OpCall::Conv2dP { .. }
            | OpCall::Conv2dFused { .. }
            | OpCall::Conv2dInputGrad { .. }
            | OpCall::Conv2dWeightGrad { .. }
            | OpCall::CrossEntropyGradRows { .. }
            | OpCall::PlaneScatter { .. }
    )
}

/// `clone(x)` where `x` is fresh memory of a node that nothing else reads
/// (no other node, view, output or effect): the copy is `x` itself. Backward
/// passes make such copies when they hand a gradient to `.grad`.
fn drop_copies(g: &mut Graph, lay: &[Option<LayoutKey>]) -> usize {
    let uses = g.use_counts();
    let mut map: HashMap<ValueId, ValueId> = HashMap::new();
    let mut dead = vec![false; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        if !matches!(n.call, OpCall::Clone) || n.outputs.len() != 1 || n.inputs.len() != 1 {
            continue;
        }
        let (x, out) = (n.inputs[0], n.outputs[0]);
        // `x` itself, or a view of a value `r` that only that view reads.
        let root = match g.values[x].producer {
            Producer::Node { node, .. }
                if g.nodes[node].call.effect() == crate::graph::Effect::View =>
            {
                let r = g.nodes[node].inputs[0];
                (g.nodes[node].outputs.len() == 1 && uses[r] == 1).then_some(r)
            }
            _ => Some(x),
        };
        let fresh = root.is_some_and(|r| match g.values[r].producer {
            Producer::Node { node, .. } => allocates(&g.nodes[node].call),
            _ => false,
        });
        // The copy is contiguous: `x` stands for it only if it is too.
        if fresh
            && same_layout(lay, out, x)
            && uses[x] == 1
            && !g.values[out].requires_grad
            && !g.values[x].requires_grad
            && g.values[out].shape == g.values[x].shape
            && g.values[out].dtype == g.values[x].dtype
        {
            map.insert(out, x);
            dead[i] = true;
        }
    }
    let n = map.len();
    substitute(g, &map);
    remove_nodes(g, &dead);
    n
}
