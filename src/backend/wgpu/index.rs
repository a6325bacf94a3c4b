//! Indexing on the device: gather and scatter along a dim, advanced-index gather and put, nonzero,
//! and the index offsets they read (computed from the checked indices on the host).

use std::sync::Arc;

use super::context::get;
use super::dispatch::{check_same_device, run_items};
use super::dtype::{elem_bytes, gty};
use super::limits::check_loop_trips;
use super::meta::raw_meta;
use super::shaders::GTy;
use super::storage::{buffer, download, download_raw, storage_over, upload};
use super::views::{as_rows, as_shape, dense, dim_last, into_dense, outer_first, via_host};
use super::{shaders, split, WgpuBackend};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::kernel::{IndexArgs, ScatterReduction};
use crate::tensor::{DType, Device, Layout, Storage, Tensor};

/// How a scatter combines each value with the slot it reaches.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Combine {
    Write,
    Add,
    Reduce(ScatterReduction),
}

/// Whether the element range one index position of an index op selects
/// (`rows`) is too wide for a window of one binding.
fn row_too_wide(rows: (isize, isize)) -> Result<bool> {
    let g = get()?;
    let piece = g.piece_elems() as isize;
    let align = (g.binding_align() / 4) as isize;
    Ok(rows.1 - rows.0 > piece - align)
}

/// The element offsets `sum_k wrap(idx_k[b]) * stride(dims[k])` of an index
/// op over `t` (relative to `t`'s offset), as a contiguous int32 GPU tensor
/// of shape `shape` (`nb` elements). The indices are read on the host and
/// validated exactly as on the CPU (one download per index tensor).
/// A graph capture records how the offsets follow from the indices, so
/// that every replay computes them again from its own index tensors.
fn index_offsets(a: &IndexArgs, t: &Tensor, nb: usize, shape: &[usize]) -> Result<Tensor> {
    let (op, dims, dim_names) = (a.op, a.dims.to_vec(), a.dim_names.to_vec());
    // Offsets depend on `t`'s layout only: a twin without data stands for it.
    let twin = Tensor::from_parts(
        Arc::new(Storage::new_meta(t.storage().nbytes())),
        t.layout().clone(),
        t.dtype(),
    )?;
    let offsets = move |indices: &[Tensor]| -> Result<Vec<u8>> {
        let host: Vec<Tensor> = indices.iter().map(download_raw).collect::<Result<_>>()?;
        let ha = IndexArgs {
            op,
            dims: &dims,
            dim_names: &dim_names,
            indices: &host,
        };
        let offs = crate::backend::cpu::index::index_offsets(&ha, &twin, nb)?;
        let v: Vec<i32> = offs
            .iter()
            .map(|&o| {
                // i32::MIN is the kernels' "skip" mark (see `offset_windows`).
                i32::try_from(o)
                    .ok()
                    .filter(|&v| v != i32::MIN)
                    .ok_or_else(|| {
                        Error::runtime(
                            op,
                            "an indexed element lies beyond the gpu device's 32-bit offsets",
                        )
                    })
            })
            .collect::<Result<_>>()?;
        Ok(bytemuck::cast_slice(&v).to_vec())
    };
    let bytes = offsets(a.indices)?;
    let g = get()?;
    let buf = g.upload(op, &bytes)?;
    g.note_derived(a.indices, &buf, Arc::new(offsets));
    let storage = storage_over(buf, nb * 4, DType::I32);
    Tensor::from_parts(Arc::new(storage), Layout::contiguous(shape), DType::I32)
}

/// The offsets of an index op over `t`: on the device ([`index_offsets`]),
/// or, when `t` lies in a buffer larger than one binding, on the host (for
/// [`offset_windows`]) with an empty device tensor in their place.
fn offsets_for(
    a: &IndexArgs,
    t: &Tensor,
    nb: usize,
    shape: &[usize],
) -> Result<(Tensor, Option<Vec<isize>>)> {
    if buffer(a.op, t)?.len > get()?.max_binding() {
        let host = host_offsets(a, t, nb)?;
        return Ok((Tensor::empty(&[0], DType::I32, t.device())?, Some(host)));
    }
    Ok((index_offsets(a, t, nb, shape)?, None))
}

/// [`index_offsets`] on the host.
fn host_offsets(a: &IndexArgs, t: &Tensor, nb: usize) -> Result<Vec<isize>> {
    let host: Vec<Tensor> = a.indices.iter().map(download).collect::<Result<_>>()?;
    let ha = IndexArgs {
        op: a.op,
        dims: a.dims,
        dim_names: a.dim_names,
        indices: &host,
    };
    crate::backend::cpu::index::index_offsets(&ha, t, nb)
}

/// An index op over `t`, which lies in a buffer larger than one storage
/// binding, in pieces: each piece is a window of that buffer (as a flat
/// tensor to bind) and the int32 offsets (shape `shape`) of the positions
/// whose rows lie in it, relative to the window, with `i32::MIN` at the
/// other positions (the kernels skip those). `offs` are the positions' offsets
/// relative to `t`'s offset, and `rows` the element range `[lo, hi)` one
/// row covers relative to its position's offset.
fn offset_windows(
    op: &'static str,
    t: &Tensor,
    offs: &[isize],
    rows: (isize, isize),
    shape: &[usize],
) -> Result<Vec<(Tensor, Tensor)>> {
    let g = get()?;
    let big = buffer(op, t)?;
    // In `t`'s elements (native float16 takes 2 bytes: twice as many fit).
    let eb = elem_bytes(t.dtype());
    let align = g.binding_align() as usize / eb;
    let piece = g.piece_elems() * 4 / eb;
    let row = |o: isize| -> (usize, usize) {
        let at = t.offset() as isize + o;
        ((at + rows.0) as usize, (at + rows.1) as usize)
    };
    if rows.1 - rows.0 > (piece - align) as isize {
        return Err(Error::runtime(
            op,
            format!(
                "one indexed row of a tensor of shape {:?} spans {} bytes, over the adapter's largest storage binding ({} bytes, max_storage_buffer_binding_size); work on slices of the tensor",
                t.shape(),
                (rows.1 - rows.0) * eb as isize,
                g.max_binding()
            ),
        ));
    }
    let mut order: Vec<usize> = (0..offs.len()).collect();
    order.sort_unstable_by_key(|&b| offs[b]);
    let mut out = Vec::new();
    let mut k = 0;
    while k < order.len() {
        let base = row(offs[order[k]]).0 / align * align;
        let end = (base + piece).min(big.len as usize / eb);
        let mut v = vec![i32::MIN; offs.len()];
        while k < order.len() && row(offs[order[k]]).1 <= end {
            let b = order[k];
            v[b] = (t.offset() as isize + offs[b] - base as isize) as i32;
            k += 1;
        }
        let w = big.window((base * eb) as u64, ((end - base) * eb) as u64);
        let storage = Arc::new(Storage::from_gpu(
            (end - base) * t.dtype().itemsize(),
            t.device(),
            Box::new(w),
        ));
        let flat = Tensor::from_parts(storage, Layout::contiguous(&[end - base]), t.dtype())?;
        out.push((flat, upload(&Tensor::from_vec(v, shape)?, t.device())?));
    }
    Ok(out)
}

/// The element range `[lo, hi)` the dims `keep` of `t` cover from one position.
fn row_span(t: &Tensor, keep: impl Iterator<Item = usize>) -> (isize, isize) {
    let (mut lo, mut hi) = (0isize, 1isize);
    for d in keep {
        let ext = (t.shape()[d] as isize - 1) * t.strides()[d];
        if ext < 0 {
            lo += ext;
        } else {
            hi += ext;
        }
    }
    (lo, hi)
}

/// The gather kernel over `shape`: operands (source, indices or offsets,
/// result), each walked from its offset with its strides; `step` scales an
/// index read into a source offset.
fn gather_kernel(
    op: &'static str,
    ty: GTy,
    shape: &[usize],
    walks: [(&Tensor, usize, Vec<isize>); 3],
    step: u32,
) -> Result<()> {
    let meta = raw_meta(
        op,
        shape,
        &walks.clone().map(|(_, off, st)| (off, st)),
        [step, 0, 0, 0, 0, 0, 0, 0],
    )?;
    let n = shape.iter().product();
    run_items(
        op,
        |bd| shaders::gather(bd, ty),
        &walks.map(|w| w.0),
        &[],
        &meta,
        n,
    )
}

/// The index-put kernel's fixed parts: values `[positions, R...]` written
/// (or added) at `dst` offsets, one thread per element of R walking the
/// positions in order.
struct Put<'a> {
    op: &'static str,
    ty: GTy,
    /// R, the shape each position writes.
    rshape: &'a [usize],
    /// dst's strides over R.
    drest: &'a [isize],
    accumulate: bool,
}

impl Put<'_> {
    /// Write the dense values `v2` (`positions × |R|`) at offsets `o`
    /// (relative to `dst_off` in `d`), in blocks of positions when values
    /// or offsets exceed one binding — in order, so later dispatches see
    /// earlier writes as one pass would.
    fn blocks(&self, v2: &Tensor, o: &Tensor, d: &Tensor, dst_off: usize) -> Result<()> {
        if !split::needed(self.op, &[v2, o])? {
            return self.launch(v2, o, d, dst_off);
        }
        split::by_batch(self.op, &[v2, o], &[true, true], &mut |p, _| {
            self.launch(&p[0], &p[1], d, dst_off)
        })
    }

    fn launch(&self, vv: &Tensor, o: &Tensor, d: &Tensor, dst_off: usize) -> Result<()> {
        let block: usize = self.rshape.iter().product();
        let meta = raw_meta(
            self.op,
            self.rshape,
            &[
                (
                    vv.offset(),
                    crate::tensor::layout::contiguous_strides(self.rshape).to_vec(),
                ),
                (o.offset(), vec![0; self.rshape.len()]),
                (dst_off, self.drest.to_vec()),
            ],
            [
                o.numel() as u32,
                block as u32,
                self.accumulate as u32,
                0,
                0,
                0,
                0,
                0,
            ],
        )?;
        // One thread per written element walks every index row, in order.
        let rows = o.numel();
        check_loop_trips(
            self.op,
            2 * rows as u64 + 64,
            &|| format!("writing through {rows} index rows"),
            "write through fewer indices at a time",
        )?;
        let ty = self.ty;
        run_items(
            self.op,
            |bd| shaders::index_put(bd, ty),
            &[vv, o, d],
            &[],
            &meta,
            block,
        )
    }
}

/// The element offsets (relative to `t`'s offset), in the row-major order
/// of `index`'s positions, that a torch-style gather or scatter along `dim`
/// reaches in `t`: the position's coordinates, with the index read on the
/// host in place of the coordinate along `dim`.
fn line_offsets(op: &'static str, t: &Tensor, dim: usize, index: &Tensor) -> Result<Vec<isize>> {
    let mut st = t.strides()[..index.ndim()].to_vec();
    st[dim] = 0;
    let mut offs = Vec::with_capacity(index.numel());
    crate::backend::cpu::strided::for_each_offset(index.shape(), &st, |o| offs.push(o));
    let host = download(index)?;
    let (len, step) = (t.shape()[dim], t.strides()[dim]);
    if !crate::backend::cpu::index::add_offsets(&host, len, step, &mut offs) {
        return Err(Error::index(
            op,
            format!("an index is out of bounds for dimension {dim} with size {len}"),
        ));
    }
    Ok(offs)
}

/// Check on the host, before anything is written, that every value of the
/// integer tensor `t` lies in `[0, len)` (values equal to `skip` pass);
/// `bad(v)` is the error for an offending value. A graph capture records
/// the check, so that every replay repeats it on that run's tensor.
pub(super) fn check_indices(
    t: &Tensor,
    len: u64,
    skip: Option<i64>,
    bad: impl Fn(i64) -> Error + Send + Sync + 'static,
) -> Result<()> {
    let check = move |t: &Tensor| -> Result<()> {
        let h = download_raw(t)?;
        let h = if h.dtype() == DType::I64 {
            h
        } else {
            let o = Tensor::empty(h.shape(), DType::I64, Device::Cpu)?;
            crate::backend::backend(Device::Cpu).cast_copy(&h, &o)?;
            o
        };
        // SAFETY: a fresh contiguous int64 CPU tensor.
        let v = unsafe { h.as_slice::<i64>() };
        match v
            .iter()
            .find(|&&v| Some(v) != skip && (v < 0 || v as u64 >= len))
        {
            Some(&v) => Err(bad(v)),
            None => Ok(()),
        }
    };
    check(t)?;
    get()?.note_check(t, Arc::new(check));
    Ok(())
}

impl WgpuBackend {
    pub(super) fn gpu_gather(
        &self,
        src: &Tensor,
        dim: usize,
        index: &Tensor,
        out: &Tensor,
    ) -> Result<()> {
        let op = "gather";
        check_same_device(op, &[src, index, out])?;
        gty(op, src.dtype())?;
        gty(op, index.dtype())?;
        if index.numel() == 0 {
            return Ok(());
        }
        let len = src.shape()[dim];
        check_indices(index, len as u64, None, move |bad| {
            Error::index(
                op,
                format!("index {bad} is out of bounds for dimension {dim} with size {len}"),
            )
        })?;
        self.gather_run(src, dim, index, out)
    }

    pub(super) fn gpu_index_gather(&self, a: &IndexArgs, src: &Tensor, out: &Tensor) -> Result<()> {
        let op = a.op;
        let mut ts = vec![src, out];
        ts.extend(a.indices.iter());
        check_same_device(op, &ts)?;
        let ty = gty(op, src.dtype())?;
        let k = out.ndim() - (src.ndim() - a.dims.len());
        let bshape = &out.shape()[..k];
        let nb: usize = bshape.iter().product();
        if nb == 0 {
            return Ok(());
        }
        let keep = (0..src.ndim()).filter(|d| !a.dims.contains(d));
        if split::needed(op, &[src])? && row_too_wide(row_span(src, keep))? {
            // What one position selects spans too much of the source: index
            // a copy laid out with the indexed dims outermost instead.
            let c = outer_first(op, src, a.dims)?;
            if !row_too_wide(row_span(&c, (0..c.ndim()).filter(|d| !a.dims.contains(d))))? {
                return self.index_gather(a, &c, out);
            }
        }
        if a.indices.len() == 1 && get()?.bundling() {
            return self.bundle_index_gather(a, src, out, bshape);
        }
        let (offs, host) = offsets_for(a, src, nb, bshape)?;
        if out.numel() == 0 {
            return Ok(());
        }
        // Over out's shape B ++ R: src walks its other dims (stride 0 over B),
        // the offsets walk B (stride 0 over R); the gather kernel adds them.
        let rs: Vec<isize> = (0..src.ndim())
            .filter(|d| !a.dims.contains(d))
            .map(|d| src.strides()[d])
            .collect();
        let launch = |sb: &Tensor, src_off: usize, offs: &Tensor, o: &Tensor| -> Result<()> {
            let kb = offs.ndim();
            let mut ss = vec![0isize; kb];
            ss.extend(&rs);
            let mut os: Vec<isize> = offs.strides().to_vec();
            os.resize(o.ndim(), 0);
            let walks = [
                (sb, src_off, ss),
                (offs, offs.offset(), os),
                (o, o.offset(), o.strides().to_vec()),
            ];
            gather_kernel(op, ty, o.shape(), walks, 1)
        };
        // Offsets or a result larger than one binding: blocks of positions
        // of a dense result (made once, as the windows below share it).
        let blocks = split::needed(op, &[out])? || (nb * 4) as u64 > get()?.max_binding();
        let run = |sb: &Tensor, src_off: usize, offs: &Tensor, o: &Tensor| -> Result<()> {
            if !blocks {
                return launch(sb, src_off, offs, o);
            }
            let mut flat = vec![nb];
            flat.extend_from_slice(&o.shape()[k..]);
            let (f1, o1) = (as_shape(offs, &[nb])?, as_shape(o, &flat)?);
            split::by_batch(op, &[&f1, &o1], &[true, true], &mut |v, _| {
                launch(sb, src_off, &v[0], &v[1])
            })
        };
        let all = |o: &Tensor| -> Result<()> {
            if let Some(host) = &host {
                // A source larger than one binding: one pass per window of
                // it, each writing the positions whose rows lie there.
                let keep = (0..src.ndim()).filter(|d| !a.dims.contains(d));
                let rows = row_span(src, keep);
                for (w, offs) in offset_windows(op, src, host, rows, bshape)? {
                    run(&w, 0, &offs, o)?;
                }
                return Ok(());
            }
            run(src, src.offset(), &offs, o)
        };
        if blocks {
            into_dense(out, all)
        } else {
            all(out)
        }
    }

    /// [`Self::gpu_index_gather`] of one index tensor while a WebGPU bundle
    /// is recorded: the run cannot read the indices on the host, so the
    /// gather kernel reads them itself (an index times the indexed dim's
    /// stride is the source offset), and the range check `[0, len)` is left
    /// to the bundle (its loader checks inputs; see `graph::bundle`).
    fn bundle_index_gather(
        &self,
        a: &IndexArgs,
        src: &Tensor,
        out: &Tensor,
        bshape: &[usize],
    ) -> Result<()> {
        let op = a.op;
        let (d, idx) = (a.dims[0], &a.indices[0]);
        if idx.shape() != bshape || buffer(op, src)?.len > get()?.max_binding() {
            return Err(Error::runtime(
                op,
                format!(
                    "cannot be recorded in a WebGPU bundle with an index of shape {:?} over a source of shape {:?} (a bundle gathers with one index tensor of the positions' shape, from a source within one storage binding)",
                    idx.shape(),
                    src.shape()
                ),
            ));
        }
        get()?.note_index_range(idx, src.shape()[d] as u64, op, d);
        if out.numel() == 0 {
            return Ok(());
        }
        let k = bshape.len();
        let mut ss = vec![0isize; k];
        ss.extend(
            (0..src.ndim())
                .filter(|x| !a.dims.contains(x))
                .map(|x| src.strides()[x]),
        );
        let mut is = idx.strides().to_vec();
        is.resize(out.ndim(), 0);
        let walks = [
            (src, src.offset(), ss),
            (idx, idx.offset(), is),
            (out, out.offset(), out.strides().to_vec()),
        ];
        let step = i32::try_from(src.strides()[d]).map_err(|_| {
            Error::runtime(
                op,
                "the indexed dim's stride exceeds the device's 32-bit offsets",
            )
        })?;
        gather_kernel(op, gty(op, src.dtype())?, out.shape(), walks, step as u32)
    }

    pub(super) fn gpu_index_put(
        &self,
        a: &IndexArgs,
        dst: &Tensor,
        values: &Tensor,
        accumulate: bool,
    ) -> Result<()> {
        let op = a.op;
        let mut ts = vec![values, dst];
        ts.extend(a.indices.iter());
        check_same_device(op, &ts)?;
        let ty = gty(op, dst.dtype())?;
        let k = values.ndim() - (dst.ndim() - a.dims.len());
        let nb: usize = values.shape()[..k].iter().product();
        if nb == 0 {
            return Ok(());
        }
        let keep = (0..dst.ndim()).filter(|d| !a.dims.contains(d));
        if split::needed(op, &[dst])? && row_too_wide(row_span(dst, keep))? {
            // As in `index_gather`: write into a copy laid out with the
            // indexed dims outermost, then copy it back.
            let c = outer_first(op, dst, a.dims)?;
            if !row_too_wide(row_span(&c, (0..c.ndim()).filter(|d| !a.dims.contains(d))))? {
                self.index_put(a, &c, values, accumulate)?;
                return self.cast_copy(&c, dst);
            }
        }
        let (offs, host) = offsets_for(a, dst, nb, &[nb])?;
        if values.numel() == 0 {
            return Ok(());
        }
        // One thread per element of the other dims R walks the index
        // positions in order, so repeated targets combine as on the CPU.
        let v = dense(values)?;
        let rshape = &values.shape()[k..];
        let block: usize = rshape.iter().product();
        let drest: Vec<isize> = (0..dst.ndim())
            .filter(|d| !a.dims.contains(d))
            .map(|d| dst.strides()[d])
            .collect();
        let v2 = as_rows(&v, nb, block)?;
        let put = Put {
            op,
            ty,
            rshape,
            drest: &drest,
            accumulate,
        };
        let run = |o: &Tensor, d: &Tensor, dst_off: usize| put.blocks(&v2, o, d, dst_off);
        if let Some(host) = host {
            // A destination larger than one binding: one pass per window
            // of it, each writing the positions whose rows lie there.
            let keep = (0..dst.ndim()).filter(|d| !a.dims.contains(d));
            let rows = row_span(dst, keep);
            for (w, o) in offset_windows(op, dst, &host, rows, &[nb])? {
                run(&o, &w, 0)?;
            }
            return Ok(());
        }
        run(&offs, dst, dst.offset())
    }

    pub(super) fn gpu_nonzero_count(&self, x: &Tensor) -> Result<usize> {
        // The output's shape depends on the data: the count is read on the host.
        crate::backend::backend(Device::Cpu).nonzero_count(&download(x)?)
    }

    pub(super) fn gpu_nonzero_fill(&self, x: &Tensor, out: &Tensor) -> Result<()> {
        let h = download(x)?;
        via_host(out, |o| {
            crate::backend::backend(Device::Cpu).nonzero_fill(&h, o)
        })
    }

    pub(super) fn gpu_scatter(
        &self,
        op: &'static str,
        dst: &Tensor,
        dim: usize,
        index: &Tensor,
        src: &Tensor,
        accumulate: bool,
    ) -> Result<()> {
        let how = if accumulate {
            Combine::Add
        } else {
            Combine::Write
        };
        // max_pool2d's gradient scatters the indices its own kernel produced (always in range).
        self.scatter_checked(op, dst, dim, index, src, how, op != "max_pool2d")
    }

    /// `scatter_reduce` on the device: the indices checked on the host
    /// before anything is written (as [`Self::gpu_scatter`] does), then one
    /// thread per line combines that line's values in order (no atomics), so
    /// each slot sees its values in the CPU's order and a sum has the CPU's bits.
    pub(super) fn gpu_scatter_reduce(
        &self,
        op: &'static str,
        dst: &Tensor,
        dim: usize,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduction,
    ) -> Result<()> {
        self.scatter_checked(op, dst, dim, index, src, Combine::Reduce(reduce), true)
    }

    /// The scatter family's device and dtype checks, then (with `check`) the
    /// host-side index range check before anything is written, then the kernel.
    #[allow(clippy::too_many_arguments)]
    fn scatter_checked(
        &self,
        op: &'static str,
        dst: &Tensor,
        dim: usize,
        index: &Tensor,
        src: &Tensor,
        how: Combine,
        check: bool,
    ) -> Result<()> {
        check_same_device(op, &[index, src, dst])?;
        gty(op, dst.dtype())?;
        gty(op, index.dtype())?;
        if index.numel() == 0 {
            return Ok(());
        }
        let len = dst.shape()[dim];
        if check {
            check_indices(index, len as u64, None, move |bad| {
                Error::index(
                    op,
                    format!("index {bad} is out of bounds for dimension {dim} with size {len}"),
                )
            })?;
        }
        self.scatter_lines(op, dst, dim, index, src, how)
    }

    /// The gather kernel (indices already checked); lines of the index's
    /// dims other than `dim` split across pieces when an operand exceeds one
    /// binding, while `src` stays whole along `dim`.
    pub(super) fn gather_run(
        &self,
        src: &Tensor,
        dim: usize,
        index: &Tensor,
        out: &Tensor,
    ) -> Result<()> {
        let op = "gather";
        let ty = gty(op, src.dtype())?;
        if split::needed(op, &[src, index, out])? {
            if src.shape()[dim] > get()?.piece_elems() {
                return self.gather_long(src, dim, index, out);
            }
            // Each line along `dim` stays whole: every operand gets `dim`
            // innermost first.
            let across = |t: &Tensor| t.shape()[dim] > 1 && t.strides()[dim] != 1;
            if across(out) {
                let c = dim_last(op, out.shape(), dim, out.dtype())?;
                self.gather_run(src, dim, index, &c)?;
                return self.cast_copy(&c, out);
            }
            for (k, t) in [src, index].into_iter().enumerate() {
                if across(t) {
                    let c = dim_last(op, t.shape(), dim, t.dtype())?;
                    self.cast_copy(t, &c)?;
                    let (s, i) = if k == 0 { (&c, index) } else { (src, &c) };
                    return self.gather_run(s, dim, i, out);
                }
            }
            let nd = index.ndim();
            let axes: Vec<usize> = (0..nd).collect();
            let space = split::Space {
                ts: &[src, index, out],
                axes: vec![axes.clone(), axes.clone(), axes],
                sizes: index.shape().to_vec(),
                splittable: (0..nd).map(|d| d != dim).collect(),
            };
            return split::in_pieces(op, &space, &mut |v, _| {
                self.gather_run(&v[0], dim, &v[1], &v[2])
            });
        }
        let mut ss: Vec<isize> = src.strides().to_vec();
        let sd = ss[dim];
        ss[dim] = 0;
        let walks = [
            (src, src.offset(), ss),
            (index, index.offset(), index.strides().to_vec()),
            (out, out.offset(), out.strides().to_vec()),
        ];
        gather_kernel(op, ty, index.shape(), walks, sd as i32 as u32)
    }

    /// Gather along lines longer than one binding: each position's source
    /// offset is computed on the host from the (checked) indices, and the
    /// kernel runs once per window of the source, as the index ops do.
    fn gather_long(&self, src: &Tensor, dim: usize, index: &Tensor, out: &Tensor) -> Result<()> {
        let op = "gather";
        let ty = gty(op, src.dtype())?;
        let offs = line_offsets(op, src, dim, index)?;
        let dense = crate::tensor::layout::contiguous_strides(index.shape()).to_vec();
        for (w, o) in offset_windows(op, src, &offs, (0, 1), index.shape())? {
            let walks = [
                (&w, 0, vec![0; index.ndim()]),
                (&o, 0, dense.clone()),
                (out, out.offset(), out.strides().to_vec()),
            ];
            gather_kernel(op, ty, index.shape(), walks, 1)?;
        }
        Ok(())
    }

    /// Scatter along destination lines longer than one binding: each
    /// position's destination offset is computed on the host from the
    /// (checked) indices, and the values are written window by window of
    /// the destination, in position order (as the index puts do).
    fn scatter_long(
        &self,
        op: &'static str,
        dst: &Tensor,
        dim: usize,
        index: &Tensor,
        src: &Tensor,
        accumulate: bool,
    ) -> Result<()> {
        let ty = gty(op, dst.dtype())?;
        let offs = line_offsets(op, dst, dim, index)?;
        // The values at the index's positions, dense in its row-major order.
        let mut l = src.layout().clone();
        for (d, &n) in index.shape().iter().enumerate() {
            l = l.slice(d, 0, n, 1);
        }
        let v = dense(&Tensor::from_parts(src.storage().clone(), l, src.dtype())?)?;
        let v2 = as_rows(&v, index.numel(), 1)?;
        let put = Put {
            op,
            ty,
            rshape: &[],
            drest: &[],
            accumulate,
        };
        for (w, o) in offset_windows(op, dst, &offs, (0, 1), &[index.numel()])? {
            put.blocks(&v2, &o, &w, 0)?;
        }
        Ok(())
    }

    /// The scatter kernel (indices already checked); lines (the dims other
    /// than `dim`) split across pieces when an operand exceeds one binding.
    pub(super) fn scatter_run(
        &self,
        op: &'static str,
        dst: &Tensor,
        dim: usize,
        index: &Tensor,
        src: &Tensor,
        accumulate: bool,
    ) -> Result<()> {
        let how = if accumulate {
            Combine::Add
        } else {
            Combine::Write
        };
        self.scatter_lines(op, dst, dim, index, src, how)
    }

    /// The scatter and scatter_reduce kernels (indices already checked);
    /// lines (the dims other than `dim`) split across pieces when an
    /// operand exceeds one binding.
    fn scatter_lines(
        &self,
        op: &'static str,
        dst: &Tensor,
        dim: usize,
        index: &Tensor,
        src: &Tensor,
        how: Combine,
    ) -> Result<()> {
        let ty = gty(op, dst.dtype())?;
        if split::needed(op, &[index, src, dst])? {
            if dst.shape()[dim] > get()?.piece_elems() {
                let Combine::Reduce(_) = how else {
                    let accumulate = how == Combine::Add;
                    return self.scatter_long(op, dst, dim, index, src, accumulate);
                };
                return Err(Error::runtime(
                    op,
                    format!(
                        "a dim of {} elements (self of shape {}) is longer than one storage binding \
                         of the gpu device ({} elements): not supported; reduce along it on the cpu",
                        dst.shape()[dim],
                        crate::tensor::layout::fmt_shape(dst.shape()),
                        get()?.piece_elems()
                    ),
                ));
            }
            // Lines split (the dims other than `dim`); each line stays whole,
            // so every operand gets `dim` innermost first.
            let across = |t: &Tensor| t.shape()[dim] > 1 && t.strides()[dim] != 1;
            if across(dst) {
                let c = dim_last(op, dst.shape(), dim, dst.dtype())?;
                self.cast_copy(dst, &c)?;
                self.scatter_lines(op, &c, dim, index, src, how)?;
                return self.cast_copy(&c, dst);
            }
            for (k, t) in [index, src].into_iter().enumerate() {
                if across(t) {
                    let c = dim_last(op, t.shape(), dim, t.dtype())?;
                    self.cast_copy(t, &c)?;
                    let (i, v) = if k == 0 { (&c, src) } else { (index, &c) };
                    return self.scatter_lines(op, dst, dim, i, v, how);
                }
            }
            let nd = index.ndim();
            let lines = |last: usize| -> Vec<usize> {
                (0..nd).map(|d| if d == dim { last } else { d }).collect()
            };
            let mut sizes = index.shape().to_vec();
            sizes[dim] = 1;
            sizes.extend([index.shape()[dim], dst.shape()[dim]]);
            let space = split::Space {
                ts: &[index, src, dst],
                axes: vec![lines(nd), lines(nd), lines(nd + 1)],
                sizes,
                splittable: (0..nd + 2).map(|d| d < nd && d != dim).collect(),
            };
            return split::in_pieces(op, &space, &mut |v, _| {
                self.scatter_lines(op, &v[2], dim, &v[0], &v[1], how)
            });
        }
        let mut lines: Vec<usize> = index.shape().to_vec();
        let klen = lines[dim];
        lines[dim] = 1;
        let meta = raw_meta(
            op,
            &lines,
            &[
                (index.offset(), index.strides().to_vec()),
                (src.offset(), src.strides().to_vec()),
                (dst.offset(), dst.strides().to_vec()),
            ],
            [
                klen as u32,
                index.strides()[dim] as i32 as u32,
                src.strides()[dim] as i32 as u32,
                dst.strides()[dim] as i32 as u32,
                (how == Combine::Add) as u32,
                0,
                0,
                0,
            ],
        )?;
        // One thread walks a whole line, in order.
        check_loop_trips(
            op,
            2 * klen as u64 + 64,
            &|| format!("scattering lines of {klen} indices"),
            "scatter fewer indices per line at a time",
        )?;
        let nl: usize = lines.iter().product();
        run_items(
            op,
            |bd| match how {
                Combine::Reduce(r) => shaders::scatter_reduce(bd, ty, r),
                _ => shaders::scatter(bd, ty),
            },
            &[index, src, dst],
            &[],
            &meta,
            nl,
        )
    }
}
