//! The counter-based generator behind every random op: Philox4x32-10.
//!
//! This module is the device-neutral specification. Every backend (the CPU
//! kernels today, a WGSL kernel later) must produce bit-identical words from
//! the same `(seed, offset)`, and the same uniform / integer values from
//! those words. Everything below uses only 32-bit integer multiplies, xors and
//! adds, so a shader can reproduce it exactly.
//!
//! # The block function
//!
//! Philox4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy
//! as 1, 2, 3", SC'11). State: a counter of four `u32` words `c0..c3` and a
//! key of two `u32` words `k0, k1`. One round:
//!
//! ```text
//! p0 = 0xD2511F53 * c0   (as a 64-bit product)
//! p1 = 0xCD9E8D57 * c2
//! (c0, c1, c2, c3) = (hi(p1) ^ c1 ^ k0,  lo(p1),  hi(p0) ^ c3 ^ k1,  lo(p0))
//! ```
//!
//! Ten rounds are applied; before every round but the first the key is bumped
//! with wrapping adds: `k0 += 0x9E3779B9`, `k1 += 0xBB67AE85`. The output is
//! the final counter `(x0, x1, x2, x3)`.
//!
//! # Streams
//!
//! A generator is a `(seed: u64, offset: u64)` pair. Each random op reserves
//! `B` consecutive blocks from its generator (the offset advances by `B`) and
//! block `j` of the call (`0 <= j < B`) is
//!
//! ```text
//! key     = (lo32(seed), hi32(seed))
//! counter = (lo32(offset + j), hi32(offset + j), 0, 0)     (offset + j wraps mod 2^64)
//! (x0, x1, x2, x3) = philox4x32_10(counter, key)
//! ```
//!
//! Element `i` of the output (in row-major logical order) reads only its own
//! block(s), so the value at element `i` depends on `(seed, offset, i)` only,
//! never on how the work is split over threads or workgroups.
//!
//! # From words to values
//!
//! *32-bit draws* use 4 elements per block: element `i` takes word
//! `x[i % 4]` of block `i / 4`. *64-bit draws* use 2 elements per block:
//! element `i` takes `v = x[2m] | (x[2m+1] << 32)` with `m = i % 2` from block
//! `i / 2`. With `w` a word and `v` a 64-bit draw:
//!
//! | output                       | draw   | per block | value                                        |
//! |------------------------------|--------|-----------|----------------------------------------------|
//! | uniform float32 in [0, 1)    | 32-bit | 4         | `(w >> 8) * 2^-24`                           |
//! | uniform float16 in [0, 1)    | 32-bit | 4         | `(w >> 21) * 2^-11`                          |
//! | uniform bfloat16 in [0, 1)   | 32-bit | 4         | `(w >> 24) * 2^-8`                           |
//! | uniform float64 in [0, 1)    | 64-bit | 2         | `(v >> 11) * 2^-53`                          |
//! | uniform(a, b)                | as above | as above | `a + (b - a) * u`, in f32 (f64 for float64), then rounded to the dtype |
//! |                              |        |           | (a result that rounds up to `b` becomes the largest value below `b`; `a`, `b` pass through f32 first for 16-bit dtypes) |
//! | bernoulli(p), dropout mask   | 32-bit | 4         | success iff `(w >> 8) < ceil(p * 2^24)`      |
//! | integer in [low, high)       | 64-bit | 2         | `low + ((v * (high - low)) >> 64)` (high half of the 128-bit product) |
//! | normal, 16/32-bit floats     | 32-bit | 4         | Box–Muller on `(x0, x1)` → elements `4b, 4b+1`, on `(x2, x3)` → `4b+2, 4b+3` |
//! | normal, float64              | 64-bit | 2         | Box–Muller on `(v0, v1)` of block `b` → elements `2b, 2b+1` |
//! | randperm keys                | 64-bit | 2         | element `i` gets key `v`; the permutation sorts `(key, i)` ascending |
//!
//! Box–Muller (f32 case; f64 is the same with 53-bit fractions): with
//! `u1 = ((w0 >> 8) + 1) * 2^-24` in (0, 1] (never 0, so the log is finite) and
//! `u2 = (w1 >> 8) * 2^-24`, `r = sqrt(-2 ln u1)`, `θ = 2π u2`, the two outputs
//! are `mean + std * r cos θ` and `mean + std * r sin θ`. Normal values depend
//! on the platform's `ln`/`sin`/`cos` and so agree across devices to rounding,
//! while uniform, integer, Bernoulli and permutation results are bit-exact.
//!
//! The number of blocks an op reserves is `ceil(n / per_block)` for `n`
//! elements (see [`blocks_for`]); multinomial documents its own indexing.

/// First Philox multiplier.
pub const PHILOX_M0: u32 = 0xD251_1F53;
/// Second Philox multiplier.
pub const PHILOX_M1: u32 = 0xCD9E_8D57;
/// First Weyl key increment (golden ratio).
pub const PHILOX_W0: u32 = 0x9E37_79B9;
/// Second Weyl key increment (sqrt(3) - 1).
pub const PHILOX_W1: u32 = 0xBB67_AE85;

/// One application of Philox4x32-10 to `ctr` under `key`.
#[inline(always)]
pub fn philox4x32_10(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let [mut c0, mut c1, mut c2, mut c3] = ctr;
    let [mut k0, mut k1] = key;
    for r in 0..10 {
        if r > 0 {
            k0 = k0.wrapping_add(PHILOX_W0);
            k1 = k1.wrapping_add(PHILOX_W1);
        }
        let p0 = PHILOX_M0 as u64 * c0 as u64;
        let p1 = PHILOX_M1 as u64 * c2 as u64;
        let n0 = ((p1 >> 32) as u32) ^ c1 ^ k0;
        let n1 = p1 as u32;
        let n2 = ((p0 >> 32) as u32) ^ c3 ^ k1;
        let n3 = p0 as u32;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
    }
    [c0, c1, c2, c3]
}

/// The blocks reserved by one random call: `(seed, first counter)`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PhiloxStream {
    pub seed: u64,
    pub offset: u64,
}

impl PhiloxStream {
    pub fn new(seed: u64, offset: u64) -> PhiloxStream {
        PhiloxStream { seed, offset }
    }

    /// The key: the seed split into two words (low word first).
    #[inline(always)]
    pub fn key(self) -> [u32; 2] {
        [self.seed as u32, (self.seed >> 32) as u32]
    }

    /// Block `j` of this call.
    #[inline(always)]
    pub fn block(self, j: u64) -> [u32; 4] {
        let c = self.offset.wrapping_add(j);
        philox4x32_10([c as u32, (c >> 32) as u32, 0, 0], self.key())
    }
}

/// How many elements one block feeds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Draw {
    /// One 32-bit word per element: 4 elements per block.
    Bits32,
    /// One 64-bit value (two words) per element: 2 elements per block.
    Bits64,
}

impl Draw {
    pub const fn per_block(self) -> u64 {
        match self {
            Draw::Bits32 => 4,
            Draw::Bits64 => 2,
        }
    }
}

/// Blocks reserved for `n` elements of a `draw`-sized distribution.
pub fn blocks_for(n: usize, draw: Draw) -> u64 {
    (n as u64).div_ceil(draw.per_block())
}

/// `x[2m] | x[2m+1] << 32`.
#[inline(always)]
pub fn word64(x: [u32; 4], m: usize) -> u64 {
    x[2 * m] as u64 | ((x[2 * m + 1] as u64) << 32)
}

/// Uniform float32 in [0, 1) from the top 24 bits of a word.
#[inline(always)]
pub fn unit_f32(w: u32) -> f32 {
    (w >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// Uniform in (0, 1] from the top 24 bits (Box–Muller's radius input).
#[inline(always)]
pub fn unit_f32_open0(w: u32) -> f32 {
    ((w >> 8) + 1) as f32 * (1.0 / 16_777_216.0)
}

/// Uniform float16 value in [0, 1) (11 bits), as an f32 exactly representable in f16.
#[inline(always)]
pub fn unit_f16(w: u32) -> f32 {
    (w >> 21) as f32 * (1.0 / 2048.0)
}

/// Uniform bfloat16 value in [0, 1) (8 bits), as an f32 exactly representable in bf16.
#[inline(always)]
pub fn unit_bf16(w: u32) -> f32 {
    (w >> 24) as f32 * (1.0 / 256.0)
}

/// Uniform float64 in [0, 1) from the top 53 bits.
#[inline(always)]
pub fn unit_f64(v: u64) -> f64 {
    // Below 2^53 the signed conversion is exact (and cheaper than the unsigned one).
    (v >> 11) as i64 as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// Uniform float64 in (0, 1].
#[inline(always)]
pub fn unit_f64_open0(v: u64) -> f64 {
    ((v >> 11) + 1) as i64 as f64 * (1.0 / 9_007_199_254_740_992.0)
}

/// The Bernoulli threshold: a word `w` is a success iff `(w >> 8) < threshold(p)`.
///
/// Equivalent to `unit_f32(w) < p` evaluated exactly; `p <= 0` never succeeds
/// and `p >= 1` always does.
#[inline(always)]
pub fn bernoulli_threshold(p: f64) -> u32 {
    if p.is_nan() || p <= 0.0 {
        0
    } else if p >= 1.0 {
        1 << 24
    } else {
        (p * 16_777_216.0).ceil() as u32
    }
}

/// An integer uniform in `[0, range)` from a 64-bit draw: the high half of
/// `v * range` (Lemire's multiply-shift; bias below `range / 2^64`).
#[inline(always)]
pub fn bounded(v: u64, range: u64) -> u64 {
    ((v as u128 * range as u128) >> 64) as u64
}

/// Two standard normals from two words (32-bit Box–Muller).
#[inline(always)]
pub fn box_muller_f32(w0: u32, w1: u32) -> (f32, f32) {
    let u1 = unit_f32_open0(w0);
    let u2 = unit_f32(w1);
    let r = (-2.0 * u1.ln()).sqrt();
    let (s, c) = (std::f32::consts::TAU * u2).sin_cos();
    (r * c, r * s)
}

/// Two standard normals from two 64-bit draws.
#[inline(always)]
pub fn box_muller_f64(v0: u64, v1: u64) -> (f64, f64) {
    let u1 = unit_f64_open0(v0);
    let u2 = unit_f64(v1);
    let r = (-2.0 * u1.ln()).sqrt();
    let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
    (r * c, r * s)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Known-answer vectors of the Random123 distribution (philox4x32, 10 rounds):
    // counter, key, expected output.
    #[test]
    fn known_answers() {
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0]
            ),
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
        );
    }

    #[test]
    fn stream_layout() {
        let s = PhiloxStream::new(0x1234_5678_9abc_def0, u64::MAX);
        assert_eq!(s.key(), [0x9abc_def0, 0x1234_5678]);
        // offset + j wraps
        assert_eq!(s.block(1), philox4x32_10([0, 0, 0, 0], s.key()));
        assert_eq!(
            s.block(0),
            philox4x32_10([u32::MAX, u32::MAX, 0, 0], s.key())
        );
    }

    #[test]
    fn unit_ranges() {
        assert_eq!(unit_f32(0), 0.0);
        assert!(unit_f32(u32::MAX) < 1.0);
        assert!(unit_f32_open0(0) > 0.0);
        assert_eq!(unit_f32_open0(u32::MAX), 1.0);
        assert!(unit_f64(u64::MAX) < 1.0);
        assert!(unit_f64_open0(0) > 0.0);
        assert_eq!(
            half::f16::from_f32(unit_f16(u32::MAX)).to_f32(),
            unit_f16(u32::MAX)
        );
        assert!(unit_f16(u32::MAX) < 1.0);
        assert_eq!(
            half::bf16::from_f32(unit_bf16(u32::MAX)).to_f32(),
            unit_bf16(u32::MAX)
        );
        assert!(unit_bf16(u32::MAX) < 1.0);
        let (a, b) = box_muller_f32(u32::MAX, 0);
        assert!(a.is_finite() && b.is_finite());
        let (a, b) = box_muller_f64(0, 0);
        assert!(a.is_finite() && b.is_finite());
        assert_eq!(bounded(u64::MAX, 10), 9);
        assert_eq!(bounded(0, 10), 0);
        assert_eq!(bounded(1 << 63, 10), 5);
        assert_eq!(bounded(u64::MAX, u64::MAX), u64::MAX - 1);
    }

    #[test]
    fn bernoulli_threshold_is_exact() {
        for p in [0.0, 1e-9, 0.25, 0.3, 0.5, 0.999_999_9, 1.0] {
            let t = bernoulli_threshold(p);
            for w in [
                0u32,
                1 << 8,
                0x4000_0000,
                0x4CCC_CCCC,
                0x8000_0000,
                u32::MAX,
            ] {
                assert_eq!((w >> 8) < t, (unit_f32(w) as f64) < p, "p={p} w={w:#x}");
            }
        }
        assert_eq!(bernoulli_threshold(1.0), 1 << 24);
        assert_eq!(bernoulli_threshold(-1.0), 0);
    }
}
