//! Direct convolution and pooling kernels, one thread per output element
//! (metadata words read directly as `md[k]`).

use super::{item_shader, Bindings};

/// Shared convolution metadata names: md = [n, N, C, H, W, O, OH, OW, KH, KW,
/// SH, SW, PT, PL, DH, DW, G, has_bias, off0, off1, off2].
pub(super) const CONV_MD: &str = include_str!("conv.wgsl");

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
