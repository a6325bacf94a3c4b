//! Applying a general op (`crate::kernel::general`): one function for all of
//! them. The op's definition gives the argument checks and the outputs'
//! shapes and dtypes; this allocates them, hands contiguous inputs to the
//! backend's kernel, and records the autograd node whose rule is the
//! definition's VJP (written in ops, so it differentiates again). Graph
//! capture records the op as one node through the definition layer's hook.

use crate::autograd::{self as ag, Backward, GradMode, Save};
use crate::backend::backend;
use crate::error::{Error, Result};
use crate::kernel::general::{intercept, GeneralOp, GradOps};
use crate::ops::{creation, elementwise, index, shape};
use crate::tensor::{DType, Tensor};

/// Apply `op` to `ins`; returns its outputs.
pub fn run(op: &GeneralOp, ins: &[&Tensor]) -> Result<Vec<Tensor>> {
    if let Some(r) = intercept(op, ins) {
        return r;
    }
    let name = op.name();
    let _profiled =
        crate::tensor::profile::op_scope(name, || ins.iter().map(|t| t.shape()).collect());
    let Some(first) = ins.first() else {
        return Err(Error::runtime(name, "expects a tensor input"));
    };
    let dev = first.device();
    if let Some(t) = ins.iter().find(|t| t.device() != dev) {
        return Err(Error::runtime(
            name,
            format!("inputs on different devices: {dev} and {}", t.device()),
        ));
    }
    let shapes: Vec<&[usize]> = ins.iter().map(|t| t.shape()).collect();
    let dtypes: Vec<DType> = ins.iter().map(|t| t.dtype()).collect();
    let plan = op.plan(&shapes, &dtypes)?;
    let outs = plan
        .outs
        .iter()
        .map(|(s, d)| Tensor::empty_for(name, s, *d, dev))
        .collect::<Result<Vec<_>>>()?;
    // The kernel runs for empty outputs too (it returns at once), so that a
    // device without one refuses every case alike.
    {
        let cins = {
            let _no = GradMode::set(false);
            ins.iter()
                .map(|t| elementwise::contiguous(t))
                .collect::<Result<Vec<_>>>()?
        };
        let cins: Vec<&Tensor> = cins.iter().collect();
        let orefs: Vec<&Tensor> = outs.iter().collect();
        backend(dev).general(op, &cins, &orefs)?;
    }
    let grads =
        (0..outs.len()).any(|i| op.differentiable(i) && outs[i].dtype().is_floating_point());
    if grads && ag::needs_grad(ins) {
        let saved: Vec<Tensor> = op.saves().iter().map(|&i| outs[i].detach()).collect();
        let save: Vec<Save<'_>> = saved.iter().map(Save::Tensor).collect();
        let bw = GeneralBackward {
            op: op.clone(),
            x_shape: first.shape().to_vec(),
            in_dtype: first.dtype(),
        };
        let orefs: Vec<&Tensor> = outs.iter().collect();
        ag::record(bw, ins, &orefs, &save);
    }
    Ok(outs)
}

/// The ops the definitions' VJPs are written in.
struct Ops;

impl GradOps for Ops {
    fn zeros(&self, shape: &[usize], dtype: DType, like: &Tensor) -> Result<Tensor> {
        creation::zeros(shape, dtype, like.device())
    }
    fn scatter(&self, base: &Tensor, dim: isize, idx: &Tensor, src: &Tensor) -> Result<Tensor> {
        index::scatter(base, dim, idx, src)
    }
    fn reshape(&self, x: &Tensor, s: &[usize]) -> Result<Tensor> {
        let s: Vec<isize> = s.iter().map(|&d| d as isize).collect();
        shape::reshape(x, &s)
    }
}

/// A general op's autograd node: its definition's VJP for input 0.
struct GeneralBackward {
    op: GeneralOp,
    x_shape: Vec<usize>,
    in_dtype: DType,
}

impl Backward for GeneralBackward {
    fn name(&self) -> &'static str {
        self.op.backward_name()
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &grads[0] else {
            return Ok(vec![None]);
        };
        let gx = self.op.vjp(&Ops, &self.x_shape, saved, g)?;
        Ok(vec![Some(elementwise::to_dtype(&gx, self.in_dtype)?)])
    }
}
