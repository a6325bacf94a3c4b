//! Epilogue fusion for inference graphs: a 4-D `conv2d` whose result only
//! a `relu` reads, and/or whose (activated) result only a 2×2 stride-2
//! unpadded `max_pool2d` reads, becomes one [`OpCall::Conv2dFused`] node.
//! The kernel applies the activation and the pooling to each sample's output
//! block right after its GEMM, while the block is in cache: the full-size
//! convolution output and the activation's output never reach memory.
//!
//! Only graphs that compute no gradients (no captured backward, no value
//! that requires grad) on the CPU are rewritten, and only float32/float64
//! convolutions; the fused node's values equal the unfused ops' bit for bit.
//!
//! Linear layers: every `linear` with a 2-D weight becomes an
//! [`OpCall::LinearFused`] node, taking with it an activation (`relu`,
//! `gelu` in both forms, `silu`, `tanh`, `sigmoid`) that only it feeds,
//! and then an `add` of a same-shaped value (`x + linear(y)`, the residual
//! connection) that only reads its result. The node's kernel packs the
//! weight once (re-packing when the parameter's version changes) and applies
//! bias, activation and residual as the product stores (see
//! `backend::cpu::prepack`); its values equal the unfused ops' bit for bit.

use crate::graph::{Graph, OpCall, Producer, ValueId};
use crate::ops::conv::{expand_arg, Conv2dParams, Padding};
use crate::ops::elementwise::{BinaryOp, UnaryOp};
use crate::tensor::{DType, Device};

/// The resolved geometry of a convolution node, when it can be fused.
fn conv_params(g: &Graph, call: &OpCall, inputs: &[ValueId]) -> Option<(Conv2dParams, bool)> {
    let (x, w) = (&g.values[*inputs.first()?], &g.values[*inputs.get(1)?]);
    if x.shape.len() != 4 || w.shape.len() != 4 {
        return None;
    }
    match call {
        OpCall::Conv2dP { p, bias } => Some((*p, *bias)),
        OpCall::Conv2d {
            stride,
            padding,
            dilation,
            groups,
            bias,
        } => {
            let s = expand_arg("conv2d", "stride", stride, 2).ok()?;
            let d = expand_arg("conv2d", "dilation", dilation, 2).ok()?;
            let pad = match padding {
                Padding::Valid => [0; 4],
                Padding::Explicit(p) => {
                    let p = expand_arg("conv2d", "padding", p, 2).ok()?;
                    [p[0], p[0], p[1], p[1]]
                }
                Padding::Same => return None,
            };
            if s.contains(&0) || d.contains(&0) || *groups == 0 {
                return None;
            }
            Some((
                Conv2dParams {
                    stride: [s[0], s[1]],
                    pad,
                    dilation: [d[0], d[1]],
                    groups: *groups,
                },
                *bias,
            ))
        }
        _ => None,
    }
}

fn is_relu(call: &OpCall) -> bool {
    matches!(call, OpCall::Unary { op: UnaryOp::Relu })
}

fn is_pool2(call: &OpCall) -> bool {
    let two = |v: &[usize], k: usize| v.iter().all(|&x| x == k) && matches!(v.len(), 1 | 2);
    match call {
        OpCall::MaxPool2d {
            kernel,
            stride,
            padding,
            dilation,
            ceil_mode,
            return_indices,
        } => {
            two(kernel, 2)
                && stride.as_deref().is_none_or(|s| two(s, 2))
                && two(padding, 0)
                && two(dilation, 1)
                && !ceil_mode
                && !return_indices
        }
        _ => false,
    }
}

/// Fuse convolution and linear epilogues; returns a summary.
pub fn run(g: &mut Graph) -> String {
    let conv = run_conv(g);
    if conv.starts_with("fused 0 convolution epilogues (not") {
        return conv;
    }
    format!("{conv}, {}", run_linear(g))
}

/// The activation ops a linear node takes into its store.
fn fusable_act(call: &OpCall) -> Option<UnaryOp> {
    match call {
        OpCall::Unary { op } => matches!(
            op,
            UnaryOp::Relu
                | UnaryOp::Gelu
                | UnaryOp::GeluTanh
                | UnaryOp::Silu
                | UnaryOp::Tanh
                | UnaryOp::Sigmoid
        )
        .then_some(*op),
        _ => None,
    }
}

/// Rewrite `linear [→ activation] [→ add residual]` chains into
/// [`OpCall::LinearFused`] nodes (the caller checked that `g` is an
/// inference graph on the CPU).
fn run_linear(g: &mut Graph) -> String {
    let uses = g.use_counts();
    let mut reader: Vec<Option<usize>> = vec![None; g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        for &v in &n.inputs {
            reader[v] = Some(i);
        }
    }
    // The one node reading v (once, and no graph output or gradient reads it).
    let only_reader = |v: ValueId| -> Option<usize> {
        let j = reader[v].filter(|_| uses[v] == 1)?;
        let n = &g.nodes[j];
        (n.outputs.len() == 1 && n.aux == 0).then_some(j)
    };
    let mut dead = vec![false; g.nodes.len()];
    // Nodes that already end a chain (`linear(a) + linear(b)`: the add is
    // the first one's residual add, the second is fused alone).
    let mut taken = vec![false; g.nodes.len()];
    // (linear node, activation node, last node of the chain, activation, residual value)
    let mut rewrites = vec![];
    for (i, n) in g.nodes.iter().enumerate() {
        let OpCall::Linear { .. } = n.call else {
            continue;
        };
        if dead[i] || n.outputs.len() != 1 || n.aux != 0 || n.inputs.len() < 2 {
            continue;
        }
        let y = n.outputs[0];
        let dt = g.values[y].dtype;
        if !matches!(dt, DType::F32 | DType::F64)
            || g.values[n.inputs[1]].shape.len() != 2
            || n.inputs.iter().any(|&v| g.values[v].dtype != dt)
        {
            continue;
        }
        let (mut end, mut last, mut act, mut residual) = (i, y, None, None);
        if let Some(j) = only_reader(last).filter(|&j| g.nodes[j].inputs.len() == 1) {
            if let Some(op) = fusable_act(&g.nodes[j].call) {
                act = Some(op);
                end = j;
                last = g.nodes[j].outputs[0];
            }
        }
        if let Some(j) = only_reader(last) {
            let a = &g.nodes[j];
            if matches!(a.call, OpCall::Binary { op: BinaryOp::Add })
                && a.inputs.len() == 2
                && !taken[j]
            {
                let r = if a.inputs[0] == last {
                    a.inputs[1]
                } else {
                    a.inputs[0]
                };
                let out = a.outputs[0];
                if r != last
                    && g.values[r].shape == g.values[last].shape
                    && g.values[r].dtype == dt
                    && g.values[out].shape == g.values[last].shape
                    && g.values[out].dtype == dt
                {
                    residual = Some(r);
                    end = j;
                }
            }
        }
        // The activation node, when it is not the end of the chain.
        let mid = act.and(reader[y]).filter(|&j| j != end);
        dead[i] = end != i;
        if let Some(j) = mid {
            dead[j] = true;
        }
        taken[end] = true;
        rewrites.push((i, mid, end, act, residual));
    }
    let (mut acts, mut adds) = (0, 0);
    let count = rewrites.len();
    for (i, mid, end, act, residual) in rewrites {
        let (inputs, loc, bias) = {
            let n = &g.nodes[i];
            let OpCall::Linear { bias } = n.call else {
                unreachable!("a linear node")
            };
            (n.inputs.clone(), n.loc.clone(), bias)
        };
        acts += usize::from(act.is_some());
        adds += usize::from(residual.is_some());
        let last = g.nodes[end].outputs[0];
        // The values inside the chain are made by no node now.
        for j in [Some(i), mid].into_iter().flatten().filter(|&j| j != end) {
            for v in std::mem::take(&mut g.nodes[j].outputs) {
                g.values[v].producer = Producer::Removed;
            }
        }
        let n = &mut g.nodes[end];
        n.call = OpCall::LinearFused {
            bias,
            act,
            residual: residual.is_some(),
        };
        n.inputs = inputs;
        n.inputs.extend(residual);
        n.outputs = vec![last];
        n.loc = loc;
    }
    if dead.iter().any(|&d| d) {
        super::remove_nodes(g, &dead);
    }
    format!("fused {count} linear layers ({acts} activations, {adds} residual adds)")
}

/// Fuse convolution epilogues; returns a summary.
fn run_conv(g: &mut Graph) -> String {
    // Parameters read by reference may require grad; what matters is
    // whether any node's result does (autograd records through it).
    let grads = g
        .nodes
        .iter()
        .any(|n| n.outputs.iter().any(|&o| g.values[o].requires_grad));
    if g.has_backward || g.device != Device::Cpu || grads {
        return "fused 0 convolution epilogues (not an inference graph on the CPU)".into();
    }
    let uses = g.use_counts();
    // The single node reading value v (when exactly one node reads it, once).
    let mut reader: Vec<Option<usize>> = vec![None; g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        for &v in &n.inputs {
            reader[v] = Some(i);
        }
    }
    let only_reader = |v: ValueId| -> Option<usize> {
        if uses[v] != 1 {
            return None;
        }
        let j = reader[v]?;
        let n = &g.nodes[j];
        (n.inputs.len() == 1 && n.outputs.len() == 1 && n.aux == 0).then_some(j)
    };
    let mut dead = vec![false; g.nodes.len()];
    let mut rewrites = vec![];
    for (i, n) in g.nodes.iter().enumerate() {
        if dead[i] || n.outputs.len() != 1 || n.aux != 0 {
            continue;
        }
        let Some((p, bias)) = conv_params(g, &n.call, &n.inputs) else {
            continue;
        };
        let y = n.outputs[0];
        if !matches!(g.values[y].dtype, DType::F32 | DType::F64)
            || n.inputs
                .iter()
                .any(|&v| g.values[v].dtype != g.values[y].dtype)
        {
            continue;
        }
        let mut last = y;
        let mut gone = vec![];
        let mut relu = false;
        if let Some(j) = only_reader(last).filter(|&j| is_relu(&g.nodes[j].call)) {
            relu = true;
            gone.push((j, last));
            last = g.nodes[j].outputs[0];
        }
        let mut pool2 = false;
        if let Some(k) = only_reader(last).filter(|&k| is_pool2(&g.nodes[k].call)) {
            pool2 = true;
            gone.push((k, last));
            last = g.nodes[k].outputs[0];
        }
        if gone.is_empty() {
            continue;
        }
        for &(j, _) in &gone {
            dead[j] = true;
        }
        rewrites.push((i, p, bias, relu, pool2, last, gone));
    }
    let fused = rewrites.len();
    for (i, p, bias, relu, pool2, last, gone) in rewrites {
        let n = &mut g.nodes[i];
        n.call = OpCall::Conv2dFused {
            p,
            bias,
            relu,
            pool2,
        };
        n.outputs = vec![last];
        for (j, inner) in gone {
            // The fused node now makes the chain's last value; the values in
            // between are made by no node.
            g.nodes[j].outputs.clear();
            g.values[inner].producer = Producer::Removed;
        }
    }
    if fused > 0 {
        super::remove_nodes(g, &dead);
    }
    format!("fused {fused} convolution epilogues")
}
