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

use crate::graph::{Graph, OpCall, Producer, ValueId};
use crate::ops::conv::{expand_arg, Conv2dParams, Padding};
use crate::ops::elementwise::UnaryOp;
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

/// Fuse convolution epilogues; returns a summary.
pub fn run(g: &mut Graph) -> String {
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
