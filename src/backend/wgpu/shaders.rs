//! WGSL generation for the WebGPU kernels (pure text: no device needed).
//!
//! Every kernel reads its sizes, strides and scalar parameters from a
//! metadata array bound at `binding(0)`; tensors follow at `binding(1..)`.
//! Shapes never appear in the shader text, so one pipeline serves every
//! shape and the pipeline cache stays small (a pipeline is keyed by its
//! source). Element types on the device: `f32` (float32), `i32` (int32, and
//! int64 stored in 32 bits) and `u32` (bool, 0 or 1). A float16 tensor is
//! stored natively as `f16` where the device has `shader-f16` (a binding
//! marked in [`Bindings::half`]): kernels still compute in `f32`, the
//! generated text loading `f32(b[i])` and storing through `to_h` (see
//! [`half_io`]); elsewhere float16 is stored as `f32` like bfloat16.
//!
//! Elementwise metadata: `[n, ndim, p0..p7, shape[ndim], then per
//! operand k: offset, strides[ndim]]` (strides are `i32` bits; the operand
//! order is the kernel's: inputs, then the output).

use std::fmt::Write as _;

use crate::ops::elementwise::{BinaryOp, UnaryOp};
use crate::ops::reduce::ReduceOp;

mod conv_gemm;
pub use conv_gemm::{conv_gemm, ConvGemm, CONV_TILE};

/// Threads per workgroup of the elementwise and matmul kernels.
pub const WG: u32 = 256;
/// Threads per workgroup of the row kernels (reductions, softmax).
pub const RED_WG: u32 = 64;
/// Index of the first shape word in elementwise metadata.
pub const EW_SHAPE: usize = 10;

/// An element type on the device.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum GTy {
    F32,
    I32,
    /// bool (0/1)
    U32,
}

impl GTy {
    pub fn wgsl(self) -> &'static str {
        match self {
            GTy::F32 => "f32",
            GTy::I32 => "i32",
            GTy::U32 => "u32",
        }
    }
    fn zero(self) -> &'static str {
        match self {
            GTy::F32 => "0.0",
            GTy::I32 => "0i",
            GTy::U32 => "0u",
        }
    }
    fn one(self) -> &'static str {
        match self {
            GTy::F32 => "1.0",
            GTy::I32 => "1i",
            GTy::U32 => "1u",
        }
    }
}

/// `e` (of type `from`) converted to `to` with the CPU's casting rules
/// (anything non-zero, NaN included, is `true`).
pub fn conv(e: &str, from: GTy, to: GTy) -> String {
    use GTy::*;
    match (from, to) {
        (a, b) if a == b => e.to_string(),
        (F32, U32) => format!("select(1u, 0u, ({e}) == 0.0)"),
        (I32, U32) => format!("select(0u, 1u, ({e}) != 0i)"),
        (F32, I32) => format!("i32(trunc({e}))"),
        (_, t) => format!("{}({e})", t.wgsl()),
    }
}

/// How a kernel binds its buffers: `(element type, writable)` per binding
/// (after the metadata), and for each operand the binding it reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bindings {
    pub bufs: Vec<(GTy, bool)>,
    pub operand: Vec<usize>,
    /// Per binding: whether it holds native float16 (`array<f16>`; the
    /// binding's [`GTy`] is then `F32`, the type its values are computed
    /// in). Shorter than `bufs` (or empty) means the rest are not.
    pub half: Vec<bool>,
}

impl Bindings {
    /// One binding per operand; the last operand is written.
    pub fn distinct(tys: &[GTy]) -> Bindings {
        let n = tys.len();
        Bindings {
            bufs: tys
                .iter()
                .enumerate()
                .map(|(i, &t)| (t, i + 1 == n))
                .collect(),
            operand: (0..n).collect(),
            half: Vec::new(),
        }
    }
    /// [`Bindings::distinct`] with the operands `half` marks stored as float16.
    pub fn distinct_half(tys: &[GTy], half: &[bool]) -> Bindings {
        let mut b = Bindings::distinct(tys);
        b.half = half.to_vec();
        b
    }
    /// Whether binding `j` holds native float16.
    pub fn is_half(&self, j: usize) -> bool {
        self.half.get(j).copied().unwrap_or(false)
    }
    pub(crate) fn any_half(&self) -> bool {
        (0..self.bufs.len()).any(|j| self.is_half(j))
    }
    pub(crate) fn decl(&self) -> String {
        let mut s = String::new();
        if self.any_half() {
            s.push_str("enable f16;\n");
        }
        s.push_str("@group(0) @binding(0) var<storage, read> md: array<u32>;\n");
        for (j, (t, rw)) in self.bufs.iter().enumerate() {
            let acc = if *rw { "read_write" } else { "read" };
            let t = if self.is_half(j) { "f16" } else { t.wgsl() };
            let _ = writeln!(
                s,
                "@group(0) @binding({}) var<storage, {acc}> b{j}: array<{t}>;",
                j + 1,
            );
        }
        if self.any_half() {
            s.push_str(HALF);
        }
        s
    }
    /// `body` (kernel statements) with the float16 bindings' accesses converted.
    pub(crate) fn io(&self, body: &str) -> String {
        if !self.any_half() {
            return body.to_string();
        }
        let half: Vec<bool> = (0..self.bufs.len()).map(|j| self.is_half(j)).collect();
        half_io(body, &half)
    }
    /// The array expression of operand `k`.
    fn arr(&self, k: usize) -> String {
        format!("b{}", self.operand[k])
    }
}

/// `h_round` alone (no `f16` type needed): for kernels that round to
/// float16 values stored as `f32`.
macro_rules! h_round_src {
    () => {
        r#"fn h_round(x: f32) -> f32 {
    let u = bitcast<u32>(x);
    let a = u & 0x7fffffffu;
    let s = u & 0x80000000u;
    if (a >= 0x7f800000u) { return x; }
    if (a >= 0x477ff000u) { return bitcast<f32>(s | 0x7f800000u); }
    if (a < 0x38800000u) {
        let q = round(bitcast<f32>(a) * 16777216.0) * 5.9604644775390625e-8;
        return bitcast<f32>(s | bitcast<u32>(q));
    }
    return bitcast<f32>(s | ((a + 0xfffu + ((a >> 13u) & 1u)) & 0xffffe000u));
}
"#
    };
}
/// Storing an `f32` as float16: `h_round(x)` is the nearest float16 value
/// (as an `f32`), ties to even, overflow to an infinity, NaN kept —
/// computed on the bits, so it is exactly the CPU's `half::f16::from_f32`
/// — and `to_h` converts that value, which float16 represents exactly, so
/// no rounding is left to the driver's `f16(x)` (WGSL leaves the rounding
/// of an inexact conversion to the implementation). Infinities and NaN
/// pass through the conversion as the driver keeps them (IEEE hardware does).
const HALF: &str = concat!(
    h_round_src!(),
    "fn to_h(x: f32) -> f16 { return f16(h_round(x)); }\n"
);
/// [`h_round`](HALF) for kernels without float16 bindings.
pub(crate) const HALF_ROUND: &str = h_round_src!();

/// `body` with every access to a float16 binding `bN` (`half[N]`)
/// converted to and from the `f32` the kernels compute in: a load
/// `bN[e]` becomes `f32(bN[e])`, a store `bN[e] = v;` becomes
/// `bN[e] = to_h(v);` (index and value expressions converted too). The
/// generators write every access as `bN[...]`, reads and plain `=` stores
/// only, so this one rewrite gives every kernel family native float16.
pub fn half_io(body: &str, half: &[bool]) -> String {
    let s = body.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    // The index of the bracket closing the one at `open`.
    let close = |open: usize| -> usize {
        let mut d = 0i32;
        for (k, &c) in s.iter().enumerate().skip(open) {
            match c {
                b'[' | b'(' => d += 1,
                b']' | b')' => {
                    d -= 1;
                    if d == 0 {
                        return k;
                    }
                }
                _ => {}
            }
        }
        s.len()
    };
    // The index of the `;` ending the expression that starts at `from`.
    let end_of = |from: usize| -> usize {
        let mut d = 0i32;
        for (k, &c) in s.iter().enumerate().skip(from) {
            match c {
                b'[' | b'(' => d += 1,
                b']' | b')' => d -= 1,
                b';' if d == 0 => return k,
                _ => {}
            }
        }
        s.len()
    };
    let mut out = String::with_capacity(body.len() + body.len() / 4);
    let mut i = 0;
    let mut copied = 0;
    while i < s.len() {
        if s[i] != b'b' || (i > 0 && ident(s[i - 1])) {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < s.len() && s[j].is_ascii_digit() {
            j += 1;
        }
        let k = body[i + 1..j].parse::<usize>().ok();
        let is_half = k.is_some_and(|k| half.get(k) == Some(&true));
        if j >= s.len() || s[j] != b'[' || !is_half {
            i = j.max(i + 1);
            continue;
        }
        let c = close(j);
        if c >= s.len() {
            break; // unbalanced: no access to convert (generated text never is)
        }
        let acc = format!("{}[{}]", &body[i..j], half_io(&body[j + 1..c], half));
        out.push_str(&body[copied..i]);
        let mut t = c + 1;
        while t < s.len() && s[t] == b' ' {
            t += 1;
        }
        if t + 1 < s.len() && s[t] == b'=' && s[t + 1] != b'=' {
            let e = end_of(t + 1);
            let v = half_io(body[t + 1..e].trim(), half);
            let _ = write!(out, "{acc} = to_h({v})");
            i = e;
        } else {
            let _ = write!(out, "f32({acc})");
            i = c + 1;
        }
        copied = i;
    }
    out.push_str(&body[copied..]);
    out
}

const MATH: &str = r#"
fn nan_f() -> f32 { return bitcast<f32>(0x7fc00000u); }
fn inf_f() -> f32 { return bitcast<f32>(0x7f800000u); }
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn is_inf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
fn pf(j: u32) -> f32 { return bitcast<f32>(md[2u + j]); }
fn pi(j: u32) -> i32 { return bitcast<i32>(md[2u + j]); }
fn log_f(x: f32) -> f32 {
    if (is_nan(x) || x < 0.0) { return nan_f(); }
    if (x == 0.0) { return -inf_f(); }
    if (is_inf(x)) { return x; }
    return log(x);
}
fn expm1_f(x: f32) -> f32 {
    if (abs(x) < 0.5) {
        return x * (1.0 + x / 2.0 * (1.0 + x / 3.0 * (1.0 + x / 4.0 * (1.0 + x / 5.0 * (1.0 + x / 6.0 * (1.0 + x / 7.0 * (1.0 + x / 8.0)))))));
    }
    if (x > 88.7) { return inf_f(); }
    return exp(x) - 1.0;
}
fn exp_f(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    if (x > 88.72) { return inf_f(); }
    if (x < -103.9) { return 0.0; }
    return exp(x);
}
fn log1p_f(x: f32) -> f32 {
    if (abs(x) < 0.5) {
        let s = x / (2.0 + x);
        let s2 = s * s;
        return 2.0 * s * (1.0 + s2 * (1.0 / 3.0 + s2 * (0.2 + s2 * (1.0 / 7.0 + s2 * (1.0 / 9.0 + s2 / 11.0)))));
    }
    return log_f(1.0 + x);
}
fn tanh_f(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    let a = abs(x);
    var r: f32;
    if (a < 0.5) {
        let t = expm1_f(2.0 * a);
        r = t / (t + 2.0);
    } else if (a > 20.0) {
        r = 1.0;
    } else {
        r = 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    }
    return select(r, -r, x < 0.0);
}
fn sigmoid_f(x: f32) -> f32 { return 1.0 / (1.0 + exp_f(-x)); }
fn erf_f(x: f32) -> f32 {
    if (is_nan(x)) { return x; }
    let a = abs(x);
    var r: f32;
    if (a < 0.5) {
        let z = a * a;
        r = 1.1283791670955126 * a * (1.0 - z * (1.0 / 3.0 - z * (0.1 - z * (1.0 / 42.0 - z * (1.0 / 216.0 - z / 1320.0)))));
    } else if (a > 4.0) {
        r = 1.0;
    } else {
        // Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7).
        let t = 1.0 / (1.0 + 0.3275911 * a);
        let p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
        r = 1.0 - p * exp(-a * a);
    }
    return select(r, -r, x < 0.0);
}
fn sqrt_f(x: f32) -> f32 {
    if (x < 0.0) { return nan_f(); }
    return sqrt(x);
}
fn pow_f(a: f32, b: f32) -> f32 {
    if (b == 0.0) { return 1.0; }
    if (is_nan(a) || is_nan(b)) { return nan_f(); }
    if (b == 1.0) { return a; }
    if (b == 2.0) { return a * a; }
    if (a == 0.0) {
        if (b < 0.0) { return inf_f(); }
        return 0.0;
    }
    let bi = trunc(b);
    if (a < 0.0) {
        if (bi != b) { return nan_f(); }
        let m = exp2(b * log2(-a));
        let odd = abs(bi - 2.0 * trunc(bi / 2.0)) == 1.0;
        return select(m, -m, odd);
    }
    return exp2(b * log2(a));
}
fn sign_bit(x: f32) -> bool { return (bitcast<u32>(x) & 0x80000000u) != 0u; }
fn atan2_f(y: f32, x: f32) -> f32 {
    let pi = 3.141592653589793;
    if (is_nan(y) || is_nan(x)) { return nan_f(); }
    if (y == 0.0) {
        if (x < 0.0 || (x == 0.0 && sign_bit(x))) { return select(pi, -pi, sign_bit(y)); }
        return y;
    }
    if (is_inf(x)) {
        if (is_inf(y)) {
            let a = select(0.25 * pi, 0.75 * pi, x < 0.0);
            return select(a, -a, y < 0.0);
        }
        if (x > 0.0) { return select(0.0, -0.0, y < 0.0); }
        return select(pi, -pi, y < 0.0);
    }
    if (x == 0.0 || is_inf(y)) { return select(0.5 * pi, -0.5 * pi, y < 0.0); }
    return atan2(y, x);
}
fn max_f(a: f32, b: f32) -> f32 {
    if (is_nan(a)) { return a; }
    if (is_nan(b)) { return b; }
    return max(a, b);
}
fn min_f(a: f32, b: f32) -> f32 {
    if (is_nan(a)) { return a; }
    if (is_nan(b)) { return b; }
    return min(a, b);
}
"#;

const OFF: &str = r#"
fn off(k: u32, i: u32) -> u32 {
    let nd = md[1];
    let base = 10u + nd + k * (nd + 1u);
    var rem = i;
    var o = bitcast<i32>(md[base]);
    var d = nd;
    loop {
        if (d == 0u) { break; }
        d = d - 1u;
        let s = md[10u + d];
        let c = rem % s;
        rem = rem / s;
        o = o + i32(c) * bitcast<i32>(md[base + 1u + d]);
    }
    return u32(o);
}
"#;

fn ew_shader(b: &Bindings, body: &str) -> String {
    let body = b.io(body);
    format!(
        "{}{MATH}{OFF}
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let i = (wid.y * nwg.x + wid.x) * {WG}u + lid;
    if (i >= md[0]) {{ return; }}
{body}
}}
",
        b.decl()
    )
}

fn load(b: &Bindings, k: usize) -> String {
    format!("{}[off({k}u, i)]", b.arr(k))
}

/// `out = convert(src)`: operands (src, out).
pub fn cast(b: &Bindings, from: GTy, to: GTy) -> String {
    let body = format!(
        "    {}[off(1u, i)] = {};",
        b.arr(1),
        conv(&load(b, 0), from, to)
    );
    ew_shader(b, &body)
}

/// Round the float32 words `b0[0..md[0])` in place to the nearest float16
/// (`half`) or bfloat16 value, ties to even, as the CPU's conversions do
/// (overflow gives an infinity, NaN stays NaN). The device stores float16 and
/// bfloat16 tensors as float32; every kernel that writes one is followed by
/// this pass, so the stored values are always the narrow type's.
pub fn round_narrow(half: bool) -> String {
    let body = if half {
        // float16: 10 mantissa bits; below 2^-14 a fixed quantum of 2^-24,
        // which `round` (ties to even) gives exactly after scaling by 2^24.
        r#"    let a = u & 0x7fffffffu;
    let s = u & 0x80000000u;
    if (a >= 0x7f800000u) { return; }
    if (a >= 0x477ff000u) { b0[i] = s | 0x7f800000u; return; }
    if (a < 0x38800000u) {
        let q = round(bitcast<f32>(a) * 16777216.0) * 5.9604644775390625e-8;
        b0[i] = s | bitcast<u32>(q);
        return;
    }
    b0[i] = s | ((a + 0xfffu + ((a >> 13u) & 1u)) & 0xffffe000u);"#
    } else {
        r#"    if ((u & 0x7fffffffu) > 0x7f800000u) { b0[i] = (u | 0x00400000u) & 0xffff0000u; return; }
    b0[i] = (u + 0x7fffu + ((u >> 16u) & 1u)) & 0xffff0000u;"#
    };
    format!(
        "@group(0) @binding(0) var<storage, read> md: array<u32>;
@group(0) @binding(1) var<storage, read_write> b0: array<u32>;
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let i = (wid.y * nwg.x + wid.x) * {WG}u + lid;
    if (i >= md[0]) {{ return; }}
    let u = b0[i];
{body}
}}
"
    )
}

/// `out = value` (the value's bits in p0): operand (out).
pub fn fill(b: &Bindings, ty: GTy) -> String {
    let v = match ty {
        GTy::F32 => "pf(0u)",
        GTy::I32 => "pi(0u)",
        GTy::U32 => "md[2]",
    };
    ew_shader(b, &format!("    {}[off(0u, i)] = {v};", b.arr(0)))
}

/// The WGSL expression of a unary op on `x` (of type `ty`), giving `out` type.
/// `None` when the device has no kernel for this op and type.
pub fn unary_expr(op: UnaryOp, ty: GTy) -> Option<String> {
    use UnaryOp::*;
    let f = ty == GTy::F32;
    let i = ty == GTy::I32;
    let e = match op {
        Neg if ty != GTy::U32 => "-x".into(),
        Abs if ty != GTy::U32 => "abs(x)".into(),
        Abs => "x".into(),
        Sign if f => "select(sign(x), x, is_nan(x))".into(),
        Sign if i => "sign(x)".into(),
        Square if ty != GTy::U32 => "x * x".into(),
        Floor | Ceil | Round | Trunc if !f => "x".into(),
        Floor => "floor(x)".into(),
        Ceil => "ceil(x)".into(),
        Round => "round(x)".into(),
        Trunc => "trunc(x)".into(),
        Relu if f => "select(x, 0.0, x < 0.0)".into(),
        Relu if i => "max(x, 0i)".into(),
        Clamp { min, max } if ty != GTy::U32 => {
            let (lo, hi) = if f {
                ("pf(0u)", "pf(1u)")
            } else {
                ("pi(0u)", "pi(1u)")
            };
            let mut s = String::from("x");
            if min.is_some() {
                s = format!("select({s}, {lo}, {s} < {lo})");
            }
            if max.is_some() {
                s = format!("select({s}, {hi}, {s} > {hi})");
            }
            s
        }
        LogicalNot => format!("select(0u, 1u, x == {})", ty.zero()),
        BitwiseNot if i => "~x".into(),
        BitwiseNot if ty == GTy::U32 => "1u - x".into(),
        IsNan if f => "select(0u, 1u, is_nan(x))".into(),
        IsInf if f => "select(0u, 1u, is_inf(x))".into(),
        IsFinite if f => "select(1u, 0u, is_nan(x) || is_inf(x))".into(),
        IsNan | IsInf => "0u".into(),
        IsFinite => "1u".into(),
        _ if !f => return None,
        Reciprocal => "1.0 / x".into(),
        Exp => "exp_f(x)".into(),
        Log => "log_f(x)".into(),
        Log2 => "log_f(x) * 1.4426950408889634".into(),
        Log1p => "log1p_f(x)".into(),
        Expm1 => "expm1_f(x)".into(),
        Sqrt => "sqrt_f(x)".into(),
        // 1/sqrt(±0) = ±inf, as on the CPU.
        Rsqrt => "select(1.0 / sqrt_f(x), select(inf_f(), -inf_f(), sign_bit(x)), x == 0.0)".into(),
        Sin => "sin(x)".into(),
        Cos => "cos(x)".into(),
        Tan => "sin(x) / cos(x)".into(),
        Tanh => "tanh_f(x)".into(),
        Sigmoid => "sigmoid_f(x)".into(),
        LeakyRelu(_) => "select(x, x * pf(0u), x < 0.0)".into(),
        Elu(_) => "select(x, pf(0u) * expm1_f(x), x <= 0.0)".into(),
        Gelu => "0.5 * x * (1.0 + erf_f(x * 0.7071067811865476))".into(),
        GeluTanh => {
            "0.5 * x * (1.0 + tanh_f(0.7978845608028654 * (x + 0.044715 * x * x * x)))".into()
        }
        Silu => "x * sigmoid_f(x)".into(),
        Softplus { .. } => {
            "select(log1p_f(exp_f(pf(0u) * x)) / pf(0u), x, pf(0u) * x > pf(1u))".into()
        }
        Erf => "erf_f(x)".into(),
        _ => return None,
    };
    Some(e)
}

/// The scalar parameters (as f64, converted to the element type's bits by the caller) of a unary op.
pub fn unary_params(op: UnaryOp) -> [f64; 2] {
    use UnaryOp::*;
    match op {
        LeakyRelu(a) | Elu(a) => [a, 0.0],
        Softplus { beta, threshold } => [beta, threshold],
        Clamp { min, max } => [min.unwrap_or(0.0), max.unwrap_or(0.0)],
        _ => [0.0, 0.0],
    }
}

/// `out = op(x)`: operands (x, out).
pub fn unary(b: &Bindings, op: UnaryOp, ty: GTy, out: GTy) -> Option<String> {
    let e = unary_expr(op, ty)?;
    let body = format!(
        "    let x = {};\n    {}[off(1u, i)] = {e};",
        load(b, 0),
        b.arr(1)
    );
    let _ = out;
    Some(ew_shader(b, &body))
}

/// The WGSL expression of `g · op'(x)` (float32) from `x`, `y = op(x)` and
/// `g`, the fused gradient of a unary op; the op's parameters are p0 and p1
/// as in [`unary_params`]. `None` for ops without a fused gradient (the
/// caller composes those from primitives), as on the CPU.
pub fn unary_grad_expr(op: UnaryOp) -> Option<&'static str> {
    use UnaryOp::*;
    Some(match op {
        // From x, as on the CPU: 1 - y² and y·(1 - y) cancel for large |x|
        // (and a rounded half-precision y is often exactly ±1 there).
        Tanh => "g * tanh_grad(x)",
        Sigmoid => "g * sigmoid_grad(x)",
        Relu => "select(0.0, g, x > 0.0)",
        LeakyRelu(_) => "select(g * pf(0u), g, x > 0.0)",
        Elu(_) => "select(g * (pf(0u) * exp_f(x)), g, x > 0.0)",
        // d/dx x·Φ(x) = Φ(x) + x·φ(x), x clamped in φ as on the CPU.
        Gelu => {
            "g * (0.5 * (1.0 + erf_f(x * 0.7071067811865476)) + cx(x, 40.0) * exp_f(-0.5 * cx(x, 40.0) * cx(x, 40.0)) * 0.3989422804014327)"
        }
        // 0.5·(1 + tanh(u)) = sigmoid(2u): sigmoid(z) + x·z'·sigmoid'(z).
        GeluTanh => "g * gelu_tanh_grad(cx(x, 1000.0))",
        Silu => "g * silu_grad(x)",
        Softplus { .. } => "select(g * sigmoid_f(x * pf(0u)), g, x * pf(0u) > pf(1u))",
        Erf => "g * (exp_f(-(x * x)) * 1.1283791670955126)",
        _ => return None,
    })
}

/// `out = g · op'(x)`: operands (x, y, g, out), all float32.
pub fn unary_grad(b: &Bindings, op: UnaryOp) -> Option<String> {
    let e = unary_grad_expr(op)?;
    let helpers = "
fn cx(x: f32, m: f32) -> f32 { return select(clamp(x, -m, m), x, is_nan(x)); }
// 1 - tanh²(x) = 4e / (1 + e)² with e = exp(-2|x|); σ'(x) = e / (1 + e)² with e = exp(-|x|).
fn tanh_grad(x: f32) -> f32 {
    let e = exp_f(-2.0 * abs(x));
    return 4.0 * e / ((1.0 + e) * (1.0 + e));
}
fn sigmoid_grad(x: f32) -> f32 {
    let e = exp_f(-abs(x));
    return e / ((1.0 + e) * (1.0 + e));
}
// σ(x)·(1 + x·σ(-x)), σ(x) and σ(-x) from one e = exp(-|x|) (1 - σ(x) cancels for large x).
fn silu_grad(x: f32) -> f32 {
    let e = exp_f(-abs(x));
    let r = 1.0 / (1.0 + e);
    let pos = x >= 0.0;
    return select(e * r, r, pos) * (x * select(r, e * r, pos) + 1.0);
}
fn gelu_tanh_grad(x: f32) -> f32 {
    let z = 1.5957691216057308 * x * (1.0 + 0.044715 * x * x);
    let dz = 1.5957691216057308 * (1.0 + 0.134145 * x * x);
    let e = exp_f(-abs(z));
    let q = 1.0 / (1.0 + e);
    return select(e * q, q, z >= 0.0) + x * dz * (e * q * q);
}
";
    let body = format!(
        "    let x = {};\n    let y = {};\n    let g = {};\n    {}[off(3u, i)] = {e};",
        load(b, 0),
        load(b, 1),
        load(b, 2),
        b.arr(3)
    );
    let src = ew_shader(b, &body);
    // The helpers go after the shared math (they call it), before the entry point.
    let at = src.find("@compute").unwrap_or(0);
    Some(format!("{}{helpers}{}", &src[..at], &src[at..]))
}

/// The WGSL statements of a binary op on `a`, `b` (type `ty`) setting `r`.
pub fn binary_expr(op: BinaryOp, ty: GTy) -> Option<String> {
    use BinaryOp::*;
    let f = ty == GTy::F32;
    let i = ty == GTy::I32;
    let z = ty.zero();
    let pred = |c: &str| format!("r = select(0u, 1u, {c});");
    let s = match op {
        Eq => pred("a == b"),
        Ne => pred("!(a == b)"),
        Lt => pred("a < b"),
        Le => pred("a <= b"),
        Gt => pred("a > b"),
        Ge => pred("a >= b"),
        LogicalAnd => pred(&format!("!(a == {z}) && !(b == {z})")),
        LogicalOr => pred(&format!("!(a == {z}) || !(b == {z})")),
        LogicalXor => pred(&format!("(a == {z}) != (b == {z})")),
        BitAnd if !f => "r = a & b;".into(),
        BitOr if !f => "r = a | b;".into(),
        BitXor if !f => "r = a ^ b;".into(),
        Add if ty == GTy::U32 => "r = a | b;".into(),
        Mul if ty == GTy::U32 => "r = a & b;".into(),
        Maximum if f => "r = max_f(a, b);".into(),
        Minimum if f => "r = min_f(a, b);".into(),
        Maximum => "r = max(a, b);".into(),
        Minimum => "r = min(a, b);".into(),
        _ if ty == GTy::U32 => return None,
        Add => "r = a + b;".into(),
        Sub => "r = a - b;".into(),
        Mul => "r = a * b;".into(),
        Div if f => "r = a / b;".into(),
        FloorDiv if f => "r = floor(a / b);".into(),
        FloorDiv if i => {
            "r = a / b; if ((a % b != 0i) && ((a < 0i) != (b < 0i))) { r = r - 1i; }".into()
        }
        Remainder if f => {
            "r = a - b * trunc(a / b); if (r != 0.0 && ((r < 0.0) != (b < 0.0))) { r = r + b; } if (b == 0.0 || is_inf(a)) { r = nan_f(); } else if (is_inf(b) && !is_nan(a)) { r = select(b, a, (a < 0.0) == (b < 0.0) || a == 0.0); }".into()
        }
        Remainder if i => {
            "r = a % b; if (r != 0i && ((r < 0i) != (b < 0i))) { r = r + b; }".into()
        }
        Pow if f => "r = pow_f(a, b);".into(),
        Pow if i => {
            "r = 1i; var e = b; var p = a; loop { if (e <= 0i) { break; } if ((e & 1i) == 1i) { r = r * p; } p = p * p; e = e >> 1u; }".into()
        }
        Atan2 if f => "r = atan2_f(a, b);".into(),
        _ => return None,
    };
    Some(s)
}

/// `out = a op b`: operands (a, b, out).
pub fn binary(bd: &Bindings, op: BinaryOp, ty: GTy, out: GTy) -> Option<String> {
    let s = binary_expr(op, ty)?;
    let body = format!(
        "    let a = {};\n    let b = {};\n    var r: {};\n    {s}\n    {}[off(2u, i)] = r;",
        load(bd, 0),
        load(bd, 1),
        out.wgsl(),
        bd.arr(2)
    );
    Some(ew_shader(bd, &body))
}

/// `out = cond ? a : b`: operands (cond, a, b, out).
pub fn where_(bd: &Bindings, cond: GTy) -> String {
    let body = format!(
        "    {}[off(3u, i)] = select({}, {}, {} != {});",
        bd.arr(3),
        load(bd, 2),
        load(bd, 1),
        load(bd, 0),
        cond.zero()
    );
    ew_shader(bd, &body)
}

/// `out = x` inside the kept triangle of the last two dims, else 0:
/// operands (x, out); p0 rows, p1 columns, p2 the diagonal offset `k` (i32),
/// p3 1 for the upper triangle (`j - i >= k`), 0 for the lower (`j - i <= k`).
pub fn tri(b: &Bindings, ty: GTy) -> String {
    let body = format!(
        "    let c = i32(i % md[3]);\n    let r = i32((i / md[3]) % md[2]);\n    let k = bitcast<i32>(md[4]);\n    let keep = select(c - r <= k, c - r >= k, md[5] == 1u);\n    {}[off(1u, i)] = select({}, {}, keep);",
        b.arr(1),
        ty.zero(),
        load(b, 0)
    );
    ew_shader(b, &body)
}

/// Inclusive scan (sum, or product when `prod`) along one dim of a dense
/// tensor, one thread per line: operands (x, out) of type `ty`; p0 the
/// scanned length, p1 the product of the dims after it.
pub fn cumulative(b: &Bindings, ty: GTy, prod: bool) -> String {
    let (init, comb) = if prod {
        (ty.one(), "*")
    } else {
        (ty.zero(), "+")
    };
    let body = format!(
        "    let n = md[2];\n    let inner = md[3];\n    let base = (i / inner) * n * inner + i % inner;\n    var acc: {t} = {init};\n    for (var j = 0u; j < n; j = j + 1u) {{\n        let p = base + j * inner;\n        acc = acc {comb} {x}[p];\n        {o}[p] = acc;\n    }}",
        t = ty.wgsl(),
        x = b.arr(0),
        o = b.arr(1),
    );
    item_shader(b, &body)
}

/// A WGSL `f32` constant with exactly `v`'s bits (NaN and infinities included).
fn f32_lit(v: f64) -> String {
    let f = v as f32;
    if f.is_finite() && f == f.trunc() && f.abs() < 1e7 && !(f == 0.0 && f.is_sign_negative()) {
        format!("{f:.1}")
    } else {
        format!("bitcast<f32>(0x{:08x}u)", f.to_bits())
    }
}

/// A fused elementwise program (see [`FusedKernel`](crate::graph::fused::FusedKernel))
/// as one kernel: operands are the program's inputs (of device types
/// `in_tys`, broadcast to its shape), then its outputs. Registers are `f32`
/// (bools as 0 and 1), as on the CPU; each output is stored as `f32`, or as a
/// bool (nonzero is true). `None` when an instruction has no WGSL form.
pub fn fused(
    bd: &Bindings,
    k: &crate::graph::fused::FusedKernel,
    in_tys: &[GTy],
) -> Option<String> {
    use crate::graph::fused::FInstr;
    let mut body = String::new();
    for (r, ins) in k.instrs.iter().enumerate() {
        match ins {
            FInstr::Load(x) => {
                let _ = writeln!(
                    body,
                    "    let r{r} = {};",
                    conv(&load(bd, *x), in_tys[*x], GTy::F32)
                );
            }
            FInstr::Const(c) => {
                let _ = writeln!(body, "    let r{r} = {};", f32_lit(c.to_f64()));
            }
            FInstr::Unary(op, a) => {
                // A fused op's parameters are fixed: written into the source
                // in place of the metadata words the standalone kernel reads.
                let p = unary_params(*op);
                let e = unary_expr(*op, GTy::F32)?
                    .replace("pf(0u)", &f32_lit(p[0]))
                    .replace("pf(1u)", &f32_lit(p[1]));
                let e = match op.out_kind() {
                    crate::ops::elementwise::UnaryOut::Bool => format!("f32({e})"),
                    _ => e,
                };
                let _ = writeln!(
                    body,
                    "    var r{r}: f32;\n    {{ let x = r{a}; r{r} = {e}; }}"
                );
            }
            FInstr::Binary(op, a, b) => {
                let st = binary_expr(*op, GTy::F32)?;
                let (ty, res) = if op.is_predicate() {
                    ("u32", "f32(r)")
                } else {
                    ("f32", "r")
                };
                let _ = writeln!(
                    body,
                    "    var r{r}: f32;\n    {{ let a = r{a}; let b = r{b}; var r: {ty}; {st} r{r} = {res}; }}"
                );
            }
            FInstr::Where(c, a, b) => {
                let _ = writeln!(body, "    let r{r} = select(r{b}, r{a}, r{c} != 0.0);");
            }
        }
    }
    let n_in = in_tys.len();
    for (j, &(r, d)) in k.outputs.iter().enumerate() {
        let to = if d == crate::tensor::DType::Bool {
            GTy::U32
        } else {
            GTy::F32
        };
        let _ = writeln!(
            body,
            "    {}[off({}u, i)] = {};",
            bd.arr(n_in + j),
            n_in + j,
            conv(&format!("r{r}"), GTy::F32, to)
        );
    }
    Some(ew_shader(bd, body.trim_end()))
}

// ---------------------------------------------------------------------------
// Row kernels: one workgroup per output, a tree in workgroup memory.
// Metadata: [nout, nred, p0, nk, nr, xoff, ooff, keep shape[nk], keep
// strides[nk], red shape[nr], red strides[nr], (softmax: out keep
// strides[nk], out red stride)].
// ---------------------------------------------------------------------------

const ROW: &str = r#"
fn keep_off(row: u32) -> u32 {
    let nk = md[3];
    var rem = row;
    var o = bitcast<i32>(md[5]);
    var d = nk;
    loop {
        if (d == 0u) { break; }
        d = d - 1u;
        let s = md[7u + d];
        o = o + i32(rem % s) * bitcast<i32>(md[7u + nk + d]);
        rem = rem / s;
    }
    return u32(o);
}
fn red_off(j: u32) -> i32 {
    let nk = md[3];
    let nr = md[4];
    let base = 7u + 2u * nk;
    var rem = j;
    var o = 0i;
    var d = nr;
    loop {
        if (d == 0u) { break; }
        d = d - 1u;
        let s = md[base + d];
        o = o + i32(rem % s) * bitcast<i32>(md[base + nr + d]);
        rem = rem / s;
    }
    return o;
}
"#;

fn row_shader(b: &Bindings, acc: GTy, body: &str) -> String {
    let body = b.io(body);
    format!(
        "{}{MATH}{ROW}
var<workgroup> sh: array<{acc}, {RED_WG}>;
@compute @workgroup_size({RED_WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let row = wid.y * nwg.x + wid.x;
    let valid = row < md[0];
    let nred = md[1];
    var xb = 0u;
    if (valid) {{ xb = keep_off(row); }}
{body}
}}
",
        b.decl(),
        acc = acc.wgsl()
    )
}

/// A tree over `sh` combining with `comb` (a function or operator template using `A`, `B`).
fn tree(comb: &str) -> String {
    let c = comb.replace('A', "sh[lid]").replace('B', "sh[lid + s]");
    format!(
        "    workgroupBarrier();
    for (var s = {}u; s > 0u; s = s >> 1u) {{
        if (lid < s) {{ sh[lid] = {c}; }}
        workgroupBarrier();
    }}",
        RED_WG / 2
    )
}

/// Reduce (x, out) with `op`; `acc` is the accumulation type, `out` the stored type.
pub fn reduce(bd: &Bindings, op: ReduceOp, x: GTy, acc: GTy, out: GTy) -> Option<String> {
    use ReduceOp::*;
    let xa = bd.arr(0);
    let oa = bd.arr(1);
    let ld = |v: &str| conv(&format!("{xa}[u32(i32(xb) + red_off({v}))]"), x, acc);
    let f = acc == GTy::F32;
    let (init, comb) = match op {
        Sum | Mean => (acc.zero().to_string(), "A + B"),
        Prod => (acc.one().to_string(), "A * B"),
        Max if f => ("-inf_f()".to_string(), "max_f(A, B)"),
        Min if f => ("inf_f()".to_string(), "min_f(A, B)"),
        Max if acc == GTy::I32 => ("-2147483647i - 1i".to_string(), "max(A, B)"),
        Min if acc == GTy::I32 => ("2147483647i".to_string(), "min(A, B)"),
        Max => ("0u".to_string(), "max(A, B)"),
        Min => ("1u".to_string(), "min(A, B)"),
        All if acc == GTy::U32 => ("1u".to_string(), "min(A, B)"),
        Any if acc == GTy::U32 => ("0u".to_string(), "max(A, B)"),
        Var { .. } | LogSumExp if f => ("0.0".to_string(), "A + B"),
        _ => return None,
    };
    if matches!(op, Mean | Var { .. } | LogSumExp) && !f {
        return None;
    }
    let fold = |v: &str| comb.replace('A', "a").replace('B', v);
    let mut body = String::new();
    match op {
        Var { std, .. } => {
            let _ = write!(
                body,
                "    var a = 0.0;
    if (valid) {{ for (var j = lid; j < nred; j = j + {RED_WG}u) {{ a = a + {}; }} }}
    sh[lid] = a;
{}
    let mean = sh[0] / f32(nred);
    workgroupBarrier();
    a = 0.0;
    if (valid) {{ for (var j = lid; j < nred; j = j + {RED_WG}u) {{ let d = {} - mean; a = a + d * d; }} }}
    sh[lid] = a;
{}
    if (valid && lid == 0u) {{
        let v = sh[0] / max(0.0, f32(nred) - pf(0u));
        {oa}[md[6] + row] = {};
    }}",
                ld("j"),
                tree("A + B"),
                ld("j"),
                tree("A + B"),
                if std { "sqrt(v)" } else { "v" }
            );
        }
        LogSumExp => {
            let _ = write!(
                body,
                "    var a = -inf_f();
    if (valid) {{ for (var j = lid; j < nred; j = j + {RED_WG}u) {{ a = max_f(a, {}); }} }}
    sh[lid] = a;
{}
    let m = sh[0];
    workgroupBarrier();
    a = 0.0;
    if (valid && !is_inf(m)) {{ for (var j = lid; j < nred; j = j + {RED_WG}u) {{ a = a + exp_f({} - m); }} }}
    sh[lid] = a;
{}
    if (valid && lid == 0u) {{
        {oa}[md[6] + row] = select(m + log_f(sh[0]), m, is_inf(m));
    }}",
                ld("j"),
                tree("max_f(A, B)"),
                ld("j"),
                tree("A + B"),
            );
        }
        _ => {
            let fin = match op {
                Mean => "sh[0] / f32(nred)".to_string(),
                _ => "sh[0]".to_string(),
            };
            let _ = write!(
                body,
                "    var a: {acc} = {init};
    if (valid) {{ for (var j = lid; j < nred; j = j + {RED_WG}u) {{ a = {}; }} }}
    sh[lid] = a;
{}
    if (valid && lid == 0u) {{ {oa}[md[6] + row] = {}; }}",
                fold(&ld("j")),
                tree(comb),
                conv(&fin, acc, out),
                acc = acc.wgsl()
            );
        }
    }
    Some(row_shader(bd, acc, &body))
}

/// Softmax (log-softmax when `p0 != 0`) of (x, out) over the single reduced dim.
pub fn softmax(bd: &Bindings) -> String {
    let xa = bd.arr(0);
    let oa = bd.arr(1);
    let body = format!(
        "    let nk = md[3];
    let ob = 7u + 2u * nk + 2u;
    var o = 0u;
    if (valid) {{
        var rem = row;
        var q = bitcast<i32>(md[6]);
        var d = nk;
        loop {{
            if (d == 0u) {{ break; }}
            d = d - 1u;
            let s = md[7u + d];
            q = q + i32(rem % s) * bitcast<i32>(md[ob + d]);
            rem = rem / s;
        }}
        o = u32(q);
    }}
    let ostride = bitcast<i32>(md[ob + nk]);
    var a = -inf_f();
    if (valid) {{ for (var j = lid; j < nred; j = j + {RED_WG}u) {{ a = max_f(a, {xa}[u32(i32(xb) + red_off(j))]); }} }}
    sh[lid] = a;
{}
    let m = sh[0];
    workgroupBarrier();
    a = 0.0;
    if (valid) {{ for (var j = lid; j < nred; j = j + {RED_WG}u) {{ a = a + exp_f({xa}[u32(i32(xb) + red_off(j))] - m); }} }}
    sh[lid] = a;
{}
    let tot = sh[0];
    if (valid) {{
        for (var j = lid; j < nred; j = j + {RED_WG}u) {{
            let v = {xa}[u32(i32(xb) + red_off(j))] - m;
            var r: f32;
            if (md[2] != 0u) {{ r = v - log_f(tot); }} else {{ r = exp_f(v) / tot; }}
            {oa}[u32(i32(o) + i32(j) * ostride)] = r;
        }}
    }}",
        tree("max_f(A, B)"),
        tree("A + B"),
    );
    row_shader(bd, GTy::F32, &body)
}

/// Softmax (log-softmax when `md[2] != 0`) gradient of (y, g, out) over the
/// single reduced dim: `y·(g - Σ g·y / Σ y)`, or `g - exp(y)·Σ g` for log-softmax.
/// Metadata as [`softmax`] for `y` (offset md[5]), then g's offset (md[6])
/// and strides after y's, then out's offset and strides.
pub fn softmax_grad(bd: &Bindings) -> String {
    let (ya, ga, oa) = (bd.arr(0), bd.arr(1), bd.arr(2));
    let body = format!(
        "    let nk = md[3];
    let gb = 9u + 2u * nk;
    let ob = gb + nk + 1u;
    var go = 0i;
    var oo = 0i;
    if (valid) {{
        var rem = row;
        go = bitcast<i32>(md[6]);
        oo = bitcast<i32>(md[ob]);
        var d = nk;
        loop {{
            if (d == 0u) {{ break; }}
            d = d - 1u;
            let s = md[7u + d];
            let c = i32(rem % s);
            go = go + c * bitcast<i32>(md[gb + d]);
            oo = oo + c * bitcast<i32>(md[ob + 1u + d]);
            rem = rem / s;
        }}
    }}
    let gs = bitcast<i32>(md[gb + nk]);
    let os = bitcast<i32>(md[ob + 1u + nk]);
    let lg = md[2] != 0u;
    var a = 0.0;
    if (valid) {{
        for (var j = lid; j < nred; j = j + {RED_WG}u) {{
            let gv = {ga}[u32(go + i32(j) * gs)];
            if (lg) {{ a = a + gv; }} else {{ a = a + gv * {ya}[u32(i32(xb) + red_off(j))]; }}
        }}
    }}
    sh[lid] = a;
{}
    var tot = sh[0];
    workgroupBarrier();
    // Σ y, to weigh Σ g·y by: rounded outputs do not sum to exactly 1, and the
    // dominant entry's g - Σ g·y cancels to about (1 - y)·g, below that error.
    a = 0.0;
    if (valid && !lg) {{
        for (var j = lid; j < nred; j = j + {RED_WG}u) {{ a = a + {ya}[u32(i32(xb) + red_off(j))]; }}
    }}
    sh[lid] = a;
{}
    if (!lg) {{ tot = tot / sh[0]; }}
    if (valid) {{
        for (var j = lid; j < nred; j = j + {RED_WG}u) {{
            let yv = {ya}[u32(i32(xb) + red_off(j))];
            let gv = {ga}[u32(go + i32(j) * gs)];
            var r: f32;
            if (lg) {{ r = gv - exp_f(yv) * tot; }} else {{ r = yv * (gv - tot); }}
            {oa}[u32(oo + i32(j) * os)] = r;
        }}
    }}",
        tree("A + B"),
        tree("A + B"),
    );
    row_shader(bd, GTy::F32, &body)
}

/// Index (and value) of the first maximum (`max`) or minimum of each row:
/// operands (x, indices) or (x, values, indices); the values' offset is p0.
pub fn arg_reduce(bd: &Bindings, ty: GTy, max: bool, with_values: bool) -> String {
    let xa = bd.arr(0);
    let ia = bd.arr(if with_values { 2 } else { 1 });
    let cmp = if max { ">" } else { "<" };
    let better = if ty == GTy::F32 {
        format!(
            "fn better(va: f32, ia: u32, vb: f32, ib: u32) -> bool {{
    if (ia == 0xffffffffu) {{ return ib != 0xffffffffu; }}
    if (ib == 0xffffffffu) {{ return false; }}
    if (is_nan(vb)) {{ return !is_nan(va) || ib < ia; }}
    if (is_nan(va)) {{ return false; }}
    return vb {cmp} va || (vb == va && ib < ia);
}}"
        )
    } else {
        format!(
            "fn better(va: {t}, ia: u32, vb: {t}, ib: u32) -> bool {{
    if (ia == 0xffffffffu) {{ return ib != 0xffffffffu; }}
    if (ib == 0xffffffffu) {{ return false; }}
    return vb {cmp} va || (vb == va && ib < ia);
}}",
            t = ty.wgsl()
        )
    };
    let store_v = if with_values {
        format!("{}[md[2] + row] = sv[0];", bd.arr(1))
    } else {
        String::new()
    };
    let body = format!(
        "    var bv: {t};
    var bi = 0xffffffffu;
    if (valid) {{
        for (var j = lid; j < nred; j = j + {RED_WG}u) {{
            let v = {xa}[u32(i32(xb) + red_off(j))];
            if (better(bv, bi, v, j)) {{ bv = v; bi = j; }}
        }}
    }}
    sv[lid] = bv;
    si[lid] = bi;
    workgroupBarrier();
    for (var s = {half}u; s > 0u; s = s >> 1u) {{
        if (lid < s && better(sv[lid], si[lid], sv[lid + s], si[lid + s])) {{
            sv[lid] = sv[lid + s];
            si[lid] = si[lid + s];
        }}
        workgroupBarrier();
    }}
    if (valid && lid == 0u) {{
        {ia}[md[6] + row] = i32(si[0]);
        {store_v}
    }}",
        t = ty.wgsl(),
        half = RED_WG / 2
    );
    let src = row_shader(bd, GTy::U32, &body).replace("var<workgroup> sh:", "var<workgroup> si:");
    src.replace(
        "var<workgroup> si:",
        &format!(
            "{better}\nvar<workgroup> sv: array<{}, {RED_WG}>;\nvar<workgroup> si:",
            ty.wgsl()
        ),
    )
}

/// Layer norm (RMS norm when `rms`) over contiguous rows of `nred`
/// elements: operands (x, [weight], [bias], out, mean, rstd); eps in p0.
/// Row metadata as [`reduce`] for `x` (offset md[5]); out's offset md[6],
/// then the offsets of mean, rstd, weight and bias (md[11..15]).
pub fn layer_norm(bd: &Bindings, has_w: bool, has_b: bool, rms: bool) -> String {
    let mut k = 1;
    let w = if has_w {
        k += 1;
        format!(" * {}[md[13] + j]", bd.arr(k - 1))
    } else {
        String::new()
    };
    let b = if has_b {
        k += 1;
        format!(" + {}[md[14] + j]", bd.arr(k - 1))
    } else {
        String::new()
    };
    let (xa, oa, ma, ra) = (bd.arr(0), bd.arr(k), bd.arr(k + 1), bd.arr(k + 2));
    let first = if rms {
        "    let mean = 0.0;".to_string()
    } else {
        format!(
            "    var a = 0.0;
    if (valid) {{ for (var j = lid; j < nred; j = j + {RED_WG}u) {{ a = a + {xa}[xb + j]; }} }}
    sh[lid] = a;
{}
    let mean = sh[0] / f32(nred);
    workgroupBarrier();",
            tree("A + B")
        )
    };
    let body = format!(
        "{first}
    var q = 0.0;
    if (valid) {{ for (var j = lid; j < nred; j = j + {RED_WG}u) {{ let d = {xa}[xb + j] - mean; q = q + d * d; }} }}
    sh[lid] = q;
{}
    let r = 1.0 / sqrt(sh[0] / f32(nred) + pf(0u));
    if (valid) {{
        let ob = xb - md[5] + md[6];
        for (var j = lid; j < nred; j = j + {RED_WG}u) {{
            {oa}[ob + j] = ({xa}[xb + j] - mean) * r{w}{b};
        }}
        if (lid == 0u) {{
            {ma}[md[11] + row] = mean;
            {ra}[md[12] + row] = r;
        }}
    }}",
        tree("A + B")
    );
    row_shader(bd, GTy::F32, &body)
}

/// Layer-norm (RMS-norm when `rms`) input gradient, one workgroup per row:
/// operands (x, g, mean, rstd[, w], dx), each a dense block of rows from its
/// offset; row metadata as [`layer_norm`] for `x` (offset md[5]), dx's
/// offset md[6], then the offsets of g, mean, rstd and w (md[11..15]).
/// `dx = r·(ĝ - x̂·mean(ĝ·x̂) - mean(ĝ))` with `ĝ = g·w`,
/// `x̂ = (x - μ)·r` (no `mean(ĝ)` term and `μ = 0` for RMS norm).
pub fn layer_norm_grad_input(bd: &Bindings, has_w: bool, rms: bool) -> String {
    let (xa, ga, ma, ra) = (bd.arr(0), bd.arr(1), bd.arr(2), bd.arr(3));
    let da = bd.arr(if has_w { 5 } else { 4 });
    let gh = if has_w {
        format!("{ga}[gb + j] * {}[md[14] + j]", bd.arr(4))
    } else {
        format!("{ga}[gb + j]")
    };
    let mu = if rms {
        "0.0".to_string()
    } else {
        format!("{ma}[md[12] + row]")
    };
    let m1 = if rms { "0.0" } else { "sh[0] / n" };
    let body = format!(
        "    let n = f32(nred);
    var mu = 0.0;
    var r = 0.0;
    var gb = 0u;
    if (valid) {{ mu = {mu}; r = {ra}[md[13] + row]; gb = xb - md[5] + md[11]; }}
    var a1 = 0.0;
    var a2 = 0.0;
    if (valid) {{
        for (var j = lid; j < nred; j = j + {RED_WG}u) {{
            let gh = {gh};
            a1 = a1 + gh;
            a2 = a2 + gh * (({xa}[xb + j] - mu) * r);
        }}
    }}
    sh[lid] = a1;
{}
    let m1 = {m1};
    workgroupBarrier();
    sh[lid] = a2;
{}
    let m2 = sh[0] / n;
    if (valid) {{
        let db = xb - md[5] + md[6];
        for (var j = lid; j < nred; j = j + {RED_WG}u) {{
            let gh = {gh};
            {da}[db + j] = r * (gh - (({xa}[xb + j] - mu) * r) * m2 - m1);
        }}
    }}",
        tree("A + B"),
        tree("A + B"),
    );
    row_shader(bd, GTy::F32, &body)
}

/// Layer-norm weight and bias gradients, one thread per column walking the
/// rows in order: operands (x, g, mean, rstd[, dw][, db]), each a dense
/// block from its offset; md: [len, rows, then the offsets of x, g, mean,
/// rstd, dw, db]. `dw = Σ g·x̂`, `db = Σ g`.
pub fn layer_norm_grad_params(bd: &Bindings, has_dw: bool, has_db: bool, rms: bool) -> String {
    let (xa, ga, ma, ra) = (bd.arr(0), bd.arr(1), bd.arr(2), bd.arr(3));
    let mu = if rms {
        "0.0".to_string()
    } else {
        format!("{ma}[md[4] + r]")
    };
    let mut body = format!(
        "    let len = md[0];
    let rows = md[1];
    var sw = 0.0;
    var sb = 0.0;
    for (var r = 0u; r < rows; r = r + 1u) {{
        let k = r * len + i;
        let gv = {ga}[md[3] + k];
        sw = sw + gv * (({xa}[md[2] + k] - {mu}) * {ra}[md[5] + r]);
        sb = sb + gv;
    }}"
    );
    let mut k = 4;
    if has_dw {
        body += &format!("\n    {}[md[6] + i] = sw;", bd.arr(k));
        k += 1;
    }
    if has_db {
        body += &format!("\n    {}[md[7] + i] = sb;", bd.arr(k));
    }
    ew_shader(bd, &body)
}

/// The flags of an optimizer update that change its WGSL (per-step
/// values — learning rate, bias corrections, SGD's first-step flag in the
/// multi-tensor kernel — are metadata words, so they never recompile).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum OptimRule {
    /// SGD over (param, grad[, momentum buffer]).
    Sgd {
        with_buf: bool,
        nesterov: bool,
        maximize: bool,
        wd: bool,
    },
    /// Adam/AdamW over (param, grad, exp_avg, exp_avg_sq[, max_exp_avg_sq]).
    Adam {
        amsgrad: bool,
        maximize: bool,
        wd: bool,
        decoupled: bool,
        /// Which form of `lerp(m, g, 1 - beta1)` the CPU uses for that weight.
        low: bool,
    },
    /// RMSprop over (param, grad, square_avg[, momentum buffer][, grad_avg]).
    Rmsprop {
        with_buf: bool,
        centered: bool,
        maximize: bool,
        wd: bool,
        /// Which form of `lerp(grad_avg, g, 1 - alpha)` the CPU uses.
        low: bool,
    },
}

impl OptimRule {
    /// Operands per parameter: the parameter, its gradient, then its state.
    pub fn operands(self) -> usize {
        match self {
            OptimRule::Sgd { with_buf, .. } => 2 + with_buf as usize,
            OptimRule::Adam { amsgrad, .. } => 4 + amsgrad as usize,
            OptimRule::Rmsprop {
                with_buf, centered, ..
            } => 3 + with_buf as usize + centered as usize,
        }
    }
}

/// Where SGD's "first step" flag comes from: fixed in the source (the
/// per-parameter kernel) or parameter word 4 of the tensor's block.
#[derive(Copy, Clone)]
enum First {
    Fixed(bool),
    Word,
}

/// How an optimizer body reads and writes one parameter's operands and
/// reads its parameter words. Per-parameter kernel (`multi` false): operand
/// `k` is `b{binding}[o{k}]` at offset `o{k}` from the elementwise
/// metadata, parameter words `pf(j)`. Multi-tensor kernel: the statements
/// run once for whichever parameter the workgroup updates, on values a
/// `switch` loaded into `v{k}`; a written value is kept in `n{k}` for the
/// `switch` that stores it, and parameter words are `pt(blk, j)`.
struct OptimIo<'a> {
    bd: &'a Bindings,
    multi: bool,
}

impl OptimIo<'_> {
    fn ld(&self, k: usize) -> String {
        if self.multi {
            format!("v{k}")
        } else {
            format!("b{}[o{k}]", self.bd.operand[k])
        }
    }
    fn st(&self, k: usize, e: &str) -> String {
        if self.multi {
            format!("let n{k} = {e};")
        } else {
            format!("b{}[o{k}] = {e};", self.bd.operand[k])
        }
    }
    fn p(&self, j: u32) -> String {
        if self.multi {
            format!("pt(blk, {j}u)")
        } else {
            format!("pf({j}u)")
        }
    }
}

/// The statements of one element's update under `rule` (see [`sgd`],
/// [`adam`] and [`rmsprop`] for the operands and parameter words), with
/// operands' offsets `o{k}` already computed.
fn optim_body(io: &OptimIo<'_>, rule: OptimRule, first: First) -> String {
    let p = |j: u32| io.p(j);
    let ld = |k: usize| io.ld(k);
    match rule {
        OptimRule::Sgd {
            with_buf,
            nesterov,
            maximize,
            wd,
        } => {
            let mut body = format!(
                "    let p = {};\n    var g = {}{};",
                ld(0),
                if maximize { "-" } else { "" },
                ld(1)
            );
            if wd {
                body += &format!("\n    g = g + {} * p;", p(1));
            }
            if with_buf {
                let later = format!("{} * {} + {} * g", ld(2), p(2), p(3));
                let b = match first {
                    First::Fixed(true) => "g".to_string(),
                    First::Fixed(false) => later,
                    First::Word => format!("select({later}, g, md[blk + 6u] != 0u)"),
                };
                body += &format!(
                    "\n    let b = {b};\n    {}\n    g = {};",
                    io.st(2, "b"),
                    if nesterov {
                        format!("g + {} * b", p(2))
                    } else {
                        "b".to_string()
                    }
                );
            }
            body += &format!("\n    {}", io.st(0, &format!("p + {} * g", p(0))));
            body
        }
        OptimRule::Adam {
            amsgrad,
            maximize,
            wd,
            decoupled,
            low,
        } => {
            let mut body = format!(
                "    var p = {};\n    var g = {}{};",
                ld(0),
                if maximize { "-" } else { "" },
                ld(1)
            );
            if wd {
                body += &if decoupled {
                    format!("\n    p = p * {};", p(7))
                } else {
                    format!("\n    g = g + {} * p;", p(6))
                };
            }
            body += &format!(
                "\n    let a = {};\n    let m = {};\n    let sq = {} * {} + {} * g * g;",
                ld(2),
                if low {
                    format!("a + {} * (g - a)", p(3))
                } else {
                    format!("g - (g - a) * (1.0 - {})", p(3))
                },
                ld(3),
                p(4),
                p(5)
            );
            if amsgrad {
                body += &format!("\n    let d = max_f({}, sq);\n    {}", ld(4), io.st(4, "d"));
            } else {
                body += "\n    let d = sq;";
            }
            body += &format!(
                "\n    let denom = sqrt(d) / {} + {};\n    {}\n    {}\n    {}",
                p(1),
                p(2),
                io.st(0, &format!("p + {} * m / denom", p(0))),
                io.st(2, "m"),
                io.st(3, "sq")
            );
            body
        }
        OptimRule::Rmsprop {
            with_buf,
            centered,
            maximize,
            wd,
            low,
        } => {
            let mut body = format!(
                "    let p = {};\n    var g = {}{};",
                ld(0),
                if maximize { "-" } else { "" },
                ld(1)
            );
            if wd {
                body += &format!("\n    g = g + {} * p;", p(1));
            }
            body += &format!(
                "\n    let sq = {} * {} + {} * g * g;\n    {}",
                ld(2),
                p(2),
                p(3),
                io.st(2, "sq")
            );
            if centered {
                let k = 3 + with_buf as usize;
                body += &format!(
                    "\n    let a0 = {};\n    let a = {};\n    {}\n    let avg = sqrt(sq - a * a) + {};",
                    ld(k),
                    if low {
                        format!("a0 + {} * (g - a0)", p(3))
                    } else {
                        format!("g - (g - a0) * (1.0 - {})", p(3))
                    },
                    io.st(k, "a"),
                    p(4)
                );
            } else {
                body += &format!("\n    let avg = sqrt(sq) + {};", p(4));
            }
            if with_buf {
                body += &format!(
                    "\n    let b = {} * {} + g / avg;\n    {}\n    {}",
                    ld(3),
                    p(5),
                    io.st(3, "b"),
                    io.st(0, &format!("p + {} * b", p(0)))
                );
            } else {
                body += &format!("\n    {}", io.st(0, &format!("p + {} * g / avg", p(0))));
            }
            body
        }
    }
}

/// The per-parameter kernel of `rule` (operands in the order of
/// [`OptimRule`]; elementwise metadata); `first`: SGD's momentum buffer
/// starts from the gradient.
pub fn optim_single(bd: &Bindings, rule: OptimRule, first: bool) -> String {
    let io = OptimIo { bd, multi: false };
    let mut body = String::new();
    for k in 0..rule.operands() {
        let _ = writeln!(body, "    let o{k} = off({k}u, i);");
    }
    body += &optim_body(&io, rule, First::Fixed(first));
    ew_shader(bd, &body)
}

/// SGD update of operands (param, grad[, momentum buffer]), in place:
/// p0 = -lr, p1 = weight decay, p2 = momentum, p3 = 1 - dampening.
pub fn sgd(
    bd: &Bindings,
    with_buf: bool,
    first: bool,
    nesterov: bool,
    maximize: bool,
    wd: bool,
) -> String {
    let rule = OptimRule::Sgd {
        with_buf,
        nesterov,
        maximize,
        wd,
    };
    optim_single(bd, rule, first)
}

/// Adam/AdamW update of operands (param, grad, exp_avg, exp_avg_sq[, max_sq]):
/// p0 = -lr/bc1, p1 = sqrt(bc2), p2 = eps, p3 = 1 - beta1, p4 = beta2,
/// p5 = 1 - beta2, p6 = weight decay, p7 = 1 - lr * weight decay.
pub fn adam(
    bd: &Bindings,
    amsgrad: bool,
    maximize: bool,
    wd: bool,
    decoupled: bool,
    low: bool,
) -> String {
    let rule = OptimRule::Adam {
        amsgrad,
        maximize,
        wd,
        decoupled,
        low,
    };
    optim_single(bd, rule, false)
}

/// RMSprop update of operands (param, grad, square_avg[, momentum buffer][,
/// grad_avg]), in place: p0 = -lr, p1 = weight decay, p2 = alpha,
/// p3 = 1 - alpha, p4 = eps, p5 = momentum. `low` picks the form of
/// `lerp(grad_avg, g, 1 - alpha)` the CPU uses for that weight.
pub fn rmsprop(
    bd: &Bindings,
    with_buf: bool,
    centered: bool,
    maximize: bool,
    wd: bool,
    low: bool,
) -> String {
    let rule = OptimRule::Rmsprop {
        with_buf,
        centered,
        maximize,
        wd,
        low,
    };
    optim_single(bd, rule, false)
}

/// The multi-tensor kernels' accessors: parameter word `j` and the element
/// offset of operand `k` at element `i`, in the tensor block at word `blk`
/// (a block is laid out as elementwise metadata).
const OFFT: &str = r#"
fn pt(blk: u32, j: u32) -> f32 { return bitcast<f32>(md[blk + 2u + j]); }
fn offt(blk: u32, k: u32, i: u32) -> u32 {
    let nd = md[blk + 1u];
    let base = blk + 10u + nd + k * (nd + 1u);
    var rem = i;
    var o = bitcast<i32>(md[base]);
    var d = nd;
    loop {
        if (d == 0u) { break; }
        d = d - 1u;
        let s = md[blk + 10u + d];
        let c = rem % s;
        rem = rem / s;
        o = o + i32(c) * bitcast<i32>(md[base + 1u + d]);
    }
    return u32(o);
}
"#;

/// One dispatch updating `tensors` parameters under `rule`: operand
/// `t * rule.operands() + k` is operand `k` of parameter `t`, bound through
/// `bd` (buffers shared by several operands are bound once). Metadata:
/// `[K, W_0..W_K, blk_0..blk_{K-1}, blocks]`: parameter `t` covers
/// workgroups `[W_t, W_{t+1})` (each starts on a workgroup of its own), and
/// its block at word `blk_t` is elementwise metadata of its operands (its
/// element count, shape, offsets and strides, and its parameter words —
/// Adam's bias corrections per parameter, SGD's first-step flag in word 4).
/// A workgroup finds its parameter `t` by a linear search of the `W` table
/// (uniform across the workgroup); its operands' offsets come from the
/// block, a `switch` on `t` loads them from the bindings case `t` names,
/// the update runs once and a second `switch` stores the results.
pub fn optim_multi(bd: &Bindings, rule: OptimRule, tensors: usize) -> String {
    let n = rule.operands();
    let mut body = String::new();
    for k in 0..n {
        let _ = writeln!(body, "    let o{k} = offt(blk, {k}u, i);");
    }
    for k in 0..n {
        let _ = writeln!(body, "    var v{k} = 0.0;");
    }
    // Loads, the update once, stores: only the memory accesses sit in the
    // switch (a software driver that runs every case under a mask then
    // pays K times the accesses, not K times the update).
    body += "    switch t {\n";
    for t in 0..tensors {
        let _ = write!(body, "        case {t}u: {{");
        for k in 0..n {
            let _ = write!(body, " v{k} = b{}[o{k}];", bd.operand[t * n + k]);
        }
        body += " }\n";
    }
    body += "        default: {}\n    }\n";
    body += &optim_body(&OptimIo { bd, multi: true }, rule, First::Word);
    body += "\n    switch t {\n";
    for t in 0..tensors {
        let _ = write!(body, "        case {t}u: {{");
        for k in (0..n).filter(|&k| k != 1) {
            let _ = write!(body, " b{}[o{k}] = n{k};", bd.operand[t * n + k]);
        }
        body += " }\n";
    }
    body += "        default: {}\n    }";
    let body = bd.io(&body);
    format!(
        "{}{MATH}{OFFT}
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let w = wid.y * nwg.x + wid.x;
    let nt = md[0];
    if (w >= md[1u + nt]) {{ return; }}
    var t = 0u;
    loop {{
        if (t + 1u >= nt || w < md[2u + t]) {{ break; }}
        t = t + 1u;
    }}
    let blk = md[2u + nt + t];
    let i = (w - md[1u + t]) * {WG}u + lid;
    if (i >= md[blk]) {{ return; }}
{body}
}}
",
        bd.decl()
    )
}

/// WGSL of the matmul kernels: the offsets `ao`, `bo`, `oo` of batch
/// element `bi` in a, b and out (metadata as [`matmul`]'s; `nb` batch dims).
const MM_BATCH: &str = "    var ao = bitcast<i32>(md[6]);
    var bo = bitcast<i32>(md[7]);
    var oo = bitcast<i32>(md[8]);
    var d = nb;
    loop {
        if (d == 0u) { break; }
        d = d - 1u;
        let s = md[15u + d];
        let c = i32(bi % s);
        bi = bi / s;
        ao = ao + c * bitcast<i32>(md[15u + nb + d]);
        bo = bo + c * bitcast<i32>(md[15u + 2u * nb + d]);
        oo = oo + c * bitcast<i32>(md[15u + 3u * nb + d]);
    }
";

/// Batched matmul of (a, b, out), one thread per output element.
/// Metadata: [n, M, N, K, nb, accumulate, a_off, b_off, o_off, a_sm, a_sk,
/// b_sk, b_sn, o_sm, o_sn, batch shape[nb], a/b/o batch strides[nb] each].
pub fn matmul(bd: &Bindings, ty: GTy) -> String {
    let (a, b, o) = (bd.arr(0), bd.arr(1), bd.arr(2));
    let body = format!(
        "    let mm = md[1];
    let nn = md[2];
    let kk = md[3];
    let nb = md[4];
    let col = i % nn;
    let r = (i / nn) % mm;
    var bi = i / (nn * mm);
{MM_BATCH}    ao = ao + i32(r) * bitcast<i32>(md[9]);
    bo = bo + i32(col) * bitcast<i32>(md[12]);
    oo = oo + i32(r) * bitcast<i32>(md[13]) + i32(col) * bitcast<i32>(md[14]);
    let ask = bitcast<i32>(md[10]);
    let bsk = bitcast<i32>(md[11]);
    var acc: {t} = {z};
    for (var k = 0u; k < kk; k = k + 1u) {{
        acc = acc + {a}[u32(ao + i32(k) * ask)] * {b}[u32(bo + i32(k) * bsk)];
    }}
    if (md[5] != 0u) {{ acc = acc + {o}[u32(oo)]; }}
    {o}[u32(oo)] = acc;",
        t = ty.wgsl(),
        z = ty.zero(),
    );
    // `off` is unused here but harmless; the row/elementwise prelude keeps one entry shape.
    ew_shader(bd, &body)
}

/// Side of the square output tile one workgroup of [`matmul_tiled`] computes.
pub const MM_TILE: u32 = 16;

/// Batched float matmul of (a, b, out) in `MM_TILE`×`MM_TILE` output tiles:
/// each workgroup (one thread per output of its tile) walks K a tile at a
/// time, loading a tile of A and one of B into workgroup memory that all its
/// threads read, so each element of A and B is fetched from global memory
/// once per tile instead of once per output. Metadata as [`matmul`]'s, but
/// `md[0]` is the number of workgroups (tiles times batch elements).
pub fn matmul_tiled(bd: &Bindings) -> String {
    let (a, b, o) = (bd.arr(0), bd.arr(1), bd.arr(2));
    let t = MM_TILE;
    let body = bd.io(&format!(
        "    let g = wid.y * nwg.x + wid.x;
    let live = g < md[0];
    let mm = md[1];
    let nn = md[2];
    let kk = md[3];
    let nb = md[4];
    let tn = (nn + {t}u - 1u) / {t}u;
    let tiles = ((mm + {t}u - 1u) / {t}u) * tn;
    let tile = g % max(tiles, 1u);
    var bi = g / max(tiles, 1u);
    let lr = lid / {t}u;
    let lc = lid % {t}u;
    let r = (tile / max(tn, 1u)) * {t}u + lr;
    let col = (tile % max(tn, 1u)) * {t}u + lc;
{MM_BATCH}    let asm_ = bitcast<i32>(md[9]);
    let ask = bitcast<i32>(md[10]);
    let bsk = bitcast<i32>(md[11]);
    let bsn = bitcast<i32>(md[12]);
    var acc = 0.0;
    let steps = (kk + {t}u - 1u) / {t}u;
    for (var st = 0u; st < steps; st = st + 1u) {{
        let ka = st * {t}u + lc;
        var av = 0.0;
        if (live && r < mm && ka < kk) {{ av = {a}[u32(ao + i32(r) * asm_ + i32(ka) * ask)]; }}
        ta[lid] = av;
        let kb = st * {t}u + lr;
        var bv = 0.0;
        if (live && kb < kk && col < nn) {{ bv = {b}[u32(bo + i32(kb) * bsk + i32(col) * bsn)]; }}
        tb[lid] = bv;
        workgroupBarrier();
        for (var q = 0u; q < {t}u; q = q + 1u) {{
            acc = acc + ta[lr * {t}u + q] * tb[q * {t}u + lc];
        }}
        workgroupBarrier();
    }}
    if (live && r < mm && col < nn) {{
        let at = u32(oo + i32(r) * bitcast<i32>(md[13]) + i32(col) * bitcast<i32>(md[14]));
        if (md[5] != 0u) {{ acc = acc + {o}[at]; }}
        {o}[at] = acc;
    }}"
    ));
    format!(
        "{}var<workgroup> ta: array<f32, {n}>;
var<workgroup> tb: array<f32, {n}>;
@compute @workgroup_size({n})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
{body}
}}
",
        bd.decl(),
        n = t * t
    )
}

// ---------------------------------------------------------------------------
// Losses, convolution, pooling, gather/scatter: one thread per output
// element (or row/line), metadata words read directly as `md[k]`.

/// A one-thread-per-item kernel over `md[0]` items with `body` using `i`.
fn item_shader(b: &Bindings, body: &str) -> String {
    ew_shader(b, body)
}

/// Cross-entropy rows. Operands (x, t[, w], loss, lse, wt);
/// md: [rows, c, ignore (i32), eps (f32), then the offsets of x, t, loss,
/// lse, wt and w].
pub fn cross_entropy(bd: &Bindings, has_w: bool) -> String {
    let (xa, ta) = (bd.arr(0), bd.arr(1));
    let k = if has_w { 3 } else { 2 };
    let (la, sa, wa) = (bd.arr(k), bd.arr(k + 1), bd.arr(k + 2));
    let wc = |e: &str| {
        if has_w {
            format!("{}[md[9] + u32({e})]", bd.arr(2))
        } else {
            "1.0".to_string()
        }
    };
    let body = format!(
        "    let c = md[1];
    let xb = md[4] + i * c;
    var m = -inf_f();
    for (var j = 0u; j < c; j = j + 1u) {{ let v = {xa}[xb + j]; if (v > m || is_nan(v)) {{ m = v; }} }}
    var ms = m;
    if (is_nan(m) || is_inf(m)) {{ ms = 0.0; }}
    var s = 0.0;
    for (var j = 0u; j < c; j = j + 1u) {{ s = s + exp_f({xa}[xb + j] - ms); }}
    let l = ms + log_f(s);
    {sa}[md[7] + i] = l;
    let ti = {ta}[md[5] + i];
    if (ti == bitcast<i32>(md[2])) {{ {la}[md[6] + i] = 0.0; {wa}[md[8] + i] = 0.0; return; }}
    let w_t = {wt};
    {wa}[md[8] + i] = w_t;
    var v = w_t * (l - {xa}[xb + u32(ti)]);
    let eps = bitcast<f32>(md[3]);
    if (eps > 0.0) {{
        var sm = 0.0;
        for (var j = 0u; j < c; j = j + 1u) {{ sm = sm + {wj} * (l - {xa}[xb + j]); }}
        v = (1.0 - eps) * v + eps / f32(c) * sm;
    }}
    {la}[md[6] + i] = v;",
        wt = wc("ti"),
        wj = wc("j"),
    );
    item_shader(bd, &body)
}

/// Cross-entropy gradient per element. Operands (x, t[, w], lse, g, out);
/// md: [rows*c, c, ignore, eps, then the offsets of x, t, lse, g, out and w].
pub fn cross_entropy_grad(bd: &Bindings, has_w: bool) -> String {
    let (xa, ta) = (bd.arr(0), bd.arr(1));
    let k = if has_w { 3 } else { 2 };
    let (la, ga, oa) = (bd.arr(k), bd.arr(k + 1), bd.arr(k + 2));
    let wc = |e: &str| {
        if has_w {
            format!("{}[md[9] + u32({e})]", bd.arr(2))
        } else {
            "1.0".to_string()
        }
    };
    let body = format!(
        "    let c = md[1];
    let r = i / c;
    let col = i % c;
    let ti = {ta}[md[5] + r];
    if (ti == bitcast<i32>(md[2])) {{ {oa}[md[8] + i] = 0.0; return; }}
    let eps = bitcast<f32>(md[3]);
    let ec = eps / f32(c);
    var wsum = 0.0;
    for (var j = 0u; j < c; j = j + 1u) {{ wsum = wsum + {wj}; }}
    let w_t = {wt};
    let b = (1.0 - eps) * w_t;
    let a = b + ec * wsum;
    let gr = {ga}[md[7] + r];
    var o = gr * (a * exp_f({xa}[md[4] + i] - {la}[md[6] + r]) - ec * {wcol});
    if (i32(col) == ti) {{ o = o - gr * b; }}
    {oa}[md[8] + i] = o;",
        wt = wc("ti"),
        wj = wc("j"),
        wcol = wc("col"),
    );
    item_shader(bd, &body)
}

/// Shared convolution metadata names: md = [n, N, C, H, W, O, OH, OW, KH, KW,
/// SH, SW, PT, PL, DH, DW, G, has_bias, off0, off1, off2].
const CONV_MD: &str =
    "    let NN = md[1]; let C = md[2]; let H = md[3]; let W = md[4]; let O = md[5];
    let OH = md[6]; let OW = md[7]; let KH = md[8]; let KW = md[9];
    let SH = i32(md[10]); let SW = i32(md[11]); let PT = i32(md[12]); let PL = i32(md[13]);
    let DH = i32(md[14]); let DW = i32(md[15]); let G = md[16];
    let CG = C / G; let OG = O / G;
";

/// Direct convolution, one thread per output. Operands (x, w[, bias], out).
pub fn conv2d(bd: &Bindings, has_bias: bool) -> String {
    let (xa, wa) = (bd.arr(0), bd.arr(1));
    let oa = bd.arr(if has_bias { 3 } else { 2 });
    let init = if has_bias {
        format!("{}[md[20] + o]", bd.arr(2))
    } else {
        "0.0".to_string()
    };
    let body = format!(
        "{CONV_MD}    let ow = i % OW;
    var t = i / OW;
    let oh = t % OH;
    t = t / OH;
    let o = t % O;
    let nb = t / O;
    let g = o / OG;
    var acc = 0.0;
    for (var ci = 0u; ci < CG; ci = ci + 1u) {{
        let c = g * CG + ci;
        let xp = md[18] + (nb * C + c) * H * W;
        let wp = md[19] + (o * CG + ci) * KH * KW;
        for (var kh = 0u; kh < KH; kh = kh + 1u) {{
            let ih = i32(oh) * SH - PT + i32(kh) * DH;
            if (ih < 0 || ih >= i32(H)) {{ continue; }}
            for (var kw = 0u; kw < KW; kw = kw + 1u) {{
                let iw = i32(ow) * SW - PL + i32(kw) * DW;
                if (iw < 0 || iw >= i32(W)) {{ continue; }}
                acc = acc + {xa}[xp + u32(ih) * W + u32(iw)] * {wa}[wp + kh * KW + kw];
            }}
        }}
    }}
    {oa}[i] = acc + {init};"
    );
    item_shader(bd, &body)
}

/// Input gradient, one thread per input element. Operands (g, w, out).
pub fn conv2d_input_grad(bd: &Bindings) -> String {
    let (ga, wa, oa) = (bd.arr(0), bd.arr(1), bd.arr(2));
    let body = format!(
        "{CONV_MD}    let iw = i32(i % W);
    var t = i / W;
    let ih = i32(t % H);
    t = t / H;
    let c = t % C;
    let nb = t / C;
    let g = c / CG;
    let ci = c % CG;
    var acc = 0.0;
    for (var oi = 0u; oi < OG; oi = oi + 1u) {{
        let o = g * OG + oi;
        let gp = md[18] + (nb * O + o) * OH * OW;
        let wp = md[19] + (o * CG + ci) * KH * KW;
        for (var kh = 0u; kh < KH; kh = kh + 1u) {{
            let th = ih + PT - i32(kh) * DH;
            if (th < 0 || th % SH != 0) {{ continue; }}
            let oh = u32(th / SH);
            if (oh >= OH) {{ continue; }}
            for (var kw = 0u; kw < KW; kw = kw + 1u) {{
                let tw = iw + PL - i32(kw) * DW;
                if (tw < 0 || tw % SW != 0) {{ continue; }}
                let ow = u32(tw / SW);
                if (ow >= OW) {{ continue; }}
                acc = acc + {ga}[gp + oh * OW + ow] * {wa}[wp + kh * KW + kw];
            }}
        }}
    }}
    {oa}[i] = acc;"
    );
    item_shader(bd, &body)
}

/// Weight gradient, one thread per weight element. Operands (g, x, out).
pub fn conv2d_weight_grad(bd: &Bindings) -> String {
    let (ga, xa, oa) = (bd.arr(0), bd.arr(1), bd.arr(2));
    let body = format!(
        "{CONV_MD}    let kw = i % KW;
    var t = i / KW;
    let kh = t % KH;
    t = t / KH;
    let ci = t % CG;
    let o = t / CG;
    let c = (o / OG) * CG + ci;
    var acc = 0.0;
    for (var nb = 0u; nb < NN; nb = nb + 1u) {{
        let gp = md[18] + (nb * O + o) * OH * OW;
        let xp = md[19] + (nb * C + c) * H * W;
        for (var oh = 0u; oh < OH; oh = oh + 1u) {{
            let ih = i32(oh) * SH - PT + i32(kh) * DH;
            if (ih < 0 || ih >= i32(H)) {{ continue; }}
            for (var ow = 0u; ow < OW; ow = ow + 1u) {{
                let iw = i32(ow) * SW - PL + i32(kw) * DW;
                if (iw < 0 || iw >= i32(W)) {{ continue; }}
                acc = acc + {ga}[gp + oh * OW + ow] * {xa}[xp + u32(ih) * W + u32(iw)];
            }}
        }}
    }}
    {oa}[i] = acc;"
    );
    item_shader(bd, &body)
}

/// Max pooling, one thread per output. Operands (x, out[, indices]);
/// md: [n, H, W, OH, OW, KH, KW, SH, SW, PH, PW, DH, DW, xoff].
pub fn max_pool2d(bd: &Bindings, with_idx: bool) -> String {
    let (xa, oa) = (bd.arr(0), bd.arr(1));
    let store = if with_idx {
        format!("{}[i] = bi;", bd.arr(2))
    } else {
        String::new()
    };
    let body = format!(
        "    let H = md[1]; let W = md[2]; let OH = md[3]; let OW = md[4];
    let ox = i % OW;
    let oy = (i / OW) % OH;
    let pl = i / (OW * OH);
    let xp = md[13] + pl * H * W;
    let y0 = i32(oy * md[7]) - i32(md[9]);
    let x0 = i32(ox * md[8]) - i32(md[10]);
    var best = -inf_f();
    var have = false;
    var bi = -1i;
    for (var a = 0u; a < md[5]; a = a + 1u) {{
        let iy = y0 + i32(a * md[11]);
        if (iy < 0 || iy >= i32(H)) {{ continue; }}
        for (var b = 0u; b < md[6]; b = b + 1u) {{
            let ix = x0 + i32(b * md[12]);
            if (ix < 0 || ix >= i32(W)) {{ continue; }}
            let v = {xa}[xp + u32(iy) * W + u32(ix)];
            if (!have || v > best || is_nan(v)) {{
                have = true;
                best = v;
                bi = iy * i32(W) + ix;
            }}
        }}
    }}
    {oa}[i] = best;
    {store}"
    );
    item_shader(bd, &body)
}

/// Average pooling, one thread per output. Operands (x, out); md as for
/// max pooling (dilation unused) plus [14] = mode (0: count the padding,
/// 1: count only inside, 2: divisor in [15]), [16] = adaptive (windows
/// `[floor(o*H/OH), ceil((o+1)*H/OH))`, mean over the window).
pub fn avg_pool2d(bd: &Bindings) -> String {
    let (xa, oa) = (bd.arr(0), bd.arr(1));
    let body = format!(
        "    let H = i32(md[1]); let W = i32(md[2]); let OH = md[3]; let OW = md[4];
    let ox = i % OW;
    let oy = (i / OW) % OH;
    let pl = i / (OW * OH);
    let xp = md[13] + pl * u32(H) * u32(W);
    var hs: i32; var he: i32; var ws: i32; var we: i32;
    var div: i32;
    if (md[16] != 0u) {{
        hs = i32(oy * u32(H) / OH);
        he = i32(((oy + 1u) * u32(H) + OH - 1u) / OH);
        ws = i32(ox * u32(W) / OW);
        we = i32(((ox + 1u) * u32(W) + OW - 1u) / OW);
        div = (he - hs) * (we - ws);
    }} else {{
        let ph = i32(md[9]); let pw = i32(md[10]);
        hs = i32(oy * md[7]) - ph;
        he = min(hs + i32(md[5]), H + ph);
        ws = i32(ox * md[8]) - pw;
        we = min(ws + i32(md[6]), W + pw);
        let pool = (he - hs) * (we - ws);
        hs = max(hs, 0); he = min(he, H); ws = max(ws, 0); we = min(we, W);
        if (md[14] == 2u) {{ div = i32(md[15]); }}
        else if (md[14] == 0u) {{ div = pool; }}
        else {{ div = max(he - hs, 0) * max(we - ws, 0); }}
    }}
    var acc = 0.0;
    for (var iy = hs; iy < he; iy = iy + 1) {{
        for (var ix = ws; ix < we; ix = ix + 1) {{
            acc = acc + {xa}[xp + u32(iy * W + ix)];
        }}
    }}
    if (div > 0) {{ {oa}[i] = acc / f32(div); }} else {{ {oa}[i] = nan_f(); }}"
    );
    item_shader(bd, &body)
}

/// `out[p] = src[p with p[dim] = index[p]]`: elementwise metadata over the
/// index's shape for operands (src with stride 0 on `dim`, index, out);
/// p0 = src's stride along `dim`. The index `i32::MIN` writes nothing (how
/// a source larger than one binding is gathered window by window).
pub fn gather(bd: &Bindings, ty: GTy) -> String {
    let (sa, ia, oa) = (bd.arr(0), bd.arr(1), bd.arr(2));
    let _ = ty;
    let body = format!(
        "    let k = {ia}[off(1u, i)];
    if (k == bitcast<i32>(0x80000000u)) {{ return; }}
    {oa}[off(2u, i)] = {sa}[u32(i32(off(0u, i)) + k * pi(0u))];"
    );
    ew_shader(bd, &body)
}

/// Scatter along lines: elementwise metadata over the index's shape with
/// `dim` set to 1, operands (index, src, dst); p0 = length along `dim`,
/// p1..p3 = the index's, src's and dst's strides along `dim`, p4 = accumulate.
/// One thread walks a line in order, so repeated indices combine as on the CPU.
pub fn scatter(bd: &Bindings, ty: GTy) -> String {
    let (ia, sa, da) = (bd.arr(0), bd.arr(1), bd.arr(2));
    let body = format!(
        "    let io = i32(off(0u, i));
    let so = i32(off(1u, i));
    let dof = i32(off(2u, i));
    for (var k = 0i; k < pi(0u); k = k + 1i) {{
        let j = {ia}[u32(io + k * pi(1u))];
        let d = u32(dof + j * pi(3u));
        let v = {sa}[u32(so + k * pi(2u))];
        if (md[6] != 0u) {{ {da}[d] = {da}[d] + v; }} else {{ {da}[d] = v; }}
    }}"
    );
    let _ = ty;
    ew_shader(bd, &body)
}

/// `dst[offs[b] + r] = values[b, r]` (`+=` when p2, or for bool): one
/// thread per element `r` of the other dims walks `b` in order. Operands
/// (values, offsets, dst) over R; p0 = number of index positions, p1 =
/// values' stride between positions; the offsets start at operand 1's
/// offset (its strides are 0). The offset `i32::MIN` writes nothing
/// (how a destination larger than one binding is written window by window).
pub fn index_put(bd: &Bindings, ty: GTy) -> String {
    let (va, oa, da) = (bd.arr(0), bd.arr(1), bd.arr(2));
    let acc = if ty == GTy::U32 {
        format!("max({da}[d], v)")
    } else {
        format!("{da}[d] + v")
    };
    let body = format!(
        "    let vo = i32(off(0u, i));
    let dof = i32(off(2u, i));
    for (var b = 0i; b < pi(0u); b = b + 1i) {{
        let o = {oa}[off(1u, i) + u32(b)];
        if (o == bitcast<i32>(0x80000000u)) {{ continue; }}
        let d = u32(dof + o);
        let v = {va}[u32(vo + b * pi(1u))];
        if (md[4] != 0u) {{ {da}[d] = {acc}; }} else {{ {da}[d] = v; }}
    }}"
    );
    ew_shader(bd, &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::reduce::ReduceOp;

    thread_local! {
        /// Whether [`mk`] and [`halved`] store float bindings as native float16.
        static HALF: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// [`Bindings::distinct`], its float bindings native float16 when [`HALF`] is set.
    fn mk(tys: &[GTy]) -> Bindings {
        halved(Bindings::distinct(tys))
    }

    fn halved(mut b: Bindings) -> Bindings {
        if HALF.with(|h| h.get()) {
            b.half = b.bufs.iter().map(|x| x.0 == GTy::F32).collect();
        }
        b
    }

    fn check(src: &str) -> Result<(), String> {
        let module = naga::front::wgsl::parse_str(src)
            .map_err(|e| format!("WGSL parse error: {}\n{src}", e.emit_to_string(src)))?;
        // Only shaders that enable f16 may use it.
        let caps = if src.starts_with("enable f16;") {
            naga::valid::Capabilities::SHADER_FLOAT16
        } else {
            naga::valid::Capabilities::empty()
        };
        let mut v = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps);
        v.validate(&module)
            .map_err(|e| format!("WGSL validation error: {}\n{src}", e.emit_to_string(src)))?;
        Ok(())
    }

    thread_local! {
        static ERRORS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
    }

    fn validate(src: &str) {
        if let Err(e) = check(src) {
            ERRORS.with(|v| v.borrow_mut().push(e));
        }
    }

    /// Fail the test with every invalid shader [`validate`] collected.
    fn assert_all_valid() {
        let errs = ERRORS.with(|v| v.borrow().clone());
        assert!(
            errs.is_empty(),
            "{} invalid shaders:\n{}",
            errs.len(),
            errs.join("\n\n")
        );
    }

    const TYS: [GTy; 3] = [GTy::F32, GTy::I32, GTy::U32];

    fn unary_ops() -> Vec<UnaryOp> {
        use UnaryOp::*;
        vec![
            Neg,
            Abs,
            Sign,
            Square,
            Reciprocal,
            Floor,
            Ceil,
            Round,
            Trunc,
            Exp,
            Log,
            Log2,
            Log1p,
            Expm1,
            Sqrt,
            Rsqrt,
            Sin,
            Cos,
            Tan,
            Tanh,
            Sigmoid,
            Relu,
            LeakyRelu(0.1),
            Elu(1.0),
            Gelu,
            GeluTanh,
            Silu,
            Softplus {
                beta: 1.0,
                threshold: 20.0,
            },
            Erf,
            Clamp {
                min: Some(0.0),
                max: None,
            },
            Clamp {
                min: None,
                max: Some(1.0),
            },
            Clamp {
                min: Some(0.0),
                max: Some(1.0),
            },
            LogicalNot,
            BitwiseNot,
            IsNan,
            IsInf,
            IsFinite,
        ]
    }

    fn binary_ops() -> Vec<BinaryOp> {
        use BinaryOp::*;
        vec![
            Add, Sub, Mul, Div, FloorDiv, Remainder, Pow, Maximum, Minimum, Atan2, Eq, Ne, Lt, Le,
            Gt, Ge, LogicalAnd, LogicalOr, LogicalXor, BitAnd, BitOr, BitXor,
        ]
    }

    /// Generate and validate every kernel family; the number of shaders.
    fn validate_all() -> usize {
        let mut n = 0;
        for half in [true, false] {
            validate(&round_narrow(half));
            n += 1;
        }
        for from in TYS {
            for to in TYS {
                validate(&cast(&mk(&[from, to]), from, to));
                n += 1;
            }
            validate(&fill(&mk(&[from]), from));
            validate(&where_(&mk(&[GTy::U32, from, from, from]), GTy::U32));
            validate(&tri(&mk(&[from, from]), from));
            n += 3;
            if from != GTy::U32 {
                for prod in [false, true] {
                    validate(&cumulative(&mk(&[from, from]), from, prod));
                    n += 1;
                }
            }
        }
        // In-place: input and output share one read-write binding.
        let shared = halved(Bindings {
            bufs: vec![(GTy::F32, true)],
            operand: vec![0, 0],
            half: vec![],
        });
        validate(&unary(&shared, UnaryOp::Exp, GTy::F32, GTy::F32).unwrap());
        for op in unary_ops() {
            for ty in TYS {
                let out = if matches!(
                    op,
                    UnaryOp::LogicalNot | UnaryOp::IsNan | UnaryOp::IsInf | UnaryOp::IsFinite
                ) {
                    GTy::U32
                } else {
                    ty
                };
                if let Some(s) = unary(&mk(&[ty, out]), op, ty, out) {
                    validate(&s);
                    n += 1;
                }
            }
        }
        for op in binary_ops() {
            for ty in TYS {
                let out = if op.is_predicate() { GTy::U32 } else { ty };
                if let Some(s) = binary(&mk(&[ty, ty, out]), op, ty, out) {
                    validate(&s);
                    n += 1;
                }
            }
        }
        let reds = [
            ReduceOp::Sum,
            ReduceOp::Mean,
            ReduceOp::Prod,
            ReduceOp::Max,
            ReduceOp::Min,
            ReduceOp::All,
            ReduceOp::Any,
            ReduceOp::Var {
                correction: 1.0,
                std: true,
            },
            ReduceOp::LogSumExp,
        ];
        for op in reds {
            for x in TYS {
                for acc in TYS {
                    if let Some(s) = reduce(&mk(&[x, acc]), op, x, acc, acc) {
                        validate(&s);
                        n += 1;
                    }
                }
            }
        }
        validate(&matmul_tiled(&mk(&[GTy::F32; 3])));
        validate(&softmax(&mk(&[GTy::F32, GTy::F32])));
        validate(&softmax_grad(&mk(&[GTy::F32; 3])));
        let mut grads = 0;
        for op in unary_ops() {
            if let Some(s) = unary_grad(&mk(&[GTy::F32; 4]), op) {
                validate(&s);
                grads += 1;
            }
        }
        assert_eq!(grads, 10, "unary ops with a fused gradient");
        for (w, b, rms) in [
            (true, true, false),
            (false, false, false),
            (true, false, true),
            (false, true, false),
        ] {
            let n = 4 + w as usize + b as usize;
            let mut tys = vec![GTy::F32; n];
            tys[n - 1] = GTy::F32;
            let mut bd = mk(&tys);
            for x in bd.bufs.iter_mut().rev().take(3) {
                x.1 = true;
            }
            validate(&layer_norm(&bd, w, b, rms));
            let mut gb = mk(&vec![GTy::F32; 5 + w as usize]);
            gb.bufs.last_mut().unwrap().1 = true;
            validate(&layer_norm_grad_input(&gb, w, rms));
            let mut pb = mk(&vec![GTy::F32; 4 + w as usize + b as usize]);
            for x in pb.bufs.iter_mut().skip(4) {
                x.1 = true;
            }
            validate(&layer_norm_grad_params(&pb, w, b, rms));
        }
        for f in 0..32u32 {
            let b = |k: u32| f & (1 << k) != 0;
            let n = if b(0) { 3 } else { 2 };
            let mut bd = mk(&vec![GTy::F32; n]);
            bd.bufs[0].1 = true;
            validate(&sgd(&bd, b(0), b(1), b(2), b(3), b(4)));
            let n = if b(0) { 5 } else { 4 };
            let mut bd = mk(&vec![GTy::F32; n]);
            for (j, x) in bd.bufs.iter_mut().enumerate() {
                x.1 = j != 1;
            }
            validate(&adam(&bd, b(0), b(1), b(2), b(3), b(4)));
            let n = 3 + b(0) as usize + b(1) as usize;
            let mut bd = mk(&vec![GTy::F32; n]);
            for (j, x) in bd.bufs.iter_mut().enumerate() {
                x.1 = j != 1;
            }
            validate(&rmsprop(&bd, b(0), b(1), b(2), b(3), b(4)));
        }
        for ty in TYS {
            for max in [true, false] {
                validate(&arg_reduce(&mk(&[ty, GTy::I32]), ty, max, false));
                let three = halved(Bindings {
                    bufs: vec![(ty, false), (ty, true), (GTy::I32, true)],
                    operand: vec![0, 1, 2],
                    half: vec![],
                });
                validate(&arg_reduce(&three, ty, max, true));
            }
        }
        validate(&matmul(&mk(&[GTy::F32; 3]), GTy::F32));
        validate(&matmul(&mk(&[GTy::I32; 3]), GTy::I32));
        for w in [false, true] {
            let mut tys = vec![GTy::F32, GTy::I32];
            if w {
                tys.push(GTy::F32);
            }
            let mut f = tys.clone();
            f.extend([GTy::F32; 3]);
            let mut fb = mk(&f);
            let nb = fb.bufs.len();
            for j in nb - 3..nb {
                fb.bufs[j].1 = true;
            }
            validate(&cross_entropy(&fb, w));
            validate(&cross_entropy_grad(&mk(&f), w));
            let mut c = vec![GTy::F32; 2];
            if w {
                c.push(GTy::F32);
            }
            c.push(GTy::F32);
            validate(&conv2d(&mk(&c), w));
            let mut mp = mk(&[GTy::F32, GTy::F32, GTy::I32]);
            mp.bufs[1].1 = true;
            validate(&max_pool2d(&mp, true));
        }
        validate(&max_pool2d(&mk(&[GTy::F32; 2]), false));
        validate(&avg_pool2d(&mk(&[GTy::F32; 2])));
        validate(&conv2d_input_grad(&mk(&[GTy::F32; 3])));
        validate(&conv2d_weight_grad(&mk(&[GTy::F32; 3])));
        for kind in [ConvGemm::InputGrad, ConvGemm::WeightGrad] {
            validate(&conv_gemm(&mk(&[GTy::F32; 3]), kind));
        }
        validate(&conv_gemm(
            &mk(&[GTy::F32; 4]),
            ConvGemm::Forward { bias: true },
        ));
        validate(&conv_gemm(
            &mk(&[GTy::F32; 3]),
            ConvGemm::Forward { bias: false },
        ));
        for ty in TYS {
            validate(&gather(&mk(&[ty, GTy::I32, ty]), ty));
            validate(&scatter(&mk(&[GTy::I32, ty, ty]), ty));
            validate(&index_put(&mk(&[ty, GTy::I32, ty]), ty));
        }
        n
    }

    #[test]
    fn every_generated_shader_validates() {
        let n = validate_all();
        assert!(n > 150, "{n} shaders");
        // Again with every float binding stored as native float16.
        HALF.with(|h| h.set(true));
        let m = validate_all();
        HALF.with(|h| h.set(false));
        assert_eq!(m, n);
        // Casts between float16 and every other storage, both ways.
        for ty in TYS {
            for (hf, ht) in [(true, false), (false, true)] {
                let (from, to) = if hf { (GTy::F32, ty) } else { (ty, GTy::F32) };
                let b = Bindings::distinct_half(&[from, to], &[hf, ht]);
                let src = cast(&b, from, to);
                assert!(src.starts_with("enable f16;"), "{src}");
                validate(&src);
            }
        }
        assert_all_valid();
    }

    /// Every optimizer rule's multi-tensor kernel, for several chunk sizes,
    /// with distinct buffers, buffers shared between parameters (one
    /// binding for several operands) and native float16 bindings mixed in.
    #[test]
    fn multi_tensor_optimizer_shaders_validate() {
        let mut rules = Vec::new();
        for f in 0..32u32 {
            let b = |k: u32| f & (1 << k) != 0;
            rules.push(OptimRule::Sgd {
                with_buf: b(0),
                nesterov: b(1),
                maximize: b(2),
                wd: b(3),
            });
            rules.push(OptimRule::Adam {
                amsgrad: b(0),
                maximize: b(1),
                wd: b(2),
                decoupled: b(3),
                low: b(4),
            });
            rules.push(OptimRule::Rmsprop {
                with_buf: b(0),
                centered: b(1),
                maximize: b(2),
                wd: b(3),
                low: b(4),
            });
        }
        rules.dedup();
        let mut n = 0;
        for rule in rules {
            let per = rule.operands();
            for k in [1usize, 2, 3, 7] {
                // Distinct buffers; every operand written but the gradients.
                let mut bd = Bindings::distinct(&vec![GTy::F32; k * per]);
                for (j, x) in bd.bufs.iter_mut().enumerate() {
                    x.1 = j % per != 1;
                }
                let src = optim_multi(&bd, rule, k);
                for t in 0..k {
                    assert!(src.contains(&format!("case {t}u: {{")), "{src}");
                }
                assert!(!src.contains(&format!("case {k}u:")));
                validate(&src);
                // The same with odd parameters' bindings stored as float16.
                let mut hb = bd.clone();
                hb.half = (0..k * per).map(|j| (j / per) % 2 == 1).collect();
                let hs = optim_multi(&hb, rule, k);
                assert_eq!(hs.starts_with("enable f16;"), k > 1, "{hs}");
                validate(&hs);
                // Parameters in one buffer, gradients in another, state distinct.
                let mut sb = Bindings {
                    bufs: vec![(GTy::F32, true), (GTy::F32, false)],
                    operand: Vec::new(),
                    half: Vec::new(),
                };
                for _ in 0..k {
                    sb.operand.extend([0, 1]);
                    for _ in 2..per {
                        sb.operand.push(sb.bufs.len());
                        sb.bufs.push((GTy::F32, true));
                    }
                }
                validate(&optim_multi(&sb, rule, k));
                n += 3;
            }
        }
        assert!(n >= 3 * 4 * 40, "{n} shaders");
        assert_all_valid();
    }

    /// The multi-tensor kernel loads each parameter's operands in one
    /// `switch` and stores all but the gradient in another, each case naming
    /// that parameter's bindings; SGD's first step is a word of the block
    /// there and fixed in the source of the per-parameter kernel.
    #[test]
    fn multi_tensor_kernel_layout() {
        let rule = OptimRule::Adam {
            amsgrad: true,
            maximize: false,
            wd: true,
            decoupled: false,
            low: true,
        };
        let mut bd = Bindings::distinct(&[GTy::F32; 10]);
        for (j, x) in bd.bufs.iter_mut().enumerate() {
            x.1 = j % 5 != 1;
        }
        let src = optim_multi(&bd, rule, 2);
        assert_eq!(src.matches("switch t {").count(), 2, "{src}");
        assert!(src.contains(
            "case 1u: { v0 = b5[o0]; v1 = b6[o1]; v2 = b7[o2]; v3 = b8[o3]; v4 = b9[o4]; }"
        ));
        assert!(src.contains("case 0u: { b0[o0] = n0; b2[o2] = n2; b3[o3] = n3; b4[o4] = n4; }"));
        assert!(!src.contains("b6[o1] ="), "a gradient is never stored");
        // The update runs once, outside the switches.
        assert_eq!(src.matches("let denom").count(), 1);
        let one = optim_single(&Bindings::distinct(&[GTy::F32; 5]), rule, false);
        assert!(one.contains("b0[o0] = p + pf(0u) * m / denom;"), "{one}");
        assert!(
            src.contains("let n0 = p + pt(blk, 0u) * m / denom;"),
            "{src}"
        );
        let sgd = OptimRule::Sgd {
            with_buf: true,
            nesterov: false,
            maximize: false,
            wd: false,
        };
        let bd3 = Bindings::distinct(&[GTy::F32; 3]);
        assert!(optim_single(&bd3, sgd, true).contains("let b = g;"));
        assert!(optim_multi(&bd3, sgd, 1).contains("md[blk + 6u] != 0u"));
        // Native float16 bindings convert on load and store.
        let mut hb = Bindings::distinct(&[GTy::F32; 3]);
        hb.half = vec![true, false, true];
        let hs = optim_multi(&hb, sgd, 1);
        assert!(
            hs.contains("v0 = f32(b0[o0]);") && hs.contains("b2[o2] = to_h(n2);"),
            "{hs}"
        );
    }

    #[test]
    fn half_accesses_convert() {
        let h = [true, false, true];
        assert_eq!(
            half_io("    b2[off(2u, i)] = b0[off(0u, i)] + b1[k];", &h),
            "    b2[off(2u, i)] = to_h(f32(b0[off(0u, i)]) + b1[k]);"
        );
        // Index expressions, comparisons and other names stay as they are.
        assert_eq!(
            half_io(
                "if (b0[b1[j]] == 0.0) { xb0[j] = sb2[j]; b2[d] = b2[d] + v; }",
                &h
            ),
            "if (f32(b0[b1[j]]) == 0.0) { xb0[j] = sb2[j]; b2[d] = to_h(f32(b2[d]) + v); }"
        );
        assert_eq!(half_io("b0[i] = 1.0;", &[false]), "b0[i] = 1.0;");
    }

    /// `h_round`'s bit arithmetic in Rust, against `half::f16::from_f32` over
    /// every float16 boundary region (what the WGSL computes on the device).
    #[test]
    fn to_h_matches_half() {
        fn h_round(x: f32) -> f32 {
            let u = x.to_bits();
            let a = u & 0x7fff_ffff;
            let s = u & 0x8000_0000;
            if a >= 0x7f80_0000 {
                return x;
            }
            if a >= 0x477f_f000 {
                return f32::from_bits(s | 0x7f80_0000);
            }
            if a < 0x3880_0000 {
                // WGSL's `round` is ties to even.
                let q = (f32::from_bits(a) * 16_777_216.0).round_ties_even() * 5.960_464_5e-8;
                return f32::from_bits(s | q.to_bits());
            }
            f32::from_bits(s | ((a + 0xfff + ((a >> 13) & 1)) & 0xffff_e000))
        }
        let mut checked = 0;
        // Every rounding point (ties and exact values, normal and
        // subnormal) lies on a multiple of 0x1000 in the f32 bits: each,
        // and its neighbours.
        for u in (0..0x8000_0000u32)
            .step_by(0x1000)
            .flat_map(|b| [0u32, 1, 2, 0xffd, 0xffe, 0xfff, 0x800].map(|d| b + d))
        {
            for x in [f32::from_bits(u), -f32::from_bits(u)] {
                let want = half::f16::from_f32(x);
                let r = h_round(x);
                if x.is_nan() {
                    assert!(r.is_nan(), "{x:?}");
                } else {
                    // A float16 value exactly (the conversion has nothing to round), the CPU's.
                    assert_eq!(
                        half::f16::from_f32(r).to_f32().to_bits(),
                        r.to_bits(),
                        "{x:e}"
                    );
                    assert_eq!(
                        r.to_bits(),
                        want.to_f32().to_bits(),
                        "{x:e} ({:#010x})",
                        x.to_bits()
                    );
                }
                checked += 1;
            }
        }
        assert!(checked > 1_000_000);
    }
}
