//! The optimizer ops (`_core._sgd_step`, `_core._adam_step`,
//! `_core._rmsprop_step`): one call updates every parameter of a group.
//!
//! `ferrograd.optim` builds the lists from its parameter groups and calls
//! these once per group per step. Arguments are lists of tensors (never
//! converted from other objects: the updates are in place).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::{run_heavy, PyTensor};
use crate::graph::call::{Dyn, DynField, OpCall};
use crate::ops::optim::{self, AdamHyper, RmspropHyper, SgdHyper};
use crate::tensor::Tensor;

/// Items of a list/tuple argument, each `f`-converted; `what` names it in errors.
fn items<T>(
    op: &str,
    what: &str,
    obj: &Bound<'_, PyAny>,
    f: impl Fn(&Bound<'_, PyAny>) -> Option<T>,
    expected: &str,
) -> PyResult<Vec<T>> {
    if obj.cast::<PyTensor>().is_ok() {
        return Err(PyTypeError::new_err(format!(
            "{op}: {what} must be a list of tensors, got a single Tensor"
        )));
    }
    let convert = |i: usize, o: &Bound<'_, PyAny>| {
        f(o).ok_or_else(|| {
            let ty = o
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default();
            PyTypeError::new_err(format!("{op}: {what}[{i}] must be {expected}, got {ty}"))
        })
    };
    // Lists (what the optimizers pass) by index: no iterator protocol per item.
    if let Ok(list) = obj.cast::<PyList>() {
        return list
            .iter()
            .enumerate()
            .map(|(i, o)| convert(i, &o))
            .collect();
    }
    let it = obj
        .try_iter()
        .map_err(|_| PyTypeError::new_err(format!("{op}: {what} must be a list of tensors")))?;
    it.enumerate().map(|(i, o)| convert(i, &o?)).collect()
}

fn tensors(op: &str, what: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<Tensor>> {
    items(
        op,
        what,
        obj,
        |o| o.cast::<PyTensor>().ok().map(|t| t.borrow().t.clone()),
        "a Tensor",
    )
}

/// `dynamic=[(field, index or None, slot), ...]`: arguments a captured graph
/// reads from scalar slots at every run (only used while capturing).
fn parse_dyn(op: &str, d: Option<Vec<(String, Option<usize>, usize)>>) -> PyResult<Vec<Dyn>> {
    d.unwrap_or_default()
        .into_iter()
        .map(|(name, idx, slot)| {
            DynField::parse(&name, idx)
                .map(|field| Dyn { field, slot })
                .ok_or_else(|| {
                    PyTypeError::new_err(format!("{op}: unknown dynamic argument {name:?}"))
                })
        })
        .collect()
}

/// Record an optimizer call with dynamic arguments into the graph being captured.
fn record_dyn(call: OpCall, ins: Vec<Tensor>) -> PyResult<()> {
    super::run(|| crate::graph::trace::record(call, &ins).map(|_| ()))
}

fn work(ts: &[Tensor]) -> usize {
    ts.iter().map(|t| t.numel()).sum()
}

/// `_sgd_step(params, grads, momentum_buffers, lr, momentum, dampening, nesterov,
/// weight_decay, maximize)` → the momentum buffers (a list; None entries start
/// from the gradient and are returned allocated; all None when momentum is 0).
#[pyfunction]
#[pyo3(name = "_sgd_step", signature = (params, grads, momentum_buffers, lr, momentum, dampening, nesterov, weight_decay, maximize, dynamic=None))]
#[allow(clippy::too_many_arguments)]
fn sgd_step(
    py: Python<'_>,
    params: &Bound<'_, PyAny>,
    grads: &Bound<'_, PyAny>,
    momentum_buffers: &Bound<'_, PyAny>,
    lr: f64,
    momentum: f64,
    dampening: f64,
    nesterov: bool,
    weight_decay: f64,
    maximize: bool,
    dynamic: Option<Vec<(String, Option<usize>, usize)>>,
) -> PyResult<Vec<Option<PyTensor>>> {
    const OP: &str = "sgd_step";
    let ps = tensors(OP, "params", params)?;
    let gs = tensors(OP, "grads", grads)?;
    let bs = items(
        OP,
        "momentum_buffers",
        momentum_buffers,
        |o| {
            if o.is_none() {
                Some(None)
            } else {
                o.cast::<PyTensor>()
                    .ok()
                    .map(|t| Some(t.borrow().t.clone()))
            }
        },
        "a Tensor or None",
    )?;
    let h = SgdHyper {
        lr,
        momentum,
        dampening,
        nesterov,
        weight_decay,
        maximize,
    };
    if dynamic.is_some() && crate::graph::trace::active() {
        let dynamic = parse_dyn(OP, dynamic)?;
        let call = OpCall::SgdStep {
            n: ps.len(),
            bufs: bs.iter().map(|b| b.is_some()).collect(),
            h,
            dynamic,
        };
        let ins: Vec<Tensor> = ps
            .iter()
            .chain(&gs)
            .chain(bs.iter().flatten())
            .cloned()
            .collect();
        record_dyn(call, ins)?;
        return Ok(bs.into_iter().map(|b| b.map(PyTensor::new)).collect());
    }
    let out = run_heavy(py, work(&ps), || optim::sgd_step(&ps, &gs, &bs, &h))?;
    Ok(out.into_iter().map(|b| b.map(PyTensor::new)).collect())
}

/// `_adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr,
/// beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled)`; `steps` are
/// the step counts after this update; `decoupled` selects AdamW's weight decay.
#[pyfunction]
#[pyo3(name = "_adam_step", signature = (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, decoupled, dynamic=None))]
#[allow(clippy::too_many_arguments)]
fn adam_step(
    py: Python<'_>,
    params: &Bound<'_, PyAny>,
    grads: &Bound<'_, PyAny>,
    exp_avgs: &Bound<'_, PyAny>,
    exp_avg_sqs: &Bound<'_, PyAny>,
    max_exp_avg_sqs: &Bound<'_, PyAny>,
    steps: Vec<u64>,
    lr: f64,
    beta1: f64,
    beta2: f64,
    eps: f64,
    weight_decay: f64,
    amsgrad: bool,
    maximize: bool,
    decoupled: bool,
    dynamic: Option<Vec<(String, Option<usize>, usize)>>,
) -> PyResult<()> {
    const OP: &str = "adam_step";
    let ps = tensors(OP, "params", params)?;
    let gs = tensors(OP, "grads", grads)?;
    let ms = tensors(OP, "exp_avgs", exp_avgs)?;
    let vs = tensors(OP, "exp_avg_sqs", exp_avg_sqs)?;
    let xs = tensors(OP, "max_exp_avg_sqs", max_exp_avg_sqs)?;
    let h = AdamHyper {
        lr,
        beta1,
        beta2,
        eps,
        weight_decay,
        amsgrad,
        maximize,
        decoupled,
    };
    if dynamic.is_some() && crate::graph::trace::active() {
        let dynamic = parse_dyn(OP, dynamic)?;
        let call = OpCall::AdamStep {
            n: ps.len(),
            steps,
            h,
            dynamic,
        };
        let ins: Vec<Tensor> = ps
            .iter()
            .chain(&gs)
            .chain(&ms)
            .chain(&vs)
            .chain(&xs)
            .cloned()
            .collect();
        return record_dyn(call, ins);
    }
    run_heavy(py, work(&ps), || {
        optim::adam_step(&ps, &gs, &ms, &vs, &xs, &steps, &h)
    })
}

/// `_rmsprop_step(params, grads, square_avgs, momentum_buffers, grad_avgs, lr,
/// alpha, eps, weight_decay, momentum, centered, maximize)`; `momentum_buffers`
/// is empty unless momentum > 0, `grad_avgs` empty unless centered.
#[pyfunction]
#[pyo3(name = "_rmsprop_step", signature = (params, grads, square_avgs, momentum_buffers, grad_avgs, lr, alpha, eps, weight_decay, momentum, centered, maximize, dynamic=None))]
#[allow(clippy::too_many_arguments)]
fn rmsprop_step(
    py: Python<'_>,
    params: &Bound<'_, PyAny>,
    grads: &Bound<'_, PyAny>,
    square_avgs: &Bound<'_, PyAny>,
    momentum_buffers: &Bound<'_, PyAny>,
    grad_avgs: &Bound<'_, PyAny>,
    lr: f64,
    alpha: f64,
    eps: f64,
    weight_decay: f64,
    momentum: f64,
    centered: bool,
    maximize: bool,
    dynamic: Option<Vec<(String, Option<usize>, usize)>>,
) -> PyResult<()> {
    const OP: &str = "rmsprop_step";
    let ps = tensors(OP, "params", params)?;
    let gs = tensors(OP, "grads", grads)?;
    let ss = tensors(OP, "square_avgs", square_avgs)?;
    let bs = tensors(OP, "momentum_buffers", momentum_buffers)?;
    let avgs = tensors(OP, "grad_avgs", grad_avgs)?;
    let h = RmspropHyper {
        lr,
        alpha,
        eps,
        weight_decay,
        momentum,
        centered,
        maximize,
    };
    if dynamic.is_some() && crate::graph::trace::active() {
        let dynamic = parse_dyn(OP, dynamic)?;
        let call = OpCall::RmspropStep {
            n: ps.len(),
            h,
            dynamic,
        };
        let ins: Vec<Tensor> = ps
            .iter()
            .chain(&gs)
            .chain(&ss)
            .chain(&bs)
            .chain(&avgs)
            .cloned()
            .collect();
        return record_dyn(call, ins);
    }
    run_heavy(py, work(&ps), || {
        optim::rmsprop_step(&ps, &gs, &ss, &bs, &avgs, &h)
    })
}

/// `_zero_grads(params)`: set `.grad` to None on every tensor of the list that
/// has one, as `p.grad = None` does for each (while a graph is captured, the
/// gradient the graph will see), without a Python object per gradient.
/// While capturing, every gradient is set to None without looking at it
/// first: the graph then does not depend on which leaves had a gradient
/// (looking would make it hold only while those stay the same).
#[pyfunction]
#[pyo3(name = "_zero_grads")]
fn zero_grads(params: &Bound<'_, PyAny>) -> PyResult<()> {
    let capturing = crate::graph::trace::recording();
    for t in &tensors("zero_grad", "params", params)? {
        if capturing || super::autograd::grad_of(t)?.is_some() {
            super::autograd::assign_grad(t, None)?;
        }
    }
    Ok(())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(zero_grads, m)?)?;
    m.add_function(wrap_pyfunction!(sgd_step, m)?)?;
    m.add_function(wrap_pyfunction!(adam_step, m)?)?;
    m.add_function(wrap_pyfunction!(rmsprop_step, m)?)?;
    Ok(())
}
