//! Losses with a fused kernel: `cross_entropy` of logits against class
//! indices (log-softmax + negative log-likelihood, class weights,
//! `ignore_index`, label smoothing) in one pass over each row.
//!
//! Shape rule: `input` is `(N, C)`, `(N, C, d1, ...)` or `(C,)` (classes on
//! dim 1, or dim 0 when 1-D); `target` has the input's shape without the
//! class dim and holds int32/int64 class indices in `[0, C)` or
//! `ignore_index`; `weight` is `(C,)`. The result is a scalar (`'mean'`,
//! `'sum'`) or the target's shape (`'none'`), in the input's dtype. Dtype
//! rule: floating logits; half precision computes in float32.
//!
//! Per element, with `lse = log Σ_c e^{x_c}`: `loss = (1-ε)·w_t·(lse - x_t) +
//! ε/C·Σ_c w_c·(lse - x_c)`, 0 where `t = ignore_index`; `'mean'` divides the
//! sum by `Σ w_t` over the kept targets (NaN when none is kept, as PyTorch).
//!
//! Gradient: `∂loss/∂x_c = a·softmax(x)_c - [c = t]·b - ε/C·w_c` with
//! `b = (1-ε)·w_t`, `a = b + ε/C·Σ w`, from the forward's saved `lse` in one
//! fused pass; under `create_graph` the same formula is composed of recorded
//! ops, so it differentiates again. The weight gets no gradient (as in
//! PyTorch); a weight that requires grad is refused.

use crate::autograd::{self as ag, Backward, GradMode, Save};
use crate::backend::backend;
use crate::error::{Error, Result};
pub use crate::kernel::params::CeCfg;
use crate::ops::elementwise::{self as ew, BinaryOp};
use crate::ops::reduce::{softmax, sum};
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::ops::shape;
use crate::tensor::layout::fmt_shape;
use crate::tensor::{DType, Scalar, Shape, Tensor};

/// Registry entries for this family.
pub const OPS: &[OpInfo] = &[OpInfo::prim("cross_entropy", "loss", DTypes::FLOAT)
    .kind(OpKind::Fused)
    .grad()];

/// How a loss over many elements is reduced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Reduction {
    None,
    Mean,
    Sum,
}

impl Reduction {
    /// `"none"`, `"mean"` or `"sum"`.
    pub fn parse(op: &'static str, s: &str) -> Result<Reduction> {
        match s {
            "none" => Ok(Reduction::None),
            "mean" => Ok(Reduction::Mean),
            "sum" => Ok(Reduction::Sum),
            _ => Err(Error::value(
                op,
                format!("reduction must be 'mean', 'sum' or 'none', got '{s}'"),
            )),
        }
    }
}

/// The dtype the kernels compute in.
fn compute_dtype(d: DType) -> DType {
    if d == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

/// Validate the arguments; returns the class count.
fn check(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    smoothing: f64,
) -> Result<usize> {
    let op = "cross_entropy";
    if !input.dtype().is_floating_point() {
        return Err(Error::dtype(
            op,
            format!(
                "input must have a floating point dtype, got {}",
                input.dtype()
            ),
        ));
    }
    if !matches!(target.dtype(), DType::I32 | DType::I64) {
        return Err(Error::dtype(
            op,
            format!(
                "class-index target must have an integer dtype (int32 or int64), got {}",
                target.dtype()
            ),
        ));
    }
    if input.ndim() == 0 {
        return Err(Error::shape(
            op,
            "input must have at least 1 dimension (the classes), got a 0-d tensor",
        ));
    }
    let cdim = usize::from(input.ndim() >= 2);
    let s = input.shape();
    let expected: Shape = s[..cdim].iter().chain(&s[cdim + 1..]).copied().collect();
    if target.shape() != expected.as_slice() {
        return Err(Error::shape(
            op,
            format!(
                "expected target of shape {} for input of shape {} (classes on dim {cdim}), got target of shape {}",
                fmt_shape(&expected),
                fmt_shape(s),
                fmt_shape(target.shape())
            ),
        ));
    }
    let c = s[cdim];
    if let Some(w) = weight {
        if !w.dtype().is_floating_point() {
            return Err(Error::dtype(
                op,
                format!("weight must have a floating point dtype, got {}", w.dtype()),
            ));
        }
        if w.shape() != [c] {
            return Err(Error::shape(
                op,
                format!(
                    "weight must be a 1-D tensor of {c} elements (one per class), got shape {}",
                    fmt_shape(w.shape())
                ),
            ));
        }
        if w.requires_grad() && ag::is_grad_enabled() {
            return Err(Error::runtime(
                op,
                "the gradient with respect to weight is not supported (pass a weight that does not require grad)",
            ));
        }
    }
    if !(0.0..=1.0).contains(&smoothing) {
        return Err(Error::value(
            op,
            format!("label_smoothing must be between 0.0 and 1.0, got {smoothing}"),
        ));
    }
    let mut all = vec![input, target];
    all.extend(weight);
    if let Some(t) = all.iter().find(|t| t.device() != input.device()) {
        return Err(Error::value(
            op,
            format!(
                "all tensors must be on one device, got {} and {}",
                input.device(),
                t.device()
            ),
        ));
    }
    Ok(c)
}

/// The logits as contiguous `(rows, C)` in the compute dtype (class dim moved last).
fn logit_rows(input: &Tensor, c: usize) -> Result<Tensor> {
    let x = ew::to_dtype(input, compute_dtype(input.dtype()))?;
    let x = if input.ndim() > 2 {
        let mut order: Vec<isize> = (0..input.ndim() as isize).filter(|&d| d != 1).collect();
        order.push(1);
        shape::permute(&x, &order)?
    } else {
        x
    };
    let x = ew::contiguous(&x)?;
    shape::reshape(&x, &[-1, c as isize])
}

/// Cross entropy of logits `input` against class indices `target`; see the module docs.
pub fn cross_entropy(
    input: &Tensor,
    target: &Tensor,
    weight: Option<&Tensor>,
    ignore_index: i64,
    reduction: Reduction,
    label_smoothing: f64,
) -> Result<Tensor> {
    if let Some(d) = super::autocast::widen(&[input]) {
        let weight = super::autocast::cast_opt(weight, d)?;
        return cross_entropy(
            &super::autocast::cast(input, d)?,
            target,
            weight.as_ref(),
            ignore_index,
            reduction,
            label_smoothing,
        );
    }
    capture!(
        crate::ops::call::OpCall::CrossEntropy {
            weight: weight.is_some(),
            ignore_index,
            reduction,
            label_smoothing
        },
        [input, target] + weight.cloned(),
        one
    );
    let c = check(input, target, weight, label_smoothing)?;
    let cfg = CeCfg {
        c,
        ignore_index,
        smoothing: label_smoothing,
    };
    let cd = compute_dtype(input.dtype());
    let dev = input.device();
    let (x2, t2, w2, lse, out, den) = {
        let _no = GradMode::set(false);
        let x2 = if c == 0 {
            Tensor::empty(&[target.numel(), 0], cd, dev)?
        } else {
            logit_rows(input, c)?
        };
        let t2 = shape::reshape(target, &[-1])?;
        let w2 = weight.map(|w| ew::to_dtype(w, cd)).transpose()?;
        let rows = t2.numel();
        let loss = Tensor::empty(&[rows], cd, dev)?;
        let lse = Tensor::empty(&[rows], cd, dev)?;
        let wt = Tensor::empty(&[rows], cd, dev)?;
        backend(dev).cross_entropy(&x2, &t2, w2.as_ref(), cfg, input.shape(), &loss, &lse, &wt)?;
        let (out, den) = match reduction {
            Reduction::None => (shape::reshape(&loss, &dims(target.shape()))?, None),
            Reduction::Sum => (sum(&loss, None, false, None)?, None),
            Reduction::Mean => {
                let den = sum(&wt, None, false, None)?;
                (
                    ew::binary(BinaryOp::Div, &sum(&loss, None, false, None)?, &den)?,
                    Some(den),
                )
            }
        };
        (x2, t2, w2, lse, ew::to_dtype(&out, input.dtype())?, den)
    };
    let record = ag::needs_grad(&[input]);
    // A captured node outputs what its gradient reads (see `trace::push_aux`).
    for t in [Some(&x2), Some(&t2), Some(&lse), w2.as_ref(), den.as_ref()]
        .into_iter()
        .flatten()
    {
        crate::ops::capture::push_aux(t, record);
    }
    if record {
        let bw = CrossEntropyBackward {
            cfg,
            reduction,
            in_shape: input.shape().into(),
            in_dtype: input.dtype(),
            has_w: w2.is_some(),
            has_den: den.is_some(),
        };
        let mut save = vec![
            Save::Tensor(input),
            Save::Tensor(&x2),
            Save::Tensor(&t2),
            Save::Tensor(&lse),
        ];
        if let Some(w) = &w2 {
            save.push(Save::Tensor(w));
        }
        if let Some(d) = &den {
            save.push(Save::Tensor(d));
        }
        ag::record(bw, &[input], &[&out], &save);
    }
    Ok(out)
}

fn dims(s: &[usize]) -> Vec<isize> {
    s.iter().map(|&d| d as isize).collect()
}

/// Gradient of [`cross_entropy`] for the logits. Saved: `[input, logit rows,
/// targets (flat), lse, weight?, mean denominator?]`.
struct CrossEntropyBackward {
    cfg: CeCfg,
    reduction: Reduction,
    in_shape: Shape,
    in_dtype: DType,
    has_w: bool,
    has_den: bool,
}

impl CrossEntropyBackward {
    /// The per-row output gradient, contiguous `(rows,)` in the compute dtype.
    fn row_grad(&self, g: &Tensor, den: Option<&Tensor>, rows: usize, cd: DType) -> Result<Tensor> {
        let g = ew::to_dtype(g, cd)?;
        let g = match self.reduction {
            Reduction::None => shape::reshape(&g, &[-1])?,
            Reduction::Sum => shape::expand(&shape::reshape(&g, &[1])?, &[rows as isize])?,
            Reduction::Mean => {
                let gd = ew::binary(BinaryOp::Div, &g, den.expect("mean saves its denominator"))?;
                shape::expand(&shape::reshape(&gd, &[1])?, &[rows as isize])?
            }
        };
        ew::contiguous(&g)
    }

    /// `(rows, C)` gradient rows back to the input's layout and dtype.
    fn to_input(&self, rows: &Tensor) -> Result<Tensor> {
        let nd = self.in_shape.len();
        let gx = if nd > 2 {
            // rows are (N, d1.., C): reshape, then move C back to dim 1
            let mut moved: Vec<isize> = vec![self.in_shape[0] as isize];
            moved.extend(self.in_shape[2..].iter().map(|&d| d as isize));
            moved.push(self.in_shape[1] as isize);
            let t = shape::reshape(rows, &moved)?;
            let mut order: Vec<isize> = vec![0, nd as isize - 1];
            order.extend(1..nd as isize - 1);
            shape::permute(&t, &order)?
        } else {
            shape::reshape(rows, &dims(&self.in_shape))?
        };
        ew::to_dtype(&gx, self.in_dtype)
    }
}

impl Backward for CrossEntropyBackward {
    fn name(&self) -> &'static str {
        "CrossEntropyLossBackward"
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
        let (input, x2, t2, lse) = (&saved[0], &saved[1], &saved[2], &saved[3]);
        let w = self.has_w.then(|| &saved[4]);
        let den = self.has_den.then(|| &saved[4 + self.has_w as usize]);
        let cd = x2.dtype();
        let rows = t2.numel();
        if ag::is_grad_enabled() && (input.requires_grad() || g.requires_grad()) {
            return Ok(vec![Some(self.composed(input, t2, w, den, g)?)]);
        }
        let gr = self.row_grad(g, den, rows, cd)?;
        let out = cross_entropy_grad_rows(x2, t2, w, lse, &gr, self.cfg)?;
        Ok(vec![Some(self.to_input(&out)?)])
    }
}

/// The fused kernel of [`cross_entropy`]'s gradient as an op of its own
/// (internal; not differentiable): `(rows, C)` logit-row gradients from the
/// logit rows `x2`, flat targets `t2`, class weights `w`, the rows'
/// log-sum-exp `lse` and the per-row output gradient `gr` (all contiguous,
/// in the compute dtype). Captured graphs record it as one node, so a
/// captured training step with this loss is made of ops only.
pub fn cross_entropy_grad_rows(
    x2: &Tensor,
    t2: &Tensor,
    w: Option<&Tensor>,
    lse: &Tensor,
    gr: &Tensor,
    cfg: CeCfg,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::CrossEntropyGradRows {
            c: cfg.c,
            ignore_index: cfg.ignore_index,
            smoothing: cfg.smoothing,
            weight: w.is_some(),
        },
        [x2, t2, lse, gr] + w.cloned(),
        one
    );
    let rows = t2.numel();
    if x2.shape() != [rows, cfg.c] || lse.numel() != rows || gr.numel() != rows {
        return Err(Error::shape(
            "cross_entropy_grad",
            format!(
                "logit rows {:?}, {rows} targets, lse {:?} and row gradients {:?} do not agree with {} classes",
                x2.shape(),
                lse.shape(),
                gr.shape(),
                cfg.c
            ),
        ));
    }
    let out = Tensor::empty(&[rows, cfg.c], x2.dtype(), x2.device())?;
    if rows > 0 && cfg.c > 0 {
        let _no = GradMode::set(false);
        let (x2, lse, gr) = (
            ew::contiguous(x2)?,
            ew::contiguous(lse)?,
            ew::contiguous(gr)?,
        );
        let t2 = ew::contiguous(t2)?;
        backend(x2.device()).cross_entropy_grad(&x2, &t2, w, &lse, &gr, cfg, &out)?;
    }
    Ok(out)
}

impl CrossEntropyBackward {
    /// The gradient composed of recorded ops (for `create_graph`):
    /// `g_r·(a_r·softmax(x) - b_r·onehot(t) - ε/C·w)`.
    fn composed(
        &self,
        input: &Tensor,
        t2: &Tensor,
        w: Option<&Tensor>,
        den: Option<&Tensor>,
        g: &Tensor,
    ) -> Result<Tensor> {
        let (c, eps) = (self.cfg.c, self.cfg.smoothing);
        let cd = compute_dtype(self.in_dtype);
        let rows = t2.numel();
        let x2 = logit_rows(input, c)?;
        let p = softmax(&x2, -1, false, None)?;
        // Constants from the targets and weights (not differentiable):
        // a_r, b_r per row, the one-hot targets and the smoothing term.
        let (a, b, onehot, smooth) = {
            let _no = GradMode::set(false);
            let keep =
                ew::binary_scalar(BinaryOp::Ne, t2, Scalar::Int(self.cfg.ignore_index), false)?;
            let drop_ = ew::unary(ew::UnaryOp::LogicalNot, &keep)?;
            let safe = ew::masked_fill(t2, &drop_, Scalar::Int(0))?;
            let classes = crate::ops::creation::arange(
                Scalar::Int(0),
                Scalar::Int(c as i64),
                Scalar::Int(1),
                Some(DType::I64),
                t2.device(),
            )?;
            let onehot = ew::binary(
                BinaryOp::Eq,
                &shape::unsqueeze(&ew::to_dtype(&safe, DType::I64)?, 1)?,
                &shape::unsqueeze(&classes, 0)?,
            )?;
            let keepf = ew::to_dtype(&keep, cd)?;
            let (wt, wsum) = match w {
                Some(w) => (
                    ew::binary(
                        BinaryOp::Mul,
                        &crate::ops::index::index_select(w, 0, &safe)?,
                        &keepf,
                    )?,
                    sum(w, None, false, None)?,
                ),
                None => (
                    keepf.clone(),
                    ew::scalar_tensor(Scalar::Float(c as f64), cd, t2.device())?,
                ),
            };
            let b = ew::binary_scalar(BinaryOp::Mul, &wt, Scalar::Float(1.0 - eps), false)?;
            let es = ew::binary_scalar(BinaryOp::Mul, &wsum, Scalar::Float(eps / c as f64), false)?;
            let a = ew::binary(BinaryOp::Add, &b, &ew::binary(BinaryOp::Mul, &keepf, &es)?)?;
            // ε/C·w_c on kept rows
            let kcol = shape::unsqueeze(&keepf, 1)?;
            let sm = match w {
                Some(w) => ew::binary(BinaryOp::Mul, &shape::unsqueeze(w, 0)?, &kcol)?,
                None => kcol,
            };
            let smooth =
                ew::binary_scalar(BinaryOp::Mul, &sm, Scalar::Float(eps / c as f64), false)?;
            (a, b, ew::to_dtype(&onehot, cd)?, smooth)
        };
        let mut inner = ew::binary(
            BinaryOp::Sub,
            &ew::binary(BinaryOp::Mul, &shape::unsqueeze(&a, 1)?, &p)?,
            &ew::binary(BinaryOp::Mul, &shape::unsqueeze(&b, 1)?, &onehot)?,
        )?;
        if eps > 0.0 {
            inner = ew::binary(BinaryOp::Sub, &inner, &smooth)?;
        }
        let gr = self.row_grad(g, den, rows, cd)?;
        let gx = ew::binary(BinaryOp::Mul, &inner, &shape::unsqueeze(&gr, 1)?)?;
        self.to_input(&gx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: Vec<f32>, s: &[usize]) -> Tensor {
        Tensor::from_vec(v, s).unwrap()
    }

    #[test]
    fn matches_log_softmax_nll() {
        let x = t(vec![1.0, 2.0, 0.5, -1.0, 0.0, 3.0], &[2, 3]);
        let tg = Tensor::from_vec(vec![2i64, 0], &[2]).unwrap();
        let l = cross_entropy(&x, &tg, None, -100, Reduction::None, 0.0)
            .unwrap()
            .to_f64_vec();
        let xs = x.to_f64_vec();
        for (r, &ti) in [2usize, 0].iter().enumerate() {
            let row = &xs[r * 3..r * 3 + 3];
            let lse = row.iter().map(|v| v.exp()).sum::<f64>().ln();
            assert!((l[r] - (lse - row[ti])).abs() < 1e-6);
        }
    }

    #[test]
    fn out_of_range_target_is_an_index_error() {
        let x = t(vec![0.0; 6], &[2, 3]);
        let tg = Tensor::from_vec(vec![1i64, 3], &[2]).unwrap();
        let e = cross_entropy(&x, &tg, None, -100, Reduction::Mean, 0.0).unwrap_err();
        assert!(e.to_string().contains("out of bounds"), "{e}");
    }
}
