//! Scalar math over the real types the CPU computes in (f32 and f64).
//!
//! Half-precision dtypes compute in f32. The f32 transcendental functions
//! come from [`super::vmath`], written to vectorise inside the multiversioned
//! loops; f64 uses the standard library.

use super::vmath;

pub trait Real:
    Copy
    + PartialOrd
    + Send
    + Sync
    + 'static
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Rem<Output = Self>
    + std::ops::Neg<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const HALF: Self;
    const NAN: Self;
    fn c(v: f64) -> Self;
    /// The value as f64 (exact).
    fn as_f64(self) -> f64;
    fn abs(self) -> Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn log2(self) -> Self;
    fn ln_1p(self) -> Self;
    fn exp_m1(self) -> Self;
    fn sqrt(self) -> Self;
    /// `self * a + b` with one rounding (IEEE fused multiply-add): the same
    /// bits at every SIMD level, one instruction where the CPU has FMA.
    fn mul_add(self, a: Self, b: Self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn tanh(self) -> Self;
    fn sigmoid(self) -> Self;
    fn erf_fn(self) -> Self;
    fn gelu(self) -> Self;
    fn gelu_tanh(self) -> Self;
    /// Derivative of exact GELU.
    fn gelu_grad(self) -> Self;
    /// Derivative of tanh-approximated GELU.
    fn gelu_tanh_grad(self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round_even(self) -> Self;
    fn trunc(self) -> Self;
    fn powf(self, e: Self) -> Self;
    fn atan2(self, o: Self) -> Self;
    fn is_nan(self) -> bool;
    fn is_infinite(self) -> bool;
    fn is_finite(self) -> bool;
    #[inline(always)]
    fn max_nan(self, o: Self) -> Self {
        if self.is_nan() || o.is_nan() {
            Self::NAN
        } else if self > o {
            self
        } else {
            o
        }
    }
    #[inline(always)]
    fn min_nan(self, o: Self) -> Self {
        if self.is_nan() || o.is_nan() {
            Self::NAN
        } else if self < o {
            self
        } else {
            o
        }
    }
}

macro_rules! real_common {
    ($t:ty) => {
        const ZERO: Self = 0.0;
        const ONE: Self = 1.0;
        const HALF: Self = 0.5;
        const NAN: Self = <$t>::NAN;
        #[inline(always)]
        fn c(v: f64) -> Self {
            v as $t
        }
        #[inline(always)]
        fn as_f64(self) -> f64 {
            self as f64
        }
        #[inline(always)]
        fn abs(self) -> Self {
            <$t>::abs(self)
        }
        #[inline(always)]
        fn log2(self) -> Self {
            <$t>::log2(self)
        }
        #[inline(always)]
        fn sqrt(self) -> Self {
            <$t>::sqrt(self)
        }
        #[inline(always)]
        fn mul_add(self, a: Self, b: Self) -> Self {
            <$t>::mul_add(self, a, b)
        }
        #[inline(always)]
        fn sin(self) -> Self {
            <$t>::sin(self)
        }
        #[inline(always)]
        fn cos(self) -> Self {
            <$t>::cos(self)
        }
        #[inline(always)]
        fn tan(self) -> Self {
            <$t>::tan(self)
        }
        #[inline(always)]
        fn floor(self) -> Self {
            <$t>::floor(self)
        }
        #[inline(always)]
        fn ceil(self) -> Self {
            <$t>::ceil(self)
        }
        #[inline(always)]
        fn round_even(self) -> Self {
            <$t>::round_ties_even(self)
        }
        #[inline(always)]
        fn trunc(self) -> Self {
            <$t>::trunc(self)
        }
        #[inline(always)]
        fn powf(self, e: Self) -> Self {
            <$t>::powf(self, e)
        }
        #[inline(always)]
        fn atan2(self, o: Self) -> Self {
            <$t>::atan2(self, o)
        }
        #[inline(always)]
        fn is_nan(self) -> bool {
            <$t>::is_nan(self)
        }
        #[inline(always)]
        fn is_infinite(self) -> bool {
            <$t>::is_infinite(self)
        }
        #[inline(always)]
        fn is_finite(self) -> bool {
            <$t>::is_finite(self)
        }
    };
}

impl Real for f32 {
    real_common!(f32);
    #[inline(always)]
    fn exp(self) -> Self {
        vmath::exp_f32(self)
    }
    #[inline(always)]
    fn ln(self) -> Self {
        vmath::ln_f32(self)
    }
    #[inline(always)]
    fn ln_1p(self) -> Self {
        vmath::log1p_f32(self)
    }
    #[inline(always)]
    fn exp_m1(self) -> Self {
        vmath::expm1_f32(self)
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        vmath::tanh_f32(self)
    }
    #[inline(always)]
    fn sigmoid(self) -> Self {
        vmath::sigmoid_f32(self)
    }
    #[inline(always)]
    fn erf_fn(self) -> Self {
        vmath::erf_f32(self)
    }
    #[inline(always)]
    fn gelu(self) -> Self {
        vmath::gelu_f32(self)
    }
    #[inline(always)]
    fn gelu_tanh(self) -> Self {
        vmath::gelu_tanh_f32(self)
    }
    #[inline(always)]
    fn gelu_grad(self) -> Self {
        vmath::gelu_grad_f32(self)
    }
    #[inline(always)]
    fn gelu_tanh_grad(self) -> Self {
        vmath::gelu_tanh_grad_f32(self)
    }
}

impl Real for f64 {
    real_common!(f64);
    #[inline(always)]
    fn exp(self) -> Self {
        f64::exp(self)
    }
    #[inline(always)]
    fn ln(self) -> Self {
        f64::ln(self)
    }
    #[inline(always)]
    fn ln_1p(self) -> Self {
        f64::ln_1p(self)
    }
    #[inline(always)]
    fn exp_m1(self) -> Self {
        f64::exp_m1(self)
    }
    #[inline(always)]
    fn tanh(self) -> Self {
        f64::tanh(self)
    }
    #[inline(always)]
    fn sigmoid(self) -> Self {
        if self >= 0.0 {
            1.0 / (1.0 + (-self).exp())
        } else {
            let e = self.exp();
            e / (1.0 + e)
        }
    }
    #[inline(always)]
    fn erf_fn(self) -> Self {
        vmath::erf_f64(self)
    }
    #[inline(always)]
    fn gelu(self) -> Self {
        vmath::gelu_f64(self)
    }
    #[inline(always)]
    fn gelu_tanh(self) -> Self {
        vmath::gelu_tanh_f64(self)
    }
    #[inline(always)]
    fn gelu_grad(self) -> Self {
        vmath::gelu_grad_f64(self)
    }
    #[inline(always)]
    fn gelu_tanh_grad(self) -> Self {
        vmath::gelu_tanh_grad_f64(self)
    }
}

/// The sum of `L` lane accumulators, halves added onto each other until
/// one is left: an order fixed by `L` alone, so every SIMD level gives the
/// same bits.
#[inline(always)]
pub fn lane_sum<R: Real, const L: usize>(acc: [R; L]) -> R {
    lane_fold(acc, |a, b| a + b)
}

/// [`lane_sum`] with any combining step (`merge` of a reducer's partials).
#[inline(always)]
pub fn lane_fold<A: Copy, const L: usize>(mut acc: [A; L], merge: impl Fn(A, A) -> A) -> A {
    let mut w = L;
    while w > 1 {
        w /= 2;
        let (lo, hi) = acc.split_at_mut(w);
        for (a, &b) in lo.iter_mut().zip(hi.iter()) {
            *a = merge(*a, b);
        }
    }
    acc[0]
}
