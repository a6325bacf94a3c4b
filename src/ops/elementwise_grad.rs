//! Vector-Jacobian products of the elementwise family, written in terms of
//! registry ops so that they are themselves differentiable.

use std::f64::consts::{LN_2, PI};

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
    matches!(op, UnaryOp::Gelu | UnaryOp::GeluTanh)
}

/// The fused gradient of a unary op as an op of its own (internal; not
/// differentiable): `g · op'(x)` with `y = op(x)` (`x`, `y`, `g` of one
/// floating dtype, shape and device), from the device's fused kernel where
/// it has one, else composed from primitives — what the backward pass
/// computes eagerly.
pub fn unary_grad(op: UnaryOp, x: &Tensor, y: &Tensor, g: &Tensor) -> Result<Tensor> {
    capture!(crate::graph::call::OpCall::UnaryGrad { op }, [x, y, g], one);
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
        use UnaryOp::*;
        match self.op {
            Neg => "NegBackward",
            Abs => "AbsBackward",
            Sign => "SignBackward",
            Square => "SquareBackward",
            Reciprocal => "ReciprocalBackward",
            Floor => "FloorBackward",
            Ceil => "CeilBackward",
            Round => "RoundBackward",
            Trunc => "TruncBackward",
            Exp => "ExpBackward",
            Log => "LogBackward",
            Log2 => "Log2Backward",
            Log1p => "Log1pBackward",
            Expm1 => "Expm1Backward",
            Sqrt => "SqrtBackward",
            Rsqrt => "RsqrtBackward",
            Sin => "SinBackward",
            Cos => "CosBackward",
            Tan => "TanBackward",
            Tanh => "TanhBackward",
            Sigmoid => "SigmoidBackward",
            Relu => "ReluBackward",
            LeakyRelu(_) => "LeakyReluBackward",
            Elu(_) => "EluBackward",
            Gelu => "GeluBackward",
            GeluTanh => "GeluBackward",
            Silu => "SiluBackward",
            Softplus { .. } => "SoftplusBackward",
            Erf => "ErfBackward",
            Clamp { .. } => "ClampBackward",
            LogicalNot | BitwiseNot | IsNan | IsInf | IsFinite => "NotDifferentiable",
        }
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
        if matches!(
            self.op,
            UnaryOp::LogicalNot
                | UnaryOp::BitwiseNot
                | UnaryOp::IsNan
                | UnaryOp::IsInf
                | UnaryOp::IsFinite
        ) {
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
    use UnaryOp::*;
    // Rules of more than one rounding step compute half types in float32.
    let one_step = matches!(
        op,
        Neg | Abs
            | Sign
            | Floor
            | Ceil
            | Round
            | Trunc
            | Square
            | Exp
            | Log
            | Sqrt
            | Relu
            | LeakyRelu(_)
            | Clamp { .. }
    );
    let (x, y, g) = if one_step {
        (x.clone(), y.clone(), g.clone())
    } else {
        (for_vjp(x)?, for_vjp(y)?, for_vjp(g)?)
    };
    let (x, y, g) = (&x, &y, &g);
    let gx = match op {
        Neg => unary(Neg, g)?,
        Abs => mul(g, &unary(Sign, x)?)?,
        Sign | Floor | Ceil | Round | Trunc => zeros_like(x)?,
        Square => mul(g, &muls(x, 2.0)?)?,
        Reciprocal => unary(Neg, &mul(g, &mul(y, y)?)?)?,
        Exp => mul(g, y)?,
        Log => div(g, x)?,
        Log2 => div(g, &muls(x, LN_2)?)?,
        Log1p => div(g, &adds(x, 1.0)?)?,
        // eˣ from x: y + 1 cancels for negative x (rounded y near -1).
        Expm1 => mul(g, &unary(Exp, x)?)?,
        Sqrt => div(g, &muls(y, 2.0)?)?,
        // -y³/2 as -y/(2x): one product of the stored y where y³ has three.
        Rsqrt => mul(g, &muls(&div(y, x)?, -0.5)?)?,
        Sin => mul(g, &unary(Cos, x)?)?,
        Cos => unary(Neg, &mul(g, &unary(Sin, x)?)?)?,
        Tan => mul(g, &adds(&mul(y, y)?, 1.0)?)?,
        // From x, step for step as the fused kernels (so that a captured
        // graph gives their bits): 1 - y² and y·(1 - y) cancel for large
        // |x|. 1 - tanh²(x) = 4e / (1 + e)² with e = exp(-2|x|).
        Tanh => {
            let e = unary(Exp, &muls(&unary(Abs, x)?, -2.0)?)?;
            let d = adds(&e, 1.0)?;
            mul(g, &div(&muls(&e, 4.0)?, &mul(&d, &d)?)?)?
        }
        // σ(x)·(1 - σ(x)) = e / (1 + e)² with e = exp(-|x|).
        Sigmoid => {
            let e = unary(Exp, &unary(Neg, &unary(Abs, x)?)?)?;
            let d = adds(&e, 1.0)?;
            mul(g, &div(&e, &mul(&d, &d)?)?)?
        }
        Relu => mask_grad(&cmps(BinaryOp::Gt, x, 0.0)?, g)?,
        LeakyRelu(s) => {
            let m = cmps(BinaryOp::Gt, x, 0.0)?;
            where_(&m, g, &muls(g, s)?)?
        }
        Elu(a) => {
            // y + α = α·eˣ for x <= 0, from x (y + α cancels as x → -∞).
            let m = cmps(BinaryOp::Gt, x, 0.0)?;
            where_(&m, g, &mul(g, &muls(&unary(Exp, x)?, a)?)?)?
        }
        Gelu => {
            // Φ(x) + x φ(x)
            let cdf = muls(
                &adds(
                    &unary(Erf, &muls(x, std::f64::consts::FRAC_1_SQRT_2)?)?,
                    1.0,
                )?,
                0.5,
            )?;
            let pdf = muls(
                &unary(Exp, &muls(&mul(x, x)?, -0.5)?)?,
                1.0 / (2.0 * PI).sqrt(),
            )?;
            mul(g, &add(&cdf, &mul(x, &pdf)?)?)?
        }
        GeluTanh => {
            let k = (2.0 / PI).sqrt();
            let x2 = mul(x, x)?;
            let inner = muls(&mul(x, &adds(&muls(&x2, 0.044715)?, 1.0)?)?, k)?;
            let t = unary(Tanh, &inner)?;
            let left = muls(&adds(&t, 1.0)?, 0.5)?;
            let dinner = muls(&adds(&muls(&x2, 3.0 * 0.044715)?, 1.0)?, k)?;
            let right = mul(&muls(x, 0.5)?, &mul(&rsubs(&mul(&t, &t)?, 1.0)?, &dinner)?)?;
            mul(g, &add(&left, &right)?)?
        }
        Silu => {
            // σ(x)·(1 + x·σ(-x)), σ(x) and σ(-x) = 1 - σ(x) from one
            // e = exp(-|x|) as in the fused kernels (1 - σ(x) cancels).
            let e = unary(Exp, &unary(Neg, &unary(Abs, x)?)?)?;
            let r = unary(Reciprocal, &adds(&e, 1.0)?)?;
            let er = mul(&e, &r)?;
            let pos = cmps(BinaryOp::Ge, x, 0.0)?;
            let (s, sn) = (where_(&pos, &r, &er)?, where_(&pos, &er, &r)?);
            mul(g, &mul(&s, &adds(&mul(x, &sn)?, 1.0)?)?)?
        }
        Softplus { beta, threshold } => {
            let bx = muls(x, beta)?;
            let lin = cmps(BinaryOp::Gt, &bx, threshold)?;
            where_(&lin, g, &mul(g, &unary(Sigmoid, &bx)?)?)?
        }
        Erf => {
            let e = unary(Exp, &unary(Neg, &mul(x, x)?)?)?;
            mul(g, &muls(&e, 2.0 / PI.sqrt())?)?
        }
        Clamp { min, max } => {
            let mut m: Option<Tensor> = None;
            if let Some(lo) = min {
                m = Some(cmps(BinaryOp::Ge, x, lo)?);
            }
            if let Some(hi) = max {
                let mh = cmps(BinaryOp::Le, x, hi)?;
                m = Some(match m {
                    Some(ml) => binary(BinaryOp::LogicalAnd, &ml, &mh)?,
                    None => mh,
                });
            }
            match m {
                Some(m) => mask_grad(&m, g)?,
                None => g.clone(),
            }
        }
        LogicalNot | BitwiseNot | IsNan | IsInf | IsFinite => {
            return Err(crate::error::Error::value(
                "unary_grad",
                format!("{} is not differentiable", op.name()),
            ))
        }
    };
    Ok(gx)
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
