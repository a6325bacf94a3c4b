//! Elementwise ops: unary maps, binary ops with broadcasting, comparisons,
//! logical ops, `where`, casts and fills.
//!
//! Shape rule: NumPy broadcasting. Dtype rule: [`DType::promote`] (Python
//! scalars are weak). Kernels: the backend's `unary` / `binary` / `where_` /
//! `cast_copy` primitives.

use super::defer;
use crate::autograd::{self as ag, GradMode, Save};
use crate::backend::backend;
use crate::error::{Error, Result};
use crate::ops::elementwise_grad::{
    BinaryBackward, CastBackward, IdentityBackward, UnaryBackward, WhereBackward,
};
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::tensor::layout::broadcast_shapes;
use crate::tensor::{Category, DType, Scalar, Tensor};

pub use crate::kernel::{BinaryOp, UnaryOp, UnaryOut};

impl UnaryOp {
    /// Dtypes the op accepts as input.
    pub fn dtypes(self) -> DTypes {
        let op = self;
        crate::kernel::unary::unary_ops!([dtypes op])
    }
}

/// Registry entries of the unary ops, from their definitions.
pub const UNARY_OPS: &[OpInfo] = crate::kernel::unary::unary_ops!([registry]);

/// Registry entries for this family.
pub const OPS: &[OpInfo] = &[
    OpInfo::prim("add", "elementwise", DTypes::ALL).grad(),
    OpInfo::prim("sub", "elementwise", DTypes::NUMERIC).grad(),
    OpInfo::prim("mul", "elementwise", DTypes::ALL).grad(),
    OpInfo::prim("div", "elementwise", DTypes::ALL).grad(),
    OpInfo::prim("floor_divide", "elementwise", DTypes::NUMERIC),
    OpInfo::prim("remainder", "elementwise", DTypes::NUMERIC).grad(),
    OpInfo::prim("pow", "elementwise", DTypes::NUMERIC).grad(),
    OpInfo::prim("maximum", "elementwise", DTypes::ALL).grad(),
    OpInfo::prim("minimum", "elementwise", DTypes::ALL).grad(),
    OpInfo::prim("atan2", "elementwise", DTypes::ALL).grad(),
    OpInfo::prim("eq", "elementwise", DTypes::ALL),
    OpInfo::prim("ne", "elementwise", DTypes::ALL),
    OpInfo::prim("lt", "elementwise", DTypes::ALL),
    OpInfo::prim("le", "elementwise", DTypes::ALL),
    OpInfo::prim("gt", "elementwise", DTypes::ALL),
    OpInfo::prim("ge", "elementwise", DTypes::ALL),
    OpInfo::prim("logical_and", "elementwise", DTypes::ALL),
    OpInfo::prim("logical_or", "elementwise", DTypes::ALL),
    OpInfo::prim("logical_xor", "elementwise", DTypes::ALL),
    OpInfo::prim("bitwise_and", "elementwise", DTypes::INT_BOOL),
    OpInfo::prim("bitwise_or", "elementwise", DTypes::INT_BOOL),
    OpInfo::prim("bitwise_xor", "elementwise", DTypes::INT_BOOL),
    OpInfo::prim("where", "elementwise", DTypes::ALL).grad(),
    OpInfo::prim("to", "elementwise", DTypes::ALL).grad(),
    OpInfo::prim("fill_", "elementwise", DTypes::ALL).mutates(0),
    OpInfo::prim("copy_", "elementwise", DTypes::ALL)
        .mutates(0)
        .grad(),
    OpInfo::prim("masked_fill", "elementwise", DTypes::ALL)
        .kind(OpKind::Composite)
        .grad(),
];

fn check_dtype(op: &'static str, dtypes: DTypes, d: DType) -> Result<()> {
    if dtypes.contains(d) {
        Ok(())
    } else {
        Err(Error::dtype(
            op,
            format!(
                "not implemented for dtype {d} (supported: {})",
                dtypes
                    .list()
                    .iter()
                    .map(|d| d.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ))
    }
}

/// Convert `x` to `dtype` (a copy unless it already has it).
pub fn to_dtype(x: &Tensor, dtype: DType) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::ToDtype { dtype }, [x], one);
    if x.dtype() == dtype {
        return Ok(x.clone());
    }
    let out = Tensor::empty_for("to", x.shape(), dtype, x.device())?;
    backend(x.device()).cast_copy(x, &out)?;
    if dtype.is_floating_point() && ag::needs_grad(&[x]) {
        ag::record(CastBackward { from: x.dtype() }, &[x], &[&out], &[]);
    }
    Ok(out)
}

/// `x` on `device` (itself when already there): a contiguous copy made through
/// the backend's materialise path; gradients flow back to `x`'s device.
pub fn to_device(x: &Tensor, device: crate::tensor::Device) -> Result<Tensor> {
    if x.device() == device {
        return Ok(x.clone());
    }
    // A captured value (shape only): the device it will be on when the graph runs.
    let traced = (!x.device().has_data()).then(|| crate::ops::capture::device_of(x));
    let from = traced.flatten().unwrap_or(x.device());
    if from == device {
        return Ok(x.clone());
    }
    capture!(crate::ops::call::OpCall::ToDevice { device }, [x], one);
    let out = match traced {
        // Shape inference of a captured copy.
        Some(_) => Tensor::empty_for("to", x.shape(), x.dtype(), x.device())?,
        None => crate::backend::transfer(x, device)?,
    };
    if x.dtype().is_floating_point() && ag::needs_grad(&[x]) {
        ag::record(
            super::elementwise_grad::ToDeviceBackward { from },
            &[x],
            &[&out],
            &[],
        );
    }
    Ok(out)
}

/// A contiguous copy (or `x` itself when already contiguous).
pub fn contiguous(x: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Contiguous, [x], one);
    if x.is_contiguous() {
        return Ok(x.clone());
    }
    clone(x)
}

/// A fresh contiguous copy.
pub fn clone(x: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Clone, [x], one);
    let out = Tensor::empty_for("clone", x.shape(), x.dtype(), x.device())?;
    backend(x.device()).cast_copy(x, &out)?;
    if ag::needs_grad(&[x]) {
        ag::record(
            IdentityBackward {
                name: "CloneBackward",
            },
            &[x],
            &[&out],
            &[],
        );
    }
    Ok(out)
}

/// Apply a unary op.
pub fn unary(op: UnaryOp, x: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Unary { op }, [x], one);
    check_dtype(op.name(), op.dtypes(), x.dtype())?;
    let (cx, out_dt) = match op.out_kind() {
        UnaryOut::Same => (x.clone(), x.dtype()),
        UnaryOut::Float => {
            let f = x.dtype().to_float();
            (to_dtype(x, f)?, f)
        }
        UnaryOut::Bool => (x.clone(), DType::Bool),
    };
    if op == UnaryOp::Neg && x.dtype() == DType::Bool {
        return Err(Error::dtype(
            "neg",
            "negation of a bool tensor is not supported; use logical_not or ~ instead",
        ));
    }
    let record = out_dt.is_floating_point() && ag::needs_grad(&[x]);
    if !record && out_dt == cx.dtype() && defer::worth(x.numel()) {
        if let Some(out) = defer::try_defer(defer::Op::Unary(op), &[&cx], x.shape(), out_dt)? {
            return Ok(out);
        }
    }
    let out = Tensor::empty_for(op.name(), x.shape(), out_dt, x.device())?;
    backend(x.device()).unary(op, &cx, &out)?;
    if record {
        ag::record(
            UnaryBackward { op },
            &[x],
            &[&out],
            &[Save::Tensor(x), Save::Output(0)],
        );
    }
    Ok(out)
}

/// Apply a unary op in place (`x.relu_()`, ...).
pub fn unary_(op: UnaryOp, x: &Tensor) -> Result<()> {
    capture!(crate::ops::call::OpCall::UnaryInplace { op }, [x], unit);
    x.check_writable(op.name())?;
    check_no_internal_overlap(op.name(), x)?;
    check_dtype(op.name(), op.dtypes(), x.dtype())?;
    match op.out_kind() {
        UnaryOut::Same => {}
        UnaryOut::Float if x.dtype().is_floating_point() => {}
        _ => {
            return Err(Error::dtype(
                op.name(),
                format!(
                    "in-place result of dtype {} cannot be stored in a {} tensor",
                    op.out_kind_dtype(x.dtype()),
                    x.dtype()
                ),
            ))
        }
    }
    if ag::needs_grad(&[x]) {
        ag::check_inplace(op.name(), x)?;
        // The VJP may save its input; it gets a (recorded) copy, since `x`
        // itself is overwritten below.
        let r = unary(op, &clone(x)?)?;
        copy_data(x, &r)?;
        return ag::rebase_history(x, &r);
    }
    backend(x.device()).unary(op, x, x)?;
    x.storage().bump_version();
    Ok(())
}

/// Copy `src`'s values into `dst` (same shape) without recording.
pub fn copy_data(dst: &Tensor, src: &Tensor) -> Result<()> {
    capture!(crate::ops::call::OpCall::CopyData, [dst, src], unit);
    backend(dst.device()).cast_copy(src, dst)?;
    dst.storage().bump_version();
    Ok(())
}

impl UnaryOp {
    fn out_kind_dtype(self, d: DType) -> DType {
        match self.out_kind() {
            UnaryOut::Same => d,
            UnaryOut::Float => d.to_float(),
            UnaryOut::Bool => DType::Bool,
        }
    }
}

/// Broadcast `a` and `b` against each other, cast both to `dt`, returning expanded views.
fn prepare_binary(
    op: &'static str,
    a: &Tensor,
    b: &Tensor,
    dt: DType,
) -> Result<(Tensor, Tensor, crate::tensor::Shape)> {
    if a.device() != b.device() {
        return Err(Error::runtime(
            op,
            format!(
                "expected all tensors to be on the same device, but found {} and {}",
                a.device(),
                b.device()
            ),
        ));
    }
    let shape = broadcast_shapes(op, a.shape(), b.shape())?;
    let a = to_dtype(a, dt)?;
    let b = to_dtype(b, dt)?;
    let la = a.layout().expand(op, &shape)?;
    let lb = b.layout().expand(op, &shape)?;
    Ok((a.with_layout(la), b.with_layout(lb), shape))
}

/// `a <op> b` with broadcasting and promotion.
pub fn binary(op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Binary { op }, [a, b], one);
    binary_as(op, a, b, promote_tensors(a, b))
}

/// PyTorch's result type of two tensors: a zero-dim tensor only decides the
/// dtype when its category (bool < int < float) is higher than the other's.
pub fn promote_tensors(a: &Tensor, b: &Tensor) -> DType {
    match (a.ndim() == 0, b.ndim() == 0) {
        (true, false) if a.dtype().category() <= b.dtype().category() => b.dtype(),
        (false, true) if b.dtype().category() <= a.dtype().category() => a.dtype(),
        _ => DType::promote(a.dtype(), b.dtype()),
    }
}

/// Integer floor division / remainder by zero and negative integer powers are errors (as in PyTorch).
fn check_int_operand(op: BinaryOp, b: &Tensor, dt: DType) -> Result<()> {
    if !dt.is_integer()
        || !matches!(op, BinaryOp::FloorDiv | BinaryOp::Remainder | BinaryOp::Pow)
        || !b.device().has_data()
    {
        // (Values of a graph being captured are checked when it runs.)
        return Ok(());
    }
    let vals = b.to_f64_vec();
    if op == BinaryOp::Pow {
        if vals.iter().any(|&v| v < 0.0) {
            return Err(Error::value(
                "pow",
                "integers to negative integer powers are not allowed",
            ));
        }
    } else if vals.contains(&0.0) {
        return Err(Error::value(
            op.name(),
            format!("integer division by zero (dtype {dt})"),
        ));
    }
    Ok(())
}

/// `a / b` rounded down, for a `b` known to hold no zero (positive counts):
/// `floor_divide` without reading `b`'s values to check it (which on the
/// gpu device would download them).
pub(crate) fn floor_divide_by_positive(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    binary_checked(BinaryOp::FloorDiv, a, b, promote_tensors(a, b), false)
}

fn binary_as(op: BinaryOp, a: &Tensor, b: &Tensor, promoted: DType) -> Result<Tensor> {
    binary_checked(op, a, b, promoted, true)
}

fn binary_checked(
    op: BinaryOp,
    a: &Tensor,
    b: &Tensor,
    promoted: DType,
    check: bool,
) -> Result<Tensor> {
    let dt = op.compute_dtype(promoted)?;
    if check {
        check_int_operand(op, b, dt)?;
    }
    let record = !op.is_predicate() && dt.is_floating_point() && ag::needs_grad(&[a, b]);
    if a.shape() == b.shape() && a.dtype() == dt && b.dtype() == dt && a.device() == b.device() {
        // Same shape and dtype: nothing to broadcast or cast (the common
        // small-op case, where preparing views would cost more than the kernel).
        if !record && defer::worth(a.numel()) {
            if let Some(out) = defer::try_defer(defer::Op::Binary(op), &[a, b], a.shape(), dt)? {
                return Ok(out);
            }
        }
        let out = Tensor::empty_for(op.name(), a.shape(), op.out_dtype(dt), a.device())?;
        backend(a.device()).binary(op, a, b, &out)?;
        if record {
            record_binary(op, a, b, &out);
        }
        return Ok(out);
    }
    let (ea, eb, shape) = if record {
        let _no = GradMode::set(false);
        prepare_binary(op.name(), a, b, dt)?
    } else {
        prepare_binary(op.name(), a, b, dt)?
    };
    if !record && defer::worth(shape.iter().product()) {
        if let Some(out) = defer::try_defer(defer::Op::Binary(op), &[&ea, &eb], &shape, dt)? {
            return Ok(out);
        }
    }
    let out = Tensor::empty_for(op.name(), &shape, op.out_dtype(dt), a.device())?;
    backend(a.device()).binary(op, &ea, &eb, &out)?;
    if record {
        record_binary(op, a, b, &out);
    }
    Ok(out)
}

fn record_binary(op: BinaryOp, a: &Tensor, b: &Tensor, out: &Tensor) {
    use BinaryOp::*;
    let d = dummy();
    // Save only what the gradients that will be needed use (so in-place
    // updates of unneeded operands stay legal).
    let (na, nb) = (a.requires_grad(), b.requires_grad());
    let (sa, sb, sy) = match op {
        Add | Sub | FloorDiv => (d, d, false),
        Mul => (if nb { a } else { d }, if na { b } else { d }, false),
        Div => (d, b, nb),
        Pow => (a, b, nb),
        _ => (a, b, false),
    };
    let save = [
        Save::Tensor(sa),
        Save::Tensor(sb),
        if sy { Save::Output(0) } else { Save::Tensor(d) },
    ];
    let bw = BinaryBackward {
        op,
        a_shape: a.shape().into(),
        b_shape: b.shape().into(),
        a_dtype: a.dtype(),
        b_dtype: b.dtype(),
    };
    ag::record(bw, &[a, b], &[out], &save);
}

/// A shared empty tensor used as a placeholder in saved-value lists.
fn dummy() -> &'static Tensor {
    static D: std::sync::OnceLock<Tensor> = std::sync::OnceLock::new();
    D.get_or_init(|| {
        Tensor::empty(&[0], DType::F32, crate::tensor::Device::Cpu).expect("empty tensor")
    })
}

/// Dtype of `tensor <op> scalar` under weak-scalar promotion.
pub fn scalar_promote(t: DType, s: Scalar) -> DType {
    DType::promote_scalar(t, s.category())
}

/// A 0-d tensor holding `s` as `dtype`.
pub fn scalar_tensor(s: Scalar, dtype: DType, device: crate::tensor::Device) -> Result<Tensor> {
    if crate::ops::capture::active() {
        // Made at the top level of a captured computation (by a VJP): part of the graph.
        return crate::ops::creation::full(&[], s, dtype, device);
    }
    if device == crate::tensor::Device::Meta && crate::ops::capture::tracing() {
        // Made inside an op being captured (and maybe saved for its
        // gradient): a constant of the graph, since its value is known —
        // unless it is a size derived from a symbolic dim.
        if let Scalar::Int(i) = s {
            if crate::ops::capture::is_symbolic(i) {
                return crate::ops::capture::symbolic_scalar(s, dtype);
            }
        }
        let on = crate::ops::capture::graph_device();
        let real = crate::ops::capture::suspended(|| scalar_tensor(s, dtype, on))?;
        return crate::ops::capture::constant(&real);
    }
    let t = Tensor::empty(&[], dtype, device)?;
    backend(device).fill(&t, s)?;
    Ok(t)
}

/// `a <op> s` (or `s <op> a` when `reflected`), with the scalar weak in promotion.
pub fn binary_scalar(op: BinaryOp, a: &Tensor, s: Scalar, reflected: bool) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::BinaryScalar { op, s, reflected },
        [a],
        one
    );
    let promoted = scalar_promote(a.dtype(), s);
    if let Some(out) = binary_scalar_direct(op, a, s, reflected, promoted)? {
        return Ok(out);
    }
    let st = scalar_tensor(s, promoted, a.device())?;
    if reflected {
        binary_as(op, &st, a, promoted)
    } else {
        binary_as(op, a, &st, promoted)
    }
}

/// `a <op> s` with `s` carried as a value (no 0-d tensor made per call), when nothing needs
/// the tensor form: `a` already in the compute dtype, no gradient to record, an output too
/// small to defer, and a backend that has the kernel. `None`: take the general path.
fn binary_scalar_direct(
    op: BinaryOp,
    a: &Tensor,
    s: Scalar,
    reflected: bool,
    promoted: DType,
) -> Result<Option<Tensor>> {
    let dt = op.compute_dtype(promoted)?;
    if a.dtype() != dt
        || !dt.is_floating_point()
        || !a.device().has_data()
        || defer::worth(a.numel())
        || (!op.is_predicate() && ag::needs_grad(&[a]))
    {
        return Ok(None);
    }
    let out = Tensor::empty_for(op.name(), a.shape(), op.out_dtype(dt), a.device())?;
    if backend(a.device()).binary_scalar(op, a, s, reflected, &out)? {
        Ok(Some(out))
    } else {
        Ok(None)
    }
}

/// In-place `a <op>= b`: `b` broadcasts to `a`'s shape, the result must be storable in `a`'s dtype.
pub fn binary_(op: BinaryOp, a: &Tensor, b: &Tensor) -> Result<()> {
    capture!(crate::ops::call::OpCall::BinaryInplace { op }, [a, b], unit);
    let promoted = promote_tensors(a, b);
    binary_inplace_as(op, a, b, promoted)
}

/// In-place `a <op>= s`.
pub fn binary_scalar_(op: BinaryOp, a: &Tensor, s: Scalar) -> Result<()> {
    capture!(
        crate::ops::call::OpCall::BinaryScalarInplace { op, s },
        [a],
        unit
    );
    let promoted = scalar_promote(a.dtype(), s);
    let dt = op.compute_dtype(promoted)?;
    if a.dtype() == dt
        && op.out_dtype(dt) == dt
        && dt.is_floating_point()
        && a.device().has_data()
        && !defer::worth(a.numel())
        && !ag::needs_grad(&[a])
    {
        // The scalar carried as a value: no 0-d tensor per call.
        a.check_writable(op.name())?;
        check_no_internal_overlap(op.name(), a)?;
        if backend(a.device()).binary_scalar(op, a, s, false, a)? {
            a.storage().bump_version();
            return Ok(());
        }
    }
    let st = scalar_tensor(s, promoted, a.device())?;
    binary_inplace_as(op, a, &st, promoted)
}

fn binary_inplace_as(op: BinaryOp, a: &Tensor, b: &Tensor, promoted: DType) -> Result<()> {
    let name = op.name();
    a.check_writable(name)?;
    check_no_internal_overlap(name, a)?;
    check_int_operand(op, b, op.compute_dtype(promoted)?)?;
    if ag::needs_grad(&[a, b]) {
        ag::check_inplace(name, a)?;
        // The VJP may save `a`; give it a copy (recorded, so gradients still reach
        // `a`'s history) since `a` itself is overwritten below.
        let a_in = clone(a)?;
        let b_in = if b.shares_storage(a) {
            clone(b)?
        } else {
            b.clone()
        };
        let r = binary_as(op, &a_in, &b_in, promoted)?;
        if r.shape() != a.shape() {
            return Err(Error::shape(
                name,
                format!(
                    "output with shape {:?} doesn't match the broadcast shape {:?}",
                    a.shape(),
                    r.shape()
                ),
            ));
        }
        if r.dtype() != a.dtype() {
            return Err(Error::dtype(
                name,
                format!(
                    "result type {} can't be cast to the desired output type {}",
                    r.dtype(),
                    a.dtype()
                ),
            ));
        }
        copy_data(a, &r)?;
        return ag::rebase_history(a, &r);
    }
    let dt = op.compute_dtype(promoted)?;
    let out_dt = op.out_dtype(dt);
    if out_dt != a.dtype() && !can_cast(out_dt, a.dtype()) {
        return Err(Error::dtype(
            name,
            format!(
                "result type {out_dt} can't be cast to the desired output type {} (in-place op on a {} tensor with a {} operand)",
                a.dtype(),
                a.dtype(),
                b.dtype()
            ),
        ));
    }
    let shape = broadcast_shapes(name, a.shape(), b.shape())?;
    if shape.as_slice() != a.shape() {
        return Err(Error::shape(
            name,
            format!(
                "output with shape {:?} doesn't match the broadcast shape {:?} (in-place op with operand of shape {:?})",
                a.shape(),
                &shape[..],
                b.shape()
            ),
        ));
    }
    // An operand that overlaps the output through a different layout must be copied first.
    let b = if b.shares_storage(a) && b.layout() != a.layout() {
        clone(b)?
    } else {
        b.clone()
    };
    let (ea, eb, _) = prepare_binary(name, a, &b, dt)?;
    let be = backend(a.device());
    if out_dt == a.dtype() {
        be.binary(op, &ea, &eb, a)?;
    } else {
        let tmp = Tensor::empty_for(op.name(), &shape, out_dt, a.device())?;
        be.binary(op, &ea, &eb, &tmp)?;
        be.cast_copy(&tmp, a)?;
    }
    a.storage().bump_version();
    Ok(())
}

/// In-place writes into a tensor whose elements alias each other (an expanded view) are refused.
pub fn check_no_internal_overlap(op: &'static str, t: &Tensor) -> Result<()> {
    if t.shape()
        .iter()
        .zip(t.strides())
        .any(|(&d, &s)| d > 1 && s == 0)
    {
        return Err(Error::runtime(
            op,
            format!(
                "unsupported operation: more than one element of the written-to tensor (shape {:?}, strides {:?}) refers to a single memory location; clone() it first",
                t.shape(),
                t.strides()
            ),
        ));
    }
    Ok(())
}

/// Whether an in-place result of dtype `from` may be written into `to` (no category up-cast).
pub fn can_cast(from: DType, to: DType) -> bool {
    from.category() <= to.category()
}

/// `where(cond, a, b)` with three-way broadcasting.
pub fn where_(cond: &Tensor, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Where, [cond, a, b], one);
    let op = "where";
    let dt = DType::promote(a.dtype(), b.dtype());
    where_as(cond, a, b, dt, op)
}

fn where_as(cond: &Tensor, a: &Tensor, b: &Tensor, dt: DType, op: &'static str) -> Result<Tensor> {
    if cond.dtype() != DType::Bool {
        return Err(Error::dtype(
            op,
            format!("condition must be a bool tensor, got {}", cond.dtype()),
        ));
    }
    for t in [a, b] {
        if t.device() != cond.device() {
            return Err(Error::runtime(
                op,
                format!(
                    "expected all tensors to be on the same device, but found {} and {}",
                    cond.device(),
                    t.device()
                ),
            ));
        }
    }
    let s = broadcast_shapes(op, cond.shape(), a.shape())?;
    let shape = broadcast_shapes(op, &s, b.shape())?;
    let record = dt.is_floating_point() && ag::needs_grad(&[a, b]);
    let (ca, cb) = {
        let _no = GradMode::set(false);
        (to_dtype(a, dt)?, to_dtype(b, dt)?)
    };
    let ec = cond.with_layout(cond.layout().expand(op, &shape)?);
    let ea = ca.with_layout(ca.layout().expand(op, &shape)?);
    let eb = cb.with_layout(cb.layout().expand(op, &shape)?);
    let out = Tensor::empty_for(op, &shape, dt, cond.device())?;
    backend(cond.device()).where_(&ec, &ea, &eb, &out)?;
    if record {
        let bw = WhereBackward {
            a_shape: a.shape().into(),
            b_shape: b.shape().into(),
            a_dtype: a.dtype(),
            b_dtype: b.dtype(),
        };
        ag::record(bw, &[cond, a, b], &[&out], &[Save::Tensor(cond)]);
    }
    Ok(out)
}

/// `where` with scalar branches (`None` means "use the tensor").
pub fn where_scalar(cond: &Tensor, a: Operand, b: Operand) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::WhereScalar {
            a: crate::ops::call::Arg::of(&a).0,
            b: crate::ops::call::Arg::of(&b).0
        },
        [cond]
            + crate::ops::call::Arg::of(&a)
                .1
                .into_iter()
                .chain(crate::ops::call::Arg::of(&b).1),
        one
    );
    let dt = match (&a, &b) {
        (Operand::T(x), Operand::T(y)) => DType::promote(x.dtype(), y.dtype()),
        (Operand::T(x), Operand::S(s)) | (Operand::S(s), Operand::T(x)) => {
            scalar_promote(x.dtype(), *s)
        }
        (Operand::S(x), Operand::S(y)) => {
            let c = x.category().max(y.category());
            match c {
                Category::Float => DType::default_float(),
                Category::Int => DType::I64,
                Category::Bool => DType::Bool,
            }
        }
    };
    let ta = a.into_tensor(dt, cond.device())?;
    let tb = b.into_tensor(dt, cond.device())?;
    where_as(cond, &ta, &tb, dt, "where")
}

/// A tensor or a Python scalar operand.
#[derive(Clone, Debug)]
pub enum Operand {
    T(Tensor),
    S(Scalar),
}

impl Operand {
    pub fn into_tensor(self, dt: DType, device: crate::tensor::Device) -> Result<Tensor> {
        match self {
            Operand::T(t) => Ok(t),
            Operand::S(s) => scalar_tensor(s, dt, device),
        }
    }
}

/// `masked_fill(x, mask, value)`: a composite of `where`.
pub fn masked_fill(x: &Tensor, mask: &Tensor, value: Scalar) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::MaskedFill { value },
        [x, mask],
        one
    );
    if mask.dtype() != DType::Bool {
        return Err(Error::dtype(
            "masked_fill",
            format!("mask must be a bool tensor, got {}", mask.dtype()),
        ));
    }
    let s = broadcast_shapes("masked_fill", x.shape(), mask.shape())?;
    if s.as_slice() != x.shape() {
        return Err(Error::shape(
            "masked_fill",
            format!(
                "mask of shape {:?} cannot be broadcast to the tensor's shape {:?}",
                mask.shape(),
                x.shape()
            ),
        ));
    }
    if value.category() > x.dtype().category() {
        return Err(Error::dtype(
            "masked_fill",
            format!("value {value:?} cannot be stored in a {} tensor", x.dtype()),
        ));
    }
    let v = scalar_tensor(value, x.dtype(), x.device())?;
    where_as(mask, &v, x, x.dtype(), "masked_fill")
}

/// Fill `x` with `value` in place.
pub fn fill_(x: &Tensor, value: Scalar) -> Result<()> {
    crate::ops::creation::check_fill_value("fill_", value, x.dtype())?;
    capture!(crate::ops::call::OpCall::Fill { value }, [x], unit);
    x.check_writable("fill_")?;
    if ag::needs_grad(&[x]) {
        // Recorded as a copy of the constant: a zero gradient for the old value (which the
        // new one no longer depends on), as in PyTorch.
        ag::check_inplace("fill_", x)?;
        return copy_(x, &scalar_tensor(value, x.dtype(), x.device())?);
    }
    backend(x.device()).fill(x, value)?;
    x.storage().bump_version();
    Ok(())
}

/// Copy `src` into `dst` in place (broadcasting `src`, converting dtype).
pub fn copy_(dst: &Tensor, src: &Tensor) -> Result<()> {
    capture!(crate::ops::call::OpCall::Copy, [dst, src], unit);
    dst.check_writable("copy_")?;
    check_no_internal_overlap("copy_", dst)?;
    let shape = broadcast_shapes("copy_", dst.shape(), src.shape())?;
    if shape.as_slice() != dst.shape() {
        return Err(Error::shape(
            "copy_",
            format!(
                "source of shape {:?} cannot be broadcast to destination shape {:?}",
                src.shape(),
                dst.shape()
            ),
        ));
    }
    if ag::needs_grad(&[dst, src]) {
        // Recorded as broadcast + cast of `src`; `dst`'s old value gets no gradient.
        ag::check_inplace("copy_", dst)?;
        let r = to_dtype(
            &crate::ops::shape::broadcast_to(src, dst.shape())?,
            dst.dtype(),
        )?;
        let r = if r.shares_storage(dst) { clone(&r)? } else { r };
        copy_data(dst, &r)?;
        // The new value's history: the gradient goes to `src` (when it requires grad) and
        // zeros to `dst`'s old value, as PyTorch's CopyBackwards.
        let out = dst.detach();
        if r.requires_grad() {
            ag::record_alias(
                OverwrittenBackward { sourced: true },
                &[dst, &r],
                &[&out],
                &[],
            );
        } else {
            ag::record_alias(OverwrittenBackward { sourced: false }, &[dst], &[&out], &[]);
        }
        return ag::rebase_history(dst, &out);
    }
    let src = if src.shares_storage(dst) {
        clone(src)?
    } else {
        src.clone()
    };
    let es = src.with_layout(src.layout().expand("copy_", dst.shape())?);
    backend(dst.device()).cast_copy(&es, dst)?;
    dst.storage().bump_version();
    Ok(())
}

/// Backward of an in-place overwrite (`copy_`, `fill_`): zeros for the old value (a
/// tensor, as PyTorch gives) and, when `sourced`, the gradient itself for the source.
struct OverwrittenBackward {
    sourced: bool,
}

impl ag::Backward for OverwrittenBackward {
    fn name(&self) -> &'static str {
        "CopyBackward"
    }
    fn apply(
        &self,
        _s: &[Tensor],
        g: &[Option<Tensor>],
        n: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let mut out = vec![None; 1 + usize::from(self.sourced)];
        if let Some(g) = g[0].as_ref() {
            if n.first().copied().unwrap_or(true) {
                out[0] = Some(Tensor::zeros(g.shape(), g.dtype(), g.device())?);
            }
            if self.sourced {
                out[1] = Some(g.clone());
            }
        }
        Ok(out)
    }
}

/// `clamp` with optional tensor bounds: composite of maximum/minimum.
pub fn clamp_tensor(x: &Tensor, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::ClampTensor {
            min: min.is_some(),
            max: max.is_some()
        },
        [x] + min.cloned().into_iter().chain(max.cloned()),
        one
    );
    let mut y = x.clone();
    if let Some(lo) = min {
        y = binary(BinaryOp::Maximum, &y, lo)?;
    }
    if let Some(hi) = max {
        y = binary(BinaryOp::Minimum, &y, hi)?;
    }
    if min.is_none() && max.is_none() {
        return Err(Error::value(
            "clamp",
            "at least one of min or max must be given",
        ));
    }
    Ok(y)
}
