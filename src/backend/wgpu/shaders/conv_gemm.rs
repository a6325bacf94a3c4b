//! Convolutions as implicit GEMMs: each kernel is [`super::matmul_tiled`]'s
//! walk (one workgroup per `CONV_TILE`×`CONV_TILE` tile of the product, K a
//! tile at a time through workgroup memory) over matrices that exist only
//! as index arithmetic on the convolution's operands. Per group `g`:
//!
//! - forward: `Y[(n,oh,ow), o] = Σ_(c,kh,kw) X̂[(n,oh,ow), (c,kh,kw)] · W[o, (c,kh,kw)]`,
//!   where `X̂` reads the input at the window position (0 in the padding);
//! - input gradient: `dX[(n,ih,iw), c] = Σ_(o,kh,kw) dŶ[(n,ih,iw), (o,kh,kw)] · W[o, (c,kh,kw)]`,
//!   where `dŶ` reads the output gradient at the position whose window
//!   puts tap `(kh, kw)` on `(ih, iw)` (0 where none does: off the grid of
//!   the stride, or outside the output);
//! - weight gradient: `dW[o, (c,kh,kw)] = Σ_(n,oh,ow) dY[o, (n,oh,ow)] · X̂[(n,oh,ow), (c,kh,kw)]`.
//!
//! Metadata: the direct kernels' ([`super::conv2d`]: `[groups of
//! workgroups, N, C, H, W, O, OH, OW, KH, KW, SH, SW, PT, PL, DH, DW, G,
//! has_bias, off0, off1, off2]`, then `k0, k1, accumulate`): the kernel
//! sums only the K range `[k0, k1)` and, with `accumulate`, adds what the
//! output already holds (a later piece of a sum split for a loop limit;
//! the bias is added only when `accumulate` is 0). The output is dense
//! from offset 0; inputs are dense from their offsets.

use super::conv::CONV_MD;
use super::Bindings;

/// Side of the square tile of the product one workgroup computes.
pub const CONV_TILE: u32 = 16;

/// Which implicit GEMM a kernel computes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ConvGemm {
    /// Operands (x, w[, bias], out).
    Forward { bias: bool },
    /// Operands (g, w, out): the input's gradient.
    InputGrad,
    /// Operands (g, x, out): the weight's gradient.
    WeightGrad,
}

impl ConvGemm {
    /// Loop iterations one invocation makes for a K range of `k` elements:
    /// one outer trip and `CONV_TILE` inner ones per tile of K.
    pub fn trips(k: u64) -> u64 {
        k.div_ceil(CONV_TILE as u64) * (1 + CONV_TILE as u64) + 1
    }
}

/// WGSL: `k` as mixed-radix digits `(k % r1, k / r1 % r2, k / (r1 r2))`,
/// and digits `v` advanced by the digits `s` of a step (each carry at most 1).
const DIGITS: &str = include_str!("conv_gemm.wgsl");

/// The implicit-GEMM convolution kernel `kind` (see the module docs).
pub fn conv_gemm(bd: &Bindings, kind: ConvGemm) -> String {
    let t = CONV_TILE;
    // (GEMM rows, columns; row setup, column setup, A load, B load, store)
    // The K index `k` of the A and B loads is walked as mixed-radix digits
    // `(k % R1, k / R1 % R2, k / (R1 R2))` (kernel taps, or output pixels),
    // advanced a tile at a time by additions with carries: no integer
    // division per element (slow where the driver runs shaders on a CPU).
    let radix = match kind {
        ConvGemm::WeightGrad => "OW, OH",
        _ => "KW, KH",
    };
    let (dims, rows, cols, a_load, b_load, store) = match kind {
        ConvGemm::Forward { bias } => {
            let (xa, wa) = (bd.arr(0), bd.arr(1));
            let oa = bd.arr(if bias { 3 } else { 2 });
            let add_bias = if bias {
                format!(
                    "if (md[23] == 0u) {{ acc = acc + {}[md[20] + oc]; }}",
                    bd.arr(2)
                )
            } else {
                String::new()
            };
            (
                "    let MM = NN * OH * OW; let NC = OG; let KK = CG * KH * KW;\n".to_string(),
                "    let ow = r % OW; let oh = (r / OW) % OH; let nb = r / max(OW * OH, 1u);
    let ih0 = i32(oh) * SH - PT; let iw0 = i32(ow) * SW - PL;
    let xp = md[18] + (nb * C + grp * CG) * H * W;\n"
                    .to_string(),
                "    let oc = grp * OG + col;\n".to_string(),
                format!(
                    "let kw = va.x; let kh = va.y; let ci = va.z;
            let ih = ih0 + i32(kh) * DH; let iw = iw0 + i32(kw) * DW;
            if (ih >= 0 && ih < i32(H) && iw >= 0 && iw < i32(W)) {{
                av = {xa}[xp + (ci * H + u32(ih)) * W + u32(iw)];
            }}"
                ),
                format!("bv = {wa}[md[19] + oc * KK + kb];"),
                format!(
                    "let at = ((nb * O + oc) * OH + oh) * OW + ow;
        if (md[23] != 0u) {{ acc = acc + {oa}[at]; }}
        {add_bias}
        {oa}[at] = acc;"
                ),
            )
        }
        ConvGemm::InputGrad => {
            let (ga, wa, oa) = (bd.arr(0), bd.arr(1), bd.arr(2));
            (
                "    let MM = NN * H * W; let NC = CG; let KK = OG * KH * KW;\n".to_string(),
                "    let iw = r % W; let ih = (r / W) % H; let nb = r / max(W * H, 1u);
    let th0 = i32(ih) + PT; let tw0 = i32(iw) + PL; let unit = SH == 1 && SW == 1;
    let gp = md[18] + (nb * O + grp * OG) * OH * OW;\n"
                    .to_string(),
                "    let wp = md[19] + grp * OG * CG * KH * KW + col * KH * KW;\n".to_string(),
                format!(
                    "let kw = va.x; let kh = va.y; let oi = va.z;
            let th = th0 - i32(kh) * DH; let tw = tw0 - i32(kw) * DW;
            if (th >= 0 && tw >= 0) {{
                var oh = u32(th); var ow = u32(tw); var on = true;
                if (!unit) {{
                    on = th % SH == 0 && tw % SW == 0; oh = u32(th / SH); ow = u32(tw / SW);
                }}
                if (on && oh < OH && ow < OW) {{ av = {ga}[gp + (oi * OH + oh) * OW + ow]; }}
            }}"
                ),
                format!(
                    "let kw = vb.x; let kh = vb.y; let oi = vb.z;
            bv = {wa}[wp + oi * CG * KH * KW + kh * KW + kw];"
                ),
                format!(
                    "let at = ((nb * C + grp * CG + col) * H + ih) * W + iw;
        if (md[23] != 0u) {{ acc = acc + {oa}[at]; }}
        {oa}[at] = acc;"
                ),
            )
        }
        ConvGemm::WeightGrad => {
            let (ga, xa, oa) = (bd.arr(0), bd.arr(1), bd.arr(2));
            (
                "    let MM = OG; let NC = CG * KH * KW; let KK = NN * OH * OW;\n".to_string(),
                "    let gp = md[18] + (grp * OG + r) * OH * OW;\n".to_string(),
                "    let kw = col % KW; let kh = (col / KW) % KH; let ci = col / max(KW * KH, 1u);
    let xp = md[19] + (grp * CG + ci) * H * W;
    let dh = i32(kh) * DH - PT; let dw = i32(kw) * DW - PL;\n"
                    .to_string(),
                format!(
                    "let ow = va.x; let oh = va.y; let nb = va.z;
            av = {ga}[gp + nb * O * OH * OW + oh * OW + ow];"
                ),
                format!(
                    "let ow = vb.x; let oh = vb.y; let nb = vb.z;
            let ih = i32(oh) * SH + dh; let iw = i32(ow) * SW + dw;
            if (ih >= 0 && ih < i32(H) && iw >= 0 && iw < i32(W)) {{
                bv = {xa}[xp + nb * C * H * W + u32(ih) * W + u32(iw)];
            }}"
                ),
                format!(
                    "let at = (grp * OG + r) * NC + col;
        if (md[23] != 0u) {{ acc = acc + {oa}[at]; }}
        {oa}[at] = acc;"
                ),
            )
        }
    };
    let body = bd.io(&format!(
        "    let gi = wid.y * nwg.x + wid.x;
    let live = gi < md[0];
{CONV_MD}{dims}    let k0 = md[21];
    let k1 = md[22];
    let tn = (NC + {t}u - 1u) / {t}u;
    let per = max(((MM + {t}u - 1u) / {t}u) * tn, 1u);
    let grp = gi / per;
    let tile = gi % per;
    let lr = lid / {t}u;
    let lc = lid % {t}u;
    let r = (tile / max(tn, 1u)) * {t}u + lr;
    let col = (tile % max(tn, 1u)) * {t}u + lc;
    let rok = live && r < MM;
    let cok = live && col < NC;
{rows}{cols}    var acc = 0.0;
    let sd = digits({t}u, {radix});
    var va = digits(k0 + lc, {radix});
    var vb = digits(k0 + lr, {radix});
    let steps = (k1 - k0 + {t}u - 1u) / {t}u;
    for (var st = 0u; st < steps; st = st + 1u) {{
        let ka = k0 + st * {t}u + lc;
        var av = 0.0;
        if (rok && ka < k1) {{
            {a_load}
        }}
        ta[lid] = av;
        let kb = k0 + st * {t}u + lr;
        var bv = 0.0;
        if (cok && kb < k1) {{
            {b_load}
        }}
        tb[lid] = bv;
        workgroupBarrier();
        for (var q = 0u; q < {t}u; q = q + 1u) {{
            acc = acc + ta[lr * {t}u + q] * tb[q * {t}u + lc];
        }}
        workgroupBarrier();
        va = advance(va, sd, {radix});
        vb = advance(vb, sd, {radix});
    }}
    if (rok && cok) {{
        {store}
    }}"
    ));
    format!(
        "{}{DIGITS}var<workgroup> ta: array<f32, {n}>;
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
