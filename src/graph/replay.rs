//! Replaying a compiled graph's GPU work.
//!
//! A plan running on the GPU captures one run ([`Gpu::capture`]): it runs as
//! usual while every dispatch is recorded with its kernel, buffers, byte
//! ranges and metadata. When that run's device work depends on nothing but
//! the graph's inputs (no host reads of device data, no seeding, no
//! tensors kept beyond its outputs and gradients), the recording becomes a
//! [`Replay`], and later runs with the same input layouts skip the executor:
//! they queue the recorded dispatches, with bind groups made once, in blocks
//! of the shared command buffer. The only nodes still run are optimizer
//! steps that read per-run scalar arguments (learning rate, step counts):
//! they run *live* between the blocks, on tensors over the replay's
//! buffers, so their metadata follows this run's scalars. Buffers come from
//! the plan:
//! - inputs (arguments, state read by reference, constants, `.grad`s) are
//!   the run's own tensors, bound afresh only when a tensor's buffer changed;
//! - buffers the run makes and uses up share the plan's scratch slots by
//!   lifetime, as the memory plan reuses memory (made once, kept by the plan);
//! - metadata lies in one buffer uploaded once; data the run uploaded that
//!   no kernel writes stays uploaded;
//! - outputs and gradients get new buffers every run (the caller keeps them).
//!
//! Host checks the captured run made (index range checks of class targets
//! and gather indices) are repeated on each replay's tensors before anything
//! is queued, so a bad index raises the same error and changes nothing; data
//! it computed on the host from inputs' values (the element offsets of
//! advanced indexing and embeddings) is computed again from each replay's
//! tensors and uploaded anew, and random numbers drawn on the host are
//! drawn again (new streams from the same generators) and uploaded anew.
//! Random kernels run on the device read their stream from their metadata:
//! their metadata lies in a small buffer written anew for each run, with
//! streams reserved anew from the same generators, in the run's order (host
//! draws included), so a replay draws the numbers eager code would.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::backend::wgpu::context::{get, DeriveFn, GpuBuffer, HostCheck, RecLive, Recording};
use crate::backend::wgpu::{buffer, storage_over, Redraw};
use crate::error::{Error, Result};
use crate::tensor::{DType, Device, Layout, Storage, Tensor};

/// Where a binding's buffer comes from on each replay.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Src {
    /// The buffer of graph input `k`.
    Input(usize),
    /// A buffer that existed before the capture and is no input (kept).
    Held(usize),
    /// One of the plan's own buffers (scratch slots, uploaded data).
    Own(usize),
    /// A new buffer each run (outputs, gradients, data the run rewrites).
    Fresh(usize),
}

/// A buffer made anew each run.
struct Fresh {
    bytes: u64,
    /// For an output's buffer: its storage's logical bytes and dtype.
    tensor: Option<(usize, DType)>,
    /// Data uploaded into it before the run's kernels.
    init: Option<Vec<u8>>,
    /// Or data computed again for each run (an index into `Replay::derived`).
    derive: Option<usize>,
}

/// One recorded dispatch, ready to queue.
struct Disp {
    op: &'static str,
    pipe: Arc<wgpu::ComputePipeline>,
    /// Byte offset and size of its metadata in the plan's metadata buffer
    /// (or, for a random kernel, in the buffer of per-run metadata).
    meta: (u64, u64),
    /// Whether its metadata is per run (a random kernel's stream).
    per_run: bool,
    /// Per binding 1, 2, ...: the buffer and the recorded (offset, size), if a range.
    binds: Vec<(Src, Option<(u64, u64)>)>,
    groups: (u32, u32),
}

/// A tensor the run hands back: a view of an input's or a fresh buffer.
struct Port {
    src: Src,
    layout: Layout,
    dtype: DType,
}

/// A view of a graph input: its position, and the layout and dtype read.
type InputView = (usize, Layout, DType);

/// A graph node a replay runs live, between blocks of recorded dispatches.
struct Live {
    node: usize,
    /// Its inputs: buffer, layout and dtype as it read them.
    inputs: Vec<(Src, Layout, DType)>,
}

/// One stretch of a replay: recorded dispatches, or a live node.
enum Step {
    Block(std::ops::Range<usize>),
    Live(Live),
}

/// A captured run's device work, replayable (see the module docs).
pub struct Replay {
    /// Each input's dtype and layout at capture (the guard).
    sig: Vec<(DType, Layout)>,
    /// Each input's first input in the same buffer.
    alias: Vec<usize>,
    /// Per input: whether a kernel binds its buffer whole (so it must fit
    /// one binding), and the furthest byte a bound range of it reaches.
    reach: Vec<(bool, u64)>,
    held: Vec<Arc<GpuBuffer>>,
    own: Vec<Arc<GpuBuffer>>,
    meta: Arc<GpuBuffer>,
    fresh: Vec<Fresh>,
    disps: Vec<Disp>,
    /// The run in order: blocks of `disps` and live nodes.
    steps: Vec<Step>,
    /// Bind groups of the last run, kept while their buffers stay.
    bind_groups: Vec<Option<wgpu::BindGroup>>,
    /// The input buffers of the last run (held, so a buffer id stays unique).
    last: Vec<Option<Arc<GpuBuffer>>>,
    outputs: Vec<Port>,
    grads: Vec<Option<Port>>,
    checks: Vec<(usize, Layout, DType, HostCheck)>,
    /// Uploads computed from inputs' host values: sources (input, layout,
    /// dtype), how, and its position among the recorded uploads.
    derived: Vec<(Vec<InputView>, DeriveFn, usize)>,
    /// Metadata words of the random kernels, written anew for each run.
    run_words: Vec<u32>,
    /// Per random op: how it reserves its stream, the word positions of
    /// the stream in `run_words`, and how many recorded uploads precede it.
    streams: Vec<(Redraw, Vec<usize>, usize)>,
    /// Inputs some kernel writes (their versions move, their host copies go).
    written_inputs: Vec<usize>,
    /// Held buffers some kernel writes.
    written_held: Vec<usize>,
    /// Bytes of the plan's own buffers.
    pub own_bytes: u64,
}

/// The port for `t`, a tensor the captured run handed back.
fn port(
    rec: &Recording,
    t: &Tensor,
    input_of: &HashMap<usize, usize>,
    fresh_of: &mut HashMap<usize, usize>,
    fresh: &mut Vec<Fresh>,
) -> std::result::Result<Port, String> {
    let b = buffer("compile", t).map_err(|_| {
        format!(
            "a result is on device {}, not made by the GPU work",
            t.device()
        )
    })?;
    let src = if let Some(&k) = input_of.get(&b.id()) {
        Src::Input(k)
    } else {
        match rec.index_of(&b) {
            Some(i) if rec.buffers[i].existing.is_none() => {
                let f = *fresh_of.entry(i).or_insert_with(|| {
                    fresh.push(Fresh {
                        bytes: b.len,
                        tensor: Some((t.storage().nbytes(), t.dtype())),
                        init: rec.buffers[i].init.clone(),
                        derive: None,
                    });
                    fresh.len() - 1
                });
                Src::Fresh(f)
            }
            _ => return Err("a result lies in a buffer the run neither made nor read".into()),
        }
    };
    Ok(Port {
        src,
        layout: t.layout().clone(),
        dtype: t.dtype(),
    })
}

/// The live step of node record `l`, its inputs placed by `src`.
fn live_step(l: &RecLive, src: &[Option<Src>]) -> std::result::Result<Live, String> {
    let inputs = l
        .inputs
        .iter()
        .map(|(b, layout, dtype)| {
            let s = src[*b].ok_or("an optimizer step reads a buffer the run never placed")?;
            Ok((s, layout.clone(), *dtype))
        })
        .collect::<std::result::Result<Vec<_>, String>>()?;
    Ok(Live {
        node: l.node,
        inputs,
    })
}

impl Replay {
    /// Make a replay of the capture `rec` of a run that read `inputs` (the
    /// graph's inputs, in order) and handed back `outs` and the gradients
    /// `grads`; `Err` says why the run cannot be replayed.
    pub fn build(
        mut rec: Recording,
        inputs: &[Tensor],
        outs: &[Tensor],
        grads: &[Option<Tensor>],
    ) -> std::result::Result<Replay, String> {
        if let Some(why) = rec.unreplayable {
            return Err(why);
        }
        let g = get().map_err(|e| e.to_string())?;
        let mut input_of: HashMap<usize, usize> = HashMap::new();
        let mut alias = Vec::with_capacity(inputs.len());
        let mut last = Vec::with_capacity(inputs.len());
        for (k, t) in inputs.iter().enumerate() {
            let b =
                buffer("compile", t).map_err(|_| format!("input {k} is not on the gpu device"))?;
            alias.push(*input_of.entry(b.id()).or_insert(k));
            last.push(Some(b));
        }
        let mut fresh = Vec::new();
        let mut fresh_of: HashMap<usize, usize> = HashMap::new();
        let outputs = outs
            .iter()
            .map(|t| port(&rec, t, &input_of, &mut fresh_of, &mut fresh))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let grads = grads
            .iter()
            .map(|t| {
                t.as_ref()
                    .map(|t| port(&rec, t, &input_of, &mut fresh_of, &mut fresh))
                    .transpose()
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        // The kernels, and which buffers they write.
        let mut kernels = HashMap::new();
        let mut written = vec![false; rec.buffers.len()];
        for d in &rec.dispatches {
            if let std::collections::hash_map::Entry::Vacant(e) = kernels.entry(d.shader) {
                e.insert(
                    g.kernel(d.op, &rec.shaders[d.shader])
                        .map_err(|e| e.to_string())?,
                );
            }
            let w = &kernels[&d.shader].1;
            for (j, &b) in d.buffers.iter().enumerate() {
                if w.get(j + 1).copied().unwrap_or(true) {
                    written[b] = true;
                }
            }
        }
        // Nodes run live (optimizer steps reading per-run scalars): their
        // dispatches are left out of the blocks.
        let mut is_live = vec![false; rec.dispatches.len()];
        for l in &rec.live {
            if l.outputs != Some(0) {
                return Err(format!(
                    "node {} reads per-run scalars and returns tensors (a first optimizer step)",
                    l.node
                ));
            }
            for d in l.dispatches.clone() {
                is_live[d] = true;
            }
        }
        let rec_checks = std::mem::take(&mut rec.checks);
        let rec_derived = std::mem::take(&mut rec.derived);
        let rec_streams = std::mem::take(&mut rec.streams);
        // Dispatches reading a random stream: their metadata is per run.
        let mut stream_of: HashMap<usize, usize> = HashMap::new();
        for (k, st) in rec_streams.iter().enumerate() {
            for &d in &st.dispatches {
                if is_live[d] {
                    return Err("an optimizer step draws random numbers".into());
                }
                stream_of.insert(d, k);
            }
        }
        // Where the host values a check or a computed upload read come
        // from: an input's view, or data the run uploaded and never
        // rewrites (the same every run: nothing to repeat).
        let source = |t: &Tensor| -> std::result::Result<Option<InputView>, String> {
            let b = buffer("compile", t).map_err(|e| e.to_string())?;
            if let Some(&k) = input_of.get(&b.id()) {
                return Ok(Some((k, t.layout().clone(), t.dtype())));
            }
            match rec.index_of(&b) {
                Some(i) if rec.buffers[i].init.is_some() && !written[i] => Ok(None),
                _ => Err(
                    "the run reads on the host the values of a tensor its kernels compute".into(),
                ),
            }
        };
        let mut checks = Vec::with_capacity(rec.checks.len());
        for c in rec_checks {
            if let Some((k, layout, dtype)) = source(&c.tensor)? {
                checks.push((k, layout, dtype, c.check));
            }
        }
        // Uploads computed from inputs' host values: computed again each run.
        let mut derived = Vec::with_capacity(rec.derived.len());
        let mut derived_of: HashMap<usize, usize> = HashMap::new();
        for (at, d) in rec_derived.into_iter().enumerate() {
            let sources = d
                .sources
                .iter()
                .map(source)
                .collect::<std::result::Result<Vec<_>, String>>()?;
            match sources.iter().filter(|s| s.is_none()).count() {
                0 => {
                    derived_of.insert(d.target, derived.len());
                    derived.push((sources.into_iter().flatten().collect(), d.make, at));
                }
                n if n == sources.len() => {} // from constant data: the recorded upload stands
                _ => {
                    return Err(
                        "the run uploads data computed from inputs together with data it made"
                            .into(),
                    )
                }
            }
        }
        for (&i, &f) in &fresh_of {
            fresh[f].derive = derived_of.get(&i).copied();
        }
        // Buffers the run made that outlive it, other than its results:
        // state it created (a first optimizer step's momentum), not replayable.
        for (i, m) in rec.made.iter().enumerate() {
            if let Some((op, w)) = m {
                if w.strong_count() > 0 && !fresh_of.contains_key(&i) {
                    return Err(format!(
                        "the run keeps a buffer {op} made beyond its results (state created on a first step)"
                    ));
                }
            }
        }
        // Where each recorded buffer comes from.
        let mut src: Vec<Option<Src>> = vec![None; rec.buffers.len()];
        let mut held = Vec::new();
        let mut written_held = Vec::new();
        let mut own: Vec<Arc<GpuBuffer>> = Vec::new();
        let mut fixed = HashSet::new();
        for (i, b) in rec.buffers.iter().enumerate() {
            let s = if let Some(ex) = &b.existing {
                match input_of.get(&ex.id()) {
                    Some(&k) => Src::Input(k),
                    None => {
                        held.push(ex.clone());
                        if written[i] {
                            written_held.push(held.len() - 1);
                        }
                        Src::Held(held.len() - 1)
                    }
                }
            } else if let Some(&f) = fresh_of.get(&i) {
                Src::Fresh(f)
            } else if let Some(&j) = derived_of.get(&i) {
                fresh.push(Fresh {
                    bytes: b.size,
                    tensor: None,
                    init: None,
                    derive: Some(j),
                });
                Src::Fresh(fresh.len() - 1)
            } else if let Some(init) = &b.init {
                if written[i] {
                    fresh.push(Fresh {
                        bytes: b.size,
                        tensor: None,
                        init: Some(init.clone()),
                        derive: None,
                    });
                    Src::Fresh(fresh.len() - 1)
                } else {
                    own.push(g.upload("compile", init).map_err(|e| e.to_string())?);
                    Src::Own(own.len() - 1)
                }
            } else {
                continue; // scratch, placed below
            };
            fixed.insert(i);
            src[i] = Some(s);
        }
        let (phys, slots) = super::bundle::share_scratch(&rec, &fixed, &HashSet::new());
        let base = own.len();
        for &size in &slots {
            own.push(g.alloc("compile", size).map_err(|e| e.to_string())?);
        }
        for (i, s) in src.iter_mut().enumerate() {
            if s.is_none() {
                if let (k, true) = phys[i] {
                    *s = Some(Src::Own(base + k));
                }
            }
        }
        // One metadata buffer, each dispatch's words at a bindable offset.
        let align = (g.binding_align() / 4) as usize;
        let mut words: Vec<u32> = Vec::new();
        let mut run_words: Vec<u32> = Vec::new();
        let mut stream_words: Vec<Vec<usize>> = vec![Vec::new(); rec_streams.len()];
        let mut disps = Vec::with_capacity(rec.dispatches.len());
        let mut steps = Vec::new();
        let mut lives = rec.live.iter().peekable();
        let mut block = 0;
        for (di, d) in rec.dispatches.iter().enumerate() {
            while let Some(l) = lives.next_if(|l| l.dispatches.start <= di) {
                steps.push(Step::Block(block..disps.len()));
                block = disps.len();
                steps.push(Step::Live(live_step(l, &src)?));
            }
            if is_live[di] {
                continue;
            }
            let stream = stream_of.get(&di).copied();
            let words = match stream {
                Some(_) => &mut run_words,
                None => &mut words,
            };
            let start = words.len().div_ceil(align) * align;
            words.resize(start, 0);
            words.extend_from_slice(&d.meta);
            if d.meta.is_empty() {
                words.push(0);
            }
            if let Some(k) = stream {
                stream_words[k].push(start);
            }
            let binds = d
                .buffers
                .iter()
                .enumerate()
                .map(|(j, &b)| {
                    let s = src[b].ok_or("a kernel binds a buffer the run never placed")?;
                    Ok((s, d.ranges.get(j).copied().flatten()))
                })
                .collect::<std::result::Result<Vec<_>, String>>()?;
            disps.push(Disp {
                op: d.op,
                pipe: kernels[&d.shader].0.clone(),
                meta: (start as u64 * 4, (words.len() - start) as u64 * 4),
                per_run: stream.is_some(),
                binds,
                groups: d.groups,
            });
        }
        for l in lives {
            steps.push(Step::Block(block..disps.len()));
            block = disps.len();
            steps.push(Step::Live(live_step(l, &src)?));
        }
        steps.push(Step::Block(block..disps.len()));
        let meta = g
            .upload("compile", bytemuck::cast_slice(&words))
            .map_err(|e| e.to_string())?;
        let written_inputs = (0..inputs.len())
            .filter(|&k| {
                alias[k] == k
                    && src
                        .iter()
                        .zip(&written)
                        .any(|(s, &w)| w && *s == Some(Src::Input(k)))
            })
            .collect();
        let own_bytes = own.iter().map(|b| b.cap).sum::<u64>() + meta.cap;
        // How each input is bound: whole anywhere, and the furthest byte a
        // range of it reaches (a kernel working through it in pieces).
        let mut reach = vec![(false, 0u64); inputs.len()];
        for d in &disps {
            for &(s, range) in &d.binds {
                if let Src::Input(k) = s {
                    match range {
                        Some((off, size)) => reach[k].1 = reach[k].1.max(off + size),
                        None => reach[k].0 = true,
                    }
                }
            }
        }
        Ok(Replay {
            reach,
            sig: inputs
                .iter()
                .map(|t| (t.dtype(), t.layout().clone()))
                .collect(),
            alias,
            held,
            own,
            meta,
            fresh,
            bind_groups: (0..disps.len()).map(|_| None).collect(),
            disps,
            steps,
            last,
            outputs,
            grads,
            checks,
            derived,
            run_words,
            streams: rec_streams
                .into_iter()
                .zip(stream_words)
                .map(|(st, w)| (st.redraw, w, st.after_derived))
                .collect(),
            written_inputs,
            written_held,
            own_bytes,
        })
    }

    /// Replay on `inputs` (the graph's inputs, in order): the outputs and
    /// gradients, or `None` when the inputs do not match the capture (their
    /// dtypes, layouts or sharing of buffers differ), so the run must go
    /// through the executor.
    /// `live(node, inputs)` runs a live node (see [`Step`]).
    #[allow(clippy::type_complexity)]
    pub fn run(
        &mut self,
        inputs: &[Tensor],
        live: &mut dyn FnMut(usize, &[Tensor]) -> Result<()>,
    ) -> Result<Option<(Vec<Tensor>, Vec<Option<Tensor>>)>> {
        const OP: &str = "compile";
        let g = get()?;
        if inputs.len() != self.sig.len() {
            return Ok(None);
        }
        let mut bufs = Vec::with_capacity(inputs.len());
        let mut first: HashMap<usize, usize> = HashMap::new();
        for (k, t) in inputs.iter().enumerate() {
            let Ok(b) = buffer(OP, t) else {
                return Ok(None);
            };
            let (dt, l) = &self.sig[k];
            if t.dtype() != *dt
                || t.layout() != l
                || *first.entry(b.id()).or_insert(k) != self.alias[k]
                || (self.reach[k].0 && b.len > g.max_binding())
                || self.reach[k].1 > b.cap
                || self.held.iter().any(|h| h.id() == b.id())
            {
                return Ok(None);
            }
            bufs.push(b);
        }
        for (k, layout, dtype, check) in &self.checks {
            check(&Tensor::from_parts(
                inputs[*k].storage().clone(),
                layout.clone(),
                *dtype,
            )?)?;
        }
        let view = |(k, layout, dtype): &InputView| {
            Tensor::from_parts(inputs[*k].storage().clone(), layout.clone(), *dtype)
        };
        // Uploads computed from host values and the random streams, in the
        // order the run made them (host draws and streams both reserve
        // from generators).
        let mut derived = Vec::with_capacity(self.derived.len());
        let mut run_words = self.run_words.clone();
        let mut next_stream = 0;
        let mut draw_streams = |upto: usize, run_words: &mut Vec<u32>| {
            while let Some((redraw, at, _)) = self.streams.get(next_stream).filter(|s| s.2 <= upto)
            {
                let s = redraw();
                for &w in at {
                    run_words[w..w + 4].copy_from_slice(&[
                        s.seed as u32,
                        (s.seed >> 32) as u32,
                        s.offset as u32,
                        (s.offset >> 32) as u32,
                    ]);
                }
                next_stream += 1;
            }
        };
        for (sources, make, at) in &self.derived {
            draw_streams(*at, &mut run_words);
            let ts = sources.iter().map(view).collect::<Result<Vec<_>>>()?;
            derived.push(make(&ts)?);
        }
        draw_streams(usize::MAX, &mut run_words);
        let run_meta = if run_words.is_empty() {
            None
        } else {
            Some(g.upload(OP, bytemuck::cast_slice(&run_words))?)
        };
        let changed: Vec<bool> = bufs
            .iter()
            .zip(&self.last)
            .map(|(b, l)| l.as_ref().is_none_or(|l| !Arc::ptr_eq(b, l)))
            .collect();
        let mut fresh_bufs = Vec::with_capacity(self.fresh.len());
        let mut fresh_storages = Vec::with_capacity(self.fresh.len());
        for f in &self.fresh {
            let b = match (f.derive, &f.init) {
                (Some(j), _) => g.upload(OP, &derived[j])?,
                (None, Some(bytes)) => g.upload(OP, bytes)?,
                (None, None) => g.alloc(OP, f.bytes)?,
            };
            fresh_storages.push(
                f.tensor
                    .map(|(nbytes, dtype)| Arc::new(storage_over(b.clone(), nbytes, dtype))),
            );
            fresh_bufs.push(b);
        }
        let buf_of = |s: Src| -> &Arc<GpuBuffer> {
            match s {
                Src::Input(k) => &bufs[k],
                Src::Held(i) => &self.held[i],
                Src::Own(i) => &self.own[i],
                Src::Fresh(i) => &fresh_bufs[i],
            }
        };
        for (d, bg) in self.disps.iter().zip(self.bind_groups.iter_mut()) {
            let stale = bg.is_none()
                || d.per_run
                || d.binds.iter().any(|(s, _)| match s {
                    Src::Input(k) => changed[*k],
                    Src::Fresh(_) => true,
                    _ => false,
                });
            if !stale {
                continue;
            }
            let binds: Vec<(&GpuBuffer, u64, u64)> = d
                .binds
                .iter()
                .map(|&(s, range)| {
                    let b = buf_of(s);
                    let (off, size) = range.unwrap_or_else(|| match s {
                        Src::Own(_) => (0, b.cap.min(g.max_binding())),
                        _ => (0, g.whole_binding(b)),
                    });
                    (&**b, off, size)
                })
                .collect();
            let meta = match (&run_meta, d.per_run) {
                (Some(m), true) => m,
                _ => &self.meta,
            };
            *bg = Some(g.bind_group(&d.pipe, (meta, d.meta.0, d.meta.1), &binds));
        }
        let items: Vec<_> = self
            .disps
            .iter()
            .zip(&self.bind_groups)
            .map(|(d, bg)| {
                (
                    d.op,
                    &*d.pipe,
                    bg.as_ref().expect("bind group made"),
                    d.groups,
                )
            })
            .collect();
        let mut uses: Vec<&GpuBuffer> = vec![&self.meta];
        uses.extend(run_meta.as_deref());
        uses.extend(bufs.iter().map(|b| &**b));
        uses.extend(self.held.iter().map(|b| &**b));
        uses.extend(self.own.iter().map(|b| &**b));
        uses.extend(fresh_bufs.iter().map(|b| &**b));
        let mut writes: Vec<&GpuBuffer> = self.written_inputs.iter().map(|&k| &*bufs[k]).collect();
        writes.extend(self.written_held.iter().map(|&i| &*self.held[i]));
        for step in &self.steps {
            match step {
                Step::Block(r) => g.queue_prepared(&items[r.clone()], &uses, &writes)?,
                Step::Live(l) => {
                    let ins = l
                        .inputs
                        .iter()
                        .map(|(s, layout, dtype)| {
                            let storage = match *s {
                                Src::Input(k) => inputs[k].storage().clone(),
                                Src::Fresh(i) if fresh_storages[i].is_some() => {
                                    fresh_storages[i].clone().expect("checked")
                                }
                                _ => {
                                    let b = buf_of(*s);
                                    Arc::new(Storage::from_gpu(
                                        b.len as usize / crate::backend::wgpu::elem_bytes(*dtype)
                                            * dtype.itemsize(),
                                        Device::Gpu(0),
                                        Box::new(b.clone()),
                                    ))
                                }
                            };
                            Tensor::from_parts(storage, layout.clone(), *dtype)
                        })
                        .collect::<Result<Vec<_>>>()?;
                    live(l.node, &ins)?;
                }
            }
        }
        drop(items);
        for &k in &self.written_inputs {
            inputs[k].storage().bump_version();
        }
        let tensor = |p: &Port| -> Result<Tensor> {
            let storage = match p.src {
                Src::Input(k) => inputs[k].storage().clone(),
                Src::Fresh(i) => fresh_storages[i].clone().ok_or_else(|| {
                    Error::runtime(OP, "a replayed result has no storage (internal error)")
                })?,
                _ => return Err(Error::runtime(OP, "a replayed result has no storage")),
            };
            Tensor::from_parts(storage, p.layout.clone(), p.dtype)
        };
        let outs = self
            .outputs
            .iter()
            .map(tensor)
            .collect::<Result<Vec<_>>>()?;
        let grads = self
            .grads
            .iter()
            .map(|p| p.as_ref().map(tensor).transpose())
            .collect::<Result<Vec<_>>>()?;
        self.last = bufs.into_iter().map(Some).collect();
        Ok(Some((outs, grads)))
    }

    /// Dispatches one replay queues.
    pub fn dispatches(&self) -> usize {
        self.disps.len()
    }
}
