//! Elementwise kernels: casts, narrow-float rounding, fills, unary and binary
//! ops, `where`, fused unary gradients, triangles and fused elementwise
//! programs.

use std::fmt::Write as _;

use super::{conv, ew_shader, load, Bindings, GTy, WG};
use crate::ops::elementwise::{BinaryOp, UnaryOp};

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
    let helpers = concat!("\n", include_str!("unary_grad.wgsl"));
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
