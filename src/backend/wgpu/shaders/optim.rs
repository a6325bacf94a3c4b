//! Optimizer update kernels: the per-parameter and multi-tensor kernels of SGD,
//! Adam/AdamW and RMSprop.

use std::fmt::Write as _;

use super::{ew_shader, Bindings, MATH, WG};

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
const OFFT: &str = concat!("\n", include_str!("optim.wgsl"));

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
