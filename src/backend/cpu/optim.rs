//! The CPU implementation of [`OptimKernels`]: fused SGD, Adam/AdamW and
//! RMSprop updates, split into chunks over the thread pool, one inner loop
//! compiled per SIMD level.

use half::{bf16, f16};

use super::math::Real;
use super::simd::{level, Level};
use super::strided::{Plan, SendPtr};
use crate::backend::optim::{AdamHyper, OptimKernels, RmspropHyper, SgdHyper};
use crate::error::Result;
use crate::tensor::{DType, Tensor};

/// Elements per task when a call is split over the thread pool.
const CHUNK: usize = 1 << 14;
/// Below this many elements in all a call runs on the calling thread: an
/// update costs about a nanosecond per element, less than waking the
/// pool for a model of many small parameters.
const PAR_MIN: usize = 1 << 18;

/// A storage element type and the type it computes in.
pub trait Store: Copy + Send + Sync + 'static {
    type C: Real;
    fn load(self) -> Self::C;
    fn store(c: Self::C) -> Self;
}

macro_rules! store_same {
    ($t:ty) => {
        impl Store for $t {
            type C = $t;
            #[inline(always)]
            fn load(self) -> $t {
                self
            }
            #[inline(always)]
            fn store(c: $t) -> $t {
                c
            }
        }
    };
}
store_same!(f32);
store_same!(f64);

macro_rules! store_half {
    ($t:ty) => {
        impl Store for $t {
            type C = f32;
            #[inline(always)]
            fn load(self) -> f32 {
                self.to_f32()
            }
            #[inline(always)]
            fn store(c: f32) -> $t {
                <$t>::from_f32(c)
            }
        }
    };
}
store_half!(f16);
store_half!(bf16);

/// One pass over `n` elements of `N` operands (index 1, the gradient, is
/// only read): load, `f`, store.
#[inline(always)]
unsafe fn row_body<T: Store, const N: usize, F: Fn(&mut [T::C; N])>(
    p: [*mut T; N],
    s: [isize; N],
    n: usize,
    f: &F,
) {
    if s.iter().all(|&x| x == 1) {
        for i in 0..n {
            let mut v: [T::C; N] = std::array::from_fn(|k| (*p[k].add(i)).load());
            f(&mut v);
            for k in 0..N {
                if k != 1 {
                    *p[k].add(i) = T::store(v[k]);
                }
            }
        }
    } else {
        for i in 0..n as isize {
            let mut v: [T::C; N] = std::array::from_fn(|k| (*p[k].offset(i * s[k])).load());
            f(&mut v);
            for k in 0..N {
                if k != 1 {
                    *p[k].offset(i * s[k]) = T::store(v[k]);
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
unsafe fn row_v4<T: Store, const N: usize, F: Fn(&mut [T::C; N])>(
    p: [*mut T; N],
    s: [isize; N],
    n: usize,
    f: &F,
) {
    row_body(p, s, n, f)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn row_v3<T: Store, const N: usize, F: Fn(&mut [T::C; N])>(
    p: [*mut T; N],
    s: [isize; N],
    n: usize,
    f: &F,
) {
    row_body(p, s, n, f)
}

/// [`row_body`] at the best SIMD level.
///
/// # Safety
/// The pointers must be valid for `n` elements at their strides; written
/// operands (all but index 1) must not overlap one another.
#[inline(always)]
unsafe fn run_row<T: Store, const N: usize, F: Fn(&mut [T::C; N])>(
    p: [*mut T; N],
    s: [isize; N],
    n: usize,
    f: &F,
) {
    #[cfg(target_arch = "x86_64")]
    match level() {
        Level::Avx512 => return row_v4(p, s, n, f),
        Level::Avx2 => return row_v3(p, s, n, f),
        Level::Scalar => {}
    }
    row_body(p, s, n, f)
}

/// `lerp(a, b, w)` as PyTorch computes it (the form depends on `w`).
#[inline(always)]
fn lerp<C: Real>(a: C, b: C, w: C, low: bool) -> C {
    if low {
        a + w * (b - a)
    } else {
        b - (b - a) * (C::ONE - w)
    }
}

/// An update rule over `N` operands: parameter, gradient, then state.
trait Rule<const N: usize>: Sync {
    /// Update `n` elements of parameter `j` from the given element pointers.
    ///
    /// # Safety
    /// As [`run_row`].
    unsafe fn row<T: Store>(&self, j: usize, p: [*mut T; N], s: [isize; N], n: usize);
}

/// One task: rows `[r0, r1)` of parameter `j`'s plan, or elements
/// `[e0, e1)` when the plan is a single run.
struct Task {
    j: usize,
    r0: usize,
    r1: usize,
    e0: usize,
    e1: usize,
}

struct Job<const N: usize> {
    dtype: DType,
    base: [SendPtr<u8>; N],
    plan: Plan<N>,
}

unsafe fn exec<T: Store, const N: usize, R: Rule<N>>(rule: &R, job: &Job<N>, t: &Task) {
    let base: [*mut T; N] = std::array::from_fn(|k| job.base[k].get() as *mut T);
    let plan = &job.plan;
    if plan.rows() == 1 {
        let st = plan.inner_strides;
        let p = std::array::from_fn(|k| base[k].offset(t.e0 as isize * st[k]));
        rule.row(t.j, p, st, t.e1 - t.e0);
    } else {
        plan.run_rows(t.r0, t.r1, &mut |off, n, st| {
            let p = std::array::from_fn(|k| base[k].offset(off[k]));
            rule.row(t.j, p, st, n);
        });
    }
}

/// Run `rule` over every parameter: `ops[j]` are parameter `j`'s
/// operands (equal shapes and dtypes, validated by the op layer).
fn drive<const N: usize, R: Rule<N>>(ops: &[[&Tensor; N]], rule: &R) {
    let jobs: Vec<Job<N>> = ops
        .iter()
        .map(|ts| Job {
            dtype: ts[0].dtype(),
            base: std::array::from_fn(|k| SendPtr(ts[k].byte_ptr())),
            plan: Plan::new(ts[0].shape(), std::array::from_fn(|k| ts[k].strides())),
        })
        .collect();
    let mut tasks = Vec::new();
    let mut total = 0usize;
    for (j, (job, ts)) in jobs.iter().zip(ops).enumerate() {
        let numel = ts[0].numel();
        if numel == 0 {
            continue;
        }
        total += numel;
        let (rows, inner) = (job.plan.rows(), job.plan.inner);
        if rows == 1 {
            for e0 in (0..inner).step_by(CHUNK) {
                let e1 = (e0 + CHUNK).min(inner);
                tasks.push(Task {
                    j,
                    r0: 0,
                    r1: 1,
                    e0,
                    e1,
                });
            }
        } else {
            let per = (CHUNK / inner.max(1)).max(1);
            for r0 in (0..rows).step_by(per) {
                let r1 = (r0 + per).min(rows);
                tasks.push(Task {
                    j,
                    r0,
                    r1,
                    e0: 0,
                    e1: 0,
                });
            }
        }
    }
    let run = |t: &Task| {
        let job = &jobs[t.j];
        // SAFETY: the op layer validated the operands (shapes, dtypes, no
        // overlap between written tensors); tasks cover disjoint elements.
        unsafe {
            match job.dtype {
                DType::F32 => exec::<f32, N, R>(rule, job, t),
                DType::F64 => exec::<f64, N, R>(rule, job, t),
                DType::F16 => exec::<f16, N, R>(rule, job, t),
                DType::BF16 => exec::<bf16, N, R>(rule, job, t),
                d => unreachable!("optimizer kernel called with dtype {d}"),
            }
        }
    };
    if total < PAR_MIN || crate::par::split() <= 1 || tasks.len() < 2 {
        tasks.iter().for_each(run);
    } else {
        crate::par::for_each(tasks.len(), |i| run(&tasks[i]));
    }
}

fn operands<const N: usize>(lists: [&[Tensor]; N]) -> Vec<[&Tensor; N]> {
    (0..lists[0].len())
        .map(|j| std::array::from_fn(|k| &lists[k][j]))
        .collect()
}

struct Sgd<'a> {
    h: SgdHyper,
    first: &'a [bool],
}

impl<const N: usize> Rule<N> for Sgd<'_> {
    #[inline(always)]
    unsafe fn row<T: Store>(&self, j: usize, p: [*mut T; N], s: [isize; N], n: usize) {
        let h = &self.h;
        let c = <T::C as Real>::c;
        let (neg_lr, wd, mom, damp1) = (
            c(-h.lr),
            c(h.weight_decay),
            c(h.momentum),
            c(1.0 - h.dampening),
        );
        let (has_wd, nesterov, maximize) = (h.weight_decay != 0.0, h.nesterov, h.maximize);
        let first = N == 3 && self.first[j];
        let f = move |v: &mut [T::C; N]| {
            let mut g = if maximize { -v[1] } else { v[1] };
            if has_wd {
                g = g + wd * v[0];
            }
            if N == 3 {
                let b = if first { g } else { v[N - 1] * mom + damp1 * g };
                v[N - 1] = b;
                g = if nesterov { g + mom * b } else { b };
            }
            v[0] = v[0] + neg_lr * g;
        };
        run_row(p, s, n, &f)
    }
}

struct Adam<'a> {
    h: AdamHyper,
    steps: &'a [u64],
}

impl<const N: usize> Rule<N> for Adam<'_> {
    #[inline(always)]
    unsafe fn row<T: Store>(&self, j: usize, p: [*mut T; N], s: [isize; N], n: usize) {
        let h = &self.h;
        let c = <T::C as Real>::c;
        let t = self.steps[j] as f64;
        let bc1 = 1.0 - h.beta1.powf(t);
        let bc2 = 1.0 - h.beta2.powf(t);
        let neg_step = c(-(h.lr / bc1));
        let bc2_sqrt = c(bc2.sqrt());
        let eps = c(h.eps);
        let w1 = c(1.0 - h.beta1);
        let low = 1.0 - h.beta1 < 0.5;
        let (b2, omb2) = (c(h.beta2), c(1.0 - h.beta2));
        let (wd, decay) = (c(h.weight_decay), c(1.0 - h.lr * h.weight_decay));
        let (has_wd, decoupled, maximize) = (h.weight_decay != 0.0, h.decoupled, h.maximize);
        let f = move |v: &mut [T::C; N]| {
            let mut p = v[0];
            let mut g = if maximize { -v[1] } else { v[1] };
            if has_wd {
                if decoupled {
                    p = p * decay;
                } else {
                    g = g + wd * p;
                }
            }
            let m = lerp(v[2], g, w1, low);
            let sq = v[3] * b2 + omb2 * g * g;
            let d = if N == 5 {
                let mx = v[N - 1].max_nan(sq);
                v[N - 1] = mx;
                mx
            } else {
                sq
            };
            let denom = d.sqrt() / bc2_sqrt + eps;
            v[0] = p + neg_step * m / denom;
            v[2] = m;
            v[3] = sq;
        };
        run_row(p, s, n, &f)
    }
}

struct Rmsprop {
    h: RmspropHyper,
}

impl<const N: usize> Rule<N> for Rmsprop {
    #[inline(always)]
    unsafe fn row<T: Store>(&self, _j: usize, p: [*mut T; N], s: [isize; N], n: usize) {
        let h = &self.h;
        let c = <T::C as Real>::c;
        let (neg_lr, wd, alpha, oma, eps, mom) = (
            c(-h.lr),
            c(h.weight_decay),
            c(h.alpha),
            c(1.0 - h.alpha),
            c(h.eps),
            c(h.momentum),
        );
        let low = 1.0 - h.alpha < 0.5;
        let (has_wd, maximize, centered) = (h.weight_decay != 0.0, h.maximize, h.centered);
        let use_buf = h.momentum > 0.0;
        // Operand slots: 2 square_avg, then the momentum buffer, then grad_avg (last).
        let buf = 3.min(N - 1);
        let f = move |v: &mut [T::C; N]| {
            let mut g = if maximize { -v[1] } else { v[1] };
            if has_wd {
                g = g + wd * v[0];
            }
            let sq = v[2] * alpha + oma * g * g;
            v[2] = sq;
            let avg = if centered {
                let a = lerp(v[N - 1], g, oma, low);
                v[N - 1] = a;
                (sq + (-a) * a).sqrt()
            } else {
                sq.sqrt()
            } + eps;
            if use_buf {
                let b = v[buf] * mom + g / avg;
                v[buf] = b;
                v[0] = v[0] + neg_lr * b;
            } else {
                v[0] = v[0] + neg_lr * g / avg;
            }
        };
        run_row(p, s, n, &f)
    }
}

/// The CPU's optimizer kernels.
pub struct CpuOptim;

impl OptimKernels for CpuOptim {
    fn name(&self) -> String {
        "cpu".into()
    }

    fn sgd(
        &self,
        params: &[Tensor],
        grads: &[Tensor],
        bufs: &[Tensor],
        first: &[bool],
        h: &SgdHyper,
    ) -> Result<()> {
        let rule = Sgd { h: *h, first };
        if bufs.is_empty() {
            drive(&operands([params, grads]), &rule);
        } else {
            drive(&operands([params, grads, bufs]), &rule);
        }
        Ok(())
    }

    fn adam(
        &self,
        params: &[Tensor],
        grads: &[Tensor],
        exp_avgs: &[Tensor],
        exp_avg_sqs: &[Tensor],
        max_sqs: &[Tensor],
        steps: &[u64],
        h: &AdamHyper,
    ) -> Result<()> {
        let rule = Adam { h: *h, steps };
        if h.amsgrad {
            drive(
                &operands([params, grads, exp_avgs, exp_avg_sqs, max_sqs]),
                &rule,
            );
        } else {
            drive(&operands([params, grads, exp_avgs, exp_avg_sqs]), &rule);
        }
        Ok(())
    }

    fn rmsprop(
        &self,
        params: &[Tensor],
        grads: &[Tensor],
        square_avgs: &[Tensor],
        bufs: &[Tensor],
        grad_avgs: &[Tensor],
        h: &RmspropHyper,
    ) -> Result<()> {
        let rule = Rmsprop { h: *h };
        match (h.momentum > 0.0, h.centered) {
            (false, false) => drive(&operands([params, grads, square_avgs]), &rule),
            (true, false) => drive(&operands([params, grads, square_avgs, bufs]), &rule),
            (false, true) => drive(&operands([params, grads, square_avgs, grad_avgs]), &rule),
            (true, true) => drive(
                &operands([params, grads, square_avgs, bufs, grad_avgs]),
                &rule,
            ),
        }
        Ok(())
    }
}
