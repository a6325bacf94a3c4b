//! Runtime SIMD dispatch.
//!
//! Hot loops are written once as plain Rust and compiled several times with
//! different `target_feature` sets ([`multiversion!`]); the level is chosen at
//! run time from the CPU's features, or forced with `FG_CPU=scalar|avx2|avx512`.
//! Wheels are built for the baseline target, never `target-cpu=native`.

use std::sync::atomic::{AtomicU8, Ordering};

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Scalar = 1,
    Avx2 = 2,
    Avx512 = 3,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Scalar => "scalar",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(0);

fn detect() -> Level {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("fma")
        {
            return Level::Avx512;
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return Level::Avx2;
        }
    }
    Level::Scalar
}

/// The best level this CPU supports.
pub fn supported() -> Level {
    detect()
}

/// The level in use (detected once; `FG_CPU` can lower it).
#[inline]
pub fn level() -> Level {
    match LEVEL.load(Ordering::Relaxed) {
        1 => Level::Scalar,
        2 => Level::Avx2,
        3 => Level::Avx512,
        _ => {
            let best = detect();
            let l = match std::env::var("FG_CPU").ok().as_deref() {
                Some("scalar") => Level::Scalar,
                Some("avx2") => Level::Avx2.min(best),
                Some("avx512") => Level::Avx512.min(best),
                _ => best,
            };
            LEVEL.store(l as u8, Ordering::Relaxed);
            l
        }
    }
}

/// Force a level (clamped to what the CPU supports). Used by tests and `fg.set_cpu_level`.
pub fn set_level(l: Level) -> Level {
    let l = l.min(detect());
    LEVEL.store(l as u8, Ordering::Relaxed);
    l
}

/// Define `fn $name<..>(args) -> ret` whose body is compiled for AVX-512, AVX2+FMA
/// and the baseline, dispatched at run time by [`level`].
///
/// The body must be safe code; it is inlined into each variant, so generic
/// closures and `#[inline(always)]` helpers it calls are vectorised with the
/// variant's features.
#[macro_export]
macro_rules! multiversion {
    (
        $(#[$m:meta])*
        $vis:vis fn $name:ident $(<$($g:ident $(: $bound:path)?),*>)? ( $($arg:ident : $ty:ty),* $(,)? ) $(-> $ret:ty)? $body:block
    ) => {
        $(#[$m])*
        #[inline]
        $vis fn $name $(<$($g $(: $bound)?),*>)? ( $($arg : $ty),* ) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,bmi2")]
                unsafe fn v4 $(<$($g $(: $bound)?),*>)? ( $($arg : $ty),* ) $(-> $ret)? $body
                #[target_feature(enable = "avx2,fma,bmi2")]
                unsafe fn v3 $(<$($g $(: $bound)?),*>)? ( $($arg : $ty),* ) $(-> $ret)? $body
                match $crate::backend::cpu::simd::level() {
                    // SAFETY: the level is only reported when the CPU has these features.
                    $crate::backend::cpu::simd::Level::Avx512 => return unsafe { v4($($arg),*) },
                    $crate::backend::cpu::simd::Level::Avx2 => return unsafe { v3($($arg),*) },
                    $crate::backend::cpu::simd::Level::Scalar => {}
                }
            }
            #[inline(always)]
            fn v1 $(<$($g $(: $bound)?),*>)? ( $($arg : $ty),* ) $(-> $ret)? $body
            v1($($arg),*)
        }
    };
}
