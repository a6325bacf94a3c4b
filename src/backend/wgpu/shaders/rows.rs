//! Row kernels: one workgroup per output, a tree in workgroup memory
//! (reductions, arg-reductions, softmax and its gradient, layer norm and its
//! gradients), and the cumulative scan (one thread per line).
//!
//! Metadata of the row kernels: [nout, nred, p0, nk, nr, xoff, ooff, keep
//! shape[nk], keep strides[nk], red shape[nr], red strides[nr], (softmax: out
//! keep strides[nk], out red stride)].

use std::fmt::Write as _;

use super::{conv, ew_shader, item_shader, Bindings, GTy, MATH, RED_WG};
use crate::kernel::ReduceOp;

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

const ROW: &str = concat!("\n", include_str!("rows.wgsl"));

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
