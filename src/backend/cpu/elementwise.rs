//! CPU elementwise kernels: maps, zips, `where`, casts and fills.
//!
//! One generic raw-pointer loop per arity, compiled per SIMD level
//! (`map_run`, `zip_run`), driven by the strided walker. The contiguous case
//! is a unit-stride loop that LLVM vectorises (with runtime alias checks, so
//! in-place use is fine); broadcast scalars hoist out of the loop.

use half::{bf16, f16};

use super::math::Real;
use super::simd::{level, Level};
use super::strided::{par_for_each_row, SendPtr, PAR_MIN};
use crate::error::Result;
use crate::kernel::BinaryOp;
use crate::kernel::{UnaryOp, UnaryOut};
use crate::tensor::{DType, Element, Scalar, Tensor};
use crate::with_dtype;

/// Grain for ops that cost tens of cycles per element.
const PAR_MIN_HEAVY: usize = 1 << 12;

// ---------------------------------------------------------------------------
// Multiversioned inner loops
// ---------------------------------------------------------------------------

/// Whether `y` is exactly `x` with elements of the same size (an in-place
/// update: element `i` is read and written at the same address).
#[inline(always)]
fn same_slot<T, U>(x: *const T, y: *mut U) -> bool {
    std::mem::size_of::<T>() == std::mem::size_of::<U>()
        && std::ptr::eq(x.cast::<u8>(), y.cast::<u8>())
}

#[inline(always)]
unsafe fn map_body<T: Copy, U: Copy, F: Fn(T) -> U>(
    x: *const T,
    sx: isize,
    y: *mut U,
    sy: isize,
    n: usize,
    f: &F,
) {
    if sx == 1 && sy == 1 {
        if same_slot::<T, U>(x, y) {
            // In place: one base pointer, so the compiler sees each element
            // read then written at the same index and vectorises (through
            // two pointers its overlap check sends the loop to scalar code).
            let p = y as *mut u8;
            for i in 0..n {
                *(p as *mut U).add(i) = f(*(p as *const T).add(i));
            }
            return;
        }
        for i in 0..n {
            *y.add(i) = f(*x.add(i));
        }
    } else if sx == 0 && sy == 1 {
        let v = f(*x);
        for i in 0..n {
            *y.add(i) = v;
        }
    } else {
        for i in 0..n as isize {
            *y.offset(i * sy) = f(*x.offset(i * sx));
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
unsafe fn map_v4<T: Copy, U: Copy, F: Fn(T) -> U>(
    x: *const T,
    sx: isize,
    y: *mut U,
    sy: isize,
    n: usize,
    f: &F,
) {
    map_body(x, sx, y, sy, n, f)
}
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn map_v3<T: Copy, U: Copy, F: Fn(T) -> U>(
    x: *const T,
    sx: isize,
    y: *mut U,
    sy: isize,
    n: usize,
    f: &F,
) {
    map_body(x, sx, y, sy, n, f)
}

/// `y[i*sy] = f(x[i*sx])` for `i < n`, at the best SIMD level.
///
/// # Safety
/// Pointers must be valid for the strided ranges; `y` may alias `x` only element-for-element.
#[inline(always)]
pub unsafe fn map_run<T: Copy, U: Copy, F: Fn(T) -> U>(
    x: *const T,
    sx: isize,
    y: *mut U,
    sy: isize,
    n: usize,
    f: &F,
) {
    #[cfg(target_arch = "x86_64")]
    match level() {
        Level::Avx512 => return map_v4(x, sx, y, sy, n, f),
        Level::Avx2 => return map_v3(x, sx, y, sy, n, f),
        Level::Scalar => {}
    }
    map_body(x, sx, y, sy, n, f)
}

/// `y[i] = f(y[i], o[i*so])` over contiguous `y` read and written through
/// one base pointer (the in-place arm of [`zip_body`]).
///
/// # Safety
/// `y` valid for `n` contiguous elements of both `T` and `U` (the same size);
/// `o` for `n` elements at stride `so`.
#[inline(always)]
unsafe fn zip_in_place<T: Copy, U: Copy, F: Fn(T, T) -> U>(
    y: *mut U,
    o: *const T,
    so: isize,
    n: usize,
    f: &F,
) {
    let p = y as *mut u8;
    if so == 1 {
        for i in 0..n {
            *(p as *mut U).add(i) = f(*(p as *const T).add(i), *o.add(i));
        }
    } else if so == 0 {
        let ov = *o;
        for i in 0..n {
            *(p as *mut U).add(i) = f(*(p as *const T).add(i), ov);
        }
    } else {
        for i in 0..n {
            *(p as *mut U).add(i) = f(*(p as *const T).add(i), *o.offset(i as isize * so));
        }
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn zip_body<T: Copy, U: Copy, F: Fn(T, T) -> U>(
    a: *const T,
    sa: isize,
    b: *const T,
    sb: isize,
    y: *mut U,
    sy: isize,
    n: usize,
    f: &F,
) {
    // In place over `a` or `b`: through one base pointer (see `map_body`).
    if sy == 1 && sa == 1 && same_slot(a, y) {
        return zip_in_place(y, b, sb, n, f);
    }
    if sy == 1 && sb == 1 && same_slot(b, y) {
        return zip_in_place(y, a, sa, n, &|p: T, q: T| f(q, p));
    }
    if sy == 1 && sa == 1 && sb == 1 {
        for i in 0..n {
            *y.add(i) = f(*a.add(i), *b.add(i));
        }
    } else if sy == 1 && sa == 1 && sb == 0 {
        let bv = *b;
        for i in 0..n {
            *y.add(i) = f(*a.add(i), bv);
        }
    } else if sy == 1 && sa == 0 && sb == 1 {
        let av = *a;
        for i in 0..n {
            *y.add(i) = f(av, *b.add(i));
        }
    } else {
        for i in 0..n as isize {
            *y.offset(i * sy) = f(*a.offset(i * sa), *b.offset(i * sb));
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn zip_v4<T: Copy, U: Copy, F: Fn(T, T) -> U>(
    a: *const T,
    sa: isize,
    b: *const T,
    sb: isize,
    y: *mut U,
    sy: isize,
    n: usize,
    f: &F,
) {
    zip_body(a, sa, b, sb, y, sy, n, f)
}
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn zip_v3<T: Copy, U: Copy, F: Fn(T, T) -> U>(
    a: *const T,
    sa: isize,
    b: *const T,
    sb: isize,
    y: *mut U,
    sy: isize,
    n: usize,
    f: &F,
) {
    zip_body(a, sa, b, sb, y, sy, n, f)
}

/// `y[i*sy] = f(a[i*sa], b[i*sb])`, at the best SIMD level.
///
/// # Safety
/// As [`map_run`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn zip_run<T: Copy, U: Copy, F: Fn(T, T) -> U>(
    a: *const T,
    sa: isize,
    b: *const T,
    sb: isize,
    y: *mut U,
    sy: isize,
    n: usize,
    f: &F,
) {
    #[cfg(target_arch = "x86_64")]
    match level() {
        Level::Avx512 => return zip_v4(a, sa, b, sb, y, sy, n, f),
        Level::Avx2 => return zip_v3(a, sa, b, sb, y, sy, n, f),
        Level::Scalar => {}
    }
    zip_body(a, sa, b, sb, y, sy, n, f)
}

// ---------------------------------------------------------------------------
// Streaming (non-temporal) stores for large outputs
// ---------------------------------------------------------------------------

/// Outputs at least this big are written with non-temporal stores: they do not
/// fit in the last-level cache, so a normal store first reads each line from
/// memory only to overwrite it (measured on 2^24 float32 `x*y`, two threads:
/// about a quarter less time with streaming stores).
const STREAM_MIN_BYTES: usize = 16 << 20;

/// Whether an output of `bytes` should be written with streaming stores:
/// large enough, at a SIMD level that has them.
pub(crate) fn stream_ok(bytes: usize) -> bool {
    cfg!(target_arch = "x86_64") && level() >= Level::Avx2 && bytes >= STREAM_MIN_BYTES
}

/// Whether a kernel writing `out` from `inputs` should stream its stores:
/// a large output that is none of the inputs (in place, the lines were just
/// read, so normal stores cost no extra traffic), at a SIMD level with
/// 256-bit streaming stores.
fn streams(out: &Tensor, inputs: &[&Tensor]) -> bool {
    stream_ok(out.numel() * out.dtype().itemsize())
        && inputs
            .iter()
            .all(|t| t.data_ptr::<u8>() != out.data_ptr::<u8>())
}

/// `y[i] = g(i)` for `i < n` over contiguous `y`: whole aligned 64-byte lines
/// are assembled in a register-sized buffer and written with streaming stores.
///
/// # Safety
/// AVX is available; `y` is valid for `n` writes and aligned to `U`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn stream_body<U: Copy, G: Fn(usize) -> U>(y: *mut U, n: usize, g: &G) {
    use std::arch::x86_64::{__m256i, _mm256_load_si256, _mm256_stream_si256};
    #[repr(align(64))]
    struct Line([u8; 64]);
    let size = std::mem::size_of::<U>();
    let per = 64 / size;
    let head = ((64 - (y as usize) % 64) % 64 / size).min(n);
    for i in 0..head {
        *y.add(i) = g(i);
    }
    let mut line = Line([0; 64]);
    let mut i = head;
    while i + per <= n {
        let b = line.0.as_mut_ptr() as *mut U;
        for j in 0..per {
            *b.add(j) = g(i + j);
        }
        let src = line.0.as_ptr() as *const __m256i;
        let dst = y.add(i) as *mut __m256i;
        _mm256_stream_si256(dst, _mm256_load_si256(src));
        _mm256_stream_si256(dst.add(1), _mm256_load_si256(src.add(1)));
        i += per;
    }
    for k in i..n {
        *y.add(k) = g(k);
    }
}

/// Order the streaming stores made so far before anything that follows (they
/// are weakly ordered): every run that streamed calls this before it returns.
#[inline]
pub(crate) fn stream_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of the x86-64 baseline.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
unsafe fn stream_v4<U: Copy, G: Fn(usize) -> U>(y: *mut U, n: usize, g: &G) {
    stream_body(y, n, g)
}
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn stream_v3<U: Copy, G: Fn(usize) -> U>(y: *mut U, n: usize, g: &G) {
    stream_body(y, n, g)
}

/// [`stream_body`] at the best SIMD level, without the closing fence; `false`
/// (nothing written) when the level has no streaming path or `U` does not
/// tile a 64-byte line.
///
/// # Safety
/// `y` is valid for `n` writes and aligned to `U`.
#[inline(always)]
pub(crate) unsafe fn stream_lines<U: Copy, G: Fn(usize) -> U>(y: *mut U, n: usize, g: &G) -> bool {
    if 64 % std::mem::size_of::<U>() != 0 {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    match level() {
        Level::Avx512 => {
            stream_v4(y, n, g);
            return true;
        }
        Level::Avx2 => {
            stream_v3(y, n, g);
            return true;
        }
        Level::Scalar => {}
    }
    let _ = (y, n, g);
    false
}

/// [`stream_lines`] followed by [`stream_fence`].
///
/// # Safety
/// As [`stream_lines`].
#[inline(always)]
unsafe fn stream_run<U: Copy, G: Fn(usize) -> U>(y: *mut U, n: usize, g: &G) -> bool {
    let done = stream_lines(y, n, g);
    if done {
        stream_fence();
    }
    done
}

/// For kernels with loops of their own (the fused interpreter):
/// `y[i] = f(x[i])` over contiguous `x` and `y` with streaming stores;
/// `false` (nothing written) when `sx != 1` or streaming is unavailable. The
/// caller ends its run with [`stream_fence`].
///
/// # Safety
/// As [`map_run`], with `y` contiguous.
#[inline(always)]
pub(crate) unsafe fn map_stream<T: Copy, U: Copy, F: Fn(T) -> U>(
    x: *const T,
    sx: isize,
    y: *mut U,
    n: usize,
    f: &F,
) -> bool {
    sx == 1 && stream_lines(y, n, &|i| f(*x.add(i)))
}

/// As [`map_stream`] for `y[i] = f(a[i*sa], b[i*sb])`, where each operand is
/// contiguous or a broadcast scalar (stride 0).
///
/// # Safety
/// As [`zip_run`], with `y` contiguous.
#[inline(always)]
pub(crate) unsafe fn zip_stream<T: Copy, U: Copy, F: Fn(T, T) -> U>(
    a: *const T,
    sa: isize,
    b: *const T,
    sb: isize,
    y: *mut U,
    n: usize,
    f: &F,
) -> bool {
    match (sa, sb) {
        (1, 1) => stream_lines(y, n, &|i| f(*a.add(i), *b.add(i))),
        (1, 0) => {
            let bv = *b;
            stream_lines(y, n, &|i| f(*a.add(i), bv))
        }
        (0, 1) => {
            let av = *a;
            stream_lines(y, n, &|i| f(av, *b.add(i)))
        }
        _ => false,
    }
}

// ---------------------------------------------------------------------------
// Tensor-level drivers
// ---------------------------------------------------------------------------

/// Run `f` over `x` into `out` (same shape), threaded above `grain` elements.
pub fn run_map<T: Copy, U: Copy, F: Fn(T) -> U + Sync>(
    x: &Tensor,
    out: &Tensor,
    grain: usize,
    f: F,
) {
    let xp = SendPtr(x.data_ptr::<T>());
    let yp = SendPtr(out.data_ptr::<U>());
    let stream = streams(out, &[x]);
    par_for_each_row(
        out.shape(),
        [x.strides(), out.strides()],
        grain,
        |[ox, oy], n, [sx, sy]| {
            // SAFETY: offsets come from the layouts; each row is written by one task.
            unsafe {
                let (x, y) = (xp.get().offset(ox), yp.get().offset(oy));
                if stream && sy == 1 && map_stream(x, sx, y, n, &f) {
                    stream_fence();
                    return;
                }
                map_run(x, sx, y, sy, n, &f)
            }
        },
    );
}

/// Run `f` over `(a, b)` into `out` (all the same shape).
pub fn run_zip<T: Copy, U: Copy, F: Fn(T, T) -> U + Sync>(
    a: &Tensor,
    b: &Tensor,
    out: &Tensor,
    grain: usize,
    f: F,
) {
    let ap = SendPtr(a.data_ptr::<T>());
    let bp = SendPtr(b.data_ptr::<T>());
    let yp = SendPtr(out.data_ptr::<U>());
    let stream = streams(out, &[a, b]);
    par_for_each_row(
        out.shape(),
        [a.strides(), b.strides(), out.strides()],
        grain,
        |[oa, ob, oy], n, [sa, sb, sy]| {
            // SAFETY: as run_map.
            unsafe {
                let (a, b, y) = (
                    ap.get().offset(oa),
                    bp.get().offset(ob),
                    yp.get().offset(oy),
                );
                if stream && sy == 1 && zip_stream(a, sa, b, sb, y, n, &f) {
                    stream_fence();
                    return;
                }
                zip_run(a, sa, b, sb, y, sy, n, &f)
            }
        },
    );
}

// ---------------------------------------------------------------------------
// Unary
// ---------------------------------------------------------------------------

/// Expand to a `match` over the float unary kernels of the op table
/// ([`crate::kernel::unary`]), calling `$run!(grain, closure over $C)`.
macro_rules! float_unary {
    ($op:expr, $C:ty, $run:ident) => {{
        let op = $op;
        $crate::kernel::unary::unary_ops!([cpu_float op $run] $C, i64)
    }};
}

pub(crate) use float_unary;

/// Same, for integer types (only the ops that keep an integer dtype).
macro_rules! int_unary {
    ($op:expr, $T:ty, $x:expr, $out:expr) => {{
        let (op, x, out) = ($op, $x, $out);
        macro_rules! run_int {
            ($f:expr) => {
                run_map(x, out, PAR_MIN, $f)
            };
        }
        $crate::kernel::unary::unary_ops!([cpu_int op run_int] f32, $T)
    }};
}

/// uint8 unary kernels: computed in i16 and narrowed to the low byte, which
/// wraps as PyTorch's (`-x` of 1 is 255, `abs` is the identity).
fn unsigned_unary(op: UnaryOp, x: &Tensor, out: &Tensor) {
    macro_rules! run_u8 {
        ($f:expr) => {{
            let f = $f;
            run_map(x, out, PAR_MIN, move |v: u8| f(v as i16) as u8)
        }};
    }
    crate::kernel::unary::unary_ops!([cpu_int op run_u8] f32, i16)
}

/// `y[i] = op(y[i])` over `n` contiguous float32s, in place, with the
/// kernel [`unary`] runs (so the values equal its, bit for bit): GEMM
/// epilogues apply an activation to each block of a product this way.
/// `op` must have a float kernel (not a predicate).
///
/// # Safety
/// `y` valid for `n` floats.
pub unsafe fn unary_in_place_f32(op: UnaryOp, y: *mut f32, n: usize) {
    macro_rules! run {
        ($g:expr, $f:expr) => {{
            let _ = $g;
            map_run::<f32, f32, _>(y, 1, y, 1, n, &$f)
        }};
    }
    float_unary!(op, f32, run)
}

pub fn unary(op: UnaryOp, x: &Tensor, out: &Tensor) -> Result<()> {
    // Predicates: any input dtype, bool output (and bitwise not of bool).
    let pred: Option<fn(f64) -> bool> = crate::kernel::unary::unary_ops!([cpu_pred op]);
    if let Some(p) = pred.filter(|_| op.out_kind() == UnaryOut::Bool || x.dtype() == DType::Bool) {
        with_dtype!(x.dtype(), T => {
            run_map(x, out, PAR_MIN, move |v: T| -> u8 { p(v.to_f64()) as u8 });
        });
        return Ok(());
    }
    match x.dtype() {
        DType::F32 => {
            macro_rules! run {
                ($g:expr, $f:expr) => {
                    run_map::<f32, f32, _>(x, out, $g, $f)
                };
            }
            float_unary!(op, f32, run)
        }
        DType::F64 => {
            macro_rules! run {
                ($g:expr, $f:expr) => {
                    run_map::<f64, f64, _>(x, out, $g, $f)
                };
            }
            float_unary!(op, f64, run)
        }
        DType::F16 => {
            macro_rules! run {
                ($g:expr, $f:expr) => {{
                    let f = $f;
                    run_map::<f16, f16, _>(x, out, $g, move |v: f16| f16::from_f32(f(v.to_f32())))
                }};
            }
            float_unary!(op, f32, run)
        }
        DType::BF16 => {
            macro_rules! run {
                ($g:expr, $f:expr) => {{
                    let f = $f;
                    run_map::<bf16, bf16, _>(x, out, $g, move |v: bf16| {
                        bf16::from_f32(f(v.to_f32()))
                    })
                }};
            }
            float_unary!(op, f32, run)
        }
        DType::I32 => int_unary!(op, i32, x, out),
        DType::I64 => int_unary!(op, i64, x, out),
        DType::I8 => int_unary!(op, i8, x, out),
        DType::I16 => int_unary!(op, i16, x, out),
        DType::U8 => unsigned_unary(op, x, out),
        DType::Bool if op.keeps_bool() => run_map(x, out, PAR_MIN, |v: u8| v),
        DType::Bool => unreachable!("bool unary {op:?} rejected by the op layer"),
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Binary
// ---------------------------------------------------------------------------

#[inline(always)]
pub(crate) fn py_fmod<R: Real>(a: R, b: R) -> R {
    let r = a % b;
    if r != R::ZERO && ((r < R::ZERO) != (b < R::ZERO)) {
        r + b
    } else {
        r
    }
}

macro_rules! float_binary {
    ($op:expr, $C:ty, $run:ident, $pred:ident) => {{
        use BinaryOp::*;
        match $op {
            Add => $run!(PAR_MIN, |a: $C, b: $C| a + b),
            Sub => $run!(PAR_MIN, |a: $C, b: $C| a - b),
            Mul => $run!(PAR_MIN, |a: $C, b: $C| a * b),
            Div => $run!(PAR_MIN, |a: $C, b: $C| a / b),
            FloorDiv => $run!(PAR_MIN, |a: $C, b: $C| (a / b).floor()),
            Remainder => $run!(PAR_MIN, |a: $C, b: $C| py_fmod(a, b)),
            Pow => $run!(PAR_MIN_HEAVY, |a: $C, b: $C| Real::powf(a, b)),
            Maximum => $run!(PAR_MIN, |a: $C, b: $C| a.max_nan(b)),
            Minimum => $run!(PAR_MIN, |a: $C, b: $C| a.min_nan(b)),
            Atan2 => $run!(PAR_MIN_HEAVY, |a: $C, b: $C| Real::atan2(a, b)),
            Eq => $pred!(|a: $C, b: $C| a == b),
            Ne => $pred!(|a: $C, b: $C| a != b),
            Lt => $pred!(|a: $C, b: $C| a < b),
            Le => $pred!(|a: $C, b: $C| a <= b),
            Gt => $pred!(|a: $C, b: $C| a > b),
            Ge => $pred!(|a: $C, b: $C| a >= b),
            LogicalAnd => $pred!(|a: $C, b: $C| a != <$C>::ZERO && b != <$C>::ZERO),
            LogicalOr => $pred!(|a: $C, b: $C| a != <$C>::ZERO || b != <$C>::ZERO),
            LogicalXor => $pred!(|a: $C, b: $C| (a != <$C>::ZERO) != (b != <$C>::ZERO)),
            BitAnd | BitOr | BitXor => {
                unreachable!("bitwise ops on floats are rejected by the op layer")
            }
        }
    }};
}

pub(crate) use float_binary;

macro_rules! int_binary {
    ($op:expr, $T:ty, $a:expr, $b:expr, $out:expr) => {{
        use BinaryOp::*;
        let (a, b, out) = ($a, $b, $out);
        macro_rules! pred {
            ($f:expr) => {{
                let f = $f;
                run_zip(a, b, out, PAR_MIN, move |x: $T, y: $T| f(x, y) as u8)
            }};
        }
        match $op {
            Add => run_zip(a, b, out, PAR_MIN, |x: $T, y: $T| x.wrapping_add(y)),
            Sub => run_zip(a, b, out, PAR_MIN, |x: $T, y: $T| x.wrapping_sub(y)),
            Mul => run_zip(a, b, out, PAR_MIN, |x: $T, y: $T| x.wrapping_mul(y)),
            FloorDiv => run_zip(a, b, out, PAR_MIN, |x: $T, y: $T| {
                if y == 0 {
                    0
                } else {
                    let q = x.wrapping_div(y);
                    if x.wrapping_rem(y) != 0 && ((x < 0) != (y < 0)) {
                        q - 1
                    } else {
                        q
                    }
                }
            }),
            Remainder => run_zip(a, b, out, PAR_MIN, |x: $T, y: $T| {
                if y == 0 {
                    0
                } else {
                    let r = x.wrapping_rem(y);
                    if r != 0 && ((r < 0) != (y < 0)) {
                        r + y
                    } else {
                        r
                    }
                }
            }),
            Pow => run_zip(a, b, out, PAR_MIN, |x: $T, y: $T| {
                if y < 0 {
                    0
                } else {
                    x.wrapping_pow((y as i64).min(u32::MAX as i64) as u32)
                }
            }),
            Maximum => run_zip(a, b, out, PAR_MIN, |x: $T, y: $T| x.max(y)),
            Minimum => run_zip(a, b, out, PAR_MIN, |x: $T, y: $T| x.min(y)),
            BitAnd => run_zip(a, b, out, PAR_MIN, |x: $T, y: $T| x & y),
            BitOr => run_zip(a, b, out, PAR_MIN, |x: $T, y: $T| x | y),
            BitXor => run_zip(a, b, out, PAR_MIN, |x: $T, y: $T| x ^ y),
            Eq => pred!(|x: $T, y: $T| x == y),
            Ne => pred!(|x: $T, y: $T| x != y),
            Lt => pred!(|x: $T, y: $T| x < y),
            Le => pred!(|x: $T, y: $T| x <= y),
            Gt => pred!(|x: $T, y: $T| x > y),
            Ge => pred!(|x: $T, y: $T| x >= y),
            LogicalAnd => pred!(|x: $T, y: $T| x != 0 && y != 0),
            LogicalOr => pred!(|x: $T, y: $T| x != 0 || y != 0),
            LogicalXor => pred!(|x: $T, y: $T| (x != 0) != (y != 0)),
            Div | Atan2 => unreachable!("true division of integers computes in float"),
        }
    }};
}

/// uint8 binary kernels on the raw bytes (wrapping as PyTorch's).
fn unsigned_binary(op: BinaryOp, a: &Tensor, b: &Tensor, out: &Tensor) {
    use BinaryOp::*;
    macro_rules! pred {
        ($f:expr) => {{
            let f = $f;
            run_zip(a, b, out, PAR_MIN, move |x: u8, y: u8| f(x, y) as u8)
        }};
    }
    match op {
        Add => run_zip(a, b, out, PAR_MIN, |x: u8, y: u8| x.wrapping_add(y)),
        Sub => run_zip(a, b, out, PAR_MIN, |x: u8, y: u8| x.wrapping_sub(y)),
        Mul => run_zip(a, b, out, PAR_MIN, |x: u8, y: u8| x.wrapping_mul(y)),
        FloorDiv => run_zip(a, b, out, PAR_MIN, |x: u8, y: u8| {
            x.checked_div(y).unwrap_or(0)
        }),
        Remainder => run_zip(a, b, out, PAR_MIN, |x: u8, y: u8| {
            x.checked_rem(y).unwrap_or(0)
        }),
        Pow => run_zip(a, b, out, PAR_MIN, |x: u8, y: u8| x.wrapping_pow(y as u32)),
        Maximum => run_zip(a, b, out, PAR_MIN, |x: u8, y: u8| x.max(y)),
        Minimum => run_zip(a, b, out, PAR_MIN, |x: u8, y: u8| x.min(y)),
        BitAnd => run_zip(a, b, out, PAR_MIN, |x: u8, y: u8| x & y),
        BitOr => run_zip(a, b, out, PAR_MIN, |x: u8, y: u8| x | y),
        BitXor => run_zip(a, b, out, PAR_MIN, |x: u8, y: u8| x ^ y),
        Eq => pred!(|x: u8, y: u8| x == y),
        Ne => pred!(|x: u8, y: u8| x != y),
        Lt => pred!(|x: u8, y: u8| x < y),
        Le => pred!(|x: u8, y: u8| x <= y),
        Gt => pred!(|x: u8, y: u8| x > y),
        Ge => pred!(|x: u8, y: u8| x >= y),
        LogicalAnd => pred!(|x: u8, y: u8| x != 0 && y != 0),
        LogicalOr => pred!(|x: u8, y: u8| x != 0 || y != 0),
        LogicalXor => pred!(|x: u8, y: u8| (x != 0) != (y != 0)),
        Div | Atan2 => unreachable!("true division of integers computes in float"),
    }
}

pub fn binary(op: BinaryOp, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
    match a.dtype() {
        DType::F32 => {
            macro_rules! run {
                ($g:expr, $f:expr) => {
                    run_zip::<f32, f32, _>(a, b, out, $g, $f)
                };
            }
            macro_rules! pred {
                ($f:expr) => {{
                    let f = $f;
                    run_zip::<f32, u8, _>(a, b, out, PAR_MIN, move |x, y| f(x, y) as u8)
                }};
            }
            float_binary!(op, f32, run, pred)
        }
        DType::F64 => {
            macro_rules! run {
                ($g:expr, $f:expr) => {
                    run_zip::<f64, f64, _>(a, b, out, $g, $f)
                };
            }
            macro_rules! pred {
                ($f:expr) => {{
                    let f = $f;
                    run_zip::<f64, u8, _>(a, b, out, PAR_MIN, move |x, y| f(x, y) as u8)
                }};
            }
            float_binary!(op, f64, run, pred)
        }
        DType::F16 => {
            macro_rules! run {
                ($g:expr, $f:expr) => {{
                    let f = $f;
                    run_zip::<f16, f16, _>(a, b, out, $g, move |x: f16, y: f16| {
                        f16::from_f32(f(x.to_f32(), y.to_f32()))
                    })
                }};
            }
            macro_rules! pred {
                ($f:expr) => {{
                    let f = $f;
                    run_zip::<f16, u8, _>(a, b, out, PAR_MIN, move |x: f16, y: f16| {
                        f(x.to_f32(), y.to_f32()) as u8
                    })
                }};
            }
            float_binary!(op, f32, run, pred)
        }
        DType::BF16 => {
            macro_rules! run {
                ($g:expr, $f:expr) => {{
                    let f = $f;
                    run_zip::<bf16, bf16, _>(a, b, out, $g, move |x: bf16, y: bf16| {
                        bf16::from_f32(f(x.to_f32(), y.to_f32()))
                    })
                }};
            }
            macro_rules! pred {
                ($f:expr) => {{
                    let f = $f;
                    run_zip::<bf16, u8, _>(a, b, out, PAR_MIN, move |x: bf16, y: bf16| {
                        f(x.to_f32(), y.to_f32()) as u8
                    })
                }};
            }
            float_binary!(op, f32, run, pred)
        }
        DType::I32 => int_binary!(op, i32, a, b, out),
        DType::I64 => int_binary!(op, i64, a, b, out),
        DType::I8 => int_binary!(op, i8, a, b, out),
        DType::I16 => int_binary!(op, i16, a, b, out),
        DType::U8 => unsigned_binary(op, a, b, out),
        DType::Bool => {
            use BinaryOp::*;
            let f: fn(u8, u8) -> u8 = match op {
                Add | LogicalOr | BitOr | Maximum => |x, y| x | y,
                Mul | LogicalAnd | BitAnd | Minimum => |x, y| x & y,
                LogicalXor | BitXor | Ne => |x, y| x ^ y,
                Eq => |x, y| (x == y) as u8,
                Lt => |x, y| (x < y) as u8,
                Le => |x, y| (x <= y) as u8,
                Gt => |x, y| (x > y) as u8,
                Ge => |x, y| (x >= y) as u8,
                FloorDiv | Remainder | Pow => |x, y| match (x, y) {
                    (_, 0) => 0,
                    (x, _) => x,
                },
                Sub | Div | Atan2 => unreachable!("rejected or promoted by the op layer"),
            };
            run_zip(a, b, out, PAR_MIN, f);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// where, cast, fill
// ---------------------------------------------------------------------------

/// `a <op> s` (`s <op> a` when `reflected`) into `out` for a float `a` in the compute dtype,
/// with `s` held in a register: rounded to `a`'s dtype as a filled 0-d tensor would be, then
/// computed by the same closures as [`binary`], so results match it bit for bit. `false` for
/// other dtypes (the caller then takes the tensor path).
pub fn binary_scalar(op: BinaryOp, a: &Tensor, s: Scalar, reflected: bool, out: &Tensor) -> bool {
    // `$load` widens an element to the compute type `$C`, `$store` narrows the result back.
    macro_rules! go {
        ($T:ty, $C:ty, $load:expr, $store:expr) => {{
            let (load, store) = ($load, $store);
            let sv: $C = load(s.to_elem::<$T>());
            macro_rules! run {
                ($g:expr, $f:expr) => {{
                    let f = $f;
                    if reflected {
                        run_map::<$T, $T, _>(a, out, $g, move |x: $T| store(f(sv, load(x))))
                    } else {
                        run_map::<$T, $T, _>(a, out, $g, move |x: $T| store(f(load(x), sv)))
                    }
                }};
            }
            macro_rules! pred {
                ($f:expr) => {{
                    let f = $f;
                    if reflected {
                        run_map::<$T, u8, _>(a, out, PAR_MIN, move |x: $T| f(sv, load(x)) as u8)
                    } else {
                        run_map::<$T, u8, _>(a, out, PAR_MIN, move |x: $T| f(load(x), sv) as u8)
                    }
                }};
            }
            float_binary!(op, $C, run, pred);
            true
        }};
    }
    match a.dtype() {
        DType::F32 => go!(f32, f32, |x: f32| x, |y: f32| y),
        DType::F64 => go!(f64, f64, |x: f64| x, |y: f64| y),
        DType::F16 => go!(f16, f32, |x: f16| x.to_f32(), f16::from_f32),
        DType::BF16 => go!(bf16, f32, |x: bf16| x.to_f32(), bf16::from_f32),
        _ => false,
    }
}

pub fn where_(cond: &Tensor, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
    with_dtype!(out.dtype(), T => {
        let cp = SendPtr(cond.data_ptr::<u8>());
        let ap = SendPtr(a.data_ptr::<T>());
        let bp = SendPtr(b.data_ptr::<T>());
        let yp = SendPtr(out.data_ptr::<T>());
        par_for_each_row(
            out.shape(),
            [cond.strides(), a.strides(), b.strides(), out.strides()],
            PAR_MIN,
            |[oc, oa, ob, oy], n, [sc, sa, sb, sy]| {
                // Both operands are read and one is selected without a branch:
                // a data-dependent branch per element mispredicts on random
                // masks (ReLU's gradient) and costs ~10x the memory traffic.
                // SAFETY: offsets from the layouts; disjoint rows per task.
                unsafe {
                    let (c, a, b, y) = (
                        cp.get().offset(oc),
                        ap.get().offset(oa),
                        bp.get().offset(ob),
                        yp.get().offset(oy),
                    );
                    if sc == 1 && sa == 1 && sy == 1 && sb == 0 {
                        let bv = *b;
                        for i in 0..n {
                            let x = *a.add(i);
                            *y.add(i) = if *c.add(i) != 0 { x } else { bv };
                        }
                    } else if sc == 1 && sa == 1 && sb == 1 && sy == 1 {
                        for i in 0..n {
                            let (x, z) = (*a.add(i), *b.add(i));
                            *y.add(i) = if *c.add(i) != 0 { x } else { z };
                        }
                    } else {
                        for i in 0..n as isize {
                            let (x, z) = (*a.offset(i * sa), *b.offset(i * sb));
                            *y.offset(i * sy) = if *c.offset(i * sc) != 0 { x } else { z };
                        }
                    }
                }
            },
        );
    });
    Ok(())
}

#[inline(always)]
fn convert<S: Element, D: Element>(v: S) -> D {
    if D::DTYPE.is_floating_point() || S::DTYPE.is_floating_point() {
        D::from_f64(v.to_f64())
    } else {
        D::from_i64(v.to_i64())
    }
}

pub fn cast_copy(src: &Tensor, dst: &Tensor) -> Result<()> {
    match (src.dtype(), dst.dtype()) {
        // Fast paths that avoid the f64 round trip.
        (DType::F32, DType::F32) => run_map(src, dst, PAR_MIN, |v: f32| v),
        (DType::F64, DType::F32) => run_map(src, dst, PAR_MIN, |v: f64| v as f32),
        (DType::F32, DType::F64) => run_map(src, dst, PAR_MIN, |v: f32| v as f64),
        (DType::F16, DType::F32) => run_map(src, dst, PAR_MIN, |v: f16| v.to_f32()),
        (DType::F32, DType::F16) => run_map(src, dst, PAR_MIN, |v: f32| f16::from_f32(v)),
        (DType::BF16, DType::F32) => run_map(src, dst, PAR_MIN, |v: bf16| v.to_f32()),
        (DType::F32, DType::BF16) => run_map(src, dst, PAR_MIN, |v: f32| bf16::from_f32(v)),
        (s, d) => with_dtype!(s, S => with_dtype!(d, D => {
            run_map(src, dst, PAR_MIN, convert::<S, D>)
        })),
    }
    Ok(())
}

pub fn fill(dst: &Tensor, value: Scalar) -> Result<()> {
    with_dtype!(dst.dtype(), T => {
        let v: T = value.to_elem();
        let yp = SendPtr(dst.data_ptr::<T>());
        par_for_each_row(dst.shape(), [dst.strides()], PAR_MIN, move |[o], n, [s]| {
            for i in 0..n as isize {
                // SAFETY: offsets from the layout.
                unsafe { *yp.get().offset(o + i * s) = v };
            }
        });
    });
    Ok(())
}

// ---------------------------------------------------------------------------
// Fused unary gradients: out = g · op'(x), one pass over (x, y, g)
// ---------------------------------------------------------------------------

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn zip3_body<T: Copy, U: Copy, F: Fn(T, T, T) -> U>(
    a: *const T,
    sa: isize,
    b: *const T,
    sb: isize,
    c: *const T,
    sc: isize,
    y: *mut U,
    sy: isize,
    n: usize,
    f: &F,
) {
    if sa == 1 && sb == 1 && sc == 1 && sy == 1 {
        // In place over one operand: through one base pointer (see `map_body`).
        let p = y as *mut u8;
        let at = |i: usize| *(p as *const T).add(i);
        if same_slot(a, y) {
            for i in 0..n {
                *(p as *mut U).add(i) = f(at(i), *b.add(i), *c.add(i));
            }
        } else if same_slot(b, y) {
            for i in 0..n {
                *(p as *mut U).add(i) = f(*a.add(i), at(i), *c.add(i));
            }
        } else if same_slot(c, y) {
            for i in 0..n {
                *(p as *mut U).add(i) = f(*a.add(i), *b.add(i), at(i));
            }
        } else {
            zip3_contiguous::<_, _, _, true, true, true>(a, b, c, y, n, f)
        }
    } else if sy == 1 && [sa, sb, sc].iter().all(|&s| s == 0 || s == 1) {
        // Scalars broadcast along the row (a constant of a fused kernel).
        match (sa == 1, sb == 1, sc == 1) {
            (true, true, _) => zip3_contiguous::<_, _, _, true, true, false>(a, b, c, y, n, f),
            (true, false, true) => zip3_contiguous::<_, _, _, true, false, true>(a, b, c, y, n, f),
            (true, false, false) => {
                zip3_contiguous::<_, _, _, true, false, false>(a, b, c, y, n, f)
            }
            (false, true, true) => zip3_contiguous::<_, _, _, false, true, true>(a, b, c, y, n, f),
            (false, true, false) => {
                zip3_contiguous::<_, _, _, false, true, false>(a, b, c, y, n, f)
            }
            (false, false, true) => {
                zip3_contiguous::<_, _, _, false, false, true>(a, b, c, y, n, f)
            }
            (false, false, false) => {
                zip3_contiguous::<_, _, _, false, false, false>(a, b, c, y, n, f)
            }
        }
    } else {
        for i in 0..n as isize {
            *y.offset(i * sy) = f(*a.offset(i * sa), *b.offset(i * sb), *c.offset(i * sc));
        }
    }
}

/// `y[i] = f(a[i], b[i], c[i])` over a contiguous `y`, each operand either
/// contiguous (`true`) or one value read for every element (`false`).
#[inline(always)]
unsafe fn zip3_contiguous<
    T: Copy,
    U: Copy,
    F: Fn(T, T, T) -> U,
    const A: bool,
    const B: bool,
    const C: bool,
>(
    a: *const T,
    b: *const T,
    c: *const T,
    y: *mut U,
    n: usize,
    f: &F,
) {
    let at = |p: *const T, along: bool, i: usize| *p.add(if along { i } else { 0 });
    for i in 0..n {
        *y.add(i) = f(at(a, A, i), at(b, B, i), at(c, C, i));
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn zip3_v4<T: Copy, U: Copy, F: Fn(T, T, T) -> U>(
    a: *const T,
    sa: isize,
    b: *const T,
    sb: isize,
    c: *const T,
    sc: isize,
    y: *mut U,
    sy: isize,
    n: usize,
    f: &F,
) {
    zip3_body(a, sa, b, sb, c, sc, y, sy, n, f)
}
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn zip3_v3<T: Copy, U: Copy, F: Fn(T, T, T) -> U>(
    a: *const T,
    sa: isize,
    b: *const T,
    sb: isize,
    c: *const T,
    sc: isize,
    y: *mut U,
    sy: isize,
    n: usize,
    f: &F,
) {
    zip3_body(a, sa, b, sb, c, sc, y, sy, n, f)
}

/// `y[i] = f(a[i], b[i], c[i])` over `n` strided elements at the best SIMD
/// level (for kernels with loops of their own: the fused interpreter).
///
/// # Safety
/// Pointers valid for `n` strided elements; `y` overlaps an operand only
/// exactly (the same address and stride 1).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn zip3_run<T: Copy, U: Copy, F: Fn(T, T, T) -> U>(
    a: *const T,
    sa: isize,
    b: *const T,
    sb: isize,
    c: *const T,
    sc: isize,
    y: *mut U,
    sy: isize,
    n: usize,
    f: &F,
) {
    #[cfg(target_arch = "x86_64")]
    match level() {
        Level::Avx512 => return zip3_v4(a, sa, b, sb, c, sc, y, sy, n, f),
        Level::Avx2 => return zip3_v3(a, sa, b, sb, c, sc, y, sy, n, f),
        Level::Scalar => {}
    }
    zip3_body(a, sa, b, sb, c, sc, y, sy, n, f)
}

/// As [`zip3_run`] over contiguous operands with streaming stores; `false`
/// (nothing written) when streaming is unavailable. The caller ends its run
/// with [`stream_fence`].
///
/// # Safety
/// As [`zip3_run`], all four contiguous and `y` overlapping no operand.
#[inline(always)]
pub(crate) unsafe fn zip3_stream<T: Copy, U: Copy, F: Fn(T, T, T) -> U>(
    a: *const T,
    b: *const T,
    c: *const T,
    y: *mut U,
    n: usize,
    f: &F,
) -> bool {
    stream_lines(y, n, &|i| f(*a.add(i), *b.add(i), *c.add(i)))
}

/// Run `f` over `(a, b, c)` into `out` (all the same shape), threaded above `grain` elements.
pub fn run_zip3<T: Copy, U: Copy, F: Fn(T, T, T) -> U + Sync>(
    a: &Tensor,
    b: &Tensor,
    c: &Tensor,
    out: &Tensor,
    grain: usize,
    f: F,
) {
    let ap = SendPtr(a.data_ptr::<T>());
    let bp = SendPtr(b.data_ptr::<T>());
    let cp = SendPtr(c.data_ptr::<T>());
    let yp = SendPtr(out.data_ptr::<U>());
    let stream = streams(out, &[a, b, c]);
    par_for_each_row(
        out.shape(),
        [a.strides(), b.strides(), c.strides(), out.strides()],
        grain,
        |[oa, ob, oc, oy], n, [sa, sb, sc, sy]| {
            // SAFETY: offsets come from the layouts; each row is written by one task.
            unsafe {
                let (a, b, c, y) = (
                    ap.get().offset(oa),
                    bp.get().offset(ob),
                    cp.get().offset(oc),
                    yp.get().offset(oy),
                );
                if stream
                    && sa == 1
                    && sb == 1
                    && sc == 1
                    && sy == 1
                    && stream_run(y, n, &|i| f(*a.add(i), *b.add(i), *c.add(i)))
                {
                    return;
                }
                zip3_run(a, sa, b, sb, c, sc, y, sy, n, &f)
            }
        },
    );
}

/// Expand to a `match` over the unary ops' fused gradients in the op table,
/// calling `$run!(grain, closure (x, y, g) -> g·op'(x) over $C)`; evaluates
/// to `false` for ops without one.
macro_rules! float_unary_grad {
    ($op:expr, $C:ty, $run:ident) => {{
        let op = $op;
        $crate::kernel::unary::unary_ops!([cpu_grad op $run] $C, i64)
    }};
}

/// `out = g · op'(x)` in one pass (`y = op(x)`; `x`, `y`, `g`, `out` share a
/// floating dtype and shape). Returns `false`, writing nothing, for ops
/// without a fused gradient.
pub fn unary_grad(op: UnaryOp, x: &Tensor, y: &Tensor, g: &Tensor, out: &Tensor) -> bool {
    match x.dtype() {
        DType::F32 => {
            macro_rules! run {
                ($grain:expr, $f:expr) => {
                    run_zip3::<f32, f32, _>(x, y, g, out, $grain, $f)
                };
            }
            float_unary_grad!(op, f32, run)
        }
        DType::F64 => {
            macro_rules! run {
                ($grain:expr, $f:expr) => {
                    run_zip3::<f64, f64, _>(x, y, g, out, $grain, $f)
                };
            }
            float_unary_grad!(op, f64, run)
        }
        DType::F16 => {
            macro_rules! run {
                ($grain:expr, $f:expr) => {{
                    let f = $f;
                    run_zip3::<f16, f16, _>(x, y, g, out, $grain, move |a: f16, b: f16, c: f16| {
                        f16::from_f32(f(a.to_f32(), b.to_f32(), c.to_f32()))
                    })
                }};
            }
            float_unary_grad!(op, f32, run)
        }
        DType::BF16 => {
            macro_rules! run {
                ($grain:expr, $f:expr) => {{
                    let f = $f;
                    run_zip3::<bf16, bf16, _>(
                        x,
                        y,
                        g,
                        out,
                        $grain,
                        move |a: bf16, b: bf16, c: bf16| {
                            bf16::from_f32(f(a.to_f32(), b.to_f32(), c.to_f32()))
                        },
                    )
                }};
            }
            float_unary_grad!(op, f32, run)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: f32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as f32 + seed) * 0.37).sin() * 3.0)
            .collect()
    }

    /// In-place runs (output = one operand) take their own loops: they must
    /// give what the out-of-place loops give, for every operand layout.
    #[test]
    fn in_place_loops_match_out_of_place() {
        let f1 = |v: f32| v / (1.0 + v * v);
        let f2 = |a: f32, b: f32| a / (1.0 + b * b);
        let f3 = |a: f32, b: f32, c: f32| a * b - c / 3.0;
        for n in [0usize, 1, 7, 8, 37, 300] {
            // map: y == x
            let x = data(n, 1.0);
            let mut y = x.clone();
            unsafe { map_run(y.as_ptr(), 1, y.as_mut_ptr(), 1, n, &f1) };
            let want: Vec<f32> = x.iter().map(|&v| f1(v)).collect();
            assert_eq!(y, want, "map n={n}");
            // zip: y == a or y == b, the other contiguous, broadcast or strided
            let b2 = data(2 * n + 1, 2.0);
            for sb in [1isize, 0, 2] {
                let other = |i: usize| b2[(i as isize * sb) as usize];
                let a = data(n, 3.0);
                let mut y = a.clone();
                unsafe { zip_run(y.as_ptr(), 1, b2.as_ptr(), sb, y.as_mut_ptr(), 1, n, &f2) };
                let want: Vec<f32> = (0..n).map(|i| f2(a[i], other(i))).collect();
                assert_eq!(y, want, "zip over a, n={n} sb={sb}");
                let mut y = a.clone();
                unsafe { zip_run(b2.as_ptr(), sb, y.as_ptr(), 1, y.as_mut_ptr(), 1, n, &f2) };
                let want: Vec<f32> = (0..n).map(|i| f2(other(i), a[i])).collect();
                assert_eq!(y, want, "zip over b, n={n} sa={sb}");
            }
            // zip3: y == a, b or c
            let (a, b, c) = (data(n, 4.0), data(n, 5.0), data(n, 6.0));
            let want: Vec<f32> = (0..n).map(|i| f3(a[i], b[i], c[i])).collect();
            for k in 0..3 {
                let mut ops = [a.clone(), b.clone(), c.clone()];
                let y = ops[k].as_mut_ptr();
                let p = |j: usize| {
                    if j == k {
                        y as *const f32
                    } else {
                        ops[j].as_ptr()
                    }
                };
                let (pa, pb, pc) = (p(0), p(1), p(2));
                unsafe {
                    match level() {
                        #[cfg(target_arch = "x86_64")]
                        Level::Avx512 => zip3_v4(pa, 1, pb, 1, pc, 1, y, 1, n, &f3),
                        #[cfg(target_arch = "x86_64")]
                        Level::Avx2 => zip3_v3(pa, 1, pb, 1, pc, 1, y, 1, n, &f3),
                        _ => zip3_body(pa, 1, pb, 1, pc, 1, y, 1, n, &f3),
                    }
                }
                assert_eq!(ops[k], want, "zip3 over operand {k}, n={n}");
                let mut ops = [a.clone(), b.clone(), c.clone()];
                let y = ops[k].as_mut_ptr();
                let p = |j: usize| {
                    if j == k {
                        y as *const f32
                    } else {
                        ops[j].as_ptr()
                    }
                };
                let (pa, pb, pc) = (p(0), p(1), p(2));
                unsafe { zip3_body(pa, 1, pb, 1, pc, 1, y, 1, n, &f3) };
                assert_eq!(ops[k], want, "zip3 (baseline) over operand {k}, n={n}");
            }
        }
    }
}
