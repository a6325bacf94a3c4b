//! Custom autograd functions (`ferrograd.autograd.Function`): a backward
//! node whose rule is a Python callable.
//!
//! The Python class runs `forward` with recording off, then records one node
//! here linking the outputs to the inputs. The node saves what
//! `ctx.save_for_backward` saved through the engine's saved-value mechanism
//! (so writing a saved tensor in place before `backward()` is caught), and
//! its rule calls back into Python with the saved tensors, the output
//! gradients and which inputs need one.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use super::autograd::HOOK_ERROR;
use super::{run, PyTensor};
use crate::autograd::{self as ag, Backward, Save};
use crate::error::Error;
use crate::tensor::Tensor;

/// A `'static` copy of `s`, made once per distinct name (node names are
/// `'static`; there is one per custom function class).
fn interned(s: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(|| Mutex::new(HashSet::new()))
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.get(s) {
        return n;
    }
    let n: &'static str = Box::leak(s.to_owned().into_boxed_str());
    names.insert(n);
    n
}

struct PyFunctionBackward {
    name: &'static str,
    /// `rule(saved, grads, needs) -> sequence of Tensor | None`, one per input.
    rule: Py<PyAny>,
    /// Shapes of the inputs, to check the gradients the rule returns.
    input_shapes: Vec<Vec<usize>>,
}

impl Backward for PyFunctionBackward {
    fn name(&self) -> &'static str {
        self.name
    }

    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> crate::Result<Vec<Option<Tensor>>> {
        Python::attach(|py| {
            let r = (|| -> PyResult<Vec<Option<Tensor>>> {
                let saved: Vec<PyTensor> = saved.iter().cloned().map(PyTensor::new).collect();
                let grads: Vec<Option<PyTensor>> =
                    grads.iter().map(|g| g.clone().map(PyTensor::new)).collect();
                let out = self.rule.call1(py, (saved, grads, needs.to_vec()))?;
                let items: Vec<Bound<'_, PyAny>> =
                    out.bind(py).try_iter()?.collect::<PyResult<_>>()?;
                if items.len() != self.input_shapes.len() {
                    return Err(PyValueError::new_err(format!(
                        "{}: backward returned {} gradients, but forward took {} inputs \
                         (return None for an input that needs no gradient)",
                        self.name,
                        items.len(),
                        self.input_shapes.len()
                    )));
                }
                items
                    .iter()
                    .enumerate()
                    .map(|(i, g)| {
                        if g.is_none() {
                            return Ok(None);
                        }
                        let g = g.cast::<PyTensor>().map_err(|_| {
                            PyTypeError::new_err(format!(
                                "{}: backward must return Tensors or None, got {} for input {i}",
                                self.name,
                                g.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                            ))
                        })?;
                        let g = g.borrow().t.clone();
                        if g.shape() != self.input_shapes[i].as_slice() {
                            return Err(PyValueError::new_err(format!(
                                "{}: backward returned a gradient of shape {:?} for input {i} of shape {:?}",
                                self.name,
                                g.shape(),
                                self.input_shapes[i]
                            )));
                        }
                        Ok(needs.get(i).copied().unwrap_or(false).then_some(g))
                    })
                    .collect()
            })();
            r.map_err(|e| {
                let msg = e.to_string();
                HOOK_ERROR.with(|h| *h.borrow_mut() = Some(e));
                Error::runtime("Function.backward", msg)
            })
        })
    }
}

/// Record the node of a custom function's call (see the module docs).
///
/// `saved_output[k]` is the output index of saved tensor `k` when it is one
/// of the outputs (it is then saved without a cycle through its own
/// history). `dirty[j]` marks output `j` as an input written in place: it
/// gets the node as its new history. `differentiable[j] == false` leaves
/// output `j` without history. Returns whether a node was recorded.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn _record_function(
    name: &str,
    rule: Py<PyAny>,
    inputs: Vec<PyRef<'_, PyTensor>>,
    outputs: Vec<PyRef<'_, PyTensor>>,
    saved: Vec<PyRef<'_, PyTensor>>,
    saved_output: Vec<Option<usize>>,
    dirty: Vec<bool>,
    differentiable: Vec<bool>,
) -> PyResult<bool> {
    let ins: Vec<&Tensor> = inputs.iter().map(|t| &t.t).collect();
    if !ag::needs_grad(&ins) {
        return Ok(false);
    }
    let n = outputs.len();
    if dirty.len() != n || differentiable.len() != n || saved_output.len() != saved.len() {
        return Err(PyValueError::new_err(
            "_record_function: dirty/differentiable must have one entry per output, saved_output one per saved tensor",
        ));
    }
    // The tensors the node sees as its outputs: fresh aliases for dirty
    // outputs (their history is rebased below) and non-differentiable ones
    // (dropped at once, so no gradient reaches them), the outputs themselves
    // otherwise.
    let slots: Vec<Option<Tensor>> = outputs
        .iter()
        .enumerate()
        .map(|(j, o)| (dirty[j] || !differentiable[j]).then(|| o.t.detach()))
        .collect();
    // The outputs themselves (not clones: a clone would get the history in
    // its own autograd cell, not in the output's).
    let outs: Vec<&Tensor> = slots
        .iter()
        .zip(&outputs)
        .map(|(s, o)| s.as_ref().unwrap_or(&o.t))
        .collect();
    let save: Vec<Save<'_>> = saved
        .iter()
        .zip(&saved_output)
        .map(|(s, k)| match k {
            Some(j) if *j < n => Save::Output(*j),
            _ => Save::Tensor(&s.t),
        })
        .collect();
    let node = PyFunctionBackward {
        name: interned(name),
        rule,
        input_shapes: ins.iter().map(|t| t.shape().to_vec()).collect(),
    };
    let any_dirty = dirty.iter().any(|&d| d);
    if any_dirty {
        ag::record_alias(node, &ins, &outs, &save);
        for (j, o) in outputs.iter().enumerate() {
            if dirty[j] {
                if let Some(a) = &slots[j] {
                    run(|| ag::rebase_history(&o.t, a))?;
                }
            }
        }
    } else {
        ag::record(node, &ins, &outs, &save);
    }
    Ok(true)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_record_function, m)?)?;
    Ok(())
}
