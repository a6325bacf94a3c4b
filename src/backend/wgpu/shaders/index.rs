//! Gather, scatter, scatter-reduce and index-put kernels (one thread per output element or
//! line; elementwise metadata).

use super::{ew_shader, Bindings, GTy};
use crate::kernel::ScatterReduction;

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
/// One thread walks a line in order, so repeated indices combine as on the CPU
/// (bool adds as `or`, keeping the stored word 0 or 1).
pub fn scatter(bd: &Bindings, ty: GTy) -> String {
    let (ia, sa, da) = (bd.arr(0), bd.arr(1), bd.arr(2));
    let acc = if ty == GTy::U32 {
        format!("max({da}[d], v)")
    } else {
        format!("{da}[d] + v")
    };
    let body = format!(
        "    let io = i32(off(0u, i));
    let so = i32(off(1u, i));
    let dof = i32(off(2u, i));
    for (var k = 0i; k < pi(0u); k = k + 1i) {{
        let j = {ia}[u32(io + k * pi(1u))];
        let d = u32(dof + j * pi(3u));
        let v = {sa}[u32(so + k * pi(2u))];
        if (md[6] != 0u) {{ {da}[d] = {acc}; }} else {{ {da}[d] = v; }}
    }}"
    );
    ew_shader(bd, &body)
}

/// `scatter_reduce` along lines: [`scatter`]'s metadata and walk (one
/// thread per line, its index entries in order), each value combined with
/// the slot it reaches by `reduce` (`Sum` and `Mean` add, `Prod`, `Amax`,
/// `Amin`), so every slot combines its values in the CPU's order. Float
/// `amax`/`amin` propagate NaN as the CPU does: the first NaN a slot meets
/// (its own value included) stays. Bool (0 or 1) adds as `or`, multiplies as `and`.
pub fn scatter_reduce(bd: &Bindings, ty: GTy, reduce: ScatterReduction) -> String {
    use ScatterReduction as R;
    let (ia, sa, da) = (bd.arr(0), bd.arr(1), bd.arr(2));
    let t = ty.wgsl();
    let pick = |op: &str, keep: &str| {
        match ty {
        GTy::F32 => format!(
            "if (is_nan(a)) {{ return a; }}\n    if (is_nan(v)) {{ return v; }}\n    return select(a, v, v {op} a);"
        ),
        _ => format!("return {keep}(a, v);"),
    }
    };
    let comb = match (reduce, ty) {
        (R::Sum | R::Mean, GTy::U32) => "return max(a, v);".to_string(),
        (R::Prod, GTy::U32) => "return min(a, v);".to_string(),
        (R::Sum | R::Mean, _) => "return a + v;".to_string(),
        (R::Prod, _) => "return a * v;".to_string(),
        (R::Amax, _) => pick(">", "max"),
        (R::Amin, _) => pick("<", "min"),
    };
    let body = format!(
        "    let io = i32(off(0u, i));
    let so = i32(off(1u, i));
    let dof = i32(off(2u, i));
    for (var k = 0i; k < pi(0u); k = k + 1i) {{
        let j = {ia}[u32(io + k * pi(1u))];
        let d = u32(dof + j * pi(3u));
        {da}[d] = combine({da}[d], {sa}[u32(so + k * pi(2u))]);
    }}"
    );
    format!(
        "{}\nfn combine(a: {t}, v: {t}) -> {t} {{\n    {comb}\n}}\n",
        ew_shader(bd, &body)
    )
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
