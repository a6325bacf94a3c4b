//! Random numbers generated on the device.
//!
//! The kernels here compute the CPU's Philox4x32-10 stream (see
//! [`crate::kernel::philox`] for the counter/key layout and the mapping from
//! words to values) in WGSL, so a seed gives the same numbers on both
//! devices and nothing drawn crosses the bus: a kernel's stream
//! `(seed, offset)` travels in its metadata words 0..4.
//!
//! WGSL has no 64-bit integers, so the high half of a 32×32-bit product is
//! assembled from four 16×16-bit products ([`mulhi32`] mirrors the WGSL in
//! Rust, and a unit test checks it against the 64-bit product). One
//! invocation computes one Philox block and writes the elements it feeds
//! (four for 32-bit draws, two for 64-bit draws), so the value at element
//! `i` depends on `(seed, offset, i)` alone, as on the CPU.
//!
//! Kernel metadata: `[k0, k1, ctr_lo, ctr_hi, first block, blocks, elements,
//! 0, p0..p7, then one element offset per operand]`. The first block and
//! the operand offsets let a tensor larger than one storage binding be
//! worked through in pieces (each piece a whole number of blocks, each
//! operand bound through a window). A compiled graph's replay rewrites the
//! first four words of each random dispatch with a new stream reserved
//! from the same generator ([`super::context::Gpu::note_stream`]).
//!
//! The backend's random ops start here too; what the kernels cannot draw
//! exactly (integers beyond float32's range, permutations, multinomial
//! draws) is drawn on the host by the CPU's kernels and uploaded, and a
//! graph capture records how to draw it again ([`note_reservation`]).

use std::sync::Arc;

use super::context::{self, get, GpuBuffer};
use super::dispatch::{bind, check_same_device};
use super::dtype::{elem_bytes, gpu_float, gty};
use super::limits::check_items;
use super::shaders::{Bindings, GTy, WG};
use super::storage::{buffer, download, host_words, upload};
use super::views::via_host;
use super::WgpuBackend;
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::kernel::philox::{PhiloxStream, PHILOX_M0, PHILOX_M1, PHILOX_W0, PHILOX_W1};
use crate::kernel::RandomDist;
use crate::tensor::{DType, Device, Tensor};

/// Index of the first parameter word in a random kernel's metadata.
const PARAMS: usize = 8;
/// Index of the first operand offset.
const OFFSETS: usize = 16;

/// How a uniform value is rounded to its dtype before the half-open check.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Round {
    /// float32: kept as computed.
    None,
    /// float16 (ties to even, as `half::f16::from_f32`).
    F16,
    /// bfloat16 (ties to even, as `half::bf16::from_f32`).
    Bf16,
}

/// A random kernel.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `low + span * u` (`u` with the dtype's bits), rounded, kept below
    /// `high`: p0..p4 = low, span, high, the value below high (f32 bits),
    /// whether to clamp. Operands: (out).
    Uniform(Round),
    /// Box–Muller: p0, p1 = mean, std (f32 bits). Operands: (out).
    Normal,
    /// `low + bounded(v, range)` from 64-bit draws: p0 = low (i32 bits),
    /// p1 = range (low word), p2 = 1 when the range is 2^32. Operands: (out).
    Int,
    /// 1 iff `(w >> 8) < p0`. Operands: (out).
    Bernoulli,
    /// 1 iff `(w >> 8) < p * 2^24` (`ceil(p * 2^24)` exactly). Operands: (p, out).
    BernoulliTensor,
    /// `x * p1` (f32 bits) iff `(w >> 8) < p0`, else 0. Operands: (x, out).
    Dropout,
}

impl Kind {
    /// Elements one Philox block feeds.
    fn per_block(self) -> usize {
        match self {
            Kind::Int => 2,
            _ => 4,
        }
    }
}

/// The high word of the 64-bit product `a * b`, from 16-bit pieces only
/// (what the WGSL `mulhi` computes).
pub fn mulhi32(a: u32, b: u32) -> u32 {
    let (a0, a1) = (a & 0xffff, a >> 16);
    let (b0, b1) = (b & 0xffff, b >> 16);
    let (p00, p01, p10, p11) = (a0 * b0, a0 * b1, a1 * b0, a1 * b1);
    let mid = (p00 >> 16) + (p01 & 0xffff) + (p10 & 0xffff);
    p11.wrapping_add(p01 >> 16)
        .wrapping_add(p10 >> 16)
        .wrapping_add(mid >> 16)
}

/// Philox4x32-10 with 32-bit arithmetic only (the WGSL `philox`, in Rust).
pub fn philox32(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let [mut c0, mut c1, mut c2, mut c3] = ctr;
    let [mut k0, mut k1] = key;
    for r in 0..10 {
        if r > 0 {
            k0 = k0.wrapping_add(PHILOX_W0);
            k1 = k1.wrapping_add(PHILOX_W1);
        }
        let (h0, l0) = (mulhi32(PHILOX_M0, c0), PHILOX_M0.wrapping_mul(c0));
        let (h1, l1) = (mulhi32(PHILOX_M1, c2), PHILOX_M1.wrapping_mul(c2));
        (c0, c1, c2, c3) = (h1 ^ c1 ^ k0, l1, h0 ^ c3 ^ k1, l0);
    }
    [c0, c1, c2, c3]
}

/// The high word of `(v1:v0) * range >> 32`, i.e. `bounded(v, range)` for
/// a range below 2^32 (what the WGSL `bounded` computes).
pub fn bounded32(v0: u32, v1: u32, range: u32) -> u32 {
    let lo1 = v1.wrapping_mul(range);
    let hi1 = mulhi32(v1, range);
    let s = lo1.wrapping_add(mulhi32(v0, range));
    hi1 + (s < lo1) as u32
}

/// WGSL shared by every random kernel: the 32-bit Philox.
fn philox_wgsl() -> String {
    format!(
        "fn mulhi(a: u32, b: u32) -> u32 {{
    let a0 = a & 0xffffu;
    let a1 = a >> 16u;
    let b0 = b & 0xffffu;
    let b1 = b >> 16u;
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
    return p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u);
}}
// Block j of the stream: counter (md[2], md[3]) + j with carry, key (md[0], md[1]).
fn philox(j: u32) -> vec4<u32> {{
    var c0 = md[2] + j;
    var c1 = md[3] + select(0u, 1u, c0 < j);
    var c2 = 0u;
    var c3 = 0u;
    var k0 = md[0];
    var k1 = md[1];
    for (var r = 0u; r < 10u; r = r + 1u) {{
        if (r > 0u) {{
            k0 = k0 + {w0:#x}u;
            k1 = k1 + {w1:#x}u;
        }}
        let h0 = mulhi({m0:#x}u, c0);
        let l0 = {m0:#x}u * c0;
        let h1 = mulhi({m1:#x}u, c2);
        let l1 = {m1:#x}u * c2;
        c0 = h1 ^ c1 ^ k0;
        c1 = l1;
        c2 = h0 ^ c3 ^ k1;
        c3 = l0;
    }}
    return vec4<u32>(c0, c1, c2, c3);
}}
",
        m0 = PHILOX_M0,
        m1 = PHILOX_M1,
        w0 = PHILOX_W0,
        w1 = PHILOX_W1,
    )
}

/// bfloat16 rounding of an f32 (ties to even, NaN kept quiet), as `half::bf16::from_f32`.
const BF_ROUND: &str = "fn bf_round(x: f32) -> f32 {
    let u = bitcast<u32>(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) { return bitcast<f32>((u | 0x00400000u) & 0xffff0000u); }
    return bitcast<f32>((u + 0x7fffu + ((u >> 16u) & 1u)) & 0xffff0000u);
}
";

/// `ln` and `sin`/`cos` for Box–Muller from additions, multiplications
/// and one division only (WGSL's own `log`, `sin` and `cos` are only
/// accurate in absolute terms — `log` near 1, where the radius is small,
/// and `sin`/`cos` near their zeros), so normals agree with the CPU's
/// within a few ulp on any conforming device. [`ln_acc`] and
/// [`sincos_acc`] are the same arithmetic in Rust.
///
/// `ln_acc(x)`, `x` positive and normal: `x = m 2^e` with `m` in
/// [√½, √2), `ln m = 2 atanh(s)`, `s = f / (2 + f)`, `f = m - 1` (exact),
/// by its series to `s^11` (|s| ≤ 0.172: truncation below 1e-10), plus
/// `e ln 2` in two parts. `sincos_acc(x)`, `0 <= x < 8`: `x` less the
/// nearest multiple `k π/2` (Cody–Waite, three parts of π/2 whose products
/// with `k <= 5` are exact), then the Cephes polynomials on [-π/4, π/4]
/// and the quadrant's signs; `(sin, cos)`.
const NORMAL_MATH: &str = "fn ln_acc(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    var e = f32(i32(b >> 23u) - 127);
    var m = bitcast<f32>((b & 0x007fffffu) | 0x3f800000u);
    if (m > 1.4142135) { m = m * 0.5; e = e + 1.0; }
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let p = 1.0 + z * (0.33333334 + z * (0.2 + z * (0.14285715 + z * (0.11111111 + z * 0.09090909))));
    return e * 0.693145751953125 + (e * 1.4286068e-6 + 2.0 * s * p);
}
fn sincos_acc(x: f32) -> vec2<f32> {
    let k = round(x * 0.63661975);
    let r = ((x - k * 1.5703125) - k * 4.837512969970703125e-4) - k * 7.54978995489188216e-8;
    let z = r * r;
    let s = r + r * z * (-0.16666655 + z * (0.008332161 + z * -0.00019515296));
    let c = z * z * (0.041666646 + z * (-0.0013887316 + z * 2.4433157e-5)) - 0.5 * z + 1.0;
    let q = u32(k) & 3u;
    if (q == 0u) { return vec2<f32>(s, c); }
    if (q == 1u) { return vec2<f32>(c, -s); }
    if (q == 2u) { return vec2<f32>(-s, -c); }
    return vec2<f32>(-c, s);
}
";

/// [`NORMAL_MATH`]'s `ln_acc` in Rust (the same operations, in order).
pub fn ln_acc(x: f32) -> f32 {
    let b = x.to_bits();
    let mut e = ((b >> 23) as i32 - 127) as f32;
    let mut m = f32::from_bits((b & 0x007f_ffff) | 0x3f80_0000);
    if m > std::f32::consts::SQRT_2 {
        m *= 0.5;
        e += 1.0;
    }
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let p = 1.0
        + z * (0.333_333_34
            + z * (0.2 + z * (0.142_857_15 + z * (0.111_111_11 + z * 0.090_909_09))));
    e * 0.693_145_75 + (e * 1.428_606_8e-6 + 2.0 * s * p)
}

/// [`NORMAL_MATH`]'s `sincos_acc` in Rust: `(sin x, cos x)`.
pub fn sincos_acc(x: f32) -> (f32, f32) {
    let k = (x * 0.636_619_75).round_ties_even();
    let r = ((x - k * 1.570_312_5) - k * 4.837_513e-4) - k * 7.549_79e-8;
    let z = r * r;
    let s = r + r * z * (-0.166_666_55 + z * (0.008_332_161 + z * -0.000_195_152_96));
    let c = z * z * (0.041_666_646 + z * (-0.001_388_731_6 + z * 2.443_315_7e-5)) - 0.5 * z + 1.0;
    match (k as u32) & 3 {
        0 => (s, c),
        1 => (c, -s),
        2 => (-s, -c),
        _ => (-c, s),
    }
}

/// The WGSL of random kernel `kind` over bindings `b` (operands as [`Kind`] lists them).
pub fn kernel(kind: Kind, b: &Bindings) -> String {
    let nops = b.operand.len();
    let out_j = b.operand[nops - 1];
    let ty = b.bufs[out_j].0;
    let arr = |k: usize| format!("b{}", b.operand[k]);
    let at = |k: usize, m: usize| format!("{}[md[{}u] + e + {m}u]", arr(k), OFFSETS + k);
    let (one, zero) = match ty {
        GTy::F32 => ("1.0", "0.0"),
        GTy::I32 => ("1i", "0i"),
        GTy::U32 => ("1u", "0u"),
    };
    let k = kind.per_block();
    let mut helpers = String::new();
    let mut body = String::new();
    // `vals[m]`: the WGSL value of element m of the block.
    let vals: Vec<String> = match kind {
        Kind::Uniform(round) => {
            let (shift, scale, r) = match round {
                Round::None => (8, "5.9604644775390625e-8", ""),
                Round::F16 => (21, "0.00048828125", "h_round"),
                Round::Bf16 => (24, "0.00390625", "bf_round"),
            };
            if round == Round::F16 && !b.any_half() {
                helpers.push_str(super::shaders::HALF_ROUND);
            }
            if round == Round::Bf16 {
                helpers.push_str(BF_ROUND);
            }
            let _ = std::fmt::Write::write_fmt(
                &mut helpers,
                format_args!(
                    "fn uni(w: u32) -> f32 {{
    let u = f32(w >> {shift}u) * {scale};
    let v = {r}(bitcast<f32>(md[{p0}u]) + bitcast<f32>(md[{p1}u]) * u);
    if (md[{p4}u] != 0u && v >= bitcast<f32>(md[{p2}u])) {{ return bitcast<f32>(md[{p3}u]); }}
    return v;
}}
",
                    p0 = PARAMS,
                    p1 = PARAMS + 1,
                    p2 = PARAMS + 2,
                    p3 = PARAMS + 3,
                    p4 = PARAMS + 4,
                ),
            );
            (0..4).map(|m| format!("uni(x[{m}])")).collect()
        }
        Kind::Normal => {
            let tau = std::f32::consts::TAU.to_bits();
            helpers.push_str(NORMAL_MATH);
            let _ = std::fmt::Write::write_fmt(
                &mut helpers,
                format_args!(
                    "// Box-Muller on two words: u1 in (0, 1], u2 in [0, 1).
fn bm(w0: u32, w1: u32) -> vec2<f32> {{
    let u1 = f32((w0 >> 8u) + 1u) * 5.9604644775390625e-8;
    let u2 = f32(w1 >> 8u) * 5.9604644775390625e-8;
    let r = sqrt(-2.0 * ln_acc(u1));
    let sc = sincos_acc(bitcast<f32>({tau:#x}u) * u2);
    return vec2<f32>(r * sc.y, r * sc.x);
}}
"
                ),
            );
            body.push_str(&format!(
                "    let mean = bitcast<f32>(md[{}u]);\n    let sd = bitcast<f32>(md[{}u]);\n    let z01 = bm(x[0], x[1]);\n    let z23 = bm(x[2], x[3]);\n",
                PARAMS,
                PARAMS + 1
            ));
            ["z01.x", "z01.y", "z23.x", "z23.y"]
                .iter()
                .map(|z| format!("mean + sd * {z}"))
                .collect()
        }
        Kind::Int => {
            let _ = std::fmt::Write::write_fmt(
                &mut helpers,
                format_args!(
                    "// The high word of (v1:v0) * range >> 32: bounded(v, range) for 64-bit v.
fn bounded(v0: u32, v1: u32) -> u32 {{
    if (md[{full}u] != 0u) {{ return v1; }}
    let r = md[{range}u];
    let lo1 = v1 * r;
    let s = lo1 + mulhi(v0, r);
    return mulhi(v1, r) + select(0u, 1u, s < lo1);
}}
",
                    range = PARAMS + 1,
                    full = PARAMS + 2,
                ),
            );
            let conv = |v: &str| match ty {
                GTy::I32 => format!("bitcast<i32>({v})"),
                GTy::U32 => v.to_string(),
                GTy::F32 => format!("f32(bitcast<i32>({v}))"),
            };
            (0..2)
                .map(|m| {
                    conv(&format!(
                        "(md[{PARAMS}u] + bounded(x[{}], x[{}]))",
                        2 * m,
                        2 * m + 1
                    ))
                })
                .collect()
        }
        Kind::Bernoulli => (0..4)
            .map(|m| format!("select({zero}, {one}, (x[{m}] >> 8u) < md[{PARAMS}u])"))
            .collect(),
        Kind::BernoulliTensor => (0..4)
            .map(|m| {
                format!(
                    "select({zero}, {one}, f32(x[{m}] >> 8u) < f32({}) * 16777216.0)",
                    at(0, m)
                )
            })
            .collect(),
        Kind::Dropout => (0..4)
            .map(|m| {
                format!(
                    "select(0.0, f32({}) * bitcast<f32>(md[{}u]), (x[{m}] >> 8u) < md[{PARAMS}u])",
                    at(0, m),
                    PARAMS + 1
                )
            })
            .collect(),
    };
    for (m, v) in vals.iter().enumerate().take(k) {
        let _ = std::fmt::Write::write_fmt(
            &mut body,
            format_args!(
                "    if (e + {m}u < md[6]) {{ {} = {v}; }}\n",
                at(nops - 1, m)
            ),
        );
    }
    let body = b.io(&body);
    format!(
        "{decl}{helpers}{philox}@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let j = (wid.y * nwg.x + wid.x) * {WG}u + lid;
    if (j >= md[5]) {{ return; }}
    let x = philox(md[4] + j);
    let e = j * {k}u;
{body}}}
",
        decl = b.decl(),
        philox = philox_wgsl(),
    )
}

/// The check of a probability tensor (operands: p, flag): the flag (an
/// int32 starting at 0) becomes `n - i` for the first element `i` outside
/// [0, 1] (NaN included; -0.0 passes, as on the CPU). Metadata `[piece
/// length, offset, first element of the piece, n]`.
pub fn prob_check(b: &Bindings) -> String {
    let p = format!("b{}", b.operand[0]);
    let flag = format!("b{}", b.operand[1]);
    let mut decl = b.decl();
    // The flag is updated atomically.
    decl = decl.replace(
        &format!("var<storage, read_write> {flag}: array<i32>;"),
        &format!("var<storage, read_write> {flag}: array<atomic<i32>>;"),
    );
    let load = b.io(&format!("    let v = {p}[md[1] + i];\n"));
    format!(
        "{decl}@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let i = (wid.y * nwg.x + wid.x) * {WG}u + lid;
    if (i >= md[0]) {{ return; }}
{load}    let u = bitcast<u32>(v);
    if (u > 0x3f800000u && u != 0x80000000u) {{
        atomicMax(&{flag}[0], i32(md[3] - (md[2] + i)));
    }}
}}
"
    )
}

// The largest value below a bound, as the CPU's half-open clamp computes it.
use crate::backend::cpu::random::{below_bits16, below_f32};

/// Parameters of a uniform kernel in `[low, high)` for `dtype`, as the
/// CPU's kernel computes them.
pub fn uniform_params(low: f64, high: f64, dtype: DType) -> (Round, [u32; 8]) {
    let (a, span) = (low as f32, (high - low) as f32);
    let (round, hi, below, clamp) = match dtype {
        DType::F16 => {
            let (hlo, hhi) = (half::f16::from_f32(a), half::f16::from_f32(high as f32));
            let b = half::f16::from_bits(below_bits16(hhi.to_bits()));
            (Round::F16, hhi.to_f32(), b.to_f32(), hhi > hlo)
        }
        DType::BF16 => {
            let (hlo, hhi) = (half::bf16::from_f32(a), half::bf16::from_f32(high as f32));
            let b = half::bf16::from_bits(below_bits16(hhi.to_bits()));
            (Round::Bf16, hhi.to_f32(), b.to_f32(), hhi > hlo)
        }
        _ => {
            let hi = high as f32;
            (Round::None, hi, below_f32(hi), hi > a)
        }
    };
    (
        round,
        [
            a.to_bits(),
            span.to_bits(),
            hi.to_bits(),
            below.to_bits(),
            clamp as u32,
            0,
            0,
            0,
        ],
    )
}

/// Refuse a random kernel while a WebGPU bundle is recorded.
pub fn refuse_bundle() -> Result<()> {
    if get()?.bundling() {
        return Err(Error::runtime(
            "export_webgpu",
            "a WebGPU bundle cannot draw random numbers (it would repeat one draw on every run): export the graph without random ops (a model in eval mode)",
        ));
    }
    Ok(())
}

/// What [`pieces`] runs per piece.
type Piece<'a> = dyn FnMut(usize, usize, &[(u64, u64)], &[u32]) -> Result<()> + 'a;

/// Work through `n` elements of the contiguous operands `ts` (bound
/// through `bufs`) in pieces of whole `k`-element blocks, each binding only
/// the bytes its piece touches when a buffer exceeds one binding:
/// `f(first element, elements, byte ranges (empty: whole buffers), element
/// offset of each operand in its binding)`.
fn pieces(
    op: &'static str,
    ts: &[&Tensor],
    bufs: &[Arc<GpuBuffer>],
    n: usize,
    k: usize,
    f: &mut Piece<'_>,
) -> Result<()> {
    let g = get()?;
    if bufs.iter().all(|b| b.len <= g.max_binding()) {
        let offs: Vec<u32> = ts.iter().map(|t| t.offset() as u32).collect();
        return f(0, n, &[], &offs);
    }
    let slot: Vec<usize> = ts
        .iter()
        .map(|t| {
            let id = buffer(op, t)?.id();
            Ok(bufs.iter().position(|b| b.id() == id).expect("bound"))
        })
        .collect::<Result<_>>()?;
    let piece = g.piece_elems() / k * k;
    let mut s = 0;
    while s < n {
        let e = n.min(s + piece);
        let mut span: Vec<Option<(usize, usize, usize)>> = vec![None; bufs.len()];
        for (t, &j) in ts.iter().zip(&slot) {
            let (a, b) = (t.offset() + s, t.offset() + e);
            let eb = elem_bytes(t.dtype());
            span[j] = Some(span[j].map_or((a, b, eb), |(x, y, _)| (x.min(a), y.max(b), eb)));
        }
        let starts: Vec<usize> = span
            .iter()
            .map(|sp| {
                let (a, _, eb) = sp.expect("every binding has an operand");
                let al = g.binding_align() as usize / eb;
                a / al * al
            })
            .collect();
        let ranges: Vec<(u64, u64)> = span
            .iter()
            .zip(&starts)
            .map(|(sp, &a0)| {
                let (_, b, eb) = sp.expect("span");
                ((a0 * eb) as u64, ((b - a0) * eb) as u64)
            })
            .collect();
        let offs: Vec<u32> = ts
            .iter()
            .zip(&slot)
            .map(|(t, &j)| (t.offset() + s - starts[j]) as u32)
            .collect();
        f(s, e - s, &ranges, &offs)?;
        s = e;
    }
    Ok(())
}

/// Run random kernel `kind` on stream `s`: operands `ts` (contiguous, of
/// one element count; the last one written), parameters `params`. A graph
/// capture notes the dispatches, so that each replay passes them a new
/// stream reserved as this op reserved its own.
pub fn launch(
    op: &'static str,
    kind: Kind,
    ts: &[&Tensor],
    params: [u32; 8],
    s: PhiloxStream,
) -> Result<()> {
    let redraw = RESERVED.with(|r| r.borrow_mut().take());
    refuse_bundle()?;
    let out = ts[ts.len() - 1];
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    check_items(op, n)?;
    debug_assert!(ts.iter().all(|t| t.is_contiguous() && t.numel() == n));
    let g = get()?;
    let (bd, bufs) = bind(op, ts)?;
    let src = kernel(kind, &bd);
    let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
    let k = kind.per_block();
    let stream = [
        s.seed as u32,
        (s.seed >> 32) as u32,
        s.offset as u32,
        (s.offset >> 32) as u32,
    ];
    let mut recorded = Vec::new();
    pieces(op, ts, &bufs, n, k, &mut |first, len, ranges, offs| {
        let blocks = len.div_ceil(k);
        let mut meta = Vec::with_capacity(OFFSETS + offs.len());
        meta.extend_from_slice(&stream);
        meta.extend([(first / k) as u32, blocks as u32, len as u32, 0]);
        meta.extend_from_slice(&params);
        meta.extend_from_slice(offs);
        recorded.extend(g.with_capture(|rec| rec.dispatches.len()));
        g.dispatch_ranges(
            op,
            &src,
            &refs,
            ranges,
            &meta,
            (blocks as u64).div_ceil(WG as u64),
        )
    })?;
    if let Some(redraw) = redraw {
        g.note_stream(recorded, redraw);
    }
    Ok(())
}

/// Raise the CPU's error when a probability of `p` (contiguous, floating)
/// lies outside [0, 1], before anything is drawn. The check runs on the
/// device; only its one-word verdict is read back.
pub fn check_probabilities(op: &'static str, p: &Tensor) -> Result<()> {
    let n = p.numel();
    if n == 0 {
        return Ok(());
    }
    check_items(op, n)?;
    let flag = Tensor::zeros(&[1], DType::I32, p.device())?;
    let (mut bd, bufs) = bind(op, &[p, &flag])?;
    bd.bufs[bd.operand[1]].1 = true;
    let src = prob_check(&bd);
    let refs: Vec<&Arc<GpuBuffer>> = bufs.iter().collect();
    let g = get()?;
    pieces(
        op,
        &[p],
        &bufs[..1],
        n,
        1,
        &mut |first, len, ranges, offs| {
            // The flag is one word, bound whole.
            let ranges: Vec<(u64, u64)> = if ranges.is_empty() {
                Vec::new()
            } else {
                vec![ranges[0], (0, 4)]
            };
            g.dispatch_ranges(
                op,
                &src,
                &refs,
                &ranges,
                &[len as u32, offs[0], first as u32, n as u32],
                (len as u64).div_ceil(WG as u64),
            )
        },
    )?;
    let v = download(&flag)?;
    // SAFETY: a fresh one-element int32 CPU tensor.
    let bad = unsafe { v.as_slice::<i32>()[0] };
    if bad == 0 {
        return Ok(());
    }
    let i = n - bad as usize;
    let h = download(p)?;
    let value = h.to_f64_vec()[i];
    Err(Error::value(
        "bernoulli",
        format!("every probability must be in [0, 1], found {value}"),
    ))
}

/// A uniform/normal/integer/Bernoulli fill of the contiguous GPU tensor
/// `out` on the device, or `None` when the device kernel cannot give the
/// CPU's numbers (integers beyond what float32 holds exactly, in a float
/// dtype: the caller draws them on the host).
pub fn fill(out: &Tensor, dist: crate::kernel::RandomDist, s: PhiloxStream) -> Result<Option<()>> {
    use crate::kernel::RandomDist;
    let op = "random";
    let ty = gty(op, out.dtype())?;
    let dt = out.dtype();
    let (kind, params) = match dist {
        RandomDist::Uniform { low, high } => {
            let (round, p) = uniform_params(low, high, dt);
            (Kind::Uniform(round), p)
        }
        RandomDist::Normal { mean, std } => (
            Kind::Normal,
            [
                (mean as f32).to_bits(),
                (std as f32).to_bits(),
                0,
                0,
                0,
                0,
                0,
                0,
            ],
        ),
        RandomDist::Int { low, range } => {
            let last = low as i128 + range as i128 - 1;
            let fits = |lo: i128, hi: i128| low as i128 >= lo && last <= hi;
            if ty == GTy::F32 && !fits(-(1 << 24), 1 << 24) {
                return Ok(None);
            }
            if !fits(i32::MIN as i128, i32::MAX as i128) {
                return Err(Error::value(
                    "randint",
                    format!(
                        "the range [{low}, {}) does not fit the gpu device's 32-bit integers ({dt} is stored as int32 there)",
                        last + 1
                    ),
                ));
            }
            (
                Kind::Int,
                [
                    low as i32 as u32,
                    range as u32,
                    (range == 1 << 32) as u32,
                    0,
                    0,
                    0,
                    0,
                    0,
                ],
            )
        }
        RandomDist::Bernoulli { p } => (
            Kind::Bernoulli,
            [
                crate::kernel::philox::bernoulli_threshold(p),
                0,
                0,
                0,
                0,
                0,
                0,
                0,
            ],
        ),
    };
    launch(op, kind, &[out], params, s).map(Some)
}

/// Dropout of the contiguous `x` into `out` with probability `p` (`0 < p < 1`).
pub fn dropout(x: &Tensor, out: &Tensor, p: f64, s: PhiloxStream) -> Result<()> {
    let t = crate::kernel::philox::bernoulli_threshold(1.0 - p);
    let scale = (1.0 / (1.0 - p)) as f32;
    launch(
        "dropout",
        Kind::Dropout,
        &[x, out],
        [t, scale.to_bits(), 0, 0, 0, 0, 0, 0],
        s,
    )
}

/// Bernoulli draws with per-element probabilities `p` (contiguous) into `out`.
pub fn bernoulli_tensor(p: &Tensor, out: &Tensor, s: PhiloxStream) -> Result<()> {
    check_probabilities("bernoulli", p)?;
    launch("bernoulli", Kind::BernoulliTensor, &[p, out], [0; 8], s)
}

/// How a random op reserves its stream again from the generator it drew
/// from (see [`note_reservation`]).
pub type Redraw = Arc<dyn Fn() -> PhiloxStream + Send + Sync>;

thread_local! {
    /// The reservation of the random op this thread is running on the GPU.
    static RESERVED: std::cell::RefCell<Option<Redraw>> = const { std::cell::RefCell::new(None) };
}

/// Note how the random op about to run on this thread reserves its stream,
/// so that a graph capture can draw again on each replay (see [`drawn`]).
pub fn note_reservation(redraw: Redraw) {
    RESERVED.with(|r| *r.borrow_mut() = Some(redraw));
}

/// Drop the reservation noted for this thread (an op about to draw from a
/// saved stream, not a new one, must not pick up another op's).
pub fn forget_reservation() {
    RESERVED.with(|r| r.borrow_mut().take());
}

/// Note that a random op is drawing on the CPU: a GPU capture in progress on
/// this thread cannot replay (the draw reaches the device as uploaded data,
/// which a replay would repeat). Never starts the device.
pub fn note_cpu_draw() {
    forget_reservation();
    if let Some(Ok(g)) = context::initialised() {
        g.with_capture(|rec| {
            rec.refuse("the run draws random numbers on the CPU (a replay would repeat them)")
        });
    }
}

/// A new GPU tensor of random values that `draw` writes into a CPU tensor
/// of `shape` and `dtype` from the stream `s` (the CPU's kernels: the same
/// numbers on both devices), uploaded. A graph capture records how to draw
/// again: each replay reserves a new stream from the same generator, as the
/// op would (see [`note_reservation`]), and uploads that draw instead.
fn drawn(
    shape: &[usize],
    dtype: DType,
    device: Device,
    s: PhiloxStream,
    draw: impl Fn(&Tensor, PhiloxStream) -> Result<()> + Send + Sync + 'static,
) -> Result<Tensor> {
    let redraw = RESERVED.with(|r| r.borrow_mut().take());
    if get()?.bundling() {
        return Err(Error::runtime(
            "export_webgpu",
            "a WebGPU bundle cannot draw random numbers (it would repeat one draw on every run): export the graph without random ops (a model in eval mode)",
        ));
    }
    let h = Tensor::empty(shape, dtype, Device::Cpu)?;
    draw(&h, s)?;
    let up = upload(&h, device)?;
    if let Some(redraw) = redraw {
        let shape = shape.to_vec();
        let again = move |_: &[Tensor]| -> Result<Vec<u8>> {
            let h = Tensor::empty(&shape, dtype, Device::Cpu)?;
            draw(&h, redraw())?;
            Ok(host_words("to", &h)?.1)
        };
        get()?.note_derived(&[], &buffer("to", &up)?, Arc::new(again));
    }
    Ok(up)
}

impl WgpuBackend {
    // Random numbers are generated on the device from the CPU's
    // counter-based stream (see `random`): the same numbers on both devices.
    pub(super) fn gpu_random_fill(
        &self,
        out: &Tensor,
        dist: RandomDist,
        s: PhiloxStream,
    ) -> Result<()> {
        gty("random", out.dtype())?;
        if fill(out, dist, s)?.is_some() {
            return Ok(());
        }
        // Integers a float32 cannot hold exactly: drawn on the host.
        let up = drawn(out.shape(), out.dtype(), out.device(), s, move |h, s| {
            crate::backend::backend(Device::Cpu).random_fill(h, dist, s)
        })?;
        self.cast_copy(&up, out)
    }

    // The probabilities are checked on the device (an invalid one raises
    // before anything is written, as on the CPU; only the verdict is read
    // back) and the draws made there.
    pub(super) fn gpu_bernoulli_tensor(
        &self,
        p: &Tensor,
        out: &Tensor,
        s: PhiloxStream,
    ) -> Result<()> {
        check_same_device("bernoulli", &[p, out])?;
        gty("bernoulli", out.dtype())?;
        gty("bernoulli", p.dtype())?;
        bernoulli_tensor(p, out, s)
    }

    pub(super) fn gpu_multinomial(
        &self,
        probs: &Tensor,
        out: &Tensor,
        replacement: bool,
        s: PhiloxStream,
    ) -> Result<()> {
        check_same_device("multinomial", &[probs, out])?;
        let hp = download(probs)?;
        via_host(out, |h| {
            crate::backend::backend(Device::Cpu).multinomial(&hp, h, replacement, s)
        })
    }

    pub(super) fn gpu_randperm(&self, out: &Tensor, s: PhiloxStream) -> Result<()> {
        gty("randperm", out.dtype())?;
        if out.numel() > i32::MAX as usize {
            return Err(Error::value(
                "randperm",
                "n exceeds the gpu device's 32-bit integers",
            ));
        }
        let up = drawn(out.shape(), out.dtype(), out.device(), s, |h, s| {
            crate::backend::backend(Device::Cpu).randperm(h, s)
        })?;
        self.cast_copy(&up, out)
    }

    pub(super) fn gpu_dropout(
        &self,
        x: &Tensor,
        out: &Tensor,
        p: f64,
        s: PhiloxStream,
    ) -> Result<()> {
        check_same_device("dropout", &[x, out])?;
        if !gpu_float(x.dtype()) {
            gty("dropout", x.dtype())?;
            return Err(Error::runtime(
                "dropout",
                format!("not supported on the gpu device for dtype {}", x.dtype()),
            ));
        }
        dropout(x, out, p, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::philox::{bounded, philox4x32_10, word64};

    /// A small xorshift for test inputs.
    fn xs(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn mulhi_from_16_bit_pieces_is_the_64_bit_product() {
        let edges = [
            0u32,
            1,
            0xffff,
            0x1_0000,
            0x7fff_ffff,
            0x8000_0000,
            u32::MAX,
        ];
        for &a in &edges {
            for &b in &edges {
                assert_eq!(
                    mulhi32(a, b),
                    ((a as u64 * b as u64) >> 32) as u32,
                    "{a:#x} {b:#x}"
                );
            }
        }
        let mut st = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            let v = xs(&mut st);
            let (a, b) = (v as u32, (v >> 32) as u32);
            assert_eq!(mulhi32(a, b), ((a as u64 * b as u64) >> 32) as u32);
        }
    }

    #[test]
    fn philox_with_32_bit_arithmetic_matches_the_cpu() {
        // The known answers of the specification, then random counters and keys.
        assert_eq!(
            philox32([0; 4], [0; 2]),
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
        );
        assert_eq!(
            philox32([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
        );
        let mut st = 12345u64;
        for _ in 0..20_000 {
            let (a, b, c) = (xs(&mut st), xs(&mut st), xs(&mut st));
            let ctr = [a as u32, (a >> 32) as u32, b as u32, (b >> 32) as u32];
            let key = [c as u32, (c >> 32) as u32];
            assert_eq!(philox32(ctr, key), philox4x32_10(ctr, key));
        }
    }

    #[test]
    fn bounded_from_32_bit_pieces_matches_the_cpu() {
        let mut st = 777u64;
        let ranges = [
            1u32,
            2,
            3,
            10,
            255,
            65_536,
            1_000_003,
            0x8000_0000,
            u32::MAX,
        ];
        for _ in 0..20_000 {
            let v = xs(&mut st);
            let x = [v as u32, (v >> 32) as u32, 0, 0];
            for &r in &ranges {
                assert_eq!(
                    bounded32(x[0], x[1], r) as u64,
                    bounded(word64(x, 0), r as u64),
                    "{v:#x} {r}"
                );
            }
            // A range of 2^32 takes the high word.
            assert_eq!(x[1] as u64, bounded(v, 1 << 32));
        }
    }

    /// Ulps between two f32 of one sign (or both near 0).
    fn ulps(a: f32, b: f32) -> u32 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
    }

    #[test]
    fn accurate_ln_and_sincos_match_the_cpu() {
        // Every u1 Box-Muller takes: (k + 1) 2^-24, k < 2^24 (a stride, and the top).
        let mut worst = 0;
        for k in (0..1u32 << 24).step_by(97).chain((1 << 24) - 5000..1 << 24) {
            let u1 = (k + 1) as f32 * (1.0 / 16_777_216.0);
            let (a, b) = (ln_acc(u1), u1.ln());
            worst = worst.max(ulps(a, b));
        }
        assert!(worst <= 2, "ln: {worst} ulp");
        // sin/cos of 2 pi u2 as the CPU rounds it: within 2 ulp of the
        // result, or 2^-25 absolutely near their zeros.
        let mut worst = 0f64;
        for k in (0..1u32 << 24).step_by(61) {
            let x = std::f32::consts::TAU * (k as f32 * (1.0 / 16_777_216.0));
            let (s, c) = sincos_acc(x);
            let (ws, wc) = x.sin_cos();
            for (g, w) in [(s, ws), (c, wc)] {
                let err = (g as f64 - w as f64).abs()
                    / (w.abs() as f64 * 2f64.powi(-23)).max(2f64.powi(-25));
                worst = worst.max(err);
            }
        }
        assert!(worst <= 2.0, "sin/cos: {worst} ulp");
        // Whole Box-Muller pairs: a few ulp of the larger of |z| and 2^-20.
        let mut st = 99u64;
        let mut worst = 0f64;
        for _ in 0..200_000 {
            let v = xs(&mut st);
            let (w0, w1) = (v as u32, (v >> 32) as u32);
            let u1 = ((w0 >> 8) + 1) as f32 * (1.0 / 16_777_216.0);
            let u2 = (w1 >> 8) as f32 * (1.0 / 16_777_216.0);
            let r = (-2.0 * ln_acc(u1)).sqrt();
            let (s, c) = sincos_acc(std::f32::consts::TAU * u2);
            let (a, b) = crate::kernel::philox::box_muller_f32(w0, w1);
            for (g, w) in [(r * c, a), (r * s, b)] {
                let err = (g as f64 - w as f64).abs()
                    / (w.abs() as f64).max(2f64.powi(-20))
                    / 2f64.powi(-23);
                worst = worst.max(err);
            }
        }
        assert!(worst <= 4.0, "box-muller: {worst} ulp");
    }

    #[test]
    fn uniform_params_clamp_as_the_cpu() {
        let (r, p) = uniform_params(0.0, 1.0, DType::F32);
        assert_eq!(r, Round::None);
        assert_eq!(f32::from_bits(p[3]), 1.0 - f32::EPSILON / 2.0);
        assert_eq!(p[4], 1);
        let (r, p) = uniform_params(0.0, 1.0, DType::F16);
        assert_eq!(r, Round::F16);
        assert_eq!(f32::from_bits(p[3]), 1.0 - 1.0 / 2048.0);
        let (_, p) = uniform_params(2.0, 2.0, DType::BF16);
        assert_eq!(p[4], 0);
        assert_eq!(below_bits16(0), 0x8001);
        assert_eq!(below_f32(-1.0), -1.000_000_1);
    }

    fn check(src: &str) {
        crate::backend::wgpu::shaders::dump_for_tests(src);
        let module = naga::front::wgsl::parse_str(src)
            .unwrap_or_else(|e| panic!("WGSL parse error: {}\n{src}", e.emit_to_string(src)));
        let caps = if src.starts_with("enable f16;") {
            naga::valid::Capabilities::SHADER_FLOAT16
        } else {
            naga::valid::Capabilities::empty()
        };
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
            .validate(&module)
            .unwrap_or_else(|e| panic!("WGSL validation error: {}\n{src}", e.emit_to_string(src)));
    }

    #[test]
    fn every_random_kernel_validates() {
        let mut n = 0;
        let kinds = [
            Kind::Uniform(Round::None),
            Kind::Uniform(Round::F16),
            Kind::Uniform(Round::Bf16),
            Kind::Normal,
            Kind::Int,
            Kind::Bernoulli,
            Kind::BernoulliTensor,
            Kind::Dropout,
        ];
        for kind in kinds {
            let inputs = matches!(kind, Kind::BernoulliTensor | Kind::Dropout) as usize;
            let outs: &[GTy] = match kind {
                Kind::Int | Kind::Bernoulli | Kind::BernoulliTensor => {
                    &[GTy::F32, GTy::I32, GTy::U32]
                }
                _ => &[GTy::F32],
            };
            for &ot in outs {
                for half_in in [false, true] {
                    for half_out in [false, true] {
                        if (half_in && inputs == 0) || (half_out && ot != GTy::F32) {
                            continue;
                        }
                        let mut tys = vec![GTy::F32; inputs];
                        tys.push(ot);
                        let mut half = vec![half_in; inputs];
                        half.push(half_out);
                        check(&kernel(kind, &Bindings::distinct_half(&tys, &half)));
                        n += 1;
                    }
                }
            }
        }
        // One buffer for input and output (an in-place draw from itself).
        let shared = Bindings {
            bufs: vec![(GTy::F32, true)],
            operand: vec![0, 0],
            half: vec![],
        };
        check(&kernel(Kind::BernoulliTensor, &shared));
        for half in [false, true] {
            check(&prob_check(&Bindings::distinct_half(
                &[GTy::F32, GTy::I32],
                &[half, false],
            )));
            n += 1;
        }
        assert!(n >= 20, "{n}");
    }
}
