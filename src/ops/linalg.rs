//! Linear algebra: `matmul` (the primitive) and the ops built on it —
//! `mm`, `bmm`, `mv`, `dot`, `outer`, `linear` and `einsum`.
//!
//! `matmul` follows NumPy/PyTorch: a 1-D left operand is a row vector and a
//! 1-D right operand a column vector (the added dim is removed from the
//! result), batch dims broadcast, dtypes promote. float16 and bfloat16
//! compute in float32 and round once at the end. Strided operands reach the
//! kernel as views, without copies.
//!
//! Gradients: `matmul` and the products on it record one `MatmulBackward`
//! (`g @ bᵀ`, `aᵀ @ g` with transposes handed to the GEMM as views, batch
//! dims folded into one product where the other operand is unbatched);
//! `linear` records `LinearBackward` (weight gradient `gᵀ @ x` straight out of
//! the GEMM); `einsum` records `EinsumBackward` (an einsum of the output
//! gradient with the other operands). All are differentiable again.

use crate::autograd::{self as ag, sum_to, Backward, GradMode, Save};
use crate::backend::backend;
use crate::error::{Error, Result};
use crate::ops::elementwise::{self as ew, BinaryOp, UnaryOp};
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::ops::shape;
use crate::tensor::layout::{broadcast_shapes, fmt_shape};
use crate::tensor::{DType, Device, Layout, Scalar, Shape, Tensor};
use smallvec::{smallvec, SmallVec};
use std::collections::HashMap;

pub const OPS: &[OpInfo] = &[
    OpInfo::prim("matmul", "linalg", DTypes::NUMERIC).grad(),
    OpInfo::prim("mm", "linalg", DTypes::NUMERIC)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("bmm", "linalg", DTypes::NUMERIC)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("mv", "linalg", DTypes::NUMERIC)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("dot", "linalg", DTypes::NUMERIC)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("outer", "linalg", DTypes::NUMERIC)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("linear", "linalg", DTypes::NUMERIC)
        .kind(OpKind::Fused)
        .grad(),
    OpInfo::prim("einsum", "linalg", DTypes::NUMERIC)
        .kind(OpKind::Composite)
        .grad(),
];

/// The dtype a product of `d` is computed in.
fn compute_dtype(d: DType) -> DType {
    match d {
        DType::F16 | DType::BF16 => DType::F32,
        _ => d,
    }
}

fn check_dtype(op: &'static str, d: DType) -> Result<()> {
    if DTypes::NUMERIC.contains(d) {
        Ok(())
    } else {
        Err(Error::dtype(
            op,
            format!("not implemented for dtype {d} (supported: float16, bfloat16, float32, float64, int32, int64)"),
        ))
    }
}

fn check_device(op: &'static str, ts: &[&Tensor]) -> Result<()> {
    let d = ts[0].device();
    for t in ts {
        if t.device() != d {
            return Err(Error::runtime(
                op,
                format!(
                    "expected all tensors to be on the same device, but found {} and {}",
                    d,
                    t.device()
                ),
            ));
        }
    }
    Ok(())
}

/// `a @ b` with NumPy/PyTorch rules.
pub fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if let Some(d) = super::autocast::lower(&[a, b]) {
        return matmul(&super::autocast::cast(a, d)?, &super::autocast::cast(b, d)?);
    }
    capture!(crate::ops::call::OpCall::Matmul, [a, b], one);
    matmul_impl("matmul", a, b, None)
}

/// The shared matmul: `init` (broadcast to the result shape) is added in the
/// same pass. Records [`MatmulBackward`] (named after `op`).
fn matmul_impl(op: &'static str, a: &Tensor, b: &Tensor, init: Option<&Tensor>) -> Result<Tensor> {
    let out = {
        let _no = GradMode::set(false);
        matmul_raw(op, a, b, init)?
    };
    let mut inputs: SmallVec<[&Tensor; 3]> = smallvec![a, b];
    inputs.extend(init);
    if out.dtype().is_floating_point() && ag::needs_grad(&inputs) {
        // Save only what the needed gradients use: `a`'s gradient needs `b` and vice versa.
        let (na, nb) = (a.requires_grad(), b.requires_grad());
        let mut save = vec![];
        if nb {
            save.push(Save::Tensor(a));
        }
        if na {
            save.push(Save::Tensor(b));
        }
        let bw = MatmulBackward {
            name: match op {
                "mm" => "MmBackward",
                "bmm" => "BmmBackward",
                "mv" => "MvBackward",
                "dot" => "DotBackward",
                _ => "MatmulBackward",
            },
            a: (a.shape().into(), a.dtype()),
            b: (b.shape().into(), b.dtype()),
            init: init.map(|t| (t.shape().into(), t.dtype())),
            saved_a: nb,
            saved_b: na,
        };
        ag::record(bw, &inputs, &[&out], &save);
    }
    Ok(out)
}

/// The common eager case of [`matmul_raw`] with less bookkeeping: 2-D
/// operands of one float32/float64 dtype and device, and an initial value
/// (bias) of that dtype with at most 2 dims. `None` when it does not apply.
fn matmul_2d(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
    init: Option<&Tensor>,
) -> Option<Result<Tensor>> {
    let dt = a.dtype();
    let simple = a.ndim() == 2
        && b.ndim() == 2
        && matches!(dt, DType::F32 | DType::F64)
        && b.dtype() == dt
        && b.device() == a.device()
        && a.shape()[1] == b.shape()[0]
        && init.is_none_or(|t| t.dtype() == dt && t.ndim() <= 2 && t.device() == a.device());
    if !simple {
        return None;
    }
    let shape = [a.shape()[0], b.shape()[1]];
    let run = || {
        let out = Tensor::empty_for(op, &shape, dt, a.device())?;
        let be = backend(a.device());
        if let Some(init) = init {
            let l = init.layout().expand(op, &shape).map_err(|_| {
                Error::shape(
                    op,
                    format!(
                        "bias of shape {} cannot be broadcast to the output shape {}",
                        fmt_shape(init.shape()),
                        fmt_shape(&shape)
                    ),
                )
            })?;
            be.matmul_init(a, b, &init.with_layout(l), &out)?;
        } else {
            be.matmul(a, b, &out, false)?;
        }
        Ok(out)
    };
    Some(run())
}

/// [`matmul_impl`] without recording.
fn matmul_raw(op: &'static str, a: &Tensor, b: &Tensor, init: Option<&Tensor>) -> Result<Tensor> {
    if let Some(r) = matmul_2d(op, a, b, init) {
        return r;
    }
    if a.ndim() == 0 || b.ndim() == 0 {
        return Err(Error::shape(
            op,
            format!(
                "both arguments need to be at least 1-D, but got shapes {} and {}",
                fmt_shape(a.shape()),
                fmt_shape(b.shape())
            ),
        ));
    }
    let mut all = vec![a, b];
    all.extend(init);
    check_device(op, &all)?;
    let dt = all
        .iter()
        .skip(1)
        .fold(a.dtype(), |d, t| DType::promote(d, t.dtype()));
    check_dtype(op, dt)?;
    let cd = compute_dtype(dt);
    let (sa, sb) = (a.shape(), b.shape());

    // bfloat16 operands on the CPU stay bfloat16: its GEMM multiplies them into
    // the float32 result (with AVX512_BF16, or by widening them itself).
    let keep = dt == DType::BF16
        && a.dtype() == DType::BF16
        && b.dtype() == DType::BF16
        && a.device() == crate::tensor::Device::Cpu;
    let (a2, b2) = if keep {
        (a.clone(), b.clone())
    } else {
        (ew::to_dtype(a, cd)?, ew::to_dtype(b, cd)?)
    };
    let a2 = if a.ndim() == 1 {
        shape::unsqueeze(&a2, 0)?
    } else {
        a2
    };
    let b2 = if b.ndim() == 1 {
        shape::unsqueeze(&b2, -1)?
    } else {
        b2
    };
    let (na, nb) = (a2.ndim(), b2.ndim());
    let (m, k) = (a2.shape()[na - 2], a2.shape()[na - 1]);
    let (k2, n) = (b2.shape()[nb - 2], b2.shape()[nb - 1]);
    if k != k2 {
        return Err(Error::shape(
            op,
            format!(
                "shapes {} and {} cannot be multiplied ({m}x{k} and {k2}x{n}): the contracted sizes {k} and {k2} differ",
                fmt_shape(sa),
                fmt_shape(sb)
            ),
        ));
    }
    let batch =
        broadcast_shapes(op, &a2.shape()[..na - 2], &b2.shape()[..nb - 2]).map_err(|_| {
            Error::shape(
                op,
                format!(
                    "batch dimensions of shapes {} and {} cannot be broadcast together",
                    fmt_shape(sa),
                    fmt_shape(sb)
                ),
            )
        })?;
    let mut result_shape: Shape = batch.clone();
    if a.ndim() > 1 {
        result_shape.push(m);
    }
    if b.ndim() > 1 {
        result_shape.push(n);
    }
    let mut full: Shape = batch.clone();
    full.push(m);
    full.push(n);

    let dev = a.device();
    let out = Tensor::empty_for(op, &result_shape, cd, dev)?;
    if let Some(init) = init {
        let l = init.layout().expand(op, &result_shape).map_err(|_| {
            Error::shape(
                op,
                format!(
                    "bias of shape {} cannot be broadcast to the output shape {}",
                    fmt_shape(init.shape()),
                    fmt_shape(&result_shape)
                ),
            )
        })?;
        backend(dev).cast_copy(&init.with_layout(l), &out)?;
    }
    let out_full = out.with_layout(Layout::contiguous(&full));
    let be = backend(dev);

    let nbatch: usize = batch.iter().product();
    let b_unbatched = b2.shape()[..nb - 2].iter().all(|&d| d == 1);
    let folded = if b_unbatched && nbatch > 1 {
        // [..batch, M, K] @ [K, N] as one [batch*M, K] @ [K, N] product.
        a2.layout()
            .reshape_view(&[nbatch * m, k])
            .zip(b2.layout().reshape_view(&[k, n]))
    } else {
        None
    };
    match folded {
        Some((la, lb)) => {
            let o2 = out.with_layout(Layout::contiguous(&[nbatch * m, n]));
            be.matmul(
                &a2.with_layout(la),
                &b2.with_layout(lb),
                &o2,
                init.is_some(),
            )?;
        }
        None => {
            let mut fa: Shape = batch.clone();
            fa.push(m);
            fa.push(k);
            let mut fb: Shape = batch.clone();
            fb.push(k);
            fb.push(n);
            let ea = a2.with_layout(a2.layout().expand(op, &fa)?);
            let eb = b2.with_layout(b2.layout().expand(op, &fb)?);
            be.matmul(&ea, &eb, &out_full, init.is_some())?;
        }
    }
    if cd != dt {
        ew::to_dtype(&out, dt)
    } else {
        Ok(out)
    }
}

/// `mm(a, b)`: strictly 2-D × 2-D.
pub fn mm(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if let Some(d) = super::autocast::lower(&[a, b]) {
        return mm(&super::autocast::cast(a, d)?, &super::autocast::cast(b, d)?);
    }
    capture!(crate::ops::call::OpCall::Mm, [a, b], one);
    if a.ndim() != 2 || b.ndim() != 2 {
        return Err(Error::shape(
            "mm",
            format!(
                "expected two 2-D tensors, got shapes {} and {}",
                fmt_shape(a.shape()),
                fmt_shape(b.shape())
            ),
        ));
    }
    matmul_impl("mm", a, b, None)
}

/// `bmm(a, b)`: 3-D × 3-D with equal batch sizes (no broadcasting).
pub fn bmm(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if let Some(d) = super::autocast::lower(&[a, b]) {
        return bmm(&super::autocast::cast(a, d)?, &super::autocast::cast(b, d)?);
    }
    capture!(crate::ops::call::OpCall::Bmm, [a, b], one);
    if a.ndim() != 3 || b.ndim() != 3 {
        return Err(Error::shape(
            "bmm",
            format!(
                "expected two 3-D tensors, got shapes {} and {}",
                fmt_shape(a.shape()),
                fmt_shape(b.shape())
            ),
        ));
    }
    if a.shape()[0] != b.shape()[0] {
        return Err(Error::shape(
            "bmm",
            format!(
                "batch sizes differ: shapes {} and {}",
                fmt_shape(a.shape()),
                fmt_shape(b.shape())
            ),
        ));
    }
    matmul_impl("bmm", a, b, None)
}

/// `mv(a, v)`: matrix × vector.
pub fn mv(a: &Tensor, v: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Mv, [a, v], one);
    if a.ndim() != 2 || v.ndim() != 1 {
        return Err(Error::shape(
            "mv",
            format!(
                "expected a 2-D matrix and a 1-D vector, got shapes {} and {}",
                fmt_shape(a.shape()),
                fmt_shape(v.shape())
            ),
        ));
    }
    matmul_impl("mv", a, v, None)
}

/// `dot(a, b)`: inner product of two 1-D tensors of equal length (a 0-d result).
pub fn dot(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Dot, [a, b], one);
    if a.ndim() != 1 || b.ndim() != 1 {
        return Err(Error::shape(
            "dot",
            format!(
                "1-D tensors expected, but got shapes {} and {}",
                fmt_shape(a.shape()),
                fmt_shape(b.shape())
            ),
        ));
    }
    if a.shape()[0] != b.shape()[0] {
        return Err(Error::shape(
            "dot",
            format!(
                "inconsistent tensor size: shapes {} and {} have different numbers of elements",
                fmt_shape(a.shape()),
                fmt_shape(b.shape())
            ),
        ));
    }
    matmul_impl("dot", a, b, None)
}

/// `outer(a, b)`: `a[i] * b[j]` for two 1-D tensors.
pub fn outer(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Outer, [a, b], one);
    if a.ndim() != 1 || b.ndim() != 1 {
        return Err(Error::shape(
            "outer",
            format!(
                "1-D tensors expected, but got shapes {} and {}",
                fmt_shape(a.shape()),
                fmt_shape(b.shape())
            ),
        ));
    }
    check_dtype("outer", DType::promote(a.dtype(), b.dtype()))?;
    ew::binary(
        BinaryOp::Mul,
        &shape::unsqueeze(a, 1)?,
        &shape::unsqueeze(b, 0)?,
    )
}

/// `linear(x, weight, bias)`: `x @ weight.T + bias`, the bias added in the product's pass.
pub fn linear(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
    if let Some((x, weight, bias)) = super::autocast::lower_args(x, weight, bias)? {
        return linear(&x, &weight, bias.as_ref());
    }
    capture!(
        crate::ops::call::OpCall::Linear {
            bias: bias.is_some()
        },
        [x, weight] + bias.cloned(),
        one
    );
    let op = "linear";
    if weight.ndim() == 0 || weight.ndim() > 2 || x.ndim() == 0 {
        return Err(Error::shape(
            op,
            format!(
                "expected input of at least 1 dim and a 1-D or 2-D weight, got input {} and weight {}",
                fmt_shape(x.shape()),
                fmt_shape(weight.shape())
            ),
        ));
    }
    let in_w = *weight.shape().last().unwrap();
    let in_x = *x.shape().last().unwrap();
    if in_w != in_x {
        return Err(Error::shape(
            op,
            format!(
                "input of shape {} has {in_x} features but weight of shape {} expects {in_w}",
                fmt_shape(x.shape()),
                fmt_shape(weight.shape())
            ),
        ));
    }
    if let Some(b) = bias {
        let out_f = if weight.ndim() == 2 {
            weight.shape()[0]
        } else {
            1
        };
        let ok = match b.ndim() {
            0 => true,
            1 => b.shape()[0] == out_f || b.shape()[0] == 1,
            _ => false,
        };
        if !ok {
            return Err(Error::shape(
                op,
                format!(
                    "bias of shape {} does not match weight of shape {} ({out_f} output features)",
                    fmt_shape(b.shape()),
                    fmt_shape(weight.shape())
                ),
            ));
        }
    }
    let out = {
        let _no = GradMode::set(false);
        let b0 = match bias {
            // the result drops the feature dim: only a scalar bias fits
            Some(b) if weight.ndim() == 1 && b.ndim() == 1 => Some(shape::squeeze(b, None)?),
            _ => bias.cloned(),
        };
        let wt = if weight.ndim() == 2 {
            shape::transpose(weight, 0, 1)?
        } else {
            weight.clone()
        };
        matmul_raw(op, x, &wt, b0.as_ref())?
    };
    let mut inputs: SmallVec<[&Tensor; 3]> = smallvec![x, weight];
    inputs.extend(bias);
    if out.dtype().is_floating_point() && ag::needs_grad(&inputs) {
        let (nx, nw) = (x.requires_grad(), weight.requires_grad());
        let mut save = vec![];
        if nw {
            save.push(Save::Tensor(x));
        }
        if nx {
            save.push(Save::Tensor(weight));
        }
        let bw = LinearBackward {
            x: (x.shape().into(), x.dtype()),
            w: (weight.shape().into(), weight.dtype()),
            b: bias.map(|t| (t.shape().into(), t.dtype())),
            saved_x: nw,
            saved_w: nx,
        };
        ag::record(bw, &inputs, &[&out], &save);
    }
    Ok(out)
}

/// `act(linear(x, weight, bias)) + residual` (activation and residual
/// optional): the node inference graphs fuse `linear → activation → add`
/// into (see `graph::passes::epilogue`). On the CPU, for float32 products
/// the packed GEMM takes, the weight is packed once (cached, re-packed when
/// its version changes) and the bias, activation and residual are applied
/// as the product stores its blocks; otherwise, and whenever a gradient is
/// recorded, it runs the unfused ops. Either way the values are those of the
/// ops one after another, bit for bit.
pub fn linear_fused(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    act: Option<UnaryOp>,
    residual: Option<&Tensor>,
) -> Result<Tensor> {
    let mut inputs: SmallVec<[&Tensor; 4]> = smallvec![x, weight];
    inputs.extend(bias);
    inputs.extend(residual);
    if x.device() == Device::Cpu
        && x.dtype() == DType::F32
        && x.ndim() >= 2
        && weight.ndim() == 2
        && !ag::needs_grad(&inputs)
    {
        let nd = x.ndim();
        let k = x.shape()[nd - 1];
        let n = weight.shape()[0];
        let m: usize = x.shape()[..nd - 1].iter().product();
        let mut shape: Shape = x.shape()[..nd - 1].into();
        shape.push(n);
        let lx = x.layout().reshape_view(&[m, k]);
        let lr = match residual {
            Some(r) if r.shape() == &shape[..] => r.layout().reshape_view(&[m, n]).map(Some),
            Some(_) => None,
            None => Some(None),
        };
        if let (Some(lx), Some(lr)) = (lx, lr) {
            let out = Tensor::empty_for("linear", &shape, DType::F32, Device::Cpu)?;
            let o2 = out.with_layout(Layout::contiguous(&[m, n]));
            let r2 = residual.zip(lr).map(|(r, l)| r.with_layout(l));
            if crate::backend::cpu::prepack::linear(
                &x.with_layout(lx),
                weight,
                bias,
                act,
                r2.as_ref(),
                &o2,
            )? {
                return Ok(out);
            }
        }
    }
    let mut y = linear(x, weight, bias)?;
    if let Some(op) = act {
        y = ew::unary(op, &y)?;
    }
    if let Some(r) = residual {
        y = ew::binary(BinaryOp::Add, r, &y)?;
    }
    Ok(y)
}

// ---------------------------------------------------------------------------
// Gradients of the products
// ---------------------------------------------------------------------------

/// `g` summed down to `shape` (also when `g` has fewer dims, e.g. a 0-d `g` for a `(1,)` bias).
fn reduce_to(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if g.ndim() >= shape.len() {
        return sum_to(g, shape);
    }
    let s = crate::ops::reduce::sum(g, None, false, None)?;
    shape::reshape(&s, &shape.iter().map(|&d| d as isize).collect::<Vec<_>>())
}

/// `t` as a 2-D `[rows, last]` matrix (the leading dims folded into rows).
fn fold_rows(t: &Tensor) -> Result<Tensor> {
    let nd = t.ndim();
    let last = t.shape()[nd - 1];
    let rows: usize = t.shape()[..nd - 1].iter().product();
    shape::reshape(t, &[rows as isize, last as isize])
}

fn tr(t: &Tensor) -> Result<Tensor> {
    shape::transpose(t, -2, -1)
}

/// Gradient of `a` in `a @ b` (NumPy rules) for the output gradient `g`.
fn matmul_grad_a(g: &Tensor, b: &Tensor, a_shape: &[usize]) -> Result<Tensor> {
    match (a_shape.len(), b.ndim()) {
        (1, 1) => ew::binary(BinaryOp::Mul, g, b),
        (1, 2) => matmul(b, g),
        (1, _) => {
            // g: [..batch, n]; b: [..batch, k, n]
            let r = matmul(b, &shape::unsqueeze(g, -1)?)?;
            let k = a_shape[0];
            shape::reshape(&reduce_to(&r, &[k, 1])?, &[k as isize])
        }
        // g: [..batch, m]: the outer product with b (the batch is a's own).
        (_, 1) => ew::binary(BinaryOp::Mul, &shape::unsqueeze(g, -1)?, b),
        _ => reduce_to(&matmul(g, &tr(b)?)?, a_shape),
    }
}

/// Gradient of `b` in `a @ b` (NumPy rules) for the output gradient `g`.
fn matmul_grad_b(g: &Tensor, a: &Tensor, b_shape: &[usize]) -> Result<Tensor> {
    let (an, bn) = (a.ndim(), b_shape.len());
    match (an, bn) {
        (1, 1) => ew::binary(BinaryOp::Mul, g, a),
        (1, _) => {
            // g: [..batch, n]: the outer product with a (the batch is b's own).
            let r = ew::binary(
                BinaryOp::Mul,
                &shape::unsqueeze(a, -1)?,
                &shape::unsqueeze(g, -2)?,
            )?;
            reduce_to(&r, b_shape)
        }
        (2, 1) => matmul(&tr(a)?, g),
        (_, 1) => {
            // a: [..batch, m, k], g: [..batch, m]: one [k, batch*m] @ [batch*m] product.
            let gf = shape::reshape(g, &[g.numel() as isize])?;
            matmul(&tr(&fold_rows(a)?)?, &gf)
        }
        _ => {
            let g_batch = &g.shape()[..g.ndim() - 2];
            let b_unbatched = b_shape[..bn - 2].iter().all(|&d| d == 1);
            if an > 2 && b_unbatched && &a.shape()[..an - 2] == g_batch {
                // [..batch, m, k] @ [k, n]: one [k, batch*m] @ [batch*m, n] product.
                let r = matmul(&tr(&fold_rows(a)?)?, &fold_rows(g)?)?;
                shape::reshape(&r, &b_shape.iter().map(|&d| d as isize).collect::<Vec<_>>())
            } else {
                reduce_to(&matmul(&tr(a)?, g)?, b_shape)
            }
        }
    }
}

/// Backward of `matmul` and the products built on it (`mm`, `bmm`, `mv`,
/// `dot`): `ga = g @ bᵀ`, `gb = aᵀ @ g` with the 1-D and broadcast cases;
/// transposes are views handed to the GEMM. Saved: `a` when `b` needs a
/// gradient, `b` when `a` does (in that order).
struct MatmulBackward {
    name: &'static str,
    a: (Shape, DType),
    b: (Shape, DType),
    init: Option<(Shape, DType)>,
    saved_a: bool,
    saved_b: bool,
}

impl Backward for MatmulBackward {
    fn name(&self) -> &'static str {
        self.name
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let n = needs.len();
        let Some(g) = &grads[0] else {
            return Ok(vec![None; n]);
        };
        let mut it = saved.iter();
        let a = if self.saved_a { it.next() } else { None };
        let b = if self.saved_b { it.next() } else { None };
        let mut out = vec![None; n];
        if needs[0] {
            let b = b.expect("b saved");
            out[0] = Some(ew::to_dtype(&matmul_grad_a(g, b, &self.a.0)?, self.a.1)?);
        }
        if needs[1] {
            let a = a.expect("a saved");
            out[1] = Some(ew::to_dtype(&matmul_grad_b(g, a, &self.b.0)?, self.b.1)?);
        }
        if let Some((s, d)) = &self.init {
            if needs[2] {
                out[2] = Some(ew::to_dtype(&reduce_to(g, s)?, *d)?);
            }
        }
        Ok(out)
    }
}

/// Backward of `linear(x, w, b) = x @ wᵀ + b`: `gx = g @ w`, `gw = gᵀ @ x`
/// (batch dims folded into one product, so `gw` comes out of the GEMM
/// contiguous), `gb = Σ g`. Saved: `x` when `w` needs a gradient, `w` when
/// `x` does.
struct LinearBackward {
    x: (Shape, DType),
    w: (Shape, DType),
    b: Option<(Shape, DType)>,
    saved_x: bool,
    saved_w: bool,
}

impl Backward for LinearBackward {
    fn name(&self) -> &'static str {
        if self.b.is_some() {
            "AddmmBackward"
        } else {
            "LinearBackward"
        }
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let n = needs.len();
        let Some(g) = &grads[0] else {
            return Ok(vec![None; n]);
        };
        let mut it = saved.iter();
        let x = if self.saved_x { it.next() } else { None };
        let w = if self.saved_w { it.next() } else { None };
        let w2 = self.w.0.len() == 2;
        let mut out = vec![None; n];
        if needs[0] {
            let w = w.expect("w saved");
            let gx = if w2 {
                matmul(g, w)?
            } else {
                ew::binary(BinaryOp::Mul, &shape::unsqueeze(g, -1)?, w)?
            };
            out[0] = Some(ew::to_dtype(&gx, self.x.1)?);
        }
        if needs[1] {
            let x = x.expect("x saved");
            let gw = match (w2, x.ndim()) {
                (true, 1) => ew::binary(
                    BinaryOp::Mul,
                    &shape::unsqueeze(g, 1)?,
                    &shape::unsqueeze(x, 0)?,
                )?,
                (true, _) => matmul(&tr(&fold_rows(g)?)?, &fold_rows(x)?)?,
                (false, 1) => ew::binary(BinaryOp::Mul, g, x)?,
                (false, _) => {
                    let gf = shape::reshape(g, &[g.numel() as isize])?;
                    matmul(&tr(&fold_rows(x)?)?, &gf)?
                }
            };
            out[1] = Some(ew::to_dtype(&gw, self.w.1)?);
        }
        if let Some((s, d)) = &self.b {
            if needs[2] {
                out[2] = Some(ew::to_dtype(&reduce_to(g, s)?, *d)?);
            }
        }
        Ok(out)
    }
}

/// First label id used for the extra labels of a backward einsum.
const FRESH: usize = 1000;

/// Backward of `einsum`: the gradient of operand `i` is the einsum of the
/// output gradient with the other operands into operand `i`'s labels. A
/// repeated label (a diagonal) gets a fresh label tied to it by an identity
/// matrix; labels found in no other term are broadcast back; dims that were
/// broadcast from size 1 are summed. Saved: every operand.
struct EinsumBackward {
    labels: Vec<Vec<usize>>,
    out: Vec<usize>,
    inputs: Vec<(Shape, DType)>,
}

impl Backward for EinsumBackward {
    fn name(&self) -> &'static str {
        "EinsumBackward"
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let n = needs.len();
        let Some(g) = &grads[0] else {
            return Ok(vec![None; n]);
        };
        let size = label_sizes(saved, &self.labels)?;
        let mut res = vec![None; n];
        for i in 0..n {
            if !needs[i] {
                continue;
            }
            let (x_shape, x_dtype) = &self.inputs[i];
            let mut ops = vec![g.clone()];
            let mut ls = vec![self.out.clone()];
            for j in (0..n).filter(|&j| j != i) {
                ops.push(saved[j].clone());
                ls.push(self.labels[j].clone());
            }
            // Per dim of operand i: the label its gradient comes from (None: a broadcast size-1 dim).
            let mut target: Vec<Option<usize>> = vec![];
            let mut seen: Vec<usize> = vec![];
            let mut fresh = FRESH;
            for (d, &l) in self.labels[i].iter().enumerate() {
                if x_shape[d] == 1 && size[&l] != 1 {
                    target.push(None);
                } else if seen.contains(&l) {
                    let eye = crate::ops::creation::eye(size[&l], size[&l], g.dtype(), g.device())?;
                    ops.push(eye);
                    ls.push(vec![l, fresh]);
                    target.push(Some(fresh));
                    fresh += 1;
                } else {
                    seen.push(l);
                    target.push(Some(l));
                }
            }
            let present = |l: usize| ls.iter().any(|v| v.contains(&l));
            let r_labels: Vec<usize> = target
                .iter()
                .flatten()
                .copied()
                .filter(|&l| present(l))
                .collect();
            let r = einsum_of_labels(&ops, &ls, &r_labels)?;
            let mut k = 0;
            let spec: Vec<isize> = target
                .iter()
                .map(|t| match t {
                    Some(l) if r_labels.contains(l) => {
                        k += 1;
                        r.shape()[k - 1] as isize
                    }
                    _ => 1,
                })
                .collect();
            let r = shape::reshape(&r, &spec)?;
            let r = if r.shape() != x_shape.as_slice() {
                shape::broadcast_to(&r, x_shape)?
            } else {
                r
            };
            res[i] = Some(ew::to_dtype(&r, *x_dtype)?);
        }
        Ok(res)
    }
}

/// The einsum of labelled operands into `out`, through the public [`einsum`]
/// (with one letter per label), so that a captured graph records it as an
/// op: a backward pass made of ops is captured node by node, and binds a
/// symbolic batch's sizes at each run. More labels than letters go through
/// [`einsum_rec`] directly.
fn einsum_of_labels(operands: &[Tensor], labels: &[Vec<usize>], out: &[usize]) -> Result<Tensor> {
    let mut order: Vec<usize> = vec![];
    for &l in labels.iter().flatten().chain(out) {
        if !order.contains(&l) {
            order.push(l);
        }
    }
    if order.len() > 52 {
        return einsum_rec(operands, labels, out);
    }
    let letter = |l: usize| {
        let k = order
            .iter()
            .position(|&x| x == l)
            .expect("a label of the equation");
        (if k < 26 {
            b'a' + k as u8
        } else {
            b'A' + (k - 26) as u8
        }) as char
    };
    let terms: Vec<String> = labels
        .iter()
        .map(|ls| ls.iter().map(|&l| letter(l)).collect())
        .collect();
    let rhs: String = out.iter().map(|&l| letter(l)).collect();
    einsum(&format!("{}->{rhs}", terms.join(",")), operands)
}

// ---------------------------------------------------------------------------
// einsum
// ---------------------------------------------------------------------------

/// Label ids: letters are 0..52, ellipsis dims `ELL + i`.
const ELL: usize = 100;

fn letter_id(c: char) -> Option<usize> {
    match c {
        'a'..='z' => Some(c as usize - 'a' as usize + 26),
        'A'..='Z' => Some(c as usize - 'A' as usize),
        _ => None,
    }
}

fn label_name(l: usize) -> String {
    if l >= ELL {
        format!("...[{}]", l - ELL)
    } else if l >= 26 {
        ((b'a' + (l - 26) as u8) as char).to_string()
    } else {
        ((b'A' + l as u8) as char).to_string()
    }
}

/// One parsed subscript: letters before and after an optional `...`.
struct Term {
    before: Vec<usize>,
    after: Vec<usize>,
    ellipsis: bool,
}

fn parse_term(s: &str) -> Result<Term> {
    let mut t = Term {
        before: vec![],
        after: vec![],
        ellipsis: false,
    };
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '.' {
            if t.ellipsis || chars.next() != Some('.') || chars.next() != Some('.') {
                return Err(Error::value(
                    "einsum",
                    format!("invalid subscript {s:?}: '.' must appear as a single '...'"),
                ));
            }
            t.ellipsis = true;
        } else if let Some(id) = letter_id(c) {
            if t.ellipsis {
                t.after.push(id);
            } else {
                t.before.push(id);
            }
        } else {
            return Err(Error::value(
                "einsum",
                format!(
                    "invalid character {c:?} in subscript {s:?}; use letters a-z, A-Z and '...'"
                ),
            ));
        }
    }
    Ok(t)
}

impl Term {
    fn n_letters(&self) -> usize {
        self.before.len() + self.after.len()
    }
    /// Per-dim labels for an operand with `ndim` dims when ellipses span `max_ell` dims.
    fn labels(&self, ndim: usize, max_ell: usize) -> Vec<usize> {
        let ell = ndim - self.n_letters();
        let mut v = self.before.clone();
        v.extend((0..ell).map(|j| ELL + max_ell - ell + j));
        v.extend(&self.after);
        v
    }
}

/// `einsum(equation, *operands)`: pairwise contractions through `matmul`.
pub fn einsum(equation: &str, operands: &[Tensor]) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Einsum {
            equation: equation.to_string()
        },
        [] + operands.iter().cloned(),
        one
    );
    let op = "einsum";
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    if operands.is_empty() {
        return Err(Error::value(op, "at least one operand is required"));
    }
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => {
            if r.contains("->") {
                return Err(Error::value(
                    op,
                    format!("equation {equation:?} has more than one '->'"),
                ));
            }
            (l, Some(r))
        }
        None => (eq.as_str(), None),
    };
    let terms: Vec<Term> = lhs.split(',').map(parse_term).collect::<Result<_>>()?;
    if terms.len() != operands.len() {
        return Err(Error::value(
            op,
            format!(
                "equation {equation:?} names {} operands but {} tensors were given",
                terms.len(),
                operands.len()
            ),
        ));
    }
    check_device(op, &operands.iter().collect::<Vec<_>>())?;
    let dt = operands
        .iter()
        .skip(1)
        .fold(operands[0].dtype(), |d, t| DType::promote(d, t.dtype()));
    check_dtype(op, dt)?;

    let mut max_ell = 0;
    for (i, (t, x)) in terms.iter().zip(operands).enumerate() {
        let ok = if t.ellipsis {
            x.ndim() >= t.n_letters()
        } else {
            x.ndim() == t.n_letters()
        };
        if !ok {
            return Err(Error::value(
                op,
                format!(
                    "operand {i} of shape {} has {} dims but its subscript in {equation:?} names {}",
                    fmt_shape(x.shape()),
                    x.ndim(),
                    t.n_letters()
                ),
            ));
        }
        if t.ellipsis {
            max_ell = max_ell.max(x.ndim() - t.n_letters());
        }
    }
    let labels: Vec<Vec<usize>> = terms
        .iter()
        .zip(operands)
        .map(|(t, x)| t.labels(x.ndim(), max_ell))
        .collect();

    let size = label_sizes(operands, &labels)?;

    // Output labels.
    let out: Vec<usize> = match rhs {
        Some(r) => {
            let t = parse_term(r)?;
            if !t.ellipsis && max_ell > 0 {
                return Err(Error::value(
                    op,
                    format!("the output of {equation:?} must contain '...' because an input does"),
                ));
            }
            let mut v = t.before.clone();
            if t.ellipsis {
                v.extend((0..max_ell).map(|j| ELL + j));
            }
            v.extend(&t.after);
            for (i, &l) in v.iter().enumerate() {
                if v[..i].contains(&l) {
                    return Err(Error::value(
                        op,
                        format!(
                            "output subscript {} appears more than once in {equation:?}",
                            label_name(l)
                        ),
                    ));
                }
                if !size.contains_key(&l) {
                    return Err(Error::value(
                        op,
                        format!(
                            "output subscript {} in {equation:?} does not appear in any input",
                            label_name(l)
                        ),
                    ));
                }
            }
            v
        }
        None => {
            let mut v: Vec<usize> = (0..max_ell).map(|j| ELL + j).collect();
            let mut count = [0usize; 52];
            for ls in &labels {
                for &l in ls {
                    if l < ELL {
                        count[l] += 1;
                    }
                }
            }
            v.extend((0..52).filter(|&l| count[l] == 1));
            v
        }
    };

    einsum_rec(operands, &labels, &out)
}

/// Sizes of the labels: equal, or 1 (broadcast).
fn label_sizes(operands: &[Tensor], labels: &[Vec<usize>]) -> Result<HashMap<usize, usize>> {
    let mut size = HashMap::<usize, usize>::new();
    for (i, (ls, x)) in labels.iter().zip(operands).enumerate() {
        for (&l, &d) in ls.iter().zip(x.shape()) {
            let e = size.entry(l).or_insert(d);
            if *e != d && d != 1 {
                if *e == 1 {
                    *e = d;
                } else {
                    return Err(Error::shape(
                        "einsum",
                        format!(
                            "subscript {} has size {d} in operand {i} (shape {}) but size {} elsewhere",
                            label_name(l),
                            fmt_shape(x.shape()),
                            *e
                        ),
                    ));
                }
            }
        }
    }
    Ok(size)
}

/// The einsum of labelled operands (one label per dim) into the labels `out`, recording [`EinsumBackward`].
fn einsum_rec(operands: &[Tensor], labels: &[Vec<usize>], out: &[usize]) -> Result<Tensor> {
    let r = {
        let _no = GradMode::set(false);
        einsum_labels(operands, labels, out)?
    };
    let refs: Vec<&Tensor> = operands.iter().collect();
    if r.dtype().is_floating_point() && ag::needs_grad(&refs) {
        let save: Vec<Save> = operands.iter().map(Save::Tensor).collect();
        let bw = EinsumBackward {
            labels: labels.to_vec(),
            out: out.to_vec(),
            inputs: operands
                .iter()
                .map(|t| (t.shape().into(), t.dtype()))
                .collect(),
        };
        ag::record(bw, &refs, &[&r], &save);
    }
    Ok(r)
}

/// The einsum of labelled operands: pairwise contractions through `matmul` (not recorded).
fn einsum_labels(operands: &[Tensor], labels: &[Vec<usize>], out: &[usize]) -> Result<Tensor> {
    let dt = operands
        .iter()
        .skip(1)
        .fold(operands[0].dtype(), |d, t| DType::promote(d, t.dtype()));
    let size = label_sizes(operands, labels)?;
    // Per operand: cast, take diagonals of repeated labels, sum labels used nowhere else.
    let mut work: Vec<(Tensor, Vec<usize>)> = Vec::with_capacity(operands.len());
    for (i, (x, ls)) in operands.iter().zip(labels).enumerate() {
        let x = ew::to_dtype(x, dt)?;
        let (x, ls) = diagonal(&x, ls)?;
        let elsewhere = |l: usize| {
            out.contains(&l)
                || labels
                    .iter()
                    .enumerate()
                    .any(|(j, o)| j != i && o.contains(&l))
        };
        let drop: Vec<usize> = ls.iter().copied().filter(|&l| !elsewhere(l)).collect();
        work.push(sum_labels(&x, &ls, &drop)?);
    }

    let mut iter = work.into_iter();
    let (mut acc, mut acc_l) = iter.next().unwrap();
    let rest: Vec<(Tensor, Vec<usize>)> = iter.collect();
    for (i, (t, tl)) in rest.iter().enumerate() {
        let keep = |l: usize| out.contains(&l) || rest[i + 1..].iter().any(|(_, o)| o.contains(&l));
        let (r, rl) = contract(&acc, &acc_l, t, tl, &keep, &size)?;
        acc = r;
        acc_l = rl;
    }
    // Whatever is left outside the output is summed; then order as the output.
    let drop: Vec<usize> = acc_l.iter().copied().filter(|l| !out.contains(l)).collect();
    let (acc, acc_l) = sum_labels(&acc, &acc_l, &drop)?;
    let perm: Vec<isize> = out
        .iter()
        .map(|l| acc_l.iter().position(|x| x == l).unwrap() as isize)
        .collect();
    let r = shape::permute(&acc, &perm)?;
    // Labels only present as broadcast size-1 dims take their full size.
    let want: Vec<usize> = out.iter().map(|l| size[l]).collect();
    if r.shape() != want.as_slice() {
        return shape::broadcast_to(&r, &want).and_then(|v| ew::contiguous(&v));
    }
    Ok(r)
}

/// Collapse repeated labels of one operand into a diagonal view.
fn diagonal(x: &Tensor, ls: &[usize]) -> Result<(Tensor, Vec<usize>)> {
    let mut labels: Vec<usize> = vec![];
    let mut shape = Shape::new();
    let mut strides = crate::tensor::Strides::new();
    for (d, &l) in ls.iter().enumerate() {
        if let Some(p) = labels.iter().position(|&x| x == l) {
            if shape[p] != x.shape()[d] {
                return Err(Error::shape(
                    "einsum",
                    format!(
                        "subscript {} is repeated in an operand of shape {} with different sizes {} and {}",
                        label_name(l),
                        fmt_shape(x.shape()),
                        shape[p],
                        x.shape()[d]
                    ),
                ));
            }
            strides[p] += x.strides()[d];
        } else {
            labels.push(l);
            shape.push(x.shape()[d]);
            strides.push(x.strides()[d]);
        }
    }
    if labels.len() == ls.len() {
        return Ok((x.clone(), labels));
    }
    let l = Layout {
        shape,
        strides,
        offset: x.offset(),
    };
    Ok((x.with_layout(l), labels))
}

/// Sum `x` over the dims labelled in `drop` (a product with a ones vector).
fn sum_labels(x: &Tensor, ls: &[usize], drop: &[usize]) -> Result<(Tensor, Vec<usize>)> {
    if drop.is_empty() {
        return Ok((x.clone(), ls.to_vec()));
    }
    let keep_idx: Vec<usize> = (0..ls.len()).filter(|&d| !drop.contains(&ls[d])).collect();
    let drop_idx: Vec<usize> = (0..ls.len()).filter(|&d| drop.contains(&ls[d])).collect();
    let perm: Vec<isize> = keep_idx
        .iter()
        .chain(&drop_idx)
        .map(|&d| d as isize)
        .collect();
    let p = shape::permute(x, &perm)?;
    let s: usize = drop_idx.iter().map(|&d| x.shape()[d]).product();
    let mut spec: Vec<isize> = keep_idx.iter().map(|&d| x.shape()[d] as isize).collect();
    spec.push(s as isize);
    let flat = shape::reshape(&p, &spec)?;
    let ones = Tensor::empty(&[s], x.dtype(), x.device())?;
    backend(x.device()).fill(&ones, Scalar::Int(1))?;
    let r = matmul_impl("einsum", &flat, &ones, None)?;
    Ok((r, keep_idx.iter().map(|&d| ls[d]).collect()))
}

/// Contract two labelled operands, keeping the labels `keep` says are still needed.
fn contract(
    a: &Tensor,
    la: &[usize],
    b: &Tensor,
    lb: &[usize],
    keep: &dyn Fn(usize) -> bool,
    size: &HashMap<usize, usize>,
) -> Result<(Tensor, Vec<usize>)> {
    // Labels of one side only that are no longer needed are summed first.
    let a_drop: Vec<usize> = la
        .iter()
        .copied()
        .filter(|l| !lb.contains(l) && !keep(*l))
        .collect();
    let b_drop: Vec<usize> = lb
        .iter()
        .copied()
        .filter(|l| !la.contains(l) && !keep(*l))
        .collect();
    let (a, la) = sum_labels(a, la, &a_drop)?;
    let (b, lb) = sum_labels(b, lb, &b_drop)?;

    let batch: Vec<usize> = la
        .iter()
        .copied()
        .filter(|l| lb.contains(l) && keep(*l))
        .collect();
    let contr: Vec<usize> = la
        .iter()
        .copied()
        .filter(|l| lb.contains(l) && !keep(*l))
        .collect();
    let afree: Vec<usize> = la.iter().copied().filter(|l| !lb.contains(l)).collect();
    let bfree: Vec<usize> = lb.iter().copied().filter(|l| !la.contains(l)).collect();

    let pos = |ls: &[usize], l: usize| ls.iter().position(|&x| x == l).unwrap();
    // A as [batch, afree, contr], B as [batch, contr, bfree]; contracted dims at full size.
    let arrange =
        |t: &Tensor, ls: &[usize], order: &[&[usize]], contr_at: usize| -> Result<Tensor> {
            let perm: Vec<isize> = order
                .iter()
                .flat_map(|g| g.iter().map(|&l| pos(ls, l) as isize))
                .collect();
            let p = shape::permute(t, &perm)?;
            let mut full: Vec<usize> = p.shape().to_vec();
            for (j, &l) in contr.iter().enumerate() {
                full[contr_at + j] = size[&l];
            }
            if full.as_slice() != p.shape() {
                shape::broadcast_to(&p, &full)
            } else {
                Ok(p)
            }
        };
    let pa = arrange(
        &a,
        &la,
        &[&batch, &afree, &contr],
        batch.len() + afree.len(),
    )?;
    let pb = arrange(&b, &lb, &[&batch, &contr, &bfree], batch.len())?;
    let nbt = batch.len();
    let dims = |t: &Tensor, from: usize, len: usize| -> Vec<usize> {
        t.shape()[from..from + len].to_vec()
    };
    let ab = dims(&pa, 0, nbt);
    let bb = dims(&pb, 0, nbt);
    let af = dims(&pa, nbt, afree.len());
    let bf = dims(&pb, nbt + contr.len(), bfree.len());
    let kk: usize = contr.iter().map(|l| size[l]).product();
    let mm_: usize = af.iter().product();
    let nn: usize = bf.iter().product();
    let spec = |lead: &[usize], r: usize, c: usize| -> Vec<isize> {
        lead.iter()
            .map(|&d| d as isize)
            .chain([r as isize, c as isize])
            .collect()
    };
    let ra = shape::reshape(&pa, &spec(&ab, mm_, kk))?;
    let rb = shape::reshape(&pb, &spec(&bb, kk, nn))?;
    let r = matmul_impl("einsum", &ra, &rb, None)?;
    let mut out_shape: Vec<isize> = r.shape()[..nbt].iter().map(|&d| d as isize).collect();
    out_shape.extend(af.iter().chain(&bf).map(|&d| d as isize));
    let r = shape::reshape(&r, &out_shape)?;
    let mut labels = batch;
    labels.extend(afree);
    labels.extend(bfree);
    Ok((r, labels))
}
