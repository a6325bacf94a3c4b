//! WGSL generation for the WebGPU kernels (pure text: no device needed).
//!
//! Every kernel reads its sizes, strides and scalar parameters from a
//! metadata array bound at `binding(0)`; tensors follow at `binding(1..)`.
//! Shapes never appear in the shader text, so one pipeline serves every
//! shape and the pipeline cache stays small (a pipeline is keyed by its
//! source). Element types on the device: `f32` (float32), `i32` (int32, and
//! int64 stored in 32 bits) and `u32` (bool, 0 or 1). A float16 tensor is
//! stored natively as `f16` where the device has `shader-f16` (a binding
//! marked in [`Bindings::half`]): kernels still compute in `f32`, the
//! generated text loading `f32(b[i])` and storing through `to_h` (see
//! [`half_io`]); elsewhere float16 is stored as `f32` like bfloat16.
//!
//! Elementwise metadata: `[n, ndim, p0..p7, shape[ndim], then per
//! operand k: offset, strides[ndim]]` (strides are `i32` bits; the operand
//! order is the kernel's: inputs, then the output).

use std::fmt::Write as _;

mod conv;
mod conv_gemm;
mod elementwise;
mod index;
mod loss;
mod matmul;
mod optim;
mod rows;
mod sort;
#[cfg(test)]
mod tests;
#[cfg(test)]
pub(crate) use tests::dump as dump_for_tests;

pub use conv::{avg_pool2d, conv2d, conv2d_input_grad, conv2d_weight_grad, max_pool2d};
pub use conv_gemm::{conv_gemm, ConvGemm, CONV_TILE};
pub use elementwise::{
    binary, binary_expr, cast, fill, fused, round_narrow, tri, unary, unary_expr, unary_grad,
    unary_grad_expr, unary_params, where_,
};
pub use index::{gather, index_put, scatter, scatter_reduce};
pub use loss::{cross_entropy, cross_entropy_grad};
pub use matmul::{matmul, matmul_tiled, MM_TILE};
pub use optim::{adam, optim_multi, optim_single, rmsprop, sgd, OptimRule};
pub use rows::{
    arg_reduce, cumulative, layer_norm, layer_norm_grad_input, layer_norm_grad_params, reduce,
    softmax, softmax_grad,
};
pub use sort::{sort_indices, sort_init, sort_step};

/// Threads per workgroup of the elementwise and matmul kernels.
pub const WG: u32 = 256;
/// Threads per workgroup of the row kernels (reductions, softmax).
pub const RED_WG: u32 = 64;
/// Index of the first shape word in elementwise metadata.
pub const EW_SHAPE: usize = 10;

/// An element type on the device.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum GTy {
    F32,
    I32,
    /// bool (0/1)
    U32,
}

impl GTy {
    pub fn wgsl(self) -> &'static str {
        match self {
            GTy::F32 => "f32",
            GTy::I32 => "i32",
            GTy::U32 => "u32",
        }
    }
    fn zero(self) -> &'static str {
        match self {
            GTy::F32 => "0.0",
            GTy::I32 => "0i",
            GTy::U32 => "0u",
        }
    }
    fn one(self) -> &'static str {
        match self {
            GTy::F32 => "1.0",
            GTy::I32 => "1i",
            GTy::U32 => "1u",
        }
    }
}

/// `e` (of type `from`) converted to `to` with the CPU's casting rules
/// (anything non-zero, NaN included, is `true`).
pub fn conv(e: &str, from: GTy, to: GTy) -> String {
    use GTy::*;
    match (from, to) {
        (a, b) if a == b => e.to_string(),
        (F32, U32) => format!("select(1u, 0u, ({e}) == 0.0)"),
        (I32, U32) => format!("select(0u, 1u, ({e}) != 0i)"),
        (F32, I32) => format!("i32(trunc({e}))"),
        (_, t) => format!("{}({e})", t.wgsl()),
    }
}

/// How a kernel binds its buffers: `(element type, writable)` per binding
/// (after the metadata), and for each operand the binding it reads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Bindings {
    pub bufs: Vec<(GTy, bool)>,
    pub operand: Vec<usize>,
    /// Per binding: whether it holds native float16 (`array<f16>`; the
    /// binding's [`GTy`] is then `F32`, the type its values are computed
    /// in). Shorter than `bufs` (or empty) means the rest are not.
    pub half: Vec<bool>,
}

impl Bindings {
    /// One binding per operand; the last operand is written.
    pub fn distinct(tys: &[GTy]) -> Bindings {
        let n = tys.len();
        Bindings {
            bufs: tys
                .iter()
                .enumerate()
                .map(|(i, &t)| (t, i + 1 == n))
                .collect(),
            operand: (0..n).collect(),
            half: Vec::new(),
        }
    }
    /// [`Bindings::distinct`] with the operands `half` marks stored as float16.
    pub fn distinct_half(tys: &[GTy], half: &[bool]) -> Bindings {
        let mut b = Bindings::distinct(tys);
        b.half = half.to_vec();
        b
    }
    /// Whether binding `j` holds native float16.
    pub fn is_half(&self, j: usize) -> bool {
        self.half.get(j).copied().unwrap_or(false)
    }
    pub(crate) fn any_half(&self) -> bool {
        (0..self.bufs.len()).any(|j| self.is_half(j))
    }
    pub(crate) fn decl(&self) -> String {
        let mut s = String::new();
        if self.any_half() {
            s.push_str("enable f16;\n");
        }
        s.push_str("@group(0) @binding(0) var<storage, read> md: array<u32>;\n");
        for (j, (t, rw)) in self.bufs.iter().enumerate() {
            let acc = if *rw { "read_write" } else { "read" };
            let t = if self.is_half(j) { "f16" } else { t.wgsl() };
            let _ = writeln!(
                s,
                "@group(0) @binding({}) var<storage, {acc}> b{j}: array<{t}>;",
                j + 1,
            );
        }
        if self.any_half() {
            s.push_str(HALF);
        }
        s
    }
    /// `body` (kernel statements) with the float16 bindings' accesses converted.
    pub(crate) fn io(&self, body: &str) -> String {
        if !self.any_half() {
            return body.to_string();
        }
        let half: Vec<bool> = (0..self.bufs.len()).map(|j| self.is_half(j)).collect();
        half_io(body, &half)
    }
    /// The array expression of operand `k`.
    fn arr(&self, k: usize) -> String {
        format!("b{}", self.operand[k])
    }
}

/// `h_round` alone (no `f16` type needed): for kernels that round to
/// float16 values stored as `f32`.
macro_rules! h_round_src {
    () => {
        include_str!("shaders/h_round.wgsl")
    };
}
/// Storing an `f32` as float16: `h_round(x)` is the nearest float16 value
/// (as an `f32`), ties to even, overflow to an infinity, NaN kept —
/// computed on the bits, so it is exactly the CPU's `half::f16::from_f32`
/// — and `to_h` converts that value, which float16 represents exactly, so
/// no rounding is left to the driver's `f16(x)` (WGSL leaves the rounding
/// of an inexact conversion to the implementation). Infinities and NaN
/// pass through the conversion as the driver keeps them (IEEE hardware does).
const HALF: &str = concat!(
    h_round_src!(),
    "fn to_h(x: f32) -> f16 { return f16(h_round(x)); }\n"
);
/// [`h_round`](HALF) for kernels without float16 bindings.
pub(crate) const HALF_ROUND: &str = h_round_src!();

/// `body` with every access to a float16 binding `bN` (`half[N]`)
/// converted to and from the `f32` the kernels compute in: a load
/// `bN[e]` becomes `f32(bN[e])`, a store `bN[e] = v;` becomes
/// `bN[e] = to_h(v);` (index and value expressions converted too). The
/// generators write every access as `bN[...]`, reads and plain `=` stores
/// only, so this one rewrite gives every kernel family native float16.
pub fn half_io(body: &str, half: &[bool]) -> String {
    let s = body.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    // The index of the bracket closing the one at `open`.
    let close = |open: usize| -> usize {
        let mut d = 0i32;
        for (k, &c) in s.iter().enumerate().skip(open) {
            match c {
                b'[' | b'(' => d += 1,
                b']' | b')' => {
                    d -= 1;
                    if d == 0 {
                        return k;
                    }
                }
                _ => {}
            }
        }
        s.len()
    };
    // The index of the `;` ending the expression that starts at `from`.
    let end_of = |from: usize| -> usize {
        let mut d = 0i32;
        for (k, &c) in s.iter().enumerate().skip(from) {
            match c {
                b'[' | b'(' => d += 1,
                b']' | b')' => d -= 1,
                b';' if d == 0 => return k,
                _ => {}
            }
        }
        s.len()
    };
    let mut out = String::with_capacity(body.len() + body.len() / 4);
    let mut i = 0;
    let mut copied = 0;
    while i < s.len() {
        if s[i] != b'b' || (i > 0 && ident(s[i - 1])) {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < s.len() && s[j].is_ascii_digit() {
            j += 1;
        }
        let k = body[i + 1..j].parse::<usize>().ok();
        let is_half = k.is_some_and(|k| half.get(k) == Some(&true));
        if j >= s.len() || s[j] != b'[' || !is_half {
            i = j.max(i + 1);
            continue;
        }
        let c = close(j);
        if c >= s.len() {
            break; // unbalanced: no access to convert (generated text never is)
        }
        let acc = format!("{}[{}]", &body[i..j], half_io(&body[j + 1..c], half));
        out.push_str(&body[copied..i]);
        let mut t = c + 1;
        while t < s.len() && s[t] == b' ' {
            t += 1;
        }
        if t + 1 < s.len() && s[t] == b'=' && s[t + 1] != b'=' {
            let e = end_of(t + 1);
            let v = half_io(body[t + 1..e].trim(), half);
            let _ = write!(out, "{acc} = to_h({v})");
            i = e;
        } else {
            let _ = write!(out, "f32({acc})");
            i = c + 1;
        }
        copied = i;
    }
    out.push_str(&body[copied..]);
    out
}

/// The math functions kernels share (NaN and infinity tests, and `exp`,
/// `log`, `tanh`, `erf`, `pow`... computed as on the CPU) and the parameter
/// words `pf(j)`/`pi(j)` of the metadata.
const MATH: &str = concat!("\n", include_str!("shaders/math.wgsl"));

/// `off(k, i)`: the element offset of operand `k` at element `i`, from
/// elementwise metadata.
const OFF: &str = concat!("\n", include_str!("shaders/offsets.wgsl"));

fn ew_shader(b: &Bindings, body: &str) -> String {
    let body = b.io(body);
    format!(
        "{}{MATH}{OFF}
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let i = (wid.y * nwg.x + wid.x) * {WG}u + lid;
    if (i >= md[0]) {{ return; }}
{body}
}}
",
        b.decl()
    )
}

fn load(b: &Bindings, k: usize) -> String {
    format!("{}[off({k}u, i)]", b.arr(k))
}

/// A one-thread-per-item kernel over `md[0]` items with `body` using `i`.
fn item_shader(b: &Bindings, body: &str) -> String {
    ew_shader(b, body)
}
