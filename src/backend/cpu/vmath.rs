//! Vectorization-friendly elementwise math for `f32` (plus a few `f64` helpers).
//!
//! Every `f32` function here is `#[inline(always)]`, free of calls into libm and of
//! data-dependent branches: special cases are handled with value selects that LLVM
//! turns into compares and blends. Inlined into a loop (for example through
//! [`map_f32`]) compiled with `#[target_feature(enable = "avx2,fma")]` or
//! `#[target_feature(enable = "avx512f")]`, the loop body is auto-vectorized.
//!
//! # Fused and unfused flavours
//!
//! The polynomial kernels use fused multiply-add. The top-level functions call
//! [`f32::mul_add`], which becomes a single `vfmadd` instruction in code compiled
//! with FMA enabled, but a slow, unvectorizable library call in code compiled
//! without it. For such code (for example the baseline fallback of a multiversioned
//! kernel) the [`nofma`] module provides the same functions evaluated with separate
//! multiplies and adds; they vectorize for any SIMD level and meet the same accuracy
//! bounds. Both flavours are deterministic: the fused flavour returns bit-identical
//! results whether or not the surrounding loop was vectorized, and so does the
//! unfused one.
//!
//! Accuracy bounds quoted below were measured against `f64` references over dense
//! and random sweeps of the whole `f32` range, for both flavours.
#![allow(
    clippy::excessive_precision,
    clippy::approx_constant,
    clippy::unreadable_literal
)]

use std::f32::consts::{FRAC_1_SQRT_2, LOG2_E};

// ---------------------------------------------------------------------------
// Building blocks
// ---------------------------------------------------------------------------

/// `a * b + c`, fused when `F` is true.
#[inline(always)]
fn fmadd<const F: bool>(a: f32, b: f32, c: f32) -> f32 {
    if F {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// Horner evaluation `c0 + x*(c1 + x*(c2 + ...))`, expanded at compile time.
macro_rules! horner {
    ($f:ident, $x:expr; $c:expr) => { $c };
    ($f:ident, $x:expr; $c:expr, $($rest:expr),+) => {
        fmadd::<$f>(horner!($f, $x; $($rest),+), $x, $c)
    };
}

/// `2^n` for `-126 <= n <= 127`, built from exponent bits.
#[inline(always)]
fn pow2i(n: i32) -> f32 {
    f32::from_bits((n.wrapping_add(127) << 23) as u32)
}

/// 1.5 * 2^23: adding it rounds a float of magnitude < 2^22 to an integer.
const SHIFTER: f32 = 12582912.0;
const SHIFTER_BITS: i32 = 0x4b40_0000;
/// ln 2 split so that `n * LN2_HI` is exact for |n| < 2^9.
const LN2_HI: f32 = 0.693145751953125;
const LN2_LO: f32 = 1.4286068e-6;
/// Bit pattern of sqrt(1/2) (rounded down); splits mantissas into [sqrt(1/2), sqrt(2)).
const SQRT_HALF_BITS: i32 = 0x3f35_04f3;

/// e^r = 1 + r + r^2 * Q(r) on |r| <= ln2/2; minimax for relative error (3e-9).
const EXP_Q: [f32; 5] = [
    0.49999994,
    0.16666521,
    0.04166826,
    0.008368671,
    0.0013821368,
];
/// e^r - 1 = r + r^2/2 + r^3 * Q(r) on |r| <= ln2/2; relative error 1.4e-8.
const EXPM1_Q: [f32; 4] = [0.16666548, 0.04166682, 0.008366102, 0.0013901037];
/// ln(1+f) = f - f^2/2 + f^3 * P(f) on [sqrt(1/2)-1, sqrt(2)-1]; relative error 6e-9.
const LOG_P: [f32; 8] = [
    0.3333333,
    -0.2500082,
    0.20001242,
    -0.16623409,
    0.14201581,
    -0.13159613,
    0.12762201,
    -0.07636403,
];
/// tanh(x) = x + x^3 * P(x^2) on |x| <= 0.625; relative error 4.5e-9.
const TANH_P: [f32; 5] = [
    -0.3333328,
    0.13331406,
    -0.053736515,
    0.020628167,
    -0.0056922967,
];
/// Below this magnitude tanh uses the odd polynomial.
const TANH_SMALL: f32 = 0.625;
/// tanh rounds to +-1 in f32 above ~9.01.
const TANH_SAT: f32 = 9.1;
/// -ln(erfc(a)) = a * Q(a) on [0, 4]; relative error 5e-8 (coefficients rounded to f32).
const ERF_Q: [f32; 11] = [
    1.1283792,
    0.63661647,
    0.102801904,
    -0.019221963,
    -8.04585e-05,
    0.001644691,
    -0.00066391955,
    0.00014795548,
    -1.9784637e-05,
    1.457664e-06,
    -4.4146812e-08,
];
/// erf(a) rounds to 1 in f32 above ~3.92; the fit covers [0, 4].
const ERF_SAT: f32 = 4.0;
/// 1/sqrt(2*pi).
const FRAC_1_SQRT_2PI: f32 = 0.3989422804014327;
/// 2*sqrt(2/pi) and 2*sqrt(2/pi)*0.044715 (tanh-GELU uses 1 + tanh(u) = 2*sigmoid(2u)).
const GT_K1: f32 = 1.5957691216057308;
const GT_K3: f32 = 0.0713548162726009;

// ---------------------------------------------------------------------------
// Generic kernels (F selects fused multiply-add)
// ---------------------------------------------------------------------------

#[inline(always)]
fn exp_g<const F: bool>(x: f32) -> f32 {
    // Clamp (NaN passes through both selects). 89 overflows, -104 underflows to 0.
    let x = if x > 89.0 { 89.0 } else { x };
    let x = if x < -104.0 { -104.0 } else { x };
    let t = fmadd::<F>(x, LOG2_E, SHIFTER);
    let n = t - SHIFTER;
    let ni = (t.to_bits() as i32).wrapping_sub(SHIFTER_BITS);
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = horner!(F, r; 1.0, 1.0, EXP_Q[0], EXP_Q[1], EXP_Q[2], EXP_Q[3], EXP_Q[4]);
    // Scale by 2^n in two exact steps so that 2^-150 .. 2^128 work, with a single
    // rounding into the subnormal range and correct overflow to infinity.
    let n1 = ni >> 1;
    let n2 = ni.wrapping_sub(n1);
    p * pow2i(n1) * pow2i(n2)
}

#[inline(always)]
fn expm1_g<const F: bool>(x: f32) -> f32 {
    // expm1 is -1 in f32 below about -17.3, and overflows above about 88.72.
    let xc = if x > 89.0 { 89.0 } else { x };
    let xc = if xc < -25.0 { -25.0 } else { xc };
    let t = fmadd::<F>(xc, LOG2_E, SHIFTER);
    let n = t - SHIFTER;
    let ni = (t.to_bits() as i32).wrapping_sub(SHIFTER_BITS);
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let q = horner!(F, r; EXPM1_Q[0], EXPM1_Q[1], EXPM1_Q[2], EXPM1_Q[3]);
    let p = fmadd::<F>(r * r, fmadd::<F>(r, q, 0.5), r);
    // 2^n (1 + p) - 1 = s*p + (s - 1); s - 1 is exact for the n where it matters.
    let big = ni > 127;
    let s = pow2i(if big { 127 } else { ni });
    let y = fmadd::<F>(s, p, s - 1.0);
    let y = if big { y * 2.0 } else { y };
    if x == 0.0 {
        x
    } else {
        y
    }
}

/// k*ln2 + ln(1+f) for f in [sqrt(1/2)-1, sqrt(2)-1] (slightly beyond is fine).
#[inline(always)]
fn log_kernel<const F: bool>(f: f32, k: f32) -> f32 {
    let p = horner!(
        F, f; LOG_P[0], LOG_P[1], LOG_P[2], LOG_P[3], LOG_P[4], LOG_P[5], LOG_P[6], LOG_P[7]
    );
    let t = fmadd::<F>(f, p, -0.5);
    let lo = fmadd::<F>(f * f, t, k * LN2_LO);
    fmadd::<F>(k, LN2_HI, f + lo)
}

#[inline(always)]
fn ln_g<const F: bool>(x: f32) -> f32 {
    let sub = x < f32::MIN_POSITIVE;
    let xs = if sub { x * 8388608.0 } else { x };
    let ix = (xs.to_bits() as i32).wrapping_sub(SQRT_HALF_BITS);
    let k = (ix >> 23).wrapping_sub(if sub { 23 } else { 0 });
    let m = f32::from_bits(((ix & 0x007f_ffff) + SQRT_HALF_BITS) as u32);
    let y = log_kernel::<F>(m - 1.0, k as f32);
    let y = if x == f32::INFINITY { x } else { y };
    let y = if x == 0.0 { f32::NEG_INFINITY } else { y };
    if x >= 0.0 {
        y
    } else {
        f32::NAN
    }
}

#[inline(always)]
fn log1p_g<const F: bool>(x: f32) -> f32 {
    let u = 1.0 + x;
    // Exact rounding error of u (Fast2Sum with the larger operand first).
    let c = if x.abs() <= 1.0 {
        x - (u - 1.0)
    } else {
        1.0 - (u - x)
    };
    let ix = (u.to_bits() as i32).wrapping_sub(SQRT_HALF_BITS);
    let k = ix >> 23;
    let m = f32::from_bits(((ix & 0x007f_ffff) + SQRT_HALF_BITS) as u32);
    // 1 + x = 2^k (m + c 2^-k): fold the rounding error into f.
    let kc = if k > 126 { 126 } else { k };
    let scale = f32::from_bits((127i32.wrapping_sub(kc) << 23) as u32);
    let f = fmadd::<F>(c, scale, m - 1.0);
    let y = log_kernel::<F>(f, k as f32);
    let y = if x == f32::INFINITY { x } else { y };
    let y = if x == -1.0 { f32::NEG_INFINITY } else { y };
    let y = if x == 0.0 { x } else { y };
    if x >= -1.0 {
        y
    } else {
        f32::NAN
    }
}

#[inline(always)]
fn tanh_g<const F: bool>(x: f32) -> f32 {
    let a = x.abs();
    let a2 = a * a;
    let small = fmadd::<F>(
        a2 * a,
        horner!(F, a2; TANH_P[0], TANH_P[1], TANH_P[2], TANH_P[3], TANH_P[4]),
        a,
    );
    let ac = if a > TANH_SAT { TANH_SAT } else { a };
    let e = exp_g::<F>(2.0 * ac);
    let large = 1.0 - 2.0 / (e + 1.0);
    let y = if a < TANH_SMALL { small } else { large };
    y.copysign(x)
}

/// Returns (e, s) with e = exp(-|z|), s = 1/(1+e); sigmoid(z) = s or e*s.
#[inline(always)]
fn sigmoid_parts<const F: bool>(z: f32) -> (f32, f32) {
    let e = exp_g::<F>(-z.abs());
    (e, 1.0 / (1.0 + e))
}

#[inline(always)]
fn sigmoid_g<const F: bool>(x: f32) -> f32 {
    let (e, s) = sigmoid_parts::<F>(x);
    // NaN takes the second arm and propagates through e.
    if x >= 0.0 {
        s
    } else {
        e * s
    }
}

#[inline(always)]
fn silu_g<const F: bool>(x: f32) -> f32 {
    // Below -128 the sigmoid is exactly 0; the clamp makes silu(-inf) = -0.
    let xl = if x < -128.0 { -128.0 } else { x };
    xl * sigmoid_g::<F>(x)
}

#[inline(always)]
fn softplus_g<const F: bool>(x: f32, beta: f32, threshold: f32) -> f32 {
    let bx = x * beta;
    let y = log1p_g::<F>(exp_g::<F>(bx)) / beta;
    if bx > threshold {
        x
    } else {
        y
    }
}

/// -ln(erfc(a)) for 0 <= a <= ERF_SAT.
#[inline(always)]
fn erfc_exponent<const F: bool>(a: f32) -> f32 {
    let q = horner!(
        F, a; ERF_Q[0], ERF_Q[1], ERF_Q[2], ERF_Q[3], ERF_Q[4], ERF_Q[5], ERF_Q[6], ERF_Q[7],
        ERF_Q[8], ERF_Q[9], ERF_Q[10]
    );
    a * q
}

#[inline(always)]
fn erf_g<const F: bool>(x: f32) -> f32 {
    let a = x.abs();
    let a = if a > ERF_SAT { ERF_SAT } else { a };
    let y = -expm1_g::<F>(-erfc_exponent::<F>(a));
    y.copysign(x)
}

/// 2*Phi(x) = 1 + erf(x/sqrt2), computed through erfc so it stays accurate for x < 0.
#[inline(always)]
fn two_phi<const F: bool>(x: f32) -> f32 {
    let a = (x * FRAC_1_SQRT_2).abs();
    let ac = if a > ERF_SAT { ERF_SAT } else { a };
    let e = exp_g::<F>(-erfc_exponent::<F>(ac));
    let e = if a > ERF_SAT { 0.0 } else { e };
    if x >= 0.0 {
        2.0 - e
    } else {
        e
    }
}

#[inline(always)]
fn gelu_g<const F: bool>(x: f32) -> f32 {
    // For x < -6, 2*Phi(x) is 0; the clamp makes gelu(-inf) = -0 instead of NaN.
    let xl = if x < -6.0 { -6.0 } else { x };
    (0.5 * xl) * two_phi::<F>(x)
}

#[inline(always)]
fn gelu_grad_g<const F: bool>(x: f32) -> f32 {
    // d/dx x*Phi(x) = Phi(x) + x*phi(x); phi(15) underflows to 0.
    let xc = if x > 15.0 { 15.0 } else { x };
    let xc = if xc < -15.0 { -15.0 } else { xc };
    let phi = exp_g::<F>(-0.5 * xc * xc) * FRAC_1_SQRT_2PI;
    fmadd::<F>(xc, phi, 0.5 * two_phi::<F>(x))
}

#[inline(always)]
fn gelu_tanh_g<const F: bool>(x: f32) -> f32 {
    // 0.5 x (1 + tanh(u)) = x * sigmoid(2u): no cancellation for x < 0.
    let xc = if x > 12.0 { 12.0 } else { x };
    let xc = if xc < -12.0 { -12.0 } else { xc };
    let z = xc * fmadd::<F>(GT_K3, xc * xc, GT_K1);
    let (e, s) = sigmoid_parts::<F>(z);
    let sig = if z >= 0.0 { s } else { e * s };
    // Beyond +-12 the sigmoid is exactly 1 or 0.
    let xl = if x < -12.0 { -12.0 } else { x };
    xl * sig
}

#[inline(always)]
fn gelu_tanh_grad_g<const F: bool>(x: f32) -> f32 {
    let xc = if x > 12.0 { 12.0 } else { x };
    let xc = if xc < -12.0 { -12.0 } else { xc };
    let x2 = xc * xc;
    let z = xc * fmadd::<F>(GT_K3, x2, GT_K1);
    let dz = fmadd::<F>(3.0 * GT_K3, x2, GT_K1);
    let (e, s) = sigmoid_parts::<F>(z);
    let sig = if z >= 0.0 { s } else { e * s };
    // sigmoid(z) * (1 - sigmoid(z)) = e * s^2 for either sign of z.
    fmadd::<F>(xc * dz, e * s * s, sig)
}

// ---------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------

macro_rules! unary_api {
    ($($(#[doc = $doc:literal])* $name:ident => $imp:ident;)*) => {
        $(
            $(#[doc = $doc])*
            ///
            /// Uses fused multiply-add; see [`nofma`] for code compiled without FMA.
            #[inline(always)]
            pub fn $name(x: f32) -> f32 {
                $imp::<true>(x)
            }
        )*

        /// The same functions evaluated with separate multiplies and adds.
        ///
        /// Use these in code compiled without the `fma` target feature (for example
        /// the SSE2 baseline of a multiversioned kernel), where [`f32::mul_add`] would
        /// be a library call. Accuracy bounds are those of the fused versions.
        pub mod nofma {
            use super::*;
            $(
                $(#[doc = $doc])*
                ///
                /// Unfused variant.
                #[inline(always)]
                pub fn $name(x: f32) -> f32 {
                    $imp::<false>(x)
                }
            )*

            /// PyTorch-style softplus; see [`super::softplus_f32`]. Unfused variant.
            #[inline(always)]
            pub fn softplus_f32(x: f32, beta: f32, threshold: f32) -> f32 {
                softplus_g::<false>(x, beta, threshold)
            }
        }
    };
}

unary_api! {
    /// e^x. Max error 1.2 ulp over the whole range, including gradual underflow
    /// (error counted in subnormal ulps); 0 below -103.98, +inf above 88.7228,
    /// NaN propagates.
    exp_f32 => exp_g;
    /// e^x - 1, accurate near 0. Max error 1.6 ulp over the whole range; -1 below
    /// -17.4, +inf above 88.7228, preserves -0, NaN propagates.
    expm1_f32 => expm1_g;
    /// Natural logarithm. Max error 0.9 ulp, including subnormal inputs.
    /// ln(+-0) = -inf, ln(x < 0) = NaN, ln(+inf) = +inf, NaN propagates.
    ln_f32 => ln_g;
    /// ln(1 + x), accurate near 0. Max error 1.5 ulp. log1p(-1) = -inf,
    /// log1p(x < -1) = NaN, preserves -0, NaN propagates.
    log1p_f32 => log1p_g;
    /// Hyperbolic tangent. Max error 1.3 ulp (relative error < 1.6e-7). Odd
    /// polynomial for |x| < 0.625, 1 - 2/(e^(2|x|) + 1) above; exactly +-1 for
    /// |x| > 9.1; odd (preserves -0); NaN propagates.
    tanh_f32 => tanh_g;
    /// Logistic sigmoid 1/(1 + e^-x). Max error 2.5 ulp; never NaN for non-NaN
    /// input (sigmoid(-inf) = 0, sigmoid(+inf) = 1), gradual underflow for x < -87.
    sigmoid_f32 => sigmoid_g;
    /// Error function. Max absolute error 9e-8, max relative error 3 ulp; odd,
    /// exactly +-1 for |x| >= 4, NaN propagates.
    erf_f32 => erf_g;
    /// SiLU / swish x * sigmoid(x). Max error 3.4 ulp for x > -87 (absolute error
    /// < 2e-43 below); silu(-inf) = -0.
    silu_f32 => silu_g;
    /// Exact GELU 0.5 x (1 + erf(x / sqrt 2)), evaluated through erfc so negative
    /// inputs keep relative accuracy. Absolute error <= 1.3e-7 * max(1, |x|);
    /// error <= 3.4 ulp for x >= -1, relative error < 1e-5 for x >= -5.6; -0 below
    /// -5.66 (true magnitude < 4e-8).
    gelu_f32 => gelu_g;
    /// Tanh-approximated GELU 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
    /// evaluated as x * sigmoid(2u) to avoid cancellation for x < 0. Absolute error
    /// <= 1.6e-7 * max(1, |x|); error <= 3 ulp for x >= -1, <= 15 ulp for x >= -3,
    /// relative error < 2.5e-5 down to the underflow point (about -10.5);
    /// gelu_tanh(-inf) = -0.
    gelu_tanh_f32 => gelu_tanh_g;
    /// Derivative of exact GELU, Phi(x) + x phi(x). Max absolute error 1.5e-7.
    gelu_grad_f32 => gelu_grad_g;
    /// Derivative of tanh-approximated GELU. Max absolute error 2.1e-7 (the
    /// function peaks at 1.13).
    gelu_tanh_grad_f32 => gelu_tanh_grad_g;
}

/// PyTorch-style softplus: `x` if `x * beta > threshold`, else
/// `log1p(exp(beta * x)) / beta`. Error is that of exp and log1p (about 2 ulp).
///
/// Uses fused multiply-add; see [`nofma`] for code compiled without FMA.
#[inline(always)]
pub fn softplus_f32(x: f32, beta: f32, threshold: f32) -> f32 {
    softplus_g::<true>(x, beta, threshold)
}

/// Applies `f` elementwise: `dst[i] = f(src[i])` over the common length.
///
/// Inlined into a function compiled with SIMD target features, the loop is
/// auto-vectorized when `f` is one of the functions of this module.
#[inline(always)]
pub fn map_f32(src: &[f32], dst: &mut [f32], f: impl Fn(f32) -> f32) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = f(*s);
    }
}

/// `dst[i] = tanh_f32(src[i])`, vectorized for AVX2 + FMA.
///
/// # Safety
///
/// The CPU must support AVX2 and FMA (check with `is_x86_feature_detected!`).
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "avx2,fma")]
pub unsafe fn tanh_slice_avx2(src: &[f32], dst: &mut [f32]) {
    map_f32(src, dst, tanh_f32)
}

/// `dst[i] = tanh_f32(src[i])`, vectorized for AVX-512F.
///
/// # Safety
///
/// The CPU must support AVX-512F (check with `is_x86_feature_detected!`).
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
#[target_feature(enable = "avx512f")]
pub unsafe fn tanh_slice_avx512(src: &[f32], dst: &mut [f32]) {
    map_f32(src, dst, tanh_f32)
}

// ---------------------------------------------------------------------------
// f64 helpers (scalar, for references and double-precision paths)
// ---------------------------------------------------------------------------

/// erf(a) for 0 <= a < 2 via erf(a) = 2/sqrt(pi) e^(-a^2) sum_n a (2a^2)^n / (2n+1)!!
/// (all terms positive, so no cancellation).
fn erf_series(a: f64) -> f64 {
    let a2 = a * a;
    let t2 = 2.0 * a2;
    let mut term = a;
    let mut sum = a;
    let mut k = 1.0;
    for _ in 0..100 {
        k += 2.0;
        term *= t2 / k;
        sum += term;
        if term <= sum * 1e-17 {
            break;
        }
    }
    // e^-(a2 + err) with err the rounding error of a*a.
    let err = a.mul_add(a, -a2);
    std::f64::consts::FRAC_2_SQRT_PI * (-a2).exp() * (1.0 - err) * sum
}

/// erfc(a) for 1.5 <= a <= 27 via the continued fraction
/// erfc(a) = e^(-a^2)/sqrt(pi) / (a + (1/2)/(a + 1/(a + (3/2)/(a + ...)))).
fn erfc_cf(a: f64) -> f64 {
    let terms = if a < 2.0 {
        160
    } else if a < 3.0 {
        80
    } else {
        40
    };
    let mut t = a;
    for k in (1..=terms).rev() {
        t = a + (k as f64 * 0.5) / t;
    }
    let a2 = a * a;
    let err = a.mul_add(a, -a2);
    const SQRT_PI: f64 = 1.7724538509055160273;
    (-a2).exp() * (1.0 - err) / (SQRT_PI * t)
}

/// Error function in f64. Relative error below 1e-15 for |x| < 2 and absolute
/// error below 1e-16 beyond; odd (preserves -0), +-1 for |x| > 6.
pub fn erf_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let y = if a < 2.0 {
        erf_series(a)
    } else if a < 6.0 {
        1.0 - erfc_cf(a)
    } else {
        1.0
    };
    y.copysign(x)
}

/// Complementary error function in f64. Relative error below 1e-15 for x >= 1.5
/// and below 3e-14 for x < 1.5; 0 above 27 (underflow).
pub fn erfc_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    let c = if a < 1.5 {
        1.0 - erf_series(a)
    } else if a <= 27.0 {
        erfc_cf(a)
    } else {
        0.0
    };
    if x < 0.0 {
        2.0 - c
    } else {
        c
    }
}

/// Exact GELU in f64, 0.5 x erfc(-x / sqrt 2). Relative error below 3e-14 for
/// x >= -38; -0 below, where the result underflows.
pub fn gelu_f64(x: f64) -> f64 {
    if x < -38.0 {
        return -0.0;
    }
    0.5 * x * erfc_f64(-x * std::f64::consts::FRAC_1_SQRT_2)
}

/// Derivative of exact GELU in f64, Phi(x) + x phi(x). Absolute error below 1e-15.
pub fn gelu_grad_f64(x: f64) -> f64 {
    let xc = x.clamp(-40.0, 40.0);
    let xc = if x.is_nan() { x } else { xc };
    let phi = (-0.5 * xc * xc).exp()
        * (0.5 * std::f64::consts::FRAC_2_SQRT_PI)
        * std::f64::consts::FRAC_1_SQRT_2;
    0.5 * erfc_f64(-x * std::f64::consts::FRAC_1_SQRT_2) + xc * phi
}

/// sigmoid(z) and sigmoid(z) * (1 - sigmoid(z)) in f64, without cancellation.
fn sigmoid_and_slope_f64(z: f64) -> (f64, f64) {
    let e = (-z.abs()).exp();
    let s = 1.0 / (1.0 + e);
    let sig = if z >= 0.0 { s } else { e * s };
    (sig, e * s * s)
}

const GT_K1_F64: f64 = 1.5957691216057307117; // 2 sqrt(2/pi)
const GT_C: f64 = 0.044715;

/// Tanh-approximated GELU in f64, computed as x * sigmoid(2u) (equal to
/// 0.5 x (1 + tanh(u)), u = sqrt(2/pi)(x + 0.044715 x^3), without cancellation).
pub fn gelu_tanh_f64(x: f64) -> f64 {
    if x < -1e3 {
        return -0.0;
    }
    let xc = x.min(1e3);
    let z = GT_K1_F64 * xc * (1.0 + GT_C * xc * xc);
    x * sigmoid_and_slope_f64(z).0
}

/// Derivative of tanh-approximated GELU in f64.
pub fn gelu_tanh_grad_f64(x: f64) -> f64 {
    let xc = x.clamp(-1e3, 1e3);
    let xc = if x.is_nan() { x } else { xc };
    let z = GT_K1_F64 * xc * (1.0 + GT_C * xc * xc);
    let dz = GT_K1_F64 * (1.0 + 3.0 * GT_C * xc * xc);
    let (sig, slope) = sigmoid_and_slope_f64(z);
    sig + xc * dz * slope
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    /// Error of `y` in units of the f32 ulp at the reference `r`.
    fn ulp_err(y: f32, r: f64) -> f64 {
        if r.is_nan() || y.is_nan() {
            return if r.is_nan() && y.is_nan() {
                0.0
            } else {
                f64::INFINITY
            };
        }
        if (r as f32).is_infinite() {
            // The reference rounds to an infinity in f32.
            return if y == r as f32 { 0.0 } else { f64::INFINITY };
        }
        // An infinite result for a finite reference counts as 2^128.
        let yd = if y.is_infinite() {
            2f64.powi(128).copysign(y as f64)
        } else {
            y as f64
        };
        if yd == r {
            return 0.0;
        }
        let e = (((r.abs().to_bits() >> 52) as i32) - 1023).clamp(-126, 127);
        (yd - r).abs() / 2f64.powi(e - 23)
    }

    fn abs_err(y: f32, r: f64) -> f64 {
        if r.is_nan() || y.is_nan() {
            return if r.is_nan() && y.is_nan() {
                0.0
            } else {
                f64::INFINITY
            };
        }
        if y as f64 == r {
            return 0.0;
        }
        (y as f64 - r).abs()
    }

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            // xorshift64*
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn bits_f32(&mut self) -> f32 {
            f32::from_bits((self.next() >> 32) as u32)
        }
        fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
            let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
            (lo as f64 + (hi as f64 - lo as f64) * u) as f32
        }
    }

    const SPECIALS: &[f32] = &[
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        1e-45,
        -1e-45,
        1e-40,
        -1e-40,
        f32::MAX,
        f32::MIN,
        f32::EPSILON,
        1.0,
        -1.0,
        0.5,
        -0.5,
        2.0,
        88.72,
        88.7228,
        88.72284,
        89.0,
        -87.33,
        -87.34,
        -103.9,
        -103.98,
        -104.0,
        0.625,
        -0.625,
        0.62499994,
        9.1,
        -9.1,
        9.01,
        4.0,
        -4.0,
        3.92,
        -0.99999994,
        -1.0000001,
    ];

    /// Grid over [lo, hi], uniform randoms in [lo, hi], random bit patterns
    /// (every magnitude, sign, subnormals, inf, NaN) and special values.
    fn inputs(lo: f32, hi: f32, seed: u64) -> Vec<f32> {
        let n = 1 << 20;
        let mut v = Vec::with_capacity(3 * n + SPECIALS.len());
        for i in 0..n {
            v.push((lo as f64 + (hi as f64 - lo as f64) * i as f64 / (n - 1) as f64) as f32);
        }
        let mut rng = Rng(seed | 1);
        for _ in 0..n {
            v.push(rng.uniform(lo, hi));
        }
        for _ in 0..n {
            v.push(rng.bits_f32());
        }
        v.extend_from_slice(SPECIALS);
        v
    }

    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn map_avx2(src: &[f32], dst: &mut [f32], f: impl Fn(f32) -> f32) {
        map_f32(src, dst, f)
    }

    fn have_avx2() -> bool {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        {
            is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
        }
        #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
        {
            false
        }
    }

    /// Evaluates `f` on `xs` scalar (one call per element, not vectorized) and,
    /// when available, through an AVX2+FMA vectorized loop; checks that both
    /// agree bit for bit and returns the scalar results.
    fn eval(xs: &[f32], f: impl Fn(f32) -> f32 + Copy) -> Vec<f32> {
        let scalar: Vec<f32> = xs.iter().map(|&x| std::hint::black_box(f)(x)).collect();
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        if have_avx2() {
            let mut v = vec![0.0; xs.len()];
            unsafe { map_avx2(xs, &mut v, f) };
            for (i, (a, b)) in scalar.iter().zip(&v).enumerate() {
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "vectorized result differs at x={:e}: {:e} vs {:e}",
                    xs[i],
                    a,
                    b
                );
            }
        }
        scalar
    }

    #[derive(Clone, Copy)]
    enum Metric {
        Ulp,
        Abs,
    }

    /// Max error over the inputs satisfying `in_domain`, and where it occurs.
    fn max_err(
        xs: &[f32],
        ys: &[f32],
        reference: impl Fn(f64) -> f64,
        metric: Metric,
        in_domain: impl Fn(f32) -> bool,
    ) -> (f64, f32) {
        let mut worst = (0.0f64, 0.0f32);
        for (&x, &y) in xs.iter().zip(ys) {
            if !in_domain(x) {
                continue;
            }
            let r = reference(x as f64);
            let e = match metric {
                Metric::Ulp => ulp_err(y, r),
                Metric::Abs => abs_err(y, r),
            };
            // NaN errors cannot occur (mismatches are reported as infinity).
            if e > worst.0 {
                worst = (e, x);
            }
        }
        worst
    }

    /// Checks both flavours of a function against `reference` and returns the
    /// larger of the two max errors.
    #[allow(clippy::too_many_arguments)]
    fn check(
        name: &str,
        fused: impl Fn(f32) -> f32 + Copy,
        unfused: impl Fn(f32) -> f32 + Copy,
        xs: &[f32],
        reference: impl Fn(f64) -> f64 + Copy,
        metric: Metric,
        in_domain: impl Fn(f32) -> bool + Copy,
        bound: f64,
    ) -> f64 {
        let mut worst = 0.0f64;
        for (flavour, ys) in [("fma", eval(xs, fused)), ("nofma", eval(xs, unfused))] {
            let (e, at) = max_err(xs, &ys, reference, metric, in_domain);
            let unit = match metric {
                Metric::Ulp => "ulp",
                Metric::Abs => "abs",
            };
            println!("{name:>22} [{flavour:>5}] max err {e:.3e} {unit} at x = {at:e}");
            assert!(
                e <= bound,
                "{name} [{flavour}]: error {e:e} {unit} at x = {at:e} exceeds {bound:e}"
            );
            worst = worst.max(e);
        }
        worst
    }

    /// Max absolute error divided by max(1, |x|), for both flavours.
    fn check_scaled_abs(
        name: &str,
        fused: impl Fn(f32) -> f32 + Copy,
        unfused: impl Fn(f32) -> f32 + Copy,
        xs: &[f32],
        reference: impl Fn(f64) -> f64 + Copy,
        bound: f64,
    ) {
        let scaled_ref = |x: f64| reference(x) / x.abs().max(1.0);
        for (flavour, ys) in [("fma", eval(xs, fused)), ("nofma", eval(xs, unfused))] {
            let ys: Vec<f32> = xs
                .iter()
                .zip(&ys)
                .map(|(&x, &y)| y / x.abs().max(1.0))
                .collect();
            let (e, at) = max_err(xs, &ys, scaled_ref, Metric::Abs, |x| x.is_finite());
            println!("{name:>22} [{flavour:>5}] max abs err / max(1,|x|) {e:.3e} at x = {at:e}");
            assert!(e <= bound, "{name} [{flavour}]: {e:e} at x = {at:e}");
        }
    }

    fn all(_: f32) -> bool {
        true
    }

    #[test]
    fn exp() {
        let xs = inputs(-110.0, 90.0, 1);
        let r = |x: f64| x.exp();
        check(
            "exp",
            exp_f32,
            nofma::exp_f32,
            &xs,
            r,
            Metric::Ulp,
            |x| (-87.0..=88.0).contains(&x),
            2.0,
        );
        // Including overflow and the subnormal range (error counted in subnormal ulps).
        check(
            "exp (all)",
            exp_f32,
            nofma::exp_f32,
            &xs,
            r,
            Metric::Ulp,
            all,
            2.0,
        );
        for f in [exp_f32 as fn(f32) -> f32, nofma::exp_f32] {
            assert_eq!(f(f32::INFINITY), f32::INFINITY);
            assert_eq!(f(88.73), f32::INFINITY);
            assert_eq!(f(f32::NEG_INFINITY), 0.0);
            assert_eq!(f(-104.0), 0.0);
            assert!(f(-100.0) > 0.0);
            assert!(f(f32::NAN).is_nan());
            assert_eq!(f(0.0), 1.0);
            assert_eq!(f(-0.0), 1.0);
        }
    }

    #[test]
    fn expm1() {
        let xs = inputs(-20.0, 90.0, 2);
        let r = |x: f64| x.exp_m1();
        check(
            "expm1 |x|<0.5",
            expm1_f32,
            nofma::expm1_f32,
            &xs,
            r,
            Metric::Ulp,
            |x| x.abs() < 0.5,
            4.0,
        );
        check(
            "expm1 (all)",
            expm1_f32,
            nofma::expm1_f32,
            &xs,
            r,
            Metric::Ulp,
            all,
            4.0,
        );
        for f in [expm1_f32 as fn(f32) -> f32, nofma::expm1_f32] {
            assert_eq!(f(f32::INFINITY), f32::INFINITY);
            assert_eq!(f(f32::NEG_INFINITY), -1.0);
            assert!(f(f32::NAN).is_nan());
            assert_eq!(f(-0.0).to_bits(), (-0.0f32).to_bits());
            assert_eq!(f(1e-30), 1e-30);
        }
    }

    #[test]
    fn ln() {
        let mut xs = inputs(0.0, 10.0, 3);
        let mut rng = Rng(33);
        // Log-uniform positive values, including subnormals.
        for _ in 0..(1 << 20) {
            xs.push(f32::from_bits((rng.next() >> 33) as u32 % 0x7f80_0000));
        }
        let r = |x: f64| x.ln();
        check("ln", ln_f32, nofma::ln_f32, &xs, r, Metric::Ulp, all, 2.0);
        for f in [ln_f32 as fn(f32) -> f32, nofma::ln_f32] {
            assert_eq!(f(0.0), f32::NEG_INFINITY);
            assert_eq!(f(-0.0), f32::NEG_INFINITY);
            assert_eq!(f(f32::INFINITY), f32::INFINITY);
            assert!(f(-1.0).is_nan());
            assert!(f(f32::NEG_INFINITY).is_nan());
            assert!(f(f32::NAN).is_nan());
            assert_eq!(f(1.0), 0.0);
        }
    }

    #[test]
    fn log1p() {
        let xs = inputs(-1.0, 10.0, 4);
        let r = |x: f64| x.ln_1p();
        check(
            "log1p |x|<0.5",
            log1p_f32,
            nofma::log1p_f32,
            &xs,
            r,
            Metric::Ulp,
            |x| x.abs() < 0.5,
            4.0,
        );
        check(
            "log1p (all)",
            log1p_f32,
            nofma::log1p_f32,
            &xs,
            r,
            Metric::Ulp,
            all,
            4.0,
        );
        for f in [log1p_f32 as fn(f32) -> f32, nofma::log1p_f32] {
            assert_eq!(f(-1.0), f32::NEG_INFINITY);
            assert!(f(-1.0000001).is_nan());
            assert!(f(f32::NEG_INFINITY).is_nan());
            assert_eq!(f(f32::INFINITY), f32::INFINITY);
            assert!(f(f32::NAN).is_nan());
            assert_eq!(f(-0.0).to_bits(), (-0.0f32).to_bits());
            assert_eq!(f(1e-40), 1e-40);
        }
    }

    #[test]
    fn tanh() {
        let xs = inputs(-12.0, 12.0, 5);
        let r = |x: f64| x.tanh();
        check(
            "tanh",
            tanh_f32,
            nofma::tanh_f32,
            &xs,
            r,
            Metric::Ulp,
            all,
            3.0,
        );
        // Hard requirement: relative error <= 1e-6 everywhere.
        let rel = |x: f64| x.tanh();
        for f in [tanh_f32 as fn(f32) -> f32, nofma::tanh_f32] {
            for &x in &xs {
                let y = f(x);
                let t = rel(x as f64);
                if x.is_nan() {
                    assert!(y.is_nan());
                    continue;
                }
                let e = if t == 0.0 {
                    (y as f64).abs()
                } else {
                    ((y as f64 - t) / t).abs()
                };
                assert!(e <= 1e-6, "tanh({x:e}) = {y:e}, rel err {e:e}");
            }
            assert_eq!(f(9.2), 1.0);
            assert_eq!(f(-1e30), -1.0);
            assert_eq!(f(f32::INFINITY), 1.0);
            assert_eq!(f(f32::NEG_INFINITY), -1.0);
            assert!(f(f32::NAN).is_nan());
            assert_eq!(f(-0.0).to_bits(), (-0.0f32).to_bits());
        }
    }

    #[test]
    fn sigmoid_and_silu() {
        let xs = inputs(-110.0, 30.0, 6);
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        check(
            "sigmoid",
            sigmoid_f32,
            nofma::sigmoid_f32,
            &xs,
            sig,
            Metric::Ulp,
            all,
            3.0,
        );
        let silu = |x: f64| x / (1.0 + (-x).exp());
        // Normal results only: below -87 the sigmoid is subnormal and x * sigmoid
        // amplifies its (absolute, tiny) rounding error in ulp terms.
        check(
            "silu",
            silu_f32,
            nofma::silu_f32,
            &xs,
            silu,
            Metric::Ulp,
            |x| x > -87.0,
            4.0,
        );
        check(
            "silu (abs)",
            silu_f32,
            nofma::silu_f32,
            &xs,
            silu,
            Metric::Abs,
            |x| x <= -87.0 && x.is_finite(),
            1e-40,
        );
        for f in [sigmoid_f32 as fn(f32) -> f32, nofma::sigmoid_f32] {
            assert_eq!(f(100.0), 1.0);
            assert!(f(-100.0) >= 0.0 && f(-100.0) < 1e-43);
            assert_eq!(f(f32::INFINITY), 1.0);
            assert_eq!(f(f32::NEG_INFINITY), 0.0);
            assert!(f(f32::NAN).is_nan());
            assert_eq!(f(0.0), 0.5);
        }
        for f in [silu_f32 as fn(f32) -> f32, nofma::silu_f32] {
            assert_eq!(f(f32::INFINITY), f32::INFINITY);
            assert_eq!(f(f32::NEG_INFINITY), 0.0);
            assert!(f(f32::NAN).is_nan());
        }
    }

    #[test]
    fn softplus() {
        let xs = inputs(-120.0, 40.0, 7);
        for (beta, threshold) in [(1.0f32, 20.0f32), (2.0, 20.0), (0.5, 10.0)] {
            let r = move |x: f64| {
                if x * beta as f64 > threshold as f64 {
                    x
                } else {
                    (x * beta as f64).exp().ln_1p() / beta as f64
                }
            };
            let fused = move |x: f32| softplus_f32(x, beta, threshold);
            let unfused = move |x: f32| nofma::softplus_f32(x, beta, threshold);
            for (name, ys) in [("fma", eval(&xs, fused)), ("nofma", eval(&xs, unfused))] {
                // Skip inputs whose f32 and f64 products land on different sides
                // of the threshold.
                let (e, at) = max_err(&xs, &ys, r, Metric::Ulp, |x| {
                    ((x * beta) > threshold) == ((x as f64 * beta as f64) > threshold as f64)
                });
                println!("softplus beta={beta} thr={threshold} [{name:>5}] max err {e:.3e} ulp at x = {at:e}");
                assert!(e <= 4.0, "softplus error {e} at {at}");
            }
        }
        assert_eq!(softplus_f32(f32::INFINITY, 1.0, 20.0), f32::INFINITY);
        assert_eq!(softplus_f32(f32::NEG_INFINITY, 1.0, 20.0), 0.0);
        assert_eq!(softplus_f32(30.0, 1.0, 20.0), 30.0);
        assert!(softplus_f32(f32::NAN, 1.0, 20.0).is_nan());
    }

    #[test]
    fn erf() {
        let xs = inputs(-6.0, 6.0, 8);
        check(
            "erf (abs)",
            erf_f32,
            nofma::erf_f32,
            &xs,
            erf_f64,
            Metric::Abs,
            all,
            2e-7,
        );
        check(
            "erf (ulp)",
            erf_f32,
            nofma::erf_f32,
            &xs,
            erf_f64,
            Metric::Ulp,
            all,
            4.0,
        );
        for f in [erf_f32 as fn(f32) -> f32, nofma::erf_f32] {
            assert_eq!(f(f32::INFINITY), 1.0);
            assert_eq!(f(f32::NEG_INFINITY), -1.0);
            assert_eq!(f(4.5), 1.0);
            assert_eq!(f(-10.0), -1.0);
            assert!(f(f32::NAN).is_nan());
            assert_eq!(f(-0.0).to_bits(), (-0.0f32).to_bits());
            for &x in &xs[..1 << 20] {
                assert_eq!(f(-x).to_bits(), (-f(x)).to_bits(), "erf not odd at {x}");
            }
        }
    }

    #[test]
    fn gelu() {
        let xs = inputs(-10.0, 10.0, 9);
        let r = gelu_f64;
        check_scaled_abs("gelu", gelu_f32, nofma::gelu_f32, &xs, r, 2e-7);
        check(
            "gelu x>=-1",
            gelu_f32,
            nofma::gelu_f32,
            &xs,
            r,
            Metric::Ulp,
            |x| x >= -1.0,
            4.0,
        );
        check(
            "gelu x>=-5.6",
            gelu_f32,
            nofma::gelu_f32,
            &xs,
            r,
            Metric::Ulp,
            |x| x >= -5.6,
            128.0,
        );
        for f in [gelu_f32 as fn(f32) -> f32, nofma::gelu_f32] {
            assert_eq!(f(f32::INFINITY), f32::INFINITY);
            assert_eq!(f(f32::NEG_INFINITY), 0.0);
            assert!(f(f32::NAN).is_nan());
            assert_eq!(f(0.0), 0.0);
            assert_eq!(f(20.0), 20.0);
        }
    }

    #[test]
    fn gelu_tanh() {
        let xs = inputs(-12.0, 12.0, 10);
        let r = gelu_tanh_f64;
        check(
            "gelu_tanh x>=-1",
            gelu_tanh_f32,
            nofma::gelu_tanh_f32,
            &xs,
            r,
            Metric::Ulp,
            |x| x >= -1.0,
            4.0,
        );
        check(
            "gelu_tanh x>=-3",
            gelu_tanh_f32,
            nofma::gelu_tanh_f32,
            &xs,
            r,
            Metric::Ulp,
            |x| x >= -3.0,
            16.0,
        );
        check(
            "gelu_tanh x>=-10.5",
            gelu_tanh_f32,
            nofma::gelu_tanh_f32,
            &xs,
            r,
            Metric::Ulp,
            |x| x >= -10.5,
            256.0,
        );
        check_scaled_abs(
            "gelu_tanh",
            gelu_tanh_f32,
            nofma::gelu_tanh_f32,
            &xs,
            r,
            2e-7,
        );
        // The f64 reference itself against the textbook formula where that is accurate.
        for i in 0..=4000 {
            let x = -2.0 + i as f64 * 1e-3 * 3.0;
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            let direct = 0.5 * x * (1.0 + u.tanh());
            assert!((gelu_tanh_f64(x) - direct).abs() <= 1e-15 * x.abs().max(1.0));
        }
        for f in [gelu_tanh_f32 as fn(f32) -> f32, nofma::gelu_tanh_f32] {
            assert_eq!(f(f32::INFINITY), f32::INFINITY);
            assert_eq!(f(f32::NEG_INFINITY), 0.0);
            assert!(f(f32::NAN).is_nan());
            assert_eq!(f(0.0), 0.0);
            assert_eq!(f(20.0), 20.0);
        }
    }

    #[test]
    fn gelu_grads() {
        let xs = inputs(-16.0, 16.0, 11);
        let fin = |x: f32| x.is_finite();
        check(
            "gelu_grad",
            gelu_grad_f32,
            nofma::gelu_grad_f32,
            &xs,
            gelu_grad_f64,
            Metric::Abs,
            fin,
            2e-7,
        );
        check(
            "gelu_tanh_grad",
            gelu_tanh_grad_f32,
            nofma::gelu_tanh_grad_f32,
            &xs,
            gelu_tanh_grad_f64,
            Metric::Abs,
            fin,
            3e-7,
        );
        for f in [
            gelu_grad_f32 as fn(f32) -> f32,
            gelu_tanh_grad_f32,
            nofma::gelu_grad_f32,
            nofma::gelu_tanh_grad_f32,
        ] {
            assert_eq!(f(f32::INFINITY), 1.0);
            assert_eq!(f(f32::NEG_INFINITY), 0.0);
            assert!(f(f32::NAN).is_nan());
            assert_eq!(f(0.0), 0.5);
        }
        // The f64 derivatives against central differences of the f64 functions.
        for i in 0..=2000 {
            let x = -8.0 + i as f64 * 8e-3;
            let h = 1e-5;
            let d = (gelu_f64(x + h) - gelu_f64(x - h)) / (2.0 * h);
            assert!((gelu_grad_f64(x) - d).abs() < 1e-9, "gelu_grad_f64({x})");
            let d = (gelu_tanh_f64(x + h) - gelu_tanh_f64(x - h)) / (2.0 * h);
            assert!(
                (gelu_tanh_grad_f64(x) - d).abs() < 1e-9,
                "gelu_tanh_grad_f64({x})"
            );
        }
    }

    #[test]
    fn erf_f64_known_values() {
        let cases = [
            (0.5, 0.5204998778130465),
            (1.0, 0.8427007929497149),
            (2.0, 0.9953222650189527),
            (3.0, 0.9999779095030014),
            (-1.0, -0.8427007929497149),
            (1e-10, 1.1283791670955126e-10),
            (0.1, 0.1124629160182849),
            (1.5, 0.9661051464753108),
            (2.5, 0.9995930479825550),
            (4.0, 0.9999999845827421),
        ];
        for (x, want) in cases {
            let got = erf_f64(x);
            assert!(
                (got - want).abs() <= 2e-16 + 1e-15 * want.abs(),
                "erf_f64({x}) = {got:e}, want {want:e}"
            );
        }
        let erfc_cases = [
            (0.5, 0.4795001221869535),
            (2.0, 4.677734981047266e-3),
            (3.0, 2.209049699858544e-5),
            (5.0, 1.537459794428035e-12),
            (10.0, 2.088487583762545e-45),
            (-1.0, 1.842700792949715),
        ];
        for (x, want) in erfc_cases {
            let got = erfc_f64(x);
            assert!(
                (got - want).abs() <= 1e-14 * want,
                "erfc_f64({x}) = {got:e}, want {want:e}"
            );
        }
        assert_eq!(erf_f64(0.0), 0.0);
        assert_eq!(erf_f64(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(erf_f64(f64::INFINITY), 1.0);
        assert_eq!(erf_f64(f64::NEG_INFINITY), -1.0);
        assert!(erf_f64(f64::NAN).is_nan());
        assert_eq!(erfc_f64(f64::INFINITY), 0.0);
        assert_eq!(erfc_f64(f64::NEG_INFINITY), 2.0);
        // Continuity across the internal switch points and erf + erfc = 1.
        for &x in &[1.5f64, 2.0, 3.0, 6.0] {
            for d in [-1e-12, 0.0, 1e-12] {
                let v = x + d;
                assert!(
                    (erf_f64(v) + erfc_f64(v) - 1.0).abs() < 3e-16,
                    "erf+erfc at {v}"
                );
            }
        }
        let mut prev = -1.0;
        for i in 0..=100_000 {
            let x = -7.0 + i as f64 * 14e-5;
            let y = erf_f64(x);
            assert!(y >= prev, "erf_f64 not monotone at {x}");
            prev = y;
        }
    }

    #[test]
    fn map_matches_scalar() {
        let xs: Vec<f32> = (0..1003).map(|i| (i as f32 - 500.0) * 0.037).collect();
        let mut out = vec![0.0; xs.len()];
        map_f32(&xs, &mut out, tanh_f32);
        for (x, y) in xs.iter().zip(&out) {
            assert_eq!(y.to_bits(), tanh_f32(*x).to_bits());
        }
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        if have_avx2() {
            let mut v = vec![0.0; xs.len()];
            unsafe { tanh_slice_avx2(&xs, &mut v) };
            assert_eq!(v, out);
        }
    }
}
