//! Normalisation over the trailing dims: `layer_norm` and `rms_norm`.
//!
//! Shape rule: `normalized_shape` (at least one dim) must equal the last
//! dims of the input; `weight` and `bias` have exactly `normalized_shape`.
//! The output has the input's shape and dtype. Dtype rule: floating inputs
//! only; weight and bias share the input's dtype (as in PyTorch without
//! autocast). Half-precision inputs compute in float32 and round on store.
//!
//! Kernel: the backend's fused `layer_norm` primitive makes one pass over
//! each row of `d = prod(normalized_shape)` elements (mean, variance with
//! the row held in cache, then the affine output) and also returns the
//! per-row mean and reciprocal standard deviation (float32 for half inputs),
//! which the gradient reuses.
//!
//! Gradient, with `x̂ = (x - μ)·r` (`x·r` for RMS norm), `ĝ = g·w`:
//! `dx = r·(ĝ - mean(ĝ) - x̂·mean(ĝ·x̂))` (RMS norm drops `mean(ĝ)`),
//! `dw = Σ_rows g·x̂`, `db = Σ_rows g`. Under `create_graph` the statistics
//! are recomputed from `x` with recorded ops, so the rule differentiates again.

use crate::autograd::{self as ag, Backward, Save};
use crate::backend::backend;
use crate::error::{Error, Result};
use crate::ops::elementwise::{self, UnaryOp};
use crate::ops::elementwise_grad::{adds, mul, sub};
use crate::ops::reduce::{mean, sum, var};
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::ops::shape::reshape;
use crate::tensor::layout::fmt_shape;
use crate::tensor::{DType, Tensor};

/// Registry entries for this family.
pub const OPS: &[OpInfo] = &[
    OpInfo::prim("layer_norm", "norm", DTypes::FLOAT)
        .kind(OpKind::Fused)
        .grad(),
    OpInfo::prim("rms_norm", "norm", DTypes::FLOAT)
        .kind(OpKind::Fused)
        .grad(),
];

/// The dtype the statistics (mean, 1/std) are kept in.
fn stats_dtype(d: DType) -> DType {
    match d {
        DType::F64 => DType::F64,
        _ => DType::F32,
    }
}

/// A float16/bfloat16 input with float32 affine parameters (a float32 model
/// run in an autocast region): the dtype to cast the parameters to, so that
/// the norm computes and returns the input's dtype, as PyTorch's mixed-type
/// norms do. Gradients reach the float32 parameters through the casts.
fn mixed_params(x: &Tensor, params: &[Option<&Tensor>]) -> Option<DType> {
    let low = matches!(x.dtype(), DType::F16 | DType::BF16);
    (low && params.iter().flatten().any(|p| p.dtype() == DType::F32)).then_some(x.dtype())
}

fn cast_param(p: Option<&Tensor>, d: DType) -> Result<Option<Tensor>> {
    p.map(|p| {
        if p.dtype() == DType::F32 {
            super::elementwise::to_dtype(p, d)
        } else {
            Ok(p.clone())
        }
    })
    .transpose()
}

/// `(x - mean) / sqrt(var + eps) * weight + bias` over the trailing `normalized_shape` dims
/// (biased variance, as in PyTorch).
pub fn layer_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    if let Some(d) = mixed_params(x, &[weight, bias]) {
        let (w, b) = (cast_param(weight, d)?, cast_param(bias, d)?);
        return layer_norm(x, normalized_shape, w.as_ref(), b.as_ref(), eps);
    }
    capture!(
        crate::ops::call::OpCall::LayerNorm {
            normalized_shape: normalized_shape.to_vec(),
            weight: weight.is_some(),
            bias: bias.is_some(),
            eps
        },
        [x] + weight.cloned().into_iter().chain(bias.cloned()),
        one
    );
    norm("layer_norm", false, x, normalized_shape, weight, bias, eps)
}

/// `x / sqrt(mean(x²) + eps) * weight` over the trailing `normalized_shape` dims.
/// `eps = None` uses the machine epsilon of the input's dtype (PyTorch's default).
pub fn rms_norm(
    x: &Tensor,
    normalized_shape: &[usize],
    weight: Option<&Tensor>,
    eps: Option<f64>,
) -> Result<Tensor> {
    if let Some(d) = mixed_params(x, &[weight]) {
        return rms_norm(x, normalized_shape, cast_param(weight, d)?.as_ref(), eps);
    }
    capture!(
        crate::ops::call::OpCall::RmsNorm {
            normalized_shape: normalized_shape.to_vec(),
            weight: weight.is_some(),
            eps
        },
        [x] + weight.cloned(),
        one
    );
    let eps = eps.unwrap_or(match x.dtype() {
        DType::F64 => f64::EPSILON,
        DType::F16 => 0.000_976_562_5,
        DType::BF16 => 0.007_812_5,
        _ => f32::EPSILON as f64,
    });
    norm("rms_norm", true, x, normalized_shape, weight, None, eps)
}

fn check_param(
    op: &'static str,
    what: &str,
    p: Option<&Tensor>,
    x: &Tensor,
    ns: &[usize],
) -> Result<()> {
    let Some(p) = p else { return Ok(()) };
    if p.shape() != ns {
        return Err(Error::shape(
            op,
            format!(
                "{what} has shape {} but normalized_shape is {}",
                fmt_shape(p.shape()),
                fmt_shape(ns)
            ),
        ));
    }
    if p.dtype() != x.dtype() {
        return Err(Error::dtype(
            op,
            format!(
                "{what} has dtype {} but the input has dtype {} (they must match)",
                p.dtype(),
                x.dtype()
            ),
        ));
    }
    if p.device() != x.device() {
        return Err(Error::value(
            op,
            format!(
                "{what} is on {} but the input is on {}",
                p.device(),
                x.device()
            ),
        ));
    }
    Ok(())
}

fn norm(
    op: &'static str,
    rms: bool,
    x: &Tensor,
    ns: &[usize],
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    if !DTypes::FLOAT.contains(x.dtype()) {
        return Err(Error::dtype(
            op,
            format!(
                "not implemented for dtype {} (input shape {}); use a floating dtype",
                x.dtype(),
                fmt_shape(x.shape())
            ),
        ));
    }
    let k = ns.len();
    if k == 0 || k > x.ndim() || x.shape()[x.ndim() - k..] != *ns {
        return Err(Error::shape(
            op,
            format!(
                "normalized_shape {} must be non-empty and equal the last dims of the input shape {}",
                fmt_shape(ns),
                fmt_shape(x.shape())
            ),
        ));
    }
    check_param(op, "weight", weight, x, ns)?;
    check_param(op, "bias", bias, x, ns)?;
    if eps.is_nan() || eps < 0.0 {
        return Err(Error::value(op, format!("eps must be >= 0, got {eps}")));
    }
    let batch = &x.shape()[..x.ndim() - k];
    let mut stat_shape: Vec<usize> = batch.to_vec();
    stat_shape.extend(std::iter::repeat_n(1, k));
    let out = Tensor::empty_for(op, x.shape(), x.dtype(), x.device())?;
    let sd = stats_dtype(x.dtype());
    let mu = Tensor::empty_for(op, &stat_shape, sd, x.device())?;
    let rstd = Tensor::empty_for(op, &stat_shape, sd, x.device())?;
    if x.numel() > 0 {
        let contig = |t: &Tensor| -> Result<Tensor> {
            let _no = crate::autograd::GradMode::set(false);
            elementwise::contiguous(t)
        };
        let xc = contig(x)?;
        let wc = weight.map(contig).transpose()?;
        let bc = bias.map(contig).transpose()?;
        backend(x.device()).layer_norm(
            &xc,
            wc.as_ref(),
            bc.as_ref(),
            eps,
            rms,
            &out,
            &mu,
            &rstd,
        )?;
    }
    let inputs: Vec<&Tensor> = [Some(x), weight, bias].into_iter().flatten().collect();
    let record = ag::needs_grad(&inputs);
    crate::ops::capture::push_aux(&mu, record);
    crate::ops::capture::push_aux(&rstd, record);
    if record {
        let bw = NormBackward {
            rms,
            eps,
            k,
            has_w: weight.is_some(),
            has_b: bias.is_some(),
            in_dtype: x.dtype(),
        };
        let mut save = vec![Save::Tensor(x), Save::Tensor(&mu), Save::Tensor(&rstd)];
        if let Some(w) = weight {
            save.push(Save::Tensor(w));
        }
        ag::record(bw, &inputs, &[&out], &save);
    }
    Ok(out)
}

/// Gradient of [`layer_norm`] / [`rms_norm`]. Saved: `[x, mean, rstd, weight?]`.
struct NormBackward {
    rms: bool,
    eps: f64,
    /// Number of normalised (trailing) dims.
    k: usize,
    has_w: bool,
    has_b: bool,
    in_dtype: DType,
}

/// The fused gradient of [`layer_norm`] (`rms_norm` when `rms`) over the
/// `k` trailing dims as an op of its own (internal; not differentiable):
/// from the input `x`, the output gradient `g` (of `x`'s dtype, shape and
/// device), the forward's per-row `mean` and `rstd` and the weight, the
/// gradients `want`ed of the input, the weight (with a weight only) and the
/// bias, in that order. The device's fused kernel where it has one, else
/// composed from primitives — what the backward pass computes eagerly.
/// Captured graphs record it as one node.
#[allow(clippy::too_many_arguments)]
pub fn norm_grad(
    x: &Tensor,
    g: &Tensor,
    mean: &Tensor,
    rstd: &Tensor,
    weight: Option<&Tensor>,
    rms: bool,
    k: usize,
    want: [bool; 3],
) -> Result<Vec<Tensor>> {
    let [dx, dw, db] = want;
    capture!(
        crate::ops::call::OpCall::NormGrad {
            rms,
            k,
            weight: weight.is_some(),
            dx,
            dw,
            db
        },
        [x, g, mean, rstd] + weight.cloned(),
        all
    );
    let op = if rms {
        "rms_norm_grad"
    } else {
        "layer_norm_grad"
    };
    if !DTypes::FLOAT.contains(x.dtype())
        || g.dtype() != x.dtype()
        || g.shape() != x.shape()
        || g.device() != x.device()
        || k == 0
        || k > x.ndim()
        || (dw && weight.is_none())
    {
        return Err(Error::value(
            op,
            format!(
                "needs x and g of one floating dtype, shape and device, 1 to {} normalised dims and a weight for its gradient, got {} {} and {} {}, {k} dims",
                x.ndim(),
                x.dtype(),
                fmt_shape(x.shape()),
                g.dtype(),
                fmt_shape(g.shape())
            ),
        ));
    }
    let _no = crate::autograd::GradMode::set(false);
    let bw = NormBackward {
        rms,
        eps: 0.0,
        k,
        has_w: weight.is_some(),
        has_b: db,
        in_dtype: x.dtype(),
    };
    let mut saved = vec![x.clone(), mean.clone(), rstd.clone()];
    saved.extend(weight.cloned());
    let mut needs = vec![dx];
    if bw.has_w {
        needs.push(dw);
    }
    if bw.has_b {
        needs.push(db);
    }
    let grads = match bw.fused(&saved, g, &needs)? {
        Some(grads) => grads,
        None => bw.composed(&saved, g, &needs)?,
    };
    Ok(grads.into_iter().flatten().collect())
}

impl NormBackward {
    /// All the gradients from the device's fused kernel, when it has one.
    fn fused(
        &self,
        saved: &[Tensor],
        g: &Tensor,
        needs: &[bool],
    ) -> Result<Option<Vec<Option<Tensor>>>> {
        let x = &saved[0];
        if g.dtype() != x.dtype() || g.shape() != x.shape() || g.device() != x.device() {
            return Ok(None);
        }
        let n_in = 1 + self.has_w as usize + self.has_b as usize;
        let pshape = &x.shape()[x.ndim() - self.k..];
        let (dev, dt) = (x.device(), x.dtype());
        let dx = needs[0]
            .then(|| Tensor::empty(x.shape(), dt, dev))
            .transpose()?;
        let dw = (self.has_w && needs[1])
            .then(|| Tensor::empty(pshape, dt, dev))
            .transpose()?;
        let db = (self.has_b && needs[n_in - 1])
            .then(|| Tensor::empty(pshape, dt, dev))
            .transpose()?;
        let w = self.has_w.then(|| &saved[3]);
        if !backend(dev).layer_norm_grad(
            x,
            g,
            &saved[1],
            &saved[2],
            w,
            self.rms,
            dx.as_ref(),
            dw.as_ref(),
            db.as_ref(),
        )? {
            return Ok(None);
        }
        let mut out = vec![dx];
        if self.has_w {
            out.push(dw);
        }
        if self.has_b {
            out.push(db);
        }
        Ok(Some(out))
    }
}

impl Backward for NormBackward {
    fn name(&self) -> &'static str {
        if self.rms {
            "RmsNormBackward"
        } else {
            "NativeLayerNormBackward"
        }
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let n_in = 1 + self.has_w as usize + self.has_b as usize;
        let Some(g) = &grads[0] else {
            return Ok(vec![None; n_in]);
        };
        let x = &saved[0];
        let fusable = !(ag::is_grad_enabled() && (x.requires_grad() || g.requires_grad()))
            && g.dtype() == x.dtype()
            && g.shape() == x.shape()
            && g.device() == x.device();
        if !fusable {
            return self.composed(saved, g, needs);
        }
        let want = [
            needs[0],
            self.has_w && needs[1],
            self.has_b && needs[n_in - 1],
        ];
        if !want.iter().any(|&w| w) {
            return Ok(vec![None; n_in]);
        }
        let w = self.has_w.then(|| &saved[3]);
        let mut got = norm_grad(x, g, &saved[1], &saved[2], w, self.rms, self.k, want)?.into_iter();
        let mut out = vec![if want[0] { got.next() } else { None }];
        if self.has_w {
            out.push(if want[1] { got.next() } else { None });
        }
        if self.has_b {
            out.push(if want[2] { got.next() } else { None });
        }
        Ok(out)
    }
}

impl NormBackward {
    /// The gradients composed of primitives (recorded: under `create_graph`
    /// the statistics are recomputed from `x`, so the rule differentiates again).
    fn composed(
        &self,
        saved: &[Tensor],
        g: &Tensor,
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let n_in = 1 + self.has_w as usize + self.has_b as usize;
        let sd = stats_dtype(self.in_dtype);
        let x = elementwise::to_dtype(&saved[0], sd)?;
        let g = elementwise::to_dtype(g, sd)?;
        let nd = x.ndim();
        let norm_dims: Vec<isize> = (nd - self.k..nd).map(|d| d as isize).collect();
        let batch_dims: Vec<isize> = (0..nd - self.k).map(|d| d as isize).collect();
        // Statistics: the kernel's when this gradient is not differentiated
        // again; recorded recomputations under create_graph.
        let (mu, r) = if ag::is_grad_enabled() && saved[0].requires_grad() {
            let mu = if self.rms {
                None
            } else {
                Some(mean(&x, Some(&norm_dims), true, None)?)
            };
            let v = if self.rms {
                mean(&mul(&x, &x)?, Some(&norm_dims), true, None)?
            } else {
                var(&x, Some(&norm_dims), 0.0, true, false)?
            };
            (
                mu,
                elementwise::unary(UnaryOp::Rsqrt, &adds(&v, self.eps)?)?,
            )
        } else {
            let mu = (!self.rms).then(|| saved[1].clone());
            (mu, saved[2].clone())
        };
        let xhat = match &mu {
            Some(m) => mul(&sub(&x, m)?, &r)?,
            None => mul(&x, &r)?,
        };
        let w = self
            .has_w
            .then(|| elementwise::to_dtype(&saved[3], sd))
            .transpose()?;
        let ns: Vec<isize> = x.shape()[nd - self.k..]
            .iter()
            .map(|&d| d as isize)
            .collect();
        // Σ over the batch dims, shaped as normalized_shape.
        let batch_sum = |t: &Tensor| -> Result<Tensor> {
            let s = if batch_dims.is_empty() {
                t.clone()
            } else {
                sum(t, Some(&batch_dims), false, None)?
            };
            elementwise::to_dtype(&reshape(&s, &ns)?, self.in_dtype)
        };
        let mut out = Vec::with_capacity(n_in);
        if needs[0] {
            let gh = match &w {
                Some(w) => mul(&g, w)?,
                None => g.clone(),
            };
            let m2 = mean(&mul(&gh, &xhat)?, Some(&norm_dims), true, None)?;
            let mut inner = sub(&gh, &mul(&xhat, &m2)?)?;
            if !self.rms {
                inner = sub(&inner, &mean(&gh, Some(&norm_dims), true, None)?)?;
            }
            let gx = mul(&r, &inner)?;
            out.push(Some(elementwise::to_dtype(&gx, self.in_dtype)?));
        } else {
            out.push(None);
        }
        if self.has_w {
            out.push(if needs[1] {
                Some(batch_sum(&mul(&g, &xhat)?)?)
            } else {
                None
            });
        }
        if self.has_b {
            out.push(if needs[n_in - 1] {
                Some(batch_sum(&g)?)
            } else {
                None
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: Vec<f32>, s: &[usize]) -> Tensor {
        Tensor::from_vec(v, s).unwrap()
    }

    #[test]
    fn layer_norm_rows_have_zero_mean_unit_var() {
        let x = t((0..12).map(|i| (i * i) as f32 * 0.25).collect(), &[3, 4]);
        let y = layer_norm(&x, &[4], None, None, 0.0).unwrap();
        let v = y.to_f64_vec();
        for row in v.chunks(4) {
            let m: f64 = row.iter().sum::<f64>() / 4.0;
            let var: f64 = row.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / 4.0;
            assert!(m.abs() < 1e-6, "mean {m}");
            assert!((var - 1.0).abs() < 1e-5, "var {var}");
        }
    }

    #[test]
    fn rms_norm_matches_formula() {
        let x = t(vec![1.0, 2.0, 3.0, 4.0, -1.0, 0.5], &[2, 3]);
        let w = t(vec![0.5, 1.0, 2.0], &[3]);
        let y = rms_norm(&x, &[3], Some(&w), Some(1e-6))
            .unwrap()
            .to_f64_vec();
        let xs = x.to_f64_vec();
        for r in 0..2 {
            let row = &xs[r * 3..r * 3 + 3];
            let ms = row.iter().map(|a| a * a).sum::<f64>() / 3.0;
            let s = 1.0 / (ms + 1e-6).sqrt();
            for j in 0..3 {
                let want = row[j] * s * [0.5, 1.0, 2.0][j];
                assert!((y[r * 3 + j] - want).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn bad_normalized_shape_is_an_error() {
        let x = t(vec![0.0; 6], &[2, 3]);
        assert!(layer_norm(&x, &[2], None, None, 1e-5).is_err());
        assert!(layer_norm(&x, &[], None, None, 1e-5).is_err());
        assert!(layer_norm(&x, &[1, 2, 3], None, None, 1e-5).is_err());
        let w = t(vec![1.0; 2], &[2]);
        assert!(layer_norm(&x, &[3], Some(&w), None, 1e-5).is_err());
    }
}
