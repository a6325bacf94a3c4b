//! Vector-Jacobian products of the elementwise family, written in terms of
//! registry ops so that they are themselves differentiable.

use crate::autograd::{sum_to, Backward};
use crate::error::Result;
use crate::ops::elementwise::{
    binary, binary_scalar, scalar_tensor, to_dtype, unary, where_, BinaryOp, UnaryOp,
};
use crate::tensor::{DType, Scalar, Shape, Tensor};

// Small helpers: tensor ∘ tensor and tensor ∘ scalar.
pub(crate) fn mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    binary(BinaryOp::Mul, a, b)
}
pub(crate) fn add(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    binary(BinaryOp::Add, a, b)
}
#[allow(dead_code)]
pub(crate) fn sub(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    binary(BinaryOp::Sub, a, b)
}
pub(crate) fn div(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    binary(BinaryOp::Div, a, b)
}
pub(crate) fn muls(a: &Tensor, s: f64) -> Result<Tensor> {
    binary_scalar(BinaryOp::Mul, a, Scalar::Float(s), false)
}
pub(crate) fn adds(a: &Tensor, s: f64) -> Result<Tensor> {
    binary_scalar(BinaryOp::Add, a, Scalar::Float(s), false)
}
/// `s - a`.
pub(crate) fn rsubs(a: &Tensor, s: f64) -> Result<Tensor> {
    binary_scalar(BinaryOp::Sub, a, Scalar::Float(s), true)
}
fn cmps(op: BinaryOp, a: &Tensor, s: f64) -> Result<Tensor> {
    binary_scalar(op, a, Scalar::Float(s), false)
}
/// The dtype a VJP written in ops computes in: float32 for float16 and
/// bfloat16, rounded once to the dtype at the end (as their kernels compute
/// in float32 and round once on store; composed in the dtype itself, every
/// intermediate would be rounded), else the dtype itself.
pub(crate) fn vjp_dtype(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        d => d,
    }
}

/// `t` in [`vjp_dtype`] of its dtype (itself, recording nothing, where that is its dtype).
pub(crate) fn for_vjp(t: &Tensor) -> Result<Tensor> {
    let d = vjp_dtype(t.dtype());
    if d == t.dtype() {
        Ok(t.clone())
    } else {
        to_dtype(t, d)
    }
}

/// `mask ? g : 0`.
fn mask_grad(mask: &Tensor, g: &Tensor) -> Result<Tensor> {
    let z = scalar_tensor(Scalar::Float(0.0), g.dtype(), g.device())?;
    where_(mask, g, &z)
}
fn zeros_like(x: &Tensor) -> Result<Tensor> {
    Tensor::zeros(x.shape(), x.dtype(), x.device())
}

/// Whether `g · op'(x)` may come from the device's fused kernel: the
/// gradient is not itself recorded (no `create_graph`) and the operands
/// share a floating dtype, a shape and a device.
fn fusable(x: &Tensor, y: &Tensor, g: &Tensor) -> bool {
    if crate::autograd::is_grad_enabled() && (x.requires_grad() || g.requires_grad()) {
        return false;
    }
    let dt = x.dtype();
    dt.is_floating_point()
        && y.dtype() == dt
        && g.dtype() == dt
        && y.shape() == x.shape()
        && g.shape() == x.shape()
        && y.device() == x.device()
        && g.device() == x.device()
}

/// `g · op'(x)` from the device's fused kernel (one pass, no temporaries)
/// when [`fusable`] and the device fuses `op`; `None` otherwise.
fn fused_unary_grad(op: UnaryOp, x: &Tensor, y: &Tensor, g: &Tensor) -> Result<Option<Tensor>> {
    if !fusable(x, y, g) {
        return Ok(None);
    }
    let out = Tensor::empty(x.shape(), x.dtype(), x.device())?;
    if out.numel() == 0 {
        return Ok(Some(out));
    }
    Ok(crate::backend::backend(x.device())
        .unary_grad(op, x, y, g, &out)?
        .then_some(out))
}

/// Ops whose fused gradient kernel computes the derivative by another
/// formula than its composition from primitives (GELU's: a clamped `exp`
/// and `erfc` or a sigmoid form, with fused multiply-adds), so the two round
/// differently. Their gradient is captured as one [`unary_grad`] node, so a
/// captured graph computes what eager mode computes; the other ops' kernels
/// round as their compositions do, which stay elementwise ops a graph fuses.
fn captured_fused(op: UnaryOp) -> bool {
    op.grad_captured()
}

/// The fused gradient of a unary op as an op of its own (internal; not
/// differentiable): `g · op'(x)` with `y = op(x)` (`x`, `y`, `g` of one
/// floating dtype, shape and device), from the device's fused kernel where
/// it has one, else composed from primitives — what the backward pass
/// computes eagerly.
pub fn unary_grad(op: UnaryOp, x: &Tensor, y: &Tensor, g: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::UnaryGrad { op }, [x, y, g], one);
    let _no = crate::autograd::GradMode::set(false);
    if !fusable(x, y, g) {
        return Err(crate::error::Error::value(
            "unary_grad",
            format!(
                "{}'s gradient needs x, y and g of one floating dtype, shape and device, got {} {:?}, {} {:?} and {} {:?}",
                op.name(),
                x.dtype(),
                x.shape(),
                y.dtype(),
                y.shape(),
                g.dtype(),
                g.shape()
            ),
        ));
    }
    match fused_unary_grad(op, x, y, g)? {
        Some(out) => Ok(out),
        None => to_dtype(&composed_unary_grad(op, x, y, g)?, x.dtype()),
    }
}

/// Backward of a unary op. Saved: `[x, y]` (input and output).
pub struct UnaryBackward {
    pub op: UnaryOp,
}

impl Backward for UnaryBackward {
    fn name(&self) -> &'static str {
        self.op.backward_name().unwrap_or("NotDifferentiable")
    }

    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let (x, y) = (&saved[0], &saved[1]);
        let Some(g) = &grads[0] else {
            return Ok(vec![None]);
        };
        if captured_fused(self.op) && fusable(x, y, g) {
            return Ok(vec![Some(unary_grad(self.op, x, y, g)?)]);
        }
        if let Some(gx) = fused_unary_grad(self.op, x, y, g)? {
            return Ok(vec![Some(gx)]);
        }
        if self.op.backward_name().is_none() {
            return Ok(vec![None]);
        }
        Ok(vec![Some(to_dtype(
            &composed_unary_grad(self.op, x, y, g)?,
            x.dtype(),
        )?)])
    }
}

/// `g · op'(x)` composed from primitives (`y = op(x)`), in the dtype the
/// primitives give (float32 for float16/bfloat16 where the rule takes more
/// than one rounding step; callers round to the dtype once); not defined for
/// the non-differentiable ops.
fn composed_unary_grad(op: UnaryOp, x: &Tensor, y: &Tensor, g: &Tensor) -> Result<Tensor> {
    // Rules of more than one rounding step compute half types in float32.
    let (x, y, g) = if op.vjp_one_step() {
        (x.clone(), y.clone(), g.clone())
    } else {
        (for_vjp(x)?, for_vjp(y)?, for_vjp(g)?)
    };
    let (x, y, g) = (&x, &y, &g);
    crate::kernel::unary::unary_ops!([vjp op x y g])
}

/// Calls a VJP of the unary table with its operands (`x`, `y = op(x)`, `g`).
fn call_vjp<F>(f: F, x: &Tensor, y: &Tensor, g: &Tensor) -> Result<Tensor>
where
    F: FnOnce(&Tensor, &Tensor, &Tensor) -> Result<Tensor>,
{
    f(x, y, g)
}

/// Backward of a binary op. Saved: `[a, b, y]` (inputs after dtype conversion, output).
pub struct BinaryBackward {
    pub op: BinaryOp,
    pub a_shape: Shape,
    pub b_shape: Shape,
    pub a_dtype: DType,
    pub b_dtype: DType,
}

impl Backward for BinaryBackward {
    fn name(&self) -> &'static str {
        use BinaryOp::*;
        match self.op {
            Add => "AddBackward",
            Sub => "SubBackward",
            Mul => "MulBackward",
            Div => "DivBackward",
            FloorDiv => "FloorDivideBackward",
            Remainder => "RemainderBackward",
            Pow => "PowBackward",
            Maximum => "MaximumBackward",
            Minimum => "MinimumBackward",
            Atan2 => "Atan2Backward",
            _ => "NotDifferentiable",
        }
    }

    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        use BinaryOp::*;
        let (a, b, y) = (&saved[0], &saved[1], &saved[2]);
        let Some(g) = &grads[0] else {
            return Ok(vec![None, None]);
        };
        // Rules of more than one rounding step (division, power, atan2) compute
        // half types in float32; the others are exact or one product.
        let c = for_vjp;
        let (ga, gb): (Option<Tensor>, Option<Tensor>) = match self.op {
            Add => (Some(g.clone()), Some(g.clone())),
            Sub => (Some(g.clone()), Some(unary(UnaryOp::Neg, g)?)),
            Mul => (
                needs[0].then(|| mul(g, b)).transpose()?,
                needs[1].then(|| mul(g, a)).transpose()?,
            ),
            Div => (
                needs[0].then(|| div(g, b)).transpose()?,
                needs[1]
                    .then(|| -> Result<Tensor> {
                        let (g, y, b) = (&c(g)?, &c(y)?, &c(b)?);
                        unary(UnaryOp::Neg, &div(&mul(g, y)?, b)?)
                    })
                    .transpose()?,
            ),
            FloorDiv => (Some(zeros_like(g)?), Some(zeros_like(g)?)),
            Remainder => (
                Some(g.clone()),
                needs[1]
                    .then(|| -> Result<Tensor> {
                        unary(UnaryOp::Neg, &mul(g, &binary(FloorDiv, a, b)?)?)
                    })
                    .transpose()?,
            ),
            Pow => {
                let (a, b, g) = (&c(a)?, &c(b)?, &c(g)?);
                let ga = needs[0]
                    .then(|| -> Result<Tensor> {
                        // b * a^(b-1), with 0 where b == 0 (avoids 0 * inf).
                        let d = mul(b, &binary(Pow, a, &adds(b, -1.0)?)?)?;
                        let bz = cmps(Eq, b, 0.0)?;
                        let z = scalar_tensor(Scalar::Float(0.0), d.dtype(), d.device())?;
                        mul(g, &where_(&bz, &z, &d)?)
                    })
                    .transpose()?;
                let gb = needs[1]
                    .then(|| -> Result<Tensor> {
                        // y * ln(a), with 0 where a == 0 and b >= 0.
                        let d = mul(&c(y)?, &unary(UnaryOp::Log, a)?)?;
                        let m = binary(LogicalAnd, &cmps(Eq, a, 0.0)?, &cmps(Ge, b, 0.0)?)?;
                        let z = scalar_tensor(Scalar::Float(0.0), d.dtype(), d.device())?;
                        mul(g, &where_(&m, &z, &d)?)
                    })
                    .transpose()?;
                (ga, gb)
            }
            Maximum | Minimum => {
                let (win, lose) = if self.op == Maximum {
                    (Gt, Lt)
                } else {
                    (Lt, Gt)
                };
                // Ties split the gradient evenly.
                let wa = to_dtype(&binary(win, a, b)?, g.dtype())?;
                let tie = muls(&to_dtype(&binary(Eq, a, b)?, g.dtype())?, 0.5)?;
                let wb = to_dtype(&binary(lose, a, b)?, g.dtype())?;
                (
                    Some(mul(g, &add(&wa, &tie)?)?),
                    Some(mul(g, &add(&wb, &tie)?)?),
                )
            }
            Atan2 => {
                let (a, b, g) = (&c(a)?, &c(b)?, &c(g)?);
                let den = add(&mul(a, a)?, &mul(b, b)?)?;
                (
                    Some(mul(g, &div(b, &den)?)?),
                    Some(unary(UnaryOp::Neg, &mul(g, &div(a, &den)?)?)?),
                )
            }
            _ => (None, None),
        };
        let fix =
            |gx: Option<Tensor>, shape: &Shape, dt: DType, need: bool| -> Result<Option<Tensor>> {
                match gx {
                    Some(gx) if need => Ok(Some(to_dtype(&sum_to(&gx, shape)?, dt)?)),
                    _ => Ok(None),
                }
            };
        Ok(vec![
            fix(ga, &self.a_shape, self.a_dtype, needs[0])?,
            fix(gb, &self.b_shape, self.b_dtype, needs[1])?,
        ])
    }
}

/// Backward of `where(cond, a, b)`. Saved: `[cond]`.
pub struct WhereBackward {
    pub a_shape: Shape,
    pub b_shape: Shape,
    pub a_dtype: DType,
    pub b_dtype: DType,
}

impl Backward for WhereBackward {
    fn name(&self) -> &'static str {
        "WhereBackward"
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let c = &saved[0];
        let Some(g) = &grads[0] else {
            return Ok(vec![None, None, None]);
        };
        let z = scalar_tensor(Scalar::Float(0.0), g.dtype(), g.device())?;
        let ga = if needs[1] {
            Some(to_dtype(
                &sum_to(&where_(c, g, &z)?, &self.a_shape)?,
                self.a_dtype,
            )?)
        } else {
            None
        };
        let gb = if needs[2] {
            Some(to_dtype(
                &sum_to(&where_(c, &z, g)?, &self.b_shape)?,
                self.b_dtype,
            )?)
        } else {
            None
        };
        Ok(vec![None, ga, gb])
    }
}

/// Backward of a dtype conversion between floating types.
pub struct CastBackward {
    pub from: DType,
}

impl Backward for CastBackward {
    fn name(&self) -> &'static str {
        "ToCopyBackward"
    }
    fn apply(
        &self,
        _saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![grads[0]
            .as_ref()
            .map(|g| to_dtype(g, self.from))
            .transpose()?])
    }
}

/// Backward of ops whose gradient is the identity (`clone`, `contiguous`).
pub struct IdentityBackward {
    pub name: &'static str,
}

impl Backward for IdentityBackward {
    fn name(&self) -> &'static str {
        self.name
    }
    fn apply(
        &self,
        _saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![grads[0].clone()])
    }
}

/// Backward of a device move: the gradient moves back to the input's device.
pub struct ToDeviceBackward {
    pub from: crate::tensor::Device,
}

impl Backward for ToDeviceBackward {
    fn name(&self) -> &'static str {
        "ToCopyBackward"
    }
    fn apply(
        &self,
        _saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        Ok(vec![grads[0]
            .as_ref()
            .map(|g| super::elementwise::to_device(g, self.from))
            .transpose()?])
    }
}
