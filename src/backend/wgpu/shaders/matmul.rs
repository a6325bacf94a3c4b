//! Matmul kernels: batched, one thread per output or in tiles through workgroup
//! memory.

use super::{ew_shader, Bindings, GTy};

/// WGSL of the matmul kernels: the offsets `ao`, `bo`, `oo` of batch
/// element `bi` in a, b and out (metadata as [`matmul`]'s; `nb` batch dims).
const MM_BATCH: &str = include_str!("matmul.wgsl");

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
