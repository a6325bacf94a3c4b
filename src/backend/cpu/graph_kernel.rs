//! The CPU interpreter of fused elementwise kernels ([`FusedKernel`]).
//!
//! The output index space is walked as rows (dims coalesced jointly over
//! every operand); each row is cut into chunks of [`CHUNK`] to [`MAX_CHUNK`]
//! elements (fewer registers, longer chunks), and
//! the program runs chunk by chunk: each instruction is one SIMD loop over
//! the chunk (the same multiversioned loops and per-element functions as the
//! unfused kernels), its result kept in a small per-thread register buffer
//! that stays in L1 — or written straight into the output when the register
//! is an output. Inputs are read in place (never copied unless they must be
//! converted), so each input is read once and each output written once.

use smallvec::{smallvec, SmallVec};

use super::elementwise::{
    map_run, map_stream, py_fmod, stream_fence, stream_ok, zip3_run, zip3_stream, zip_run,
    zip_stream,
};
use super::math::Real;
use super::strided::{SendPtr, PAR_MIN};
use crate::error::{Error, Result};
use crate::kernel::fused::{FInstr, FusedKernel};
use crate::kernel::{BinaryOp, UnaryOp};
use crate::tensor::{DType, Element, Tensor};

/// Elements per chunk at least: registers of this many elements stay in L1.
pub const CHUNK: usize = 512;
/// Elements per chunk at most (kernels with few buffered registers).
const MAX_CHUNK: usize = 8 * CHUNK;
/// Bytes of register buffers a chunk may use: the chunk length is this
/// shared among the registers that are not views of an input or written
/// straight into an output, so small programs run long chunks (fewer loop
/// dispatches per element) and large ones stay in L1.
const REG_BUDGET: usize = 16 << 10;
/// Unused by the chunk loops; the shared op tables name a grain.
const PAR_MIN_HEAVY: usize = PAR_MIN;

thread_local! {
    /// Register storage of the fused kernels run on this thread, kept between
    /// runs so small kernels do not allocate and zero it on every call.
    static REGS: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Run `k` on `ins` (any layouts broadcastable to `k.shape`; dtypes the
/// compute dtype or bool) into `outs` (shape `k.shape`, any layouts).
pub fn run(k: &FusedKernel, ins: &[Tensor], outs: &[Tensor]) -> Result<()> {
    if ins.len() != k.n_inputs || outs.len() != k.n_outputs() {
        return Err(Error::runtime(
            "fused",
            format!(
                "kernel takes {} inputs and {} outputs, got {} and {}",
                k.n_inputs,
                k.n_outputs(),
                ins.len(),
                outs.len()
            ),
        ));
    }
    match k.compute {
        DType::F32 => run_typed::<f32>(k, ins, outs),
        DType::F64 => run_typed::<f64>(k, ins, outs),
        d => Err(Error::dtype(
            "fused",
            format!("fused kernels compute in float32 or float64, not {d}"),
        )),
    }
}

/// A short per-operand or per-instruction list, kept inline (a kernel run
/// on a small tensor would otherwise spend much of its time allocating).
type Few<T> = SmallVec<[T; 8]>;
/// Dims of one operand.
type DimVec<T> = SmallVec<[T; 4]>;

/// Operand strides over the output shape, and the jointly coalesced dims.
struct Walk {
    /// Sizes of the coalesced dims (last = the row).
    shape: DimVec<usize>,
    /// Per operand: strides per coalesced dim.
    strides: Few<DimVec<isize>>,
    /// Per operand: element offset of `[0, ..]`.
    base: Few<isize>,
}

impl Walk {
    fn new(shape: &[usize], ops: &[(&[isize], isize)]) -> Walk {
        let mut dims: DimVec<usize> = DimVec::new();
        let mut strides: Few<DimVec<isize>> = smallvec![DimVec::new(); ops.len()];
        for (d, &n) in shape.iter().enumerate() {
            if n == 1 {
                continue;
            }
            let can_merge = !dims.is_empty()
                && ops.iter().enumerate().all(|(j, (s, _))| {
                    let prev = *strides[j].last().expect("dims non-empty");
                    prev == s[d] * n as isize
                });
            if can_merge {
                let last = dims.len() - 1;
                dims[last] *= n;
                for (j, (s, _)) in ops.iter().enumerate() {
                    *strides[j].last_mut().expect("dims non-empty") = s[d];
                }
            } else {
                dims.push(n);
                for (j, (s, _)) in ops.iter().enumerate() {
                    strides[j].push(s[d]);
                }
            }
        }
        if dims.is_empty() {
            dims.push(1);
            for s in &mut strides {
                s.push(0);
            }
        }
        Walk {
            shape: dims,
            strides,
            base: ops.iter().map(|(_, o)| *o).collect(),
        }
    }

    /// `n` elements of operands that are all contiguous: one row.
    fn flat(n: usize, nops: usize) -> Walk {
        Walk {
            shape: smallvec![n],
            strides: smallvec![smallvec![1]; nops],
            base: smallvec![0; nops],
        }
    }

    fn rows(&self) -> usize {
        self.shape[..self.shape.len() - 1].iter().product()
    }
    fn inner(&self) -> usize {
        *self.shape.last().expect("at least one dim")
    }
    /// Offsets of row `r` (row-major over the outer dims) for every operand.
    fn row_offsets(&self, r: usize, out: &mut [isize]) {
        let nd = self.shape.len() - 1;
        out.copy_from_slice(&self.base);
        let mut rem = r;
        for d in (0..nd).rev() {
            let i = rem % self.shape[d];
            rem /= self.shape[d];
            for (j, o) in out.iter_mut().enumerate() {
                *o += i as isize * self.strides[j][d];
            }
        }
    }
}

fn run_typed<C: Real + Element + Send + Sync>(
    k: &FusedKernel,
    ins: &[Tensor],
    outs: &[Tensor],
) -> Result<()> {
    let n_el: usize = k.shape.iter().product();
    let (outs, routs) = outs.split_at(k.outputs.len());
    for (t, r) in routs.iter().zip(&k.reductions) {
        if t.shape() != r.shape(&k.shape).as_slice() || t.dtype() != k.compute || !t.is_contiguous()
        {
            return Err(Error::shape(
                "fused",
                format!(
                    "reduction output of shape {:?} and dtype {} for a kernel of shape {:?} reducing dims {:?} in {}",
                    t.shape(),
                    t.dtype(),
                    k.shape,
                    r.dims,
                    k.compute
                ),
            ));
        }
    }
    if n_el == 0 {
        // A sum over no elements is 0, a mean NaN.
        for (t, r) in routs.iter().zip(&k.reductions) {
            let v = C::c(if r.mean { f64::NAN } else { 0.0 });
            // SAFETY: a contiguous output of `numel` elements of C (checked above).
            unsafe { std::slice::from_raw_parts_mut(t.data_ptr::<C>(), t.numel()) }.fill(v);
        }
        return Ok(());
    }
    // How each reduction maps an element to its output: by blocks of the
    // flat index when the reduced dims all precede or all follow the kept
    // ones, else through the walk (one operand per reduction).
    let forms: Few<RedForm> = k
        .reductions
        .iter()
        .map(|r| {
            let kept: DimVec<usize> = (0..k.shape.len()).filter(|d| !r.dims.contains(d)).collect();
            let kept_len: usize = kept.iter().map(|&d| k.shape[d]).product();
            match (kept.first(), kept.last(), r.dims.first(), r.dims.last()) {
                // Nothing reduced, or everything: `i / 1`, `i / n`.
                (_, _, None, _) | (None, ..) => RedForm::Trail(n_el / kept_len),
                (Some(&fk), _, _, Some(&lr)) if lr < fk => RedForm::Lead(kept_len),
                (_, Some(&lk), Some(&fr), _) if lk < fr => RedForm::Trail(n_el / kept_len),
                _ => RedForm::Walk,
            }
        })
        .collect();
    // Every operand contiguous in the kernel's shape (the common case of
    // small graph nodes) and no walked reduction: one flat row, without
    // broadcasting any layout.
    let plain = forms.iter().all(|f| !matches!(f, RedForm::Walk))
        && ins
            .iter()
            .chain(outs)
            .all(|t| t.shape() == k.shape.as_slice() && t.is_contiguous());
    // Otherwise broadcast every input to the kernel's shape.
    let mut layouts: Few<crate::tensor::Layout> = Few::new();
    for t in ins.iter().filter(|_| !plain) {
        layouts.push(t.layout().expand("fused", &k.shape)?);
    }
    for t in outs.iter().filter(|_| !plain) {
        if t.shape() != k.shape.as_slice() {
            return Err(Error::shape(
                "fused",
                format!(
                    "output of shape {:?} for a kernel of shape {:?}",
                    t.shape(),
                    k.shape
                ),
            ));
        }
        layouts.push(t.layout().clone());
    }
    for (t, want) in ins.iter().zip(std::iter::repeat(k.compute)) {
        if t.dtype() != want && t.dtype() != DType::Bool {
            return Err(Error::dtype(
                "fused",
                format!(
                    "input of dtype {} for a kernel computing in {want}",
                    t.dtype()
                ),
            ));
        }
    }
    // Strides relative to each tensor's data pointer (which includes its offset).
    let walk = if plain {
        Walk::flat(n_el, ins.len() + outs.len())
    } else {
        // Each reduction is one more operand: its output indexed over the
        // kernel's dims, with stride 0 along the reduced ones.
        let red_strides: Few<DimVec<isize>> = k
            .reductions
            .iter()
            .map(|r| {
                let mut st: DimVec<isize> = smallvec![0; k.shape.len()];
                let mut acc = 1isize;
                for d in (0..k.shape.len()).rev() {
                    if !r.dims.contains(&d) {
                        st[d] = acc;
                        acc *= k.shape[d] as isize;
                    }
                }
                st
            })
            .collect();
        let ops: Few<(&[isize], isize)> = layouts
            .iter()
            .map(|l| (&l.strides[..], 0))
            .chain(red_strides.iter().map(|s| (&s[..], 0)))
            .collect();
        Walk::new(&k.shape, &ops)
    };
    let in_ptrs: Few<(SendPtr<u8>, DType)> = ins
        .iter()
        .map(|t| (SendPtr(t.byte_ptr()), t.dtype()))
        .collect();
    let out_ptrs: Few<(SendPtr<u8>, DType)> = outs
        .iter()
        .map(|t| (SendPtr(t.byte_ptr()), t.dtype()))
        .collect();
    // Which register is computed straight into which output.
    let mut direct: Few<Option<usize>> = smallvec![None; k.instrs.len()];
    for (j, &(r, d)) in k.outputs.iter().enumerate() {
        let computed = !matches!(k.instrs[r], FInstr::Load(_) | FInstr::Const(_));
        if computed && d == k.compute && direct[r].is_none() {
            direct[r] = Some(j);
        }
    }
    // Instructions run by their reader (see `pairs`), and so the position in
    // the program at which each instruction really runs: a deferred one runs
    // with its reader, after everything between the two.
    let pair = pairs(k);
    let mut runs_at: Few<usize> = (0..k.instrs.len()).collect();
    for (j, p) in pair.iter().enumerate() {
        if let Some(p) = *p {
            runs_at[p] = j;
        }
    }
    // An output may share its buffer with an input (a buffer reused in place):
    // only with the very same layout, so each element is read only to compute
    // the same element; and it is written straight from its instruction only
    // when no instruction that runs after it reads that input (otherwise at
    // the chunk's end). "After" is by when an instruction runs, not by its
    // place in the program: an instruction deferred to a later reader reads
    // its operands there, so a write in between would reach it.
    for (j, o) in outs.iter().enumerate() {
        let Some(kx) = ins.iter().position(|t| t.byte_ptr() == o.byte_ptr()) else {
            continue;
        };
        let same = (plain || layouts[kx].strides == layouts[ins.len() + j].strides)
            && ins[kx].dtype() == o.dtype()
            && ins
                .iter()
                .enumerate()
                .all(|(i, t)| i == kx || t.byte_ptr() != o.byte_ptr());
        if !same
            || k.outputs
                .iter()
                .any(|&(r, _)| matches!(k.instrs[r], FInstr::Load(_) | FInstr::Const(_)))
        {
            return Err(Error::runtime(
                "fused",
                format!(
                    "output {j} (shape {:?}) overlaps input {kx} with a different layout; a fused kernel writes in place only over an identical operand",
                    o.shape()
                ),
            ));
        }
        let r = k.outputs[j].0;
        let read_later = k.instrs.iter().enumerate().any(|(i, ins_i)| {
            i != r
                && runs_at[i] > r
                && reads(ins_i)
                    .into_iter()
                    .flatten()
                    .any(|a| matches!(k.instrs[a], FInstr::Load(x) if x == kx))
        });
        if read_later && direct[r] == Some(j) {
            direct[r] = None;
        }
    }
    // Large outputs computed in place are written with streaming stores (see
    // `elementwise::stream_ok`), unless they are also an input.
    // Nor when a reduction reads the output's register back right away.
    let stream: Few<bool> = outs
        .iter()
        .enumerate()
        .map(|(j, o)| {
            stream_ok(o.numel() * o.dtype().itemsize())
                && ins.iter().all(|t| t.byte_ptr() != o.byte_ptr())
                && k.reductions.iter().all(|r| r.reg != k.outputs[j].0)
        })
        .collect();
    let any_stream = direct.iter().any(|d| d.is_some_and(|j| stream[j]));
    let buffered = k
        .instrs
        .iter()
        .enumerate()
        .filter(|&(i, ins_i)| match *ins_i {
            FInstr::Load(kx) => ins[kx].dtype() != k.compute,
            FInstr::Const(_) => false,
            _ => direct[i].is_none(),
        })
        .count()
        .max(1);
    let chunk =
        (REG_BUDGET / (buffered * std::mem::size_of::<C>()) / 64 * 64).clamp(CHUNK, MAX_CHUNK);
    let mut deferred: Few<bool> = smallvec![false; pair.len()];
    for &p in pair.iter().flatten() {
        deferred[p] = true;
    }
    let rows = walk.rows();
    let inner = walk.inner();
    let nops = ins.len() + outs.len();
    // Reduction partial results: per part of the run, one f64 per element of
    // every reduction output (offsets `red_off`), `red_len` in all.
    let mut red_off: Few<usize> = Few::new();
    let mut red_len = 0;
    for t in routs {
        red_off.push(red_len);
        red_len += t.numel();
    }
    let job = |r0: usize, r1: usize, c0: usize, c1: usize, acc: SendPtr<f64>| {
        // Registers as long as this task's chunks (small kernels need less than a chunk).
        let width = chunk.min(c1 - c0);
        let len = k.instrs.len() * width;
        let mut own_regs: Vec<C>;
        let mut scratch =
            REGS.with(|r| r.try_borrow_mut().ok().map(|mut v| std::mem::take(&mut *v)));
        let regs: &mut [C] = match scratch.as_mut() {
            // SAFETY: the words are initialised, f32/f64 accept any bits and
            // need at most the 8-byte alignment of u64; `len` C's fit.
            Some(words) => unsafe {
                words.resize(
                    words
                        .len()
                        .max((len * std::mem::size_of::<C>()).div_ceil(8)),
                    0,
                );
                std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut C, len)
            },
            None => {
                own_regs = vec![C::ZERO; len];
                &mut own_regs
            }
        };
        let mut view: Few<(*const C, isize)> = Few::with_capacity(k.instrs.len());
        let mut offs: Few<isize> = smallvec![0isize; walk.base.len()];
        let id = walk.shape.len() - 1;
        for r in r0..r1 {
            walk.row_offsets(r, &mut offs);
            let mut start = c0;
            while start < c1 {
                let n = chunk.min(c1 - start);
                // SAFETY: offsets come from the operands' layouts (expanded
                // inputs, outputs of the kernel's shape); each output element
                // is written by exactly one task; registers are this task's.
                unsafe {
                    exec_chunk::<C>(
                        k, &walk, &offs, start, n, &in_ptrs, &out_ptrs, &direct, &stream, &pair,
                        &deferred, regs, width, &mut view,
                    )
                };
                for (q, red) in k.reductions.iter().enumerate() {
                    // The chunk's values of the reduced register (never
                    // deferred, see `pairs`) added into this part's partials.
                    let (p, sp) = view[red.reg];
                    if plain {
                        // One flat row: element `start + e` of the kernel.
                        // SAFETY: as below; the block forms index the output.
                        unsafe { add_blocks(forms[q], p, sp, start, n, acc.get().add(red_off[q])) };
                        continue;
                    }
                    let rs = walk.strides[nops + q][id];
                    let base = offs[nops + q] + start as isize * rs;
                    // SAFETY: `acc` holds `red_len` partials of this part
                    // alone; `base + e*rs` indexes reduction output `q`.
                    unsafe { add_into(acc.get().add(red_off[q]).offset(base), rs, p, sp, n) };
                }
                start += n;
            }
        }
        if any_stream {
            stream_fence();
        }
        if let Some(words) = scratch {
            REGS.with(|r| {
                if let Ok(mut slot) = r.try_borrow_mut() {
                    *slot = words;
                }
            });
        }
    };
    let threads = crate::par::split();
    let heavy = k
        .instrs
        .iter()
        .filter(|i| matches!(i, FInstr::Unary(..)))
        .count()
        .max(1);
    let grain = (1usize << 15) / heavy.min(8);
    let none = SendPtr(std::ptr::null_mut::<f64>());
    if !k.reductions.is_empty() {
        // Parts fixed by the shape alone (not the thread count), their
        // partials combined in order: the same sums on any number of threads.
        let mut parts: SmallVec<[(usize, usize, usize, usize); 1]> = SmallVec::new();
        if n_el < grain * 2 {
            parts.push((0, rows, 0, inner));
        } else if rows >= RED_PARTS {
            let per = rows.div_ceil(RED_PARTS);
            parts.extend(
                (0..rows)
                    .step_by(per)
                    .map(|s| (s, (s + per).min(rows), 0, inner)),
            );
        } else {
            let seg = inner
                .div_ceil(RED_PARTS.div_ceil(rows))
                .div_ceil(chunk)
                .max(1)
                * chunk;
            for r in 0..rows {
                for s in (0..inner).step_by(seg) {
                    parts.push((r, r + 1, s, (s + seg).min(inner)));
                }
            }
        }
        let mut acc: SmallVec<[f64; 256]> = smallvec![0.0f64; parts.len() * red_len];
        let base = SendPtr(acc.as_mut_ptr());
        let part = |u: usize| {
            let (r0, r1, c0, c1) = parts[u];
            // SAFETY: part `u` owns partials `u*red_len..(u+1)*red_len`.
            job(
                r0,
                r1,
                c0,
                c1,
                SendPtr(unsafe { base.get().add(u * red_len) }),
            );
        };
        if parts.len() == 1 || threads <= 1 {
            (0..parts.len()).for_each(part);
        } else {
            crate::par::for_each(parts.len(), part);
        }
        // Part 0's partials accumulate the others', part by part (in order).
        let (first, rest) = acc.split_at_mut(red_len);
        for other in rest.chunks_exact(red_len) {
            for (s, &v) in first.iter_mut().zip(other) {
                *s += v;
            }
        }
        for ((t, r), &off) in routs.iter().zip(&k.reductions).zip(&red_off) {
            let len = t.numel();
            let scale = if r.mean {
                len as f64 / n_el as f64
            } else {
                1.0
            };
            // SAFETY: a contiguous output of `len` elements of C (checked above).
            let o = unsafe { std::slice::from_raw_parts_mut(t.data_ptr::<C>(), len) };
            for (v, &s) in o.iter_mut().zip(&first[off..off + len]) {
                *v = C::c(s * scale);
            }
        }
    } else if n_el < grain * 2 || threads <= 1 {
        job(0, rows, 0, inner, none);
    } else if rows >= threads * 4 {
        let tasks = (threads * 4).min(rows);
        let per = rows.div_ceil(tasks);
        crate::par::for_each(tasks, |t| {
            let (s, e) = (t * per, ((t + 1) * per).min(rows));
            if s < e {
                job(s, e, 0, inner, none);
            }
        });
    } else {
        // Few long rows: split each row into segments of whole chunks.
        let seg = (inner.div_ceil(threads * 2)).div_ceil(chunk).max(1) * chunk;
        let nseg = inner.div_ceil(seg);
        crate::par::for_each(rows * nseg, |u| {
            let (r, sg) = (u / nseg, u % nseg);
            let s = sg * seg;
            job(r, r + 1, s, (s + seg).min(inner), none);
        });
    }
    Ok(())
}

/// How a reduction maps the kernel's flat element index `i` to its output
/// element: `i % K` (`Lead(K)`: the reduced dims all precede the kept ones),
/// `i / R` (`Trail(R)`: they all follow), or through the walk's strides.
#[derive(Clone, Copy)]
enum RedForm {
    Lead(usize),
    Trail(usize),
    Walk,
}

/// Add the `n` values `p[e*s]` of flat elements `start..start+n` into the
/// partials `acc` of a reduction of form `f` (not `Walk`).
///
/// # Safety
/// `p` must be valid for `n` elements at stride `s`, and `acc` for every
/// output index the form maps those elements to.
unsafe fn add_blocks<C: Real>(
    f: RedForm,
    p: *const C,
    s: isize,
    start: usize,
    n: usize,
    acc: *mut f64,
) {
    let mut e = 0;
    match f {
        RedForm::Lead(k) => {
            while e < n {
                let j = (start + e) % k;
                let len = (k - j).min(n - e);
                add_into(acc.add(j), 1, p.offset(e as isize * s), s, len);
                e += len;
            }
        }
        RedForm::Trail(r) => {
            while e < n {
                let o = (start + e) / r;
                let len = (r - (start + e) % r).min(n - e);
                add_into(acc.add(o), 0, p.offset(e as isize * s), s, len);
                e += len;
            }
        }
        RedForm::Walk => unreachable!("a walked reduction has no block form"),
    }
}

/// `acc[e*rs] += p[e*s]` for `e < n` in f64 (`rs == 0`: one sum into `acc[0]`).
///
/// # Safety
/// `p` must be valid for `n` elements at stride `s`, `acc` at stride `rs`.
unsafe fn add_into<C: Real>(acc: *mut f64, rs: isize, p: *const C, s: isize, n: usize) {
    if rs == 0 {
        *acc += chunk_sum(p, s, n);
    } else if rs == 1 && s == 1 {
        let (dst, src) = (
            std::slice::from_raw_parts_mut(acc, n),
            std::slice::from_raw_parts(p, n),
        );
        #[cfg(target_arch = "x86_64")]
        match super::simd::level() {
            super::simd::Level::Avx512 => return add_rows_v4(dst, src),
            super::simd::Level::Avx2 => return add_rows_v3(dst, src),
            super::simd::Level::Scalar => {}
        }
        add_rows(dst, src)
    } else {
        for e in 0..n as isize {
            *acc.offset(e * rs) += (*p.offset(e * s)).as_f64();
        }
    }
}

/// `dst[e] += src[e]` in f64.
#[inline(always)]
fn add_rows<C: Real>(dst: &mut [f64], src: &[C]) {
    for (d, &v) in dst.iter_mut().zip(src) {
        *d += v.as_f64();
    }
}

/// [`add_rows`] compiled for AVX-512.
///
/// # Safety
/// The CPU has AVX-512 (F, VL, BW, DQ).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
unsafe fn add_rows_v4<C: Real>(dst: &mut [f64], src: &[C]) {
    add_rows(dst, src)
}

/// [`add_rows`] compiled for AVX2.
///
/// # Safety
/// The CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn add_rows_v3<C: Real>(dst: &mut [f64], src: &[C]) {
    add_rows(dst, src)
}

/// Parts a run with reductions is split into when it is worth splitting
/// (each keeps its own partial results; see `run_typed`).
const RED_PARTS: usize = 16;

/// `Σ p[e*s]` for `e < n`, in f64 with 32 independent partial sums.
///
/// # Safety
/// `p` must be valid for `n` elements at stride `s`.
unsafe fn chunk_sum<C: Real>(p: *const C, s: isize, n: usize) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if s == 1 {
        match super::simd::level() {
            super::simd::Level::Avx512 => return chunk_sum_v4(p, n),
            super::simd::Level::Avx2 => return chunk_sum_v3(p, n),
            super::simd::Level::Scalar => {}
        }
    }
    chunk_sum_body(p, s, n)
}

/// [`chunk_sum`] of a contiguous run, compiled for AVX-512.
///
/// # Safety
/// As [`chunk_sum`]; the CPU has AVX-512 (F, VL, BW, DQ).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")]
unsafe fn chunk_sum_v4<C: Real>(p: *const C, n: usize) -> f64 {
    chunk_sum_body(p, 1, n)
}

/// [`chunk_sum`] of a contiguous run, compiled for AVX2.
///
/// # Safety
/// As [`chunk_sum`]; the CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn chunk_sum_v3<C: Real>(p: *const C, n: usize) -> f64 {
    chunk_sum_body(p, 1, n)
}

/// The loop of [`chunk_sum`]; the summation order is the same at every level.
#[inline(always)]
unsafe fn chunk_sum_body<C: Real>(p: *const C, s: isize, n: usize) -> f64 {
    // 32 lanes: four independent vector additions in flight.
    let mut acc = [0.0f64; 32];
    let full = n / 32 * 32;
    for e in (0..full).step_by(32) {
        for (l, a) in acc.iter_mut().enumerate() {
            *a += (*p.offset((e + l) as isize * s)).as_f64();
        }
    }
    for (l, e) in (full..n).enumerate() {
        acc[l] += (*p.offset(e as isize * s)).as_f64();
    }
    acc.iter().sum()
}

/// The four arithmetic operators [`pair_into`] runs two at a time.
fn arith(op: BinaryOp) -> bool {
    matches!(
        op,
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div
    )
}

/// `pair[j] = Some(i)`: instruction `i` is an arithmetic binary op whose
/// only reader is instruction `j`, itself an arithmetic binary op that reads
/// it as one operand (not both). Then `i` is not run on its own: `j` runs
/// both as one loop over three operands (`x*y+z` reads each input once and
/// writes once, with no pass through a register buffer), rounding each op
/// as the two loops would. Registers that are outputs (among them all those
/// computed straight into an output) are never deferred, so the pairing does
/// not depend on which outputs are written in place.
fn pairs(k: &FusedKernel) -> Few<Option<usize>> {
    let n = k.instrs.len();
    let mut pair: Few<Option<usize>> = smallvec![None; n];
    for i in 0..n {
        let FInstr::Binary(op1, _, _) = k.instrs[i] else {
            continue;
        };
        // A consumer of a pair is not deferred itself: its own producer
        // would never be run.
        if !arith(op1)
            || pair[i].is_some()
            || k.outputs.iter().any(|&(r, _)| r == i)
            || k.reductions.iter().any(|r| r.reg == i)
        {
            continue;
        }
        let mut readers = (i + 1..n).filter(|&j| reads(&k.instrs[j]).contains(&Some(i)));
        let (Some(j), None) = (readers.next(), readers.next()) else {
            continue;
        };
        if let FInstr::Binary(op2, x, y) = k.instrs[j] {
            if arith(op2) && ((x == i) != (y == i)) {
                pair[j] = Some(i);
            }
        }
    }
    pair
}

/// The registers an instruction reads.
fn reads(i: &FInstr) -> [Option<usize>; 3] {
    match *i {
        FInstr::Load(_) | FInstr::Const(_) => [None; 3],
        FInstr::Unary(_, a) => [Some(a), None, None],
        FInstr::Binary(_, a, b) => [Some(a), Some(b), None],
        FInstr::Where(c, a, b) => [Some(c), Some(a), Some(b)],
    }
}

/// Run the program on elements `start..start+n` of the row whose operand
/// offsets are `offs` (inputs first, then outputs).
///
/// # Safety
/// Pointers and offsets must describe valid operands of the kernel's shape.
#[allow(clippy::too_many_arguments)]
unsafe fn exec_chunk<C: Real + Element>(
    k: &FusedKernel,
    walk: &Walk,
    offs: &[isize],
    start: usize,
    n: usize,
    ins: &[(SendPtr<u8>, DType)],
    outs: &[(SendPtr<u8>, DType)],
    direct: &[Option<usize>],
    stream: &[bool],
    pair: &[Option<usize>],
    deferred: &[bool],
    regs: &mut [C],
    width: usize,
    view: &mut Few<(*const C, isize)>,
) {
    let inner = walk.shape.len() - 1;
    let ni = ins.len();
    // (pointer, stride) of each register (the buffer is reused across chunks).
    view.clear();
    let buf = regs.as_mut_ptr();
    // Where register `i` is computed: (pointer, stride, streaming stores).
    let place = |i: usize| -> (*mut C, isize, bool) {
        match direct[i] {
            Some(j) => {
                let s = walk.strides[ni + j][inner];
                let p = outs[j].0.get() as *mut C;
                (
                    p.offset(offs[ni + j] + start as isize * s),
                    s,
                    s == 1 && stream[j],
                )
            }
            None => (buf.add(i * width), 1, false),
        }
    };
    for (i, ins_i) in k.instrs.iter().enumerate() {
        let own = buf.add(i * width);
        if deferred[i] {
            // Run by its reader (below); the view is a placeholder until then.
            view.push((own, 1));
            continue;
        }
        let (dst, sd, st) = place(i);
        match *ins_i {
            FInstr::Load(kx) => {
                let s = walk.strides[kx][inner];
                let (p, d) = ins[kx];
                let off = offs[kx] + start as isize * s;
                if d == C::DTYPE {
                    view.push(((p.get() as *const C).offset(off), s));
                } else {
                    // bool as 0/1
                    let b = (p.get() as *const u8).offset(off);
                    for e in 0..n {
                        *own.add(e) = if *b.offset(e as isize * s) != 0 {
                            C::ONE
                        } else {
                            C::ZERO
                        };
                    }
                    view.push((own, 1));
                }
                continue;
            }
            FInstr::Const(c) => {
                *own = C::c(c.to_f64());
                view.push((own, 0));
                continue;
            }
            FInstr::Unary(op, a) => {
                let (pa, sa) = view[a];
                unary_into::<C>(op, pa, sa, dst, sd, n, st);
            }
            FInstr::Binary(op, a, b) => {
                if let Some(p) = pair[i] {
                    let FInstr::Binary(op1, a1, b1) = k.instrs[p] else {
                        unreachable!("paired with a binary op")
                    };
                    let (pa, sa) = view[a1];
                    let (pb, sb) = view[b1];
                    let left = a == p;
                    let (pc, sc) = view[if left { b } else { a }];
                    if sa == 1 && sb == 1 && sc == 1 && sd == 1 {
                        pair_into::<C>(op1, op, left, pa, pb, pc, dst, n, st);
                        view.push((dst as *const C, sd));
                        continue;
                    }
                    // A broadcast or strided operand: run the first op on its own.
                    let buf_p = buf.add(p * width);
                    binary_into::<C>(op1, pa, sa, pb, sb, buf_p, 1, n, false);
                    view[p] = (buf_p, 1);
                }
                let (pa, sa) = view[a];
                let (pb, sb) = view[b];
                binary_into::<C>(op, pa, sa, pb, sb, dst, sd, n, st);
            }
            FInstr::Where(c, a, b) => {
                let (pc, sc) = view[c];
                let (pa, sa) = view[a];
                let (pb, sb) = view[b];
                // Both sides are read for every element: a select, which vectorises.
                let pick = |c: C, x: C, y: C| if c != C::ZERO { x } else { y };
                zip3_run(pc, sc, pa, sa, pb, sb, dst, sd, n, &pick);
            }
        }
        view.push((dst as *const C, sd));
    }
    // Store the outputs not computed in place.
    for (j, &(r, d)) in k.outputs.iter().enumerate() {
        if direct[r] == Some(j) {
            continue;
        }
        let s = walk.strides[ni + j][inner];
        let (pr, sr) = view[r];
        let base = outs[j].0.get();
        if d == C::DTYPE {
            let dst = (base as *mut C).offset(offs[ni + j] + start as isize * s);
            map_run(pr, sr, dst, s, n, &|v: C| v);
        } else {
            let dst = base.offset(offs[ni + j] + start as isize * s);
            map_run(pr, sr, dst, s, n, &|v: C| (v != C::ZERO) as u8);
        }
    }
}

/// `y = op(x)` over `n` strided elements with the unfused kernels' functions
/// (with streaming stores when `stream` and the operands allow).
unsafe fn unary_into<C: Real + Element>(
    op: UnaryOp,
    x: *const C,
    sx: isize,
    y: *mut C,
    sy: isize,
    n: usize,
    stream: bool,
) {
    let pred: Option<fn(f64) -> bool> = crate::kernel::unary::unary_ops!([cpu_pred op]);
    match pred {
        Some(p) => map_run(x, sx, y, sy, n, &|v: C| {
            if p(v.to_f64()) {
                C::ONE
            } else {
                C::ZERO
            }
        }),
        _ => {
            macro_rules! run {
                ($g:expr, $f:expr) => {{
                    let _ = $g;
                    let f = $f;
                    if !(stream && map_stream(x, sx, y, n, &f)) {
                        map_run(x, sx, y, sy, n, &f)
                    }
                }};
            }
            super::elementwise::float_unary!(op, C, run)
        }
    }
}

/// `y = op2(op1(a, b), c)` (or `op2(c, op1(a, b))` when not `left`) over
/// `n` contiguous elements in one loop, each op rounded as on its own; with
/// streaming stores when `stream`. `op1`, `op2` are arithmetic ([`arith`]).
///
/// # Safety
/// `a`, `b`, `c`, `y` valid for `n` contiguous elements; `y` overlaps an
/// operand only exactly.
#[allow(clippy::too_many_arguments)]
unsafe fn pair_into<C: Real + Element>(
    op1: BinaryOp,
    op2: BinaryOp,
    left: bool,
    a: *const C,
    b: *const C,
    c: *const C,
    y: *mut C,
    n: usize,
    stream: bool,
) {
    use BinaryOp::*;
    macro_rules! go {
        ($f:expr) => {{
            let f = $f;
            if !(stream && zip3_stream(a, b, c, y, n, &f)) {
                zip3_run(a, 1, b, 1, c, 1, y, 1, n, &f)
            }
        }};
    }
    macro_rules! outer {
        ($g:expr) => {{
            let g = $g;
            // g(p, q) is op1's result; r is op2's other operand.
            match op2 {
                Add => go!(move |p: C, q: C, r: C| g(p, q) + r),
                Mul => go!(move |p: C, q: C, r: C| g(p, q) * r),
                Sub if left => go!(move |p: C, q: C, r: C| g(p, q) - r),
                Sub => go!(move |p: C, q: C, r: C| r - g(p, q)),
                Div if left => go!(move |p: C, q: C, r: C| g(p, q) / r),
                Div => go!(move |p: C, q: C, r: C| r / g(p, q)),
                other => unreachable!("pair_into with outer op {other:?}"),
            }
        }};
    }
    match op1 {
        Add => outer!(|p: C, q: C| p + q),
        Sub => outer!(|p: C, q: C| p - q),
        Mul => outer!(|p: C, q: C| p * q),
        Div => outer!(|p: C, q: C| p / q),
        other => unreachable!("pair_into with inner op {other:?}"),
    }
}

/// `y = a op b` over `n` strided elements; predicates give 0/1 (with
/// streaming stores when `stream` and the operands allow).
#[allow(clippy::too_many_arguments)]
unsafe fn binary_into<C: Real + Element>(
    op: BinaryOp,
    a: *const C,
    sa: isize,
    b: *const C,
    sb: isize,
    y: *mut C,
    sy: isize,
    n: usize,
    stream: bool,
) {
    macro_rules! run {
        ($g:expr, $f:expr) => {{
            let _ = $g;
            let f = $f;
            if !(stream && zip_stream(a, sa, b, sb, y, n, &f)) {
                zip_run(a, sa, b, sb, y, sy, n, &f)
            }
        }};
    }
    macro_rules! pred {
        ($f:expr) => {{
            let f = $f;
            zip_run(a, sa, b, sb, y, sy, n, &move |p: C, q: C| {
                if f(p, q) {
                    C::ONE
                } else {
                    C::ZERO
                }
            })
        }};
    }
    super::elementwise::float_binary!(op, C, run, pred)
}
