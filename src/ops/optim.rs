//! Optimizer updates: SGD, Adam/AdamW and RMSprop as multi-tensor ops.
//!
//! Each op takes lists of parameters, gradients and optimizer state and
//! updates every parameter (and its state) in place in one call. The op
//! layer validates *everything* first — list lengths, dtypes, shapes,
//! devices, writability, leaf-ness and memory overlap — and only then
//! writes, so a refused call leaves every tensor untouched. Writes bypass
//! autograd (no history is recorded, as under `no_grad`) and bump the
//! version counter of every written storage.
//!
//! The element math follows PyTorch's single-tensor formulas operation by
//! operation (see [`SgdHyper`], [`AdamHyper`], [`RmspropHyper`]); the fused
//! kernel does weight decay, moment updates, bias correction and the
//! parameter update in one pass per element.
//!
//! Devices provide the update kernels through [`OptimKernels`]
//! ([`kernels`] picks the implementation by device; both live in
//! `backend::optim`). The CPU kernels (`backend::cpu::optim`) split the parameters into chunks of about 16 Ki elements, run
//! the chunks over the thread pool when the call's total is large, and walk
//! each chunk with one inner loop compiled per SIMD level. Parameters and
//! state may have any (non-overlapping) strides. float16 and bfloat16
//! tensors compute in float32 and are rounded on store; their state has the
//! parameter's dtype, as in PyTorch.
//!
//! Registry: `sgd_step`, `adam_step` (Adam and AdamW), `rmsprop_step`;
//! family `optim`, kind fused (the reference is the composition of
//! elementwise ops PyTorch runs per parameter). Input 0 (the parameter
//! list) is the declared mutated input; the state lists are written too.
//! None is differentiable.

use super::registry::{DTypes, OpInfo, OpKind};
use crate::error::{Error, Result};
use crate::tensor::Tensor;

pub const OPS: &[OpInfo] = &[
    OpInfo::prim("sgd_step", "optim", DTypes::FLOAT)
        .kind(OpKind::Fused)
        .mutates(0),
    OpInfo::prim("adam_step", "optim", DTypes::FLOAT)
        .kind(OpKind::Fused)
        .mutates(0),
    OpInfo::prim("rmsprop_step", "optim", DTypes::FLOAT)
        .kind(OpKind::Fused)
        .mutates(0),
];

pub use crate::backend::optim::{kernels, AdamHyper, OptimKernels, RmspropHyper, SgdHyper};

// ---------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------

/// One tensor list of an op call, for checks and messages. `None` entries
/// (SGD buffers not created yet) are skipped.
struct List<'a> {
    /// Name in messages ("grad", "exp_avg", ...).
    what: &'static str,
    tensors: Vec<Option<&'a Tensor>>,
    written: bool,
}

impl<'a> List<'a> {
    fn new(what: &'static str, ts: &'a [Tensor], written: bool) -> List<'a> {
        List {
            what,
            tensors: ts.iter().map(Some).collect(),
            written,
        }
    }
}

fn check_len(op: &'static str, n: usize, what: &str, len: usize) -> Result<()> {
    if len != n {
        return Err(Error::value(
            op,
            format!(
                "got {n} parameters but {len} {what} tensors; the lists must have equal lengths"
            ),
        ));
    }
    Ok(())
}

/// `[lo, hi)` in bytes of the storage a layout reaches (empty for no elements).
fn byte_span(t: &Tensor) -> (isize, isize) {
    if t.numel() == 0 {
        return (0, 0);
    }
    let (lo, hi) = t.layout().span();
    let w = t.dtype().itemsize() as isize;
    (lo * w, hi * w)
}

/// True when two distinct elements of the layout may share memory
/// (conservative: some interleaved layouts that do not are refused too).
fn overlaps_itself(t: &Tensor) -> bool {
    if t.layout().is_contiguous() {
        return false;
    }
    let mut dims: Vec<(usize, usize)> = t
        .shape()
        .iter()
        .zip(t.strides())
        .filter(|(&n, _)| n > 1)
        .map(|(&n, &s)| (n, s.unsigned_abs()))
        .collect();
    dims.sort_by_key(|&(_, s)| s);
    let mut extent = 0usize; // the largest offset the smaller dims reach
    for (n, s) in dims {
        if s <= extent {
            return true;
        }
        extent += s * (n - 1);
    }
    false
}

fn describe(t: &Tensor) -> String {
    format!("shape {:?} and dtype {}", t.shape(), t.dtype())
}

/// A byte range of one storage: `(lo, hi, list name, parameter index, written)`.
type Span = (isize, isize, &'static str, usize, bool);

/// Check every list against the parameters; see the module docs.
fn validate(op: &'static str, params: &[Tensor], lists: &[List<'_>]) -> Result<()> {
    let n = params.len();
    for l in lists {
        check_len(op, n, l.what, l.tensors.len())?;
    }
    for (i, p) in params.iter().enumerate() {
        if !p.dtype().is_floating_point() {
            return Err(Error::dtype(
                op,
                format!(
                    "parameter {i} has dtype {}; optimizers update floating-point tensors only",
                    p.dtype()
                ),
            ));
        }
        if p.meta().is_some_and(|m| !m.is_leaf()) {
            return Err(Error::value(
                op,
                format!(
                    "parameter {i} (shape {:?}) is not a leaf tensor (it was produced by a recorded op); optimizers update leaf tensors only",
                    p.shape()
                ),
            ));
        }
        if p.device() != params[0].device() {
            return Err(Error::value(
                op,
                format!(
                    "parameter {i} is on {}, but parameter 0 is on {}; one call updates tensors of one device",
                    p.device(),
                    params[0].device()
                ),
            ));
        }
        for l in lists {
            let Some(t) = l.tensors[i] else { continue };
            if t.dtype() != p.dtype() {
                return Err(Error::dtype(
                    op,
                    format!(
                        "parameter {i}: the {} has {}, but the parameter has {}",
                        l.what,
                        describe(t),
                        describe(p)
                    ),
                ));
            }
            if t.shape() != p.shape() {
                return Err(Error::shape(
                    op,
                    format!(
                        "parameter {i}: the {} has {}, but the parameter has {}",
                        l.what,
                        describe(t),
                        describe(p)
                    ),
                ));
            }
            if t.device() != p.device() {
                return Err(Error::value(
                    op,
                    format!(
                        "parameter {i}: the {} is on {}, but the parameter is on {}",
                        l.what,
                        t.device(),
                        p.device()
                    ),
                ));
            }
        }
    }
    // Written tensors must be writable, must not overlap themselves or one
    // another, and no gradient may overlap a written tensor.
    let all = std::iter::once(("parameter", params.iter().map(Some).collect(), true))
        .chain(lists.iter().map(|l| (l.what, l.tensors.clone(), l.written)));
    // Tensors of distinct storages cannot overlap: when no storage appears
    // twice (the usual case), only the per-tensor checks below remain.
    let mut ids: Vec<usize> = params
        .iter()
        .map(Some)
        .chain(lists.iter().flat_map(|l| l.tensors.iter().copied()))
        .flatten()
        .map(|t| std::sync::Arc::as_ptr(t.storage()) as usize)
        .collect();
    ids.sort_unstable();
    let shared = ids.windows(2).any(|w| w[0] == w[1]);
    // (storage, span) pairs; sorted below so each storage's spans are adjacent.
    let mut spans: Vec<(usize, Span)> = Vec::new();
    for (what, ts, written) in all {
        for (i, t) in ts.into_iter().enumerate() {
            let Some(t) = t else { continue };
            if written {
                if t.storage().is_readonly() {
                    return Err(Error::value(
                        op,
                        format!(
                            "parameter {i}: the {what} (shape {:?}) borrows read-only memory and cannot be updated in place",
                            t.shape()
                        ),
                    ));
                }
                if overlaps_itself(t) {
                    return Err(Error::value(
                        op,
                        format!(
                            "parameter {i}: the {what} has overlapping memory (shape {:?}, strides {:?}) and cannot be updated in place",
                            t.shape(),
                            t.strides()
                        ),
                    ));
                }
            }
            let (lo, hi) = byte_span(t);
            if shared && lo < hi {
                // By storage identity (shape-only storages have no address).
                spans.push((
                    std::sync::Arc::as_ptr(t.storage()) as usize,
                    (lo, hi, what, i, written),
                ));
            }
        }
    }
    spans.sort_unstable_by_key(|&(p, s)| (p, s.0));
    for group in spans.chunk_by(|a, b| a.0 == b.0) {
        if group.len() < 2 || group.iter().all(|s| !s.1 .4) {
            continue;
        }
        let v: Vec<Span> = group.iter().map(|&(_, s)| s).collect();
        // The furthest-reaching span so far, and the furthest-reaching written one.
        let mut reach: Option<(isize, &'static str, usize)> = None;
        let mut wreach: Option<(isize, &'static str, usize)> = None;
        for &(lo, hi, what, i, w) in v.iter() {
            let seen = if w { reach } else { wreach };
            if let Some((_, rwhat, ri)) = seen.filter(|r| lo < r.0) {
                return Err(Error::value(
                    op,
                    format!(
                        "the {rwhat} of parameter {ri} and the {what} of parameter {i} share memory; every parameter and state tensor needs memory of its own, and gradients must not overlap them"
                    ),
                ));
            }
            if reach.is_none_or(|r| hi > r.0) {
                reach = Some((hi, what, i));
            }
            if w && wreach.is_none_or(|r| hi > r.0) {
                wreach = Some((hi, what, i));
            }
        }
    }
    Ok(())
}

fn bump(ts: &[Tensor]) {
    for t in ts {
        t.storage().bump_version();
    }
}

// ---------------------------------------------------------------------------
// The ops
// ---------------------------------------------------------------------------

/// SGD over a list of parameters. `bufs[i]` is the momentum buffer of
/// parameter `i`, or None before its first step (a zeroed buffer is then
/// allocated, after validation, and starts from the gradient). Returns the
/// buffers (None everywhere when `momentum == 0`; given buffers are then
/// ignored).
pub fn sgd_step(
    params: &[Tensor],
    grads: &[Tensor],
    bufs: &[Option<Tensor>],
    h: &SgdHyper,
) -> Result<Vec<Option<Tensor>>> {
    if let Some(r) = crate::ops::capture::intercept(|| {
        let call = crate::ops::call::OpCall::SgdStep {
            n: params.len(),
            bufs: bufs.iter().map(|b| b.is_some()).collect(),
            h: *h,
            dynamic: vec![],
        };
        let ins = params
            .iter()
            .chain(grads)
            .chain(bufs.iter().flatten())
            .cloned()
            .collect();
        (call, ins)
    }) {
        // The captured node's outputs are the buffers it creates (for `None` entries).
        let mut created = r?.into_iter();
        return Ok(bufs
            .iter()
            .map(|b| {
                if h.momentum == 0.0 {
                    None
                } else {
                    b.clone().or_else(|| created.next())
                }
            })
            .collect());
    }
    const OP: &str = "sgd_step";
    let _profiled = crate::tensor::profile::scope(OP, crate::tensor::profile::Kind::Op);
    check_len(OP, params.len(), "momentum buffer", bufs.len())?;
    if h.nesterov && (h.momentum <= 0.0 || h.dampening != 0.0) {
        return Err(Error::value(
            OP,
            "Nesterov momentum requires a momentum and zero dampening",
        ));
    }
    let use_buf = h.momentum != 0.0;
    let mut lists = vec![List::new("grad", grads, false)];
    if use_buf {
        lists.push(List {
            what: "momentum buffer",
            tensors: bufs.iter().map(Option::as_ref).collect(),
            written: true,
        });
    }
    validate(OP, params, &lists)?;
    if !use_buf {
        if !params.is_empty() {
            kernels(params[0].device()).sgd(params, grads, &[], &[], h)?;
            bump(params);
        }
        return Ok(vec![None; params.len()]);
    }
    let mut first = Vec::with_capacity(params.len());
    let mut full = Vec::with_capacity(params.len());
    for (p, b) in params.iter().zip(bufs) {
        match b {
            Some(b) => {
                first.push(false);
                full.push(b.clone());
            }
            None => {
                first.push(true);
                full.push(Tensor::zeros(p.shape(), p.dtype(), p.device())?);
            }
        }
    }
    if !params.is_empty() {
        kernels(params[0].device()).sgd(params, grads, &full, &first, h)?;
        bump(params);
        bump(&full);
    }
    Ok(full.into_iter().map(Some).collect())
}

/// SGD with every momentum buffer given and `first[i]` marking a buffer
/// that starts from the gradient (a captured graph's form of [`sgd_step`],
/// whose state tensors exist before the first update).
pub fn sgd_step_first(
    params: &[Tensor],
    grads: &[Tensor],
    bufs: &[Tensor],
    first: &[bool],
    h: &SgdHyper,
) -> Result<()> {
    const OP: &str = "sgd_step";
    check_len(OP, params.len(), "momentum buffer", bufs.len())?;
    check_len(OP, params.len(), "first flag", first.len())?;
    if h.momentum == 0.0 || first.iter().all(|f| !f) {
        let b: Vec<Option<Tensor>> = bufs.iter().cloned().map(Some).collect();
        return sgd_step(params, grads, &b, h).map(|_| ()); // its own profiler event
    }
    let _profiled = crate::tensor::profile::scope(OP, crate::tensor::profile::Kind::Op);
    if h.nesterov && h.dampening != 0.0 {
        return Err(Error::value(
            OP,
            "Nesterov momentum requires a momentum and zero dampening",
        ));
    }
    let lists = vec![
        List::new("grad", grads, false),
        List::new("momentum buffer", bufs, true),
    ];
    validate(OP, params, &lists)?;
    if !params.is_empty() {
        kernels(params[0].device()).sgd(params, grads, bufs, first, h)?;
        bump(params);
        bump(bufs);
    }
    Ok(())
}

/// Adam (or AdamW with `h.decoupled`) over a list of parameters.
/// `steps[i]` is parameter `i`'s step count *after* this update (>= 1);
/// `max_exp_avg_sqs` must be empty unless `h.amsgrad`.
pub fn adam_step(
    params: &[Tensor],
    grads: &[Tensor],
    exp_avgs: &[Tensor],
    exp_avg_sqs: &[Tensor],
    max_exp_avg_sqs: &[Tensor],
    steps: &[u64],
    h: &AdamHyper,
) -> Result<()> {
    capture!(
        crate::ops::call::OpCall::AdamStep {
            n: params.len(),
            steps: steps.to_vec(),
            h: *h,
            dynamic: vec![]
        },
        [] + params
            .iter()
            .chain(grads)
            .chain(exp_avgs)
            .chain(exp_avg_sqs)
            .chain(max_exp_avg_sqs)
            .cloned(),
        unit
    );
    const OP: &str = "adam_step";
    check_len(OP, params.len(), "step", steps.len())?;
    if let Some(i) = steps.iter().position(|&s| s == 0) {
        return Err(Error::value(
            OP,
            format!("parameter {i}: the step count after the update must be at least 1, got 0"),
        ));
    }
    if !h.amsgrad && !max_exp_avg_sqs.is_empty() {
        return Err(Error::value(
            OP,
            "max_exp_avg_sq tensors were given but amsgrad is off; pass an empty list",
        ));
    }
    let mut lists = vec![
        List::new("grad", grads, false),
        List::new("exp_avg", exp_avgs, true),
        List::new("exp_avg_sq", exp_avg_sqs, true),
    ];
    if h.amsgrad {
        lists.push(List::new("max_exp_avg_sq", max_exp_avg_sqs, true));
    }
    validate(OP, params, &lists)?;
    if params.is_empty() {
        return Ok(());
    }
    kernels(params[0].device()).adam(
        params,
        grads,
        exp_avgs,
        exp_avg_sqs,
        max_exp_avg_sqs,
        steps,
        h,
    )?;
    bump(params);
    bump(exp_avgs);
    bump(exp_avg_sqs);
    bump(max_exp_avg_sqs);
    Ok(())
}

/// RMSprop over a list of parameters. `momentum_buffers` must be empty
/// unless `h.momentum > 0`, `grad_avgs` empty unless `h.centered`.
pub fn rmsprop_step(
    params: &[Tensor],
    grads: &[Tensor],
    square_avgs: &[Tensor],
    momentum_buffers: &[Tensor],
    grad_avgs: &[Tensor],
    h: &RmspropHyper,
) -> Result<()> {
    capture!(
        crate::ops::call::OpCall::RmspropStep {
            n: params.len(),
            h: *h,
            dynamic: vec![]
        },
        [] + params
            .iter()
            .chain(grads)
            .chain(square_avgs)
            .chain(momentum_buffers)
            .chain(grad_avgs)
            .cloned(),
        unit
    );
    const OP: &str = "rmsprop_step";
    let use_buf = h.momentum > 0.0;
    if !use_buf && !momentum_buffers.is_empty() {
        return Err(Error::value(
            OP,
            "momentum buffers were given but momentum is 0; pass an empty list",
        ));
    }
    if !h.centered && !grad_avgs.is_empty() {
        return Err(Error::value(
            OP,
            "grad_avg tensors were given but centered is off; pass an empty list",
        ));
    }
    let mut lists = vec![
        List::new("grad", grads, false),
        List::new("square_avg", square_avgs, true),
    ];
    if use_buf {
        lists.push(List::new("momentum buffer", momentum_buffers, true));
    }
    if h.centered {
        lists.push(List::new("grad_avg", grad_avgs, true));
    }
    validate(OP, params, &lists)?;
    if params.is_empty() {
        return Ok(());
    }
    kernels(params[0].device()).rmsprop(
        params,
        grads,
        square_avgs,
        momentum_buffers,
        grad_avgs,
        h,
    )?;
    bump(params);
    bump(square_avgs);
    bump(momentum_buffers);
    bump(grad_avgs);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t32(v: &[f64], shape: &[usize]) -> Tensor {
        Tensor::from_vec(v.iter().map(|&x| x as f32).collect::<Vec<_>>(), shape).unwrap()
    }
    fn t64(v: &[f64], shape: &[usize]) -> Tensor {
        Tensor::from_vec(v.to_vec(), shape).unwrap()
    }
    fn close(a: &[f64], b: &[f64], tol: f64) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= tol * (1.0 + y.abs()),
                "element {i}: {x} vs {y}"
            );
        }
    }

    const P: [f64; 6] = [0.5, -1.25, 2.0, 0.0, -3.0, 1.0];
    const G: [f64; 6] = [0.1, 0.7, -0.4, 1.5, -0.05, 0.0];

    /// The scalar reference of Adam/AdamW for one element over `steps` updates.
    fn adam_ref(mut p: f64, g: f64, h: &AdamHyper, steps: u64) -> (f64, f64, f64) {
        let (mut m, mut v, mut vmax) = (0.0f64, 0.0f64, 0.0f64);
        for t in 1..=steps {
            let mut g = if h.maximize { -g } else { g };
            if h.weight_decay != 0.0 {
                if h.decoupled {
                    p *= 1.0 - h.lr * h.weight_decay;
                } else {
                    g += h.weight_decay * p;
                }
            }
            m = h.beta1 * m + (1.0 - h.beta1) * g;
            v = h.beta2 * v + (1.0 - h.beta2) * g * g;
            vmax = vmax.max(v);
            let d = if h.amsgrad { vmax } else { v };
            let bc1 = 1.0 - h.beta1.powi(t as i32);
            let bc2 = 1.0 - h.beta2.powi(t as i32);
            p -= h.lr / bc1 * m / (d.sqrt() / bc2.sqrt() + h.eps);
        }
        (p, m, v)
    }

    fn adam_h(amsgrad: bool, decoupled: bool) -> AdamHyper {
        AdamHyper {
            lr: 0.01,
            beta1: 0.9,
            beta2: 0.99,
            eps: 1e-8,
            weight_decay: 0.1,
            amsgrad,
            maximize: false,
            decoupled,
        }
    }

    #[test]
    fn adam_and_adamw_match_the_scalar_formulas() {
        for (amsgrad, decoupled) in [(false, false), (true, false), (false, true), (true, true)] {
            let h = adam_h(amsgrad, decoupled);
            for f64_dtype in [false, true] {
                let mk = if f64_dtype { t64 } else { t32 };
                let p = mk(&P, &[2, 3]);
                let g = mk(&G, &[2, 3]);
                let m = mk(&[0.0; 6], &[2, 3]);
                let v = mk(&[0.0; 6], &[2, 3]);
                let x = mk(&[0.0; 6], &[2, 3]);
                let xs = if amsgrad { vec![x] } else { vec![] };
                for step in 1..=3 {
                    adam_step(
                        std::slice::from_ref(&p),
                        std::slice::from_ref(&g),
                        std::slice::from_ref(&m),
                        std::slice::from_ref(&v),
                        &xs,
                        &[step],
                        &h,
                    )
                    .unwrap();
                }
                let want: Vec<(f64, f64, f64)> = P
                    .iter()
                    .zip(G)
                    .map(|(&p, g)| adam_ref(p, g, &h, 3))
                    .collect();
                let tol = if f64_dtype { 1e-12 } else { 1e-5 };
                close(
                    &p.to_f64_vec(),
                    &want.iter().map(|w| w.0).collect::<Vec<_>>(),
                    tol,
                );
                close(
                    &m.to_f64_vec(),
                    &want.iter().map(|w| w.1).collect::<Vec<_>>(),
                    tol,
                );
                close(
                    &v.to_f64_vec(),
                    &want.iter().map(|w| w.2).collect::<Vec<_>>(),
                    tol,
                );
            }
        }
    }

    #[test]
    fn sgd_momentum_starts_from_the_gradient() {
        let h = SgdHyper {
            lr: 0.1,
            momentum: 0.9,
            dampening: 0.5,
            nesterov: false,
            weight_decay: 0.0,
            maximize: false,
        };
        let p = t64(&P, &[6]);
        let g = t64(&G, &[6]);
        let bufs = sgd_step(
            std::slice::from_ref(&p),
            std::slice::from_ref(&g),
            &[None],
            &h,
        )
        .unwrap();
        let b = bufs[0].clone().unwrap();
        close(&b.to_f64_vec(), &G, 0.0);
        let want1: Vec<f64> = P.iter().zip(G).map(|(p, g)| p - 0.1 * g).collect();
        close(&p.to_f64_vec(), &want1, 1e-15);
        // Second step: b = 0.9 b + 0.5 g; p -= 0.1 b.
        sgd_step(
            std::slice::from_ref(&p),
            std::slice::from_ref(&g),
            &[Some(b.clone())],
            &h,
        )
        .unwrap();
        let b2: Vec<f64> = G.iter().map(|g| 0.9 * g + 0.5 * g).collect();
        close(&b.to_f64_vec(), &b2, 1e-15);
        let want2: Vec<f64> = want1.iter().zip(&b2).map(|(p, b)| p - 0.1 * b).collect();
        close(&p.to_f64_vec(), &want2, 1e-15);
        // Nesterov with weight decay and maximize, no buffer returned without momentum.
        let hn = SgdHyper {
            nesterov: true,
            dampening: 0.0,
            weight_decay: 0.2,
            maximize: true,
            ..h
        };
        let q = t64(&P, &[6]);
        sgd_step(
            std::slice::from_ref(&q),
            std::slice::from_ref(&g),
            &[None],
            &hn,
        )
        .unwrap();
        let want: Vec<f64> = P
            .iter()
            .zip(G)
            .map(|(&p, g)| {
                let d = -g + 0.2 * p;
                p - 0.1 * (d + 0.9 * d)
            })
            .collect();
        close(&q.to_f64_vec(), &want, 1e-15);
        let plain = SgdHyper { momentum: 0.0, ..h };
        let out = sgd_step(std::slice::from_ref(&q), &[g], &[None], &plain).unwrap();
        assert!(out[0].is_none());
    }

    #[test]
    fn rmsprop_centered_with_momentum() {
        let h = RmspropHyper {
            lr: 0.01,
            alpha: 0.9,
            eps: 1e-6,
            weight_decay: 0.1,
            momentum: 0.5,
            centered: true,
            maximize: false,
        };
        let p = t64(&P, &[3, 2]);
        let g = t64(&G, &[3, 2]);
        let (s, b, a) = (
            t64(&[0.0; 6], &[3, 2]),
            t64(&[0.0; 6], &[3, 2]),
            t64(&[0.0; 6], &[3, 2]),
        );
        for _ in 0..2 {
            rmsprop_step(
                std::slice::from_ref(&p),
                std::slice::from_ref(&g),
                std::slice::from_ref(&s),
                std::slice::from_ref(&b),
                std::slice::from_ref(&a),
                &h,
            )
            .unwrap();
        }
        let want: Vec<f64> = P
            .iter()
            .zip(G)
            .map(|(&p0, g0)| {
                let (mut p, mut s, mut b, mut a) = (p0, 0.0f64, 0.0f64, 0.0f64);
                for _ in 0..2 {
                    let g = g0 + 0.1 * p;
                    s = 0.9 * s + 0.1 * g * g;
                    a = 0.9 * a + 0.1 * g;
                    let d = (s - a * a).sqrt() + 1e-6;
                    b = 0.5 * b + g / d;
                    p -= 0.01 * b;
                }
                p
            })
            .collect();
        close(&p.to_f64_vec(), &want, 1e-12);
    }

    #[test]
    fn strided_params_match_contiguous_ones() {
        // A transposed parameter with a contiguous gradient, and a large one for the threaded path.
        let n = 300 * 257;
        let vals: Vec<f64> = (0..n)
            .map(|i| ((i * 37 % 101) as f64 - 50.0) / 17.0)
            .collect();
        let grads: Vec<f64> = (0..n)
            .map(|i| ((i * 13 % 89) as f64 - 44.0) / 23.0)
            .collect();
        let h = adam_h(true, false);
        let run = |p: &Tensor| {
            let g = t32(&grads, &[300, 257]);
            let z = || t32(&vec![0.0; n], &[300, 257]);
            let (m, v, x) = (z(), z(), z());
            for step in 1..=2 {
                adam_step(
                    std::slice::from_ref(p),
                    std::slice::from_ref(&g),
                    std::slice::from_ref(&m),
                    std::slice::from_ref(&v),
                    std::slice::from_ref(&x),
                    &[step],
                    &h,
                )
                .unwrap();
            }
        };
        let dense = t32(&vals, &[300, 257]);
        run(&dense);
        // The same values stored column-major, viewed as [300, 257].
        let mut cm = vec![0.0; n];
        for r in 0..300 {
            for c in 0..257 {
                cm[c * 300 + r] = vals[r * 257 + c];
            }
        }
        let base = t32(&cm, &[257, 300]);
        let strided = base.with_layout(base.layout().transpose("t", 0, 1).unwrap());
        assert!(!strided.is_contiguous());
        run(&strided);
        assert_eq!(dense.to_f64_vec(), strided.to_f64_vec());
    }

    #[test]
    fn refused_calls_write_nothing() {
        let h = adam_h(false, false);
        let ps = [t32(&P, &[6]), t32(&P, &[6])];
        let gs = [t32(&G, &[6]), t32(&G, &[6])];
        let ms = [t32(&[0.0; 6], &[6]), t32(&[0.0; 6], &[6])];
        let bad_v = [t32(&[0.0; 6], &[6]), t32(&[0.0; 6], &[2, 3])];
        let e = adam_step(&ps, &gs, &ms, &bad_v, &[], &[1, 1], &h).unwrap_err();
        assert!(
            matches!(e, Error::Shape { .. }) && e.to_string().contains("parameter 1"),
            "{e}"
        );
        for t in ps.iter().chain(&ms) {
            assert_eq!(t.version(), 0);
        }
        assert_eq!(ps[0].to_f64_vec(), t32(&P, &[6]).to_f64_vec());
        // Two parameters overlapping in one storage.
        let base = t32(&[0.0; 8], &[8]);
        let a = base.with_layout(crate::tensor::Layout::contiguous(&[6]));
        let mut l = crate::tensor::Layout::contiguous(&[6]);
        l.offset = 2;
        let b = base.with_layout(l);
        let vs = [t32(&[0.0; 6], &[6]), t32(&[0.0; 6], &[6])];
        let e = adam_step(&[a, b], &gs, &ms, &vs, &[], &[1, 1], &h).unwrap_err();
        assert!(e.to_string().contains("share memory"), "{e}");
        assert_eq!(base.version(), 0);
    }

    #[test]
    fn self_overlap_detection() {
        let t = t32(&[0.0; 6], &[2, 3]);
        assert!(!overlaps_itself(&t));
        let tr = t.with_layout(t.layout().transpose("t", 0, 1).unwrap());
        assert!(!overlaps_itself(&tr));
        let ex = t32(&[0.0; 3], &[1, 3]);
        let ex = ex.with_layout(ex.layout().expand("e", &[4, 3]).unwrap());
        assert!(overlaps_itself(&ex));
    }
}
