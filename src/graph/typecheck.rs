//! Type checking of captured graphs: shape inference on shape-only tensors
//! (each node's own shape and dtype rules, run again), re-typing a graph for
//! new argument shapes, checking arguments and node results against the
//! captured types, and binding symbolic dims from argument shapes. The
//! executor ([`super::exec`]) runs these before any kernel writes anything.

use crate::autograd::GradMode;
use crate::error::{Error, Result};
use crate::tensor::{Device, Layout, Storage, Tensor};

use super::exec::{exec_node, node_note};
use super::sym;
use super::{Graph, InputKind, Producer, ValueId};

fn type_error(g: &Graph, node: usize, v: ValueId, got: &Tensor, want: &[usize]) -> Error {
    let n = &g.nodes[node];
    Error::runtime(
        "graph",
        format!(
            "node {node} ({}) produced a value of shape {:?} and dtype {} where the captured graph has shape {:?} and dtype {}; the graph is not valid for these argument shapes{}",
            n.call.name(),
            got.shape(),
            got.dtype(),
            want,
            g.values[v].dtype,
            n.loc.as_deref().map(|l| format!(" (captured at {l})")).unwrap_or_default()
        ),
    )
}

/// Shape inference: run every node's shape and dtype rules on shape-only
/// tensors, from the graph's input types, and check that each node gives
/// the types recorded for its outputs. `g`'s dims are concrete sizes (a
/// symbolic graph's sentinels, as when it was captured, or the sizes of a run).
pub(crate) fn infer_types(g: &Graph) -> Result<()> {
    infer_meta(g).map(|_| ())
}

/// [`infer_types`], returning the shape-only tensor of every value (with the
/// layout each op gives it: strides and offset, as eager execution would);
/// `None` for values no node defines.
pub(crate) fn infer_meta(g: &Graph) -> Result<Vec<Option<Tensor>>> {
    infer_meta_with(g, true)
}

/// `g` with the arguments at the given positions taking new shapes (and
/// ranks): every value's shape is derived again by its op's own rules, in
/// order, and an op whose arguments do not fit the new shapes fails with its
/// own error. How a graph with an input of unknown shape (a placeholder
/// declared without one) runs on the shape it is fed.
pub fn retype(g: &Graph, shapes: &[(usize, Vec<usize>)]) -> Result<Graph> {
    let mut g = g.clone();
    for inp in &g.inputs {
        if let InputKind::Arg(p) = inp.kind {
            if let Some((_, s)) = shapes.iter().find(|(q, _)| *q == p) {
                g.values[inp.value].shape.clone_from(s);
            }
        }
    }
    let twins = infer_meta_with(&g, false)?;
    for (v, t) in twins.iter().enumerate() {
        if let Some(t) = t {
            g.values[v].shape = t.shape().to_vec();
        }
    }
    Ok(g)
}

fn infer_meta_with(g: &Graph, check: bool) -> Result<Vec<Option<Tensor>>> {
    let mut twins: Vec<Option<Tensor>> = vec![None; g.values.len()];
    for inp in &g.inputs {
        let info = &g.values[inp.value];
        let t = match &inp.kind {
            // Same layout as the tensor read (some ops care about strides).
            InputKind::Ref(r) | InputKind::Const(r) => Tensor::from_parts(
                std::sync::Arc::new(Storage::new_meta(r.storage().nbytes())),
                r.layout().clone(),
                r.dtype(),
            )?,
            _ => meta_tensor(&info.shape, info.dtype)?,
        };
        twins[inp.value] = Some(t);
    }
    let _no = GradMode::set(false);
    for (i, n) in g.nodes.iter().enumerate() {
        let ins: Vec<Tensor> = n
            .inputs
            .iter()
            .map(|&v| {
                twins[v].clone().ok_or_else(|| {
                    Error::runtime(
                        "graph",
                        format!(
                            "node {i} ({}) reads %{v} before it is defined",
                            n.call.name()
                        ),
                    )
                })
            })
            .collect::<Result<_>>()?;
        let outs = exec_node(n, &n.call.on_device(Device::Meta), &ins, true)
            .map_err(|e| e.with_note(&node_note(g, i)))?;
        if check {
            check_outputs(g, i, &outs)?;
        } else {
            check_output_count(g, i, outs.len())?;
        }
        for (&v, t) in n.outputs.iter().zip(outs) {
            twins[v] = Some(t);
        }
    }
    Ok(twins)
}

fn meta_tensor(shape: &[usize], dtype: crate::tensor::DType) -> Result<Tensor> {
    let nbytes = crate::tensor::nbytes_for("graph", shape, dtype)?;
    Tensor::from_parts(
        std::sync::Arc::new(Storage::new_meta(nbytes)),
        Layout::contiguous(shape),
        dtype,
    )
}

/// A node must produce as many outputs as were captured for it.
pub(super) fn check_output_count(g: &Graph, node: usize, got: usize) -> Result<()> {
    let n = &g.nodes[node];
    if got != n.outputs.len() {
        return Err(Error::runtime(
            "graph",
            format!(
                "node {node} ({}) produced {got} outputs where {} were captured",
                n.call.name(),
                n.outputs.len()
            ),
        ));
    }
    Ok(())
}

fn check_outputs(g: &Graph, node: usize, outs: &[Tensor]) -> Result<()> {
    let n = &g.nodes[node];
    check_output_count(g, node, outs.len())?;
    for (&v, t) in n.outputs.iter().zip(outs) {
        let want = &g.values[v];
        if t.shape() != want.shape.as_slice() || t.dtype() != want.dtype {
            return Err(type_error(g, node, v, t, &want.shape));
        }
    }
    Ok(())
}

/// Check an argument against its input's captured type (symbols already bound).
pub(super) fn check_arg(g: &Graph, v: ValueId, name: Option<&str>, t: &Tensor) -> Result<()> {
    let want = &g.values[v];
    if t.shape() != want.shape.as_slice() || t.dtype() != want.dtype {
        let who = name
            .map(|n| format!("'{n}'"))
            .unwrap_or_else(|| "argument".into());
        return Err(Error::value(
            "graph",
            format!(
                "{who} expects shape {:?} and dtype {}, got shape {:?} and dtype {}",
                want.shape,
                want.dtype,
                t.shape(),
                t.dtype()
            ),
        ));
    }
    if t.device() != g.device {
        let who = name
            .map(|n| format!("'{n}'"))
            .unwrap_or_else(|| "an argument".into());
        return Err(Error::runtime(
            "graph",
            format!(
                "{who} is on device {} where the graph runs on {}; move it with .to(\"{}\")",
                t.device(),
                g.device,
                g.device
            ),
        ));
    }
    Ok(())
}

/// Bind the graph's symbols from the shapes of `args`: each symbolic dim of
/// an argument input gives its symbol's size. Errors name the input and
/// both shapes when an argument's rank or fixed dims do not fit.
pub fn bind_symbols(g: &Graph, args: &[Tensor]) -> Result<Vec<usize>> {
    let mut env: Vec<Option<usize>> = vec![None; g.symbols.len()];
    for inp in &g.inputs {
        let InputKind::Arg(i) = inp.kind else {
            continue;
        };
        let Some(t) = args.get(i) else {
            return Err(Error::value(
                "graph",
                format!(
                    "missing argument {i} ({})",
                    inp.name.as_deref().unwrap_or("unnamed")
                ),
            ));
        };
        let info = &g.values[inp.value];
        // Formatted only for an error (this runs on every call of a graph).
        let who = || {
            inp.name
                .as_deref()
                .map(|n| format!("'{n}'"))
                .unwrap_or_else(|| format!("argument {i}"))
        };
        let shown = || {
            format!(
                "({})",
                info.shape
                    .iter()
                    .map(|&d| match sym::decompose(d as i64, &g.symbols) {
                        Some(_) => "None".to_string(),
                        None => d.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        if t.dtype() != info.dtype {
            return Err(Error::dtype(
                "graph",
                format!(
                    "{} expects dtype {}, got {} (shape {:?})",
                    who(),
                    info.dtype,
                    t.dtype(),
                    t.shape()
                ),
            ));
        }
        if t.ndim() != info.shape.len() {
            return Err(Error::shape(
                "graph",
                format!(
                    "{} expects shape {}, got shape {:?}",
                    who(),
                    shown(),
                    t.shape()
                ),
            ));
        }
        for (&d, &got) in info.shape.iter().zip(t.shape()) {
            match sym::decompose(d as i64, &g.symbols) {
                Some(e) if e.syms.len() == 1 && e.coef == 1 && e.offset == 0 => {
                    let s = e.syms[0];
                    match env[s] {
                        None => env[s] = Some(got),
                        Some(b) if b == got => {}
                        Some(b) => {
                            return Err(Error::shape(
                                "graph",
                                format!("{}: dimension {} is {got} but the same symbolic dimension is {b} elsewhere (shape {:?})", who(),
                                    g.symbols[s].name,
                                    t.shape()
                                ),
                            ))
                        }
                    }
                }
                Some(_) => {}
                None if d == got => {}
                None => {
                    return Err(Error::shape(
                        "graph",
                        format!(
                            "{} expects shape {}, got shape {:?}",
                            who(),
                            shown(),
                            t.shape()
                        ),
                    ))
                }
            }
        }
    }
    env.iter()
        .enumerate()
        .map(|(i, e)| {
            // A symbol no value's shape involves (a sub-graph that kept none
            // of the inputs declaring it) needs no size.
            let unused = || {
                !g.values.iter().any(|v| {
                    v.producer != Producer::Removed
                        && v.shape.iter().any(|&d| {
                            sym::decompose(d as i64, &g.symbols)
                                .is_some_and(|x| x.syms.contains(&i))
                        })
                })
            };
            e.or_else(|| unused().then_some(1)).ok_or_else(|| {
                Error::value(
                    "graph",
                    format!(
                        "symbolic dimension {} is not given by any argument",
                        g.symbols[i].name
                    ),
                )
            })
        })
        .collect()
}
