//! The sort family's kernels (`crate::kernel::sort`): a bitonic sort of
//! `(key, index)` pairs in global memory, one thread per compare-exchange
//! and one dispatch per step, so no invocation loops (a software driver's
//! loop limit never applies) and rows of any length sort alike. Each row
//! is padded to a power of two `P`; a pair whose index is `>= n` is
//! padding and sorts after every element (whatever the direction).
//!
//! Metadata (item kernels, parameters from md[2]): `[items, 1, p0..]`.

use super::{ew_shader, Bindings, GTy};

/// The order of two pairs: `before(ka, ia, kb, ib)` when `(ka, ia)` comes
/// first: the definition's total order (NaN above every number, `-0.0 ==
/// 0.0`, descending when p4 is non-zero) with ties by index, padding last.
fn before(ty: GTy) -> String {
    let t = ty.wgsl();
    let cmp = if ty == GTy::F32 {
        "    let na = is_nan(ka);
    let nb = is_nan(kb);
    var lt = nb && !na;
    var gt = na && !nb;
    if (!na && !nb) { lt = ka < kb; gt = kb < ka; }"
    } else {
        "    var lt = ka < kb;
    var gt = kb < ka;"
    };
    format!(
        "fn before(ka: {t}, ia: i32, kb: {t}, ib: i32) -> bool {{
    let n = md[3];
    if (u32(ia) >= n || u32(ib) >= n) {{ return ia < ib; }}
{cmp}
    if (md[6] != 0u) {{ let s = lt; lt = gt; gt = s; }}
    if (lt) {{ return true; }}
    if (gt) {{ return false; }}
    return ia < ib;
}}
"
    )
}

/// Fill the padded pairs: operands (x, keys, idx); items `rows * P`;
/// p0 = P, p1 = n, p2 = inner (row `r` is `x[o, :, j]` with `r = o * inner
/// + j`), p3..p5 = the offsets of x, keys and idx.
pub fn sort_init(bd: &Bindings) -> String {
    let (xa, ka, ia) = (bd.arr(0), bd.arr(1), bd.arr(2));
    let body = format!(
        "    let p = md[2];
    let n = md[3];
    let inner = md[4];
    let row = i / p;
    let t = i % p;
    if (t < n) {{
        let o = row / inner;
        let j = row % inner;
        {ka}[md[6] + i] = {xa}[md[5] + (o * n + t) * inner + j];
    }}
    {ia}[md[7] + i] = i32(t);"
    );
    ew_shader(bd, &body)
}

/// One bitonic step over every row: operands (keys, idx), both written;
/// items `rows * P / 2`; p0 = P, p1 = n, p2 = the partner distance `j`,
/// p3 = the merged block size `k`, p4 = descending, p5/p6 = the offsets of
/// keys and idx.
pub fn sort_step(bd: &Bindings, ty: GTy) -> String {
    let (ka, ia) = (bd.arr(0), bd.arr(1));
    let body = format!(
        "    let p = md[2];
    let j = md[4];
    let row = i / (p / 2u);
    let q = i % (p / 2u);
    let l = (q / j) * 2u * j + q % j;
    let a = row * p + l;
    let b = a + j;
    let kx = {ka}[md[7] + a];
    let ky = {ka}[md[7] + b];
    let ix = {ia}[md[8] + a];
    let iy = {ia}[md[8] + b];
    let up = (l & md[5]) == 0u;
    let swap = select(before(kx, ix, ky, iy), before(ky, iy, kx, ix), up);
    if (swap) {{
        {ka}[md[7] + a] = ky;
        {ka}[md[7] + b] = kx;
        {ia}[md[8] + a] = iy;
        {ia}[md[8] + b] = ix;
    }}"
    );
    let src = ew_shader(bd, &body);
    src.replace("\n@compute", &format!("\n{}@compute", before(ty)))
}

/// The first `k` sorted indices of each row into the int64 (stored as
/// 32-bit) output laid out as `[outer, k, inner]`: operands (idx, out);
/// items `rows * k`; p0 = P, p1 = k, p2 = inner, p3/p4 = the offsets of idx
/// and out.
pub fn sort_indices(bd: &Bindings) -> String {
    let (ia, oa) = (bd.arr(0), bd.arr(1));
    let body = format!(
        "    let k = md[3];
    let inner = md[4];
    let row = i / k;
    let t = i % k;
    let o = row / inner;
    let j = row % inner;
    {oa}[md[6] + (o * k + t) * inner + j] = {ia}[md[5] + row * md[2] + t];"
    );
    ew_shader(bd, &body)
}
