//! Elementwise kernels: casts, narrow-float rounding, fills, unary and binary
//! ops, `where`, fused unary gradients, triangles and fused elementwise
//! programs.

use std::fmt::Write as _;

use super::{conv, ew_shader, load, Bindings, GTy, WG};
use crate::kernel::BinaryOp;
use crate::kernel::UnaryOp;

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

/// The WGSL expression of a unary op on `x` (of type `ty`), from the op's
/// definition. `None` when the device has no kernel for this op and type.
pub fn unary_expr(op: UnaryOp, ty: GTy) -> Option<String> {
    let [f, i, u] = op.wgsl();
    match ty {
        GTy::F32 => f,
        GTy::I32 => i,
        GTy::U32 => u,
    }
}

/// The scalar parameters (as f64, converted to the element type's bits by the caller) of a unary op.
pub fn unary_params(op: UnaryOp) -> [f64; 2] {
    op.params()
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
    op.wgsl_grad()
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
/// NaN and infinities come from `bits_f`, a function call and so not a
/// const-expression: a const-expression whose value is not finite is a
/// shader-creation error (Chromium's compiler rejects it; naga does not).
fn f32_lit(v: f64) -> String {
    let f = v as f32;
    if f.is_finite() && f == f.trunc() && f.abs() < 1e7 && !(f == 0.0 && f.is_sign_negative()) {
        format!("{f:.1}")
    } else if f.is_finite() {
        format!("bitcast<f32>(0x{:08x}u)", f.to_bits())
    } else {
        format!("bits_f(0x{:08x}u)", f.to_bits())
    }
}

/// A fused elementwise program (see [`FusedKernel`](crate::kernel::fused::FusedKernel))
/// as one kernel: operands are the program's inputs (of device types
/// `in_tys`, broadcast to its shape), then its outputs. Registers are `f32`
/// (bools as 0 and 1), as on the CPU; each output is stored as `f32`, or as a
/// bool (nonzero is true). `None` when an instruction has no WGSL form.
pub fn fused(
    bd: &Bindings,
    k: &crate::kernel::fused::FusedKernel,
    in_tys: &[GTy],
) -> Option<String> {
    use crate::kernel::fused::FInstr;
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
                    crate::kernel::UnaryOut::Bool => format!("f32({e})"),
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
