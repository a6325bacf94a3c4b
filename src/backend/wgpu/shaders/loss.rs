//! Cross-entropy kernels (one thread per row, or per element for the gradient;
//! metadata words read directly as `md[k]`).

use super::{item_shader, Bindings};

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
