//! Running a captured graph on real tensors.
//!
//! [`Plan::new`] specialises a graph to the sizes its symbols take for one
//! set of argument shapes and checks it: every node's shape rules run again
//! on shape-only tensors, and each result must match the type captured for
//! it. Only then does [`Plan::run`] execute — so an argument that does not
//! fit is refused before any kernel writes anything. A run binds the inputs,
//! calls each node's op in program order (the same op functions eager mode
//! uses), releases each value after its last use, and finally applies the
//! graph's `.grad` effects.

use crate::autograd::{self as ag, GradMode};
use crate::error::{Error, Result};
use crate::tensor::{Device, Layout, Tensor};

use super::call::Outs;
use super::fused::FInstr;
use super::sym;
use super::{Graph, InputKind, OpCall, ValueId};

pub use super::typecheck::{bind_symbols, retype};
use super::typecheck::{check_arg, check_output_count};
pub(crate) use super::typecheck::{infer_meta, infer_types};

/// A graph specialised to concrete sizes, ready to run.
pub struct Plan {
    pub graph: Graph,
    /// Sizes of the symbols this plan was specialised for.
    pub env: Vec<usize>,
    /// For each node, the values whose last use it is.
    free_after: Vec<Vec<ValueId>>,
    /// Constants some node writes into (copied afresh for every run).
    mutated_consts: Vec<bool>,
    /// For each node, (output, input position) pairs: the output may be
    /// written into the input's buffer, which dies at this node.
    reuse: Vec<Vec<(usize, usize)>>,
    /// For each node, a later node run concurrently with it (see [`branch_pairs`]).
    partner: Vec<Option<usize>>,
    /// For each node with a partner, the view nodes its partner needs (run first).
    pre: Vec<Vec<usize>>,
    /// Nodes run early: beside their partner, or as a view a partner needs.
    early: Vec<bool>,
    /// Record autograd while running (a forward-only graph whose outputs need grad).
    pub record_autograd: bool,
    /// The value table of the last finished run, emptied, for the next run to
    /// reuse (a table per run would be a large allocation for small steps).
    /// A run that finds it taken (one running on another thread) makes its own.
    slots: parking_lot::Mutex<Vec<Option<Tensor>>>,
    /// Buffer recycling (CPU plans): the byte sizes of the node-made buffers
    /// worth keeping, sorted, and for each value the index of its size
    /// there (`NO_SPARE` for values whose buffers are not kept).
    spare_bytes: Vec<usize>,
    spare_class: Vec<u32>,
    /// For each size class, how many values of the graph have it: the most
    /// spares of that size one run can take, so the most worth keeping.
    spare_cap: Vec<usize>,
    /// Buffers of values that died, by size class, offered to the nodes
    /// that make results of that size (in this run or the next): see
    /// [`Plan::run_inputs`].
    spares: parking_lot::Mutex<Vec<Vec<Tensor>>>,
    /// For a GPU plan whose runs may replay their device work (see
    /// [`super::replay`]): the last capture and its counters.
    #[cfg(feature = "gpu")]
    replayer: Option<parking_lot::Mutex<Replayer>>,
    /// Nodes a replay runs live (they read per-run scalar arguments).
    #[cfg(feature = "gpu")]
    live: Vec<bool>,
}

/// Note in the capture being made, if any, that node `i` starts on `ins`;
/// returns whether one is being made.
#[cfg(feature = "gpu")]
fn live_begin(i: usize, ins: &[Tensor]) -> bool {
    let Some(gpu) = crate::backend::wgpu::context::started() else {
        return false;
    };
    let bufs: Option<Vec<_>> = ins
        .iter()
        .map(|t| {
            crate::backend::wgpu::buffer("compile", t)
                .ok()
                .map(|b| (b, t.layout().clone(), t.dtype()))
        })
        .collect();
    gpu.with_capture(|rec| match &bufs {
        Some(b) => rec.live_begin(i, b),
        None => rec.refuse("an optimizer step reads a tensor that is not on the gpu device"),
    })
    .is_some()
}

/// Captures in a row that never replayed after which a plan stops capturing
/// (its replays keep failing their guards, e.g. a learning rate that changes every step).
#[cfg(feature = "gpu")]
const MAX_FRUITLESS: u32 = 4;

/// Why a plan stopped capturing when its captures replay fine but never get
/// the chance.
#[cfg(feature = "gpu")]
const GUARDS_FAIL: &str = "every run differs from the last capture: the argument layouts (strides, offsets, shared buffers) change from run to run";

/// A GPU plan's replay state.
#[cfg(feature = "gpu")]
#[derive(Default)]
pub struct Replayer {
    replay: Option<super::replay::Replay>,
    /// Captures since the last replay.
    fruitless: u32,
    /// Runs replayed, and runs captured.
    pub replays: u64,
    pub captures: u64,
    /// Why the last capture cannot be replayed, or why runs never replay.
    pub reason: Option<String>,
    /// Why runs of this plan never replay (they always run the executor).
    never: Option<&'static str>,
}

#[cfg(feature = "gpu")]
impl Replayer {
    /// Dispatches and plan-owned bytes of the current replay.
    pub fn current(&self) -> Option<(usize, u64)> {
        self.replay.as_ref().map(|r| (r.dispatches(), r.own_bytes))
    }
}

/// Per-node measurements of one profiled run, in node order.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// Wall time of each node in seconds.
    pub seconds: Vec<f64>,
    /// Bytes each node allocated, measured at the allocators (CPU blocks and
    /// GPU buffers, scratch space included; a result written over a dying
    /// input or into a recycled buffer allocates nothing).
    pub allocated: Vec<u64>,
    /// Bytes in use after each node (and the releases that follow it), less
    /// those in use when the run started.
    pub live: Vec<i64>,
}

/// What [`Plan::memory_plan`] reports (bytes).
#[derive(Clone, Debug)]
pub struct MemoryPlan {
    /// Most bytes of node-made buffers alive at once.
    pub peak_bytes: usize,
    /// Bytes of all node-made buffers (the need without any release or reuse).
    pub total_bytes: usize,
    /// Bytes of the graph's inputs (arguments, captured tensors, constants).
    pub input_bytes: usize,
    /// Bytes of the outputs' buffers.
    pub output_bytes: usize,
    /// Buffers allocated per run.
    pub allocations: usize,
    /// Fused-kernel outputs written into the buffer of an input that dies
    /// at their node (no allocation).
    pub in_place: usize,
    /// Of `allocations`, the buffers that come from those the plan keeps
    /// from its earlier runs (small intermediate results; see
    /// [`Plan::run_inputs`]) once it has run.
    pub recycled: usize,
    /// Bytes of node-made buffers alive after each node.
    pub live_after: Vec<usize>,
}

/// Rewrite every size in a call's arguments for symbol sizes `env`.
fn rebind_call(call: &OpCall, g: &Graph, env: &[usize]) -> OpCall {
    if g.symbols.is_empty() {
        return call.clone();
    }
    let mut c = call.clone();
    c.map_ints(&mut |v| sym::rebind(v, &g.symbols, env));
    c
}

impl Plan {
    /// Specialise `graph` to symbol sizes `env` and check it by shape inference.
    pub fn new(graph: &Graph, env: &[usize]) -> Result<Plan> {
        let mut g = graph.clone();
        if !g.symbols.is_empty() {
            for v in &mut g.values {
                for d in &mut v.shape {
                    *d = sym::rebind(*d as i64, &graph.symbols, env).max(0) as usize;
                }
            }
            for n in &mut g.nodes {
                n.call = rebind_call(&n.call, graph, env);
            }
            g.symbols.clear();
        }
        infer_types(&g)?;
        // Liveness: release each value after its last reader.
        let mut last: Vec<Option<usize>> = vec![None; g.values.len()];
        for (i, n) in g.nodes.iter().enumerate() {
            for &v in n.inputs.iter().chain(&n.outputs) {
                last[v] = Some(i);
            }
        }
        let mut keep = vec![false; g.values.len()];
        for &o in &g.outputs {
            keep[o] = true;
        }
        for s in &g.set_grads {
            keep[s.target] = true;
            if let Some(v) = s.value {
                keep[v] = true;
            }
        }
        let mut free_after = vec![vec![]; g.nodes.len()];
        for (v, l) in last.iter().enumerate() {
            if let Some(l) = l {
                if !keep[v] {
                    free_after[*l].push(v);
                }
            }
        }
        let mut mutated = vec![false; g.values.len()];
        for n in &g.nodes {
            for i in n.call.written_inputs(n.inputs.len()) {
                mutated[g.storage_root(n.inputs[i])] = true;
            }
        }
        let mutated_consts: Vec<bool> = g
            .inputs
            .iter()
            .map(|inp| matches!(inp.kind, InputKind::Const(_)) && mutated[inp.value])
            .collect();
        let record_autograd =
            !g.has_backward && g.outputs.iter().any(|&o| g.values[o].requires_grad);
        let mut reuse = if record_autograd || g.no_inplace {
            vec![vec![]; g.nodes.len()]
        } else {
            in_place_reuse(&g, &free_after)
        };
        // Concurrent branches pay off only for CPU kernels (a GPU queues its
        // work in order anyway).
        let (partner, pre) = if record_autograd || g.no_parallel || g.device != Device::Cpu {
            (vec![None; g.nodes.len()], vec![vec![]; g.nodes.len()])
        } else {
            branch_pairs(&g)
        };
        let mut early = vec![false; g.nodes.len()];
        for (i, p) in partner.iter().enumerate() {
            let Some(j) = *p else { continue };
            early[j] = true;
            for &v in &pre[i] {
                early[v] = true;
            }
            // `j` runs beside `i`, before the nodes between: it may write over
            // a dying input only if none of `i..j` reads that buffer.
            let inputs = &g.nodes[j].inputs;
            reuse[j].retain(|&(_, k)| {
                let root = inputs[k];
                g.nodes[i..j]
                    .iter()
                    .all(|n| n.inputs.iter().all(|&v| g.storage_root(v) != root))
            });
        }
        let (spare_bytes, spare_class, spare_cap) = spare_classes(&g, record_autograd);
        #[cfg(feature = "gpu")]
        let refusal = replay_refusal(&g, record_autograd, &mutated_consts);
        #[cfg(feature = "gpu")]
        let replayer = (g.device == Device::Gpu(0)).then(|| {
            parking_lot::Mutex::new(Replayer {
                never: refusal,
                reason: refusal.map(String::from),
                ..Default::default()
            })
        });
        #[cfg(feature = "gpu")]
        let live = match refusal {
            None => g.nodes.iter().map(|n| n.call.reads_scalars()).collect(),
            Some(_) => vec![],
        };
        Ok(Plan {
            #[cfg(feature = "gpu")]
            replayer,
            #[cfg(feature = "gpu")]
            live,
            graph: g,
            env: env.to_vec(),
            free_after,
            mutated_consts,
            reuse,
            partner,
            pre,
            early,
            record_autograd,
            slots: parking_lot::Mutex::new(Vec::new()),
            spares: parking_lot::Mutex::new(vec![Vec::new(); spare_bytes.len()]),
            spare_bytes,
            spare_class,
            spare_cap,
        })
    }

    /// Run on `args` (one tensor per `Arg` input position) with the scalar
    /// slot values `scalars` (dynamic optimizer arguments); returns the outputs.
    /// A GPU plan replays the device work of an earlier run when it can (see
    /// [`super::replay`]).
    pub fn run_with(&self, args: &[Tensor], scalars: &[f64]) -> Result<Vec<Tensor>> {
        #[cfg(feature = "gpu")]
        if let Some(r) = &self.replayer {
            return super::call::with_slots(scalars, || self.run_replaying(r, args));
        }
        super::call::with_slots(scalars, || self.run(args))
    }

    /// The replay state of a GPU plan (`None` for a CPU plan).
    #[cfg(feature = "gpu")]
    pub fn replayer(&self) -> Option<&parking_lot::Mutex<Replayer>> {
        self.replayer.as_ref()
    }

    #[cfg(feature = "gpu")]
    fn run_replaying(
        &self,
        r: &parking_lot::Mutex<Replayer>,
        args: &[Tensor],
    ) -> Result<Vec<Tensor>> {
        let gpu = crate::backend::wgpu::context::get()?;
        // A run of the same plan on another thread, or one being recorded
        // into a WebGPU bundle: this one runs the executor.
        let Some(mut st) = r
            .try_lock()
            .filter(|st| st.never.is_none() && !gpu.is_recording())
        else {
            return self.run(args);
        };
        let inputs = self.resolve_inputs(args)?;
        if let Some(rp) = st.replay.as_mut() {
            let _no = GradMode::set(false);
            let g = &self.graph;
            // Optimizer steps run live: they read this run's scalar arguments.
            let mut live = |i: usize, ins: &[Tensor]| -> Result<()> {
                let n = &g.nodes[i];
                let outs =
                    exec_node(n, &n.call, ins, false).map_err(|e| e.with_note(&node_note(g, i)))?;
                check_output_count(g, i, outs.len())
            };
            if let Some((outs, grads)) = rp.run(&inputs, &mut live)? {
                self.apply_grads(&inputs, grads);
                st.replays += 1;
                st.fruitless = 0;
                return Ok(outs);
            }
        }
        st.replay = None;
        if st.fruitless >= MAX_FRUITLESS {
            if st.reason.is_none() {
                st.reason = Some(GUARDS_FAIL.into());
            }
            return self.run_inputs(inputs, None);
        }
        st.captures += 1;
        st.fruitless += 1;
        let (res, rec) = gpu.capture(|| self.run_inputs(inputs.clone(), None));
        let outs = res?;
        let Some(rec) = rec else {
            return Ok(outs);
        };
        let grads: Vec<Option<Tensor>> = self
            .graph
            .set_grads
            .iter()
            .map(|s| {
                self.input_position(s.target)
                    .and_then(|k| inputs[k].meta().and_then(|m| m.grad()))
            })
            .collect();
        match super::replay::Replay::build(rec, &inputs, &outs, &grads) {
            Ok(rp) => {
                st.replay = Some(rp);
                st.reason = None;
            }
            Err(why) => st.reason = Some(why),
        }
        Ok(outs)
    }

    /// The position among the graph's inputs of input value `v`.
    fn input_position(&self, v: ValueId) -> Option<usize> {
        self.graph.inputs.iter().position(|i| i.value == v)
    }

    /// Apply the graph's `.grad` effects with `grads` (one per effect) on `inputs`.
    #[cfg(feature = "gpu")]
    fn apply_grads(&self, inputs: &[Tensor], grads: Vec<Option<Tensor>>) {
        for (s, v) in self.graph.set_grads.iter().zip(grads) {
            let Some(k) = self.input_position(s.target) else {
                continue;
            };
            let m = inputs[k].init_meta(|| ag::AutogradMeta::leaf(true));
            m.set_grad(v.map(|t| t.detach()));
        }
    }

    /// Run on `args` (one tensor per `Arg` input position); returns the outputs.
    pub fn run(&self, args: &[Tensor]) -> Result<Vec<Tensor>> {
        self.run_timed(args, None)
    }

    /// [`run_with`](Self::run_with), also measuring every node: its wall time,
    /// the bytes it allocated and the bytes the run holds after it (see
    /// [`Profile`]). Independent branches that a plain run executes side by
    /// side run one after the other here, so each node's figures are its own.
    pub fn profile(&self, args: &[Tensor], scalars: &[f64]) -> Result<(Vec<Tensor>, Profile)> {
        let mut prof = Profile::default();
        let outs = super::call::with_slots(scalars, || self.run_timed(args, Some(&mut prof)))?;
        Ok((outs, prof))
    }

    /// Pairs of nodes that run concurrently (independent branches), in order.
    pub fn parallel_pairs(&self) -> Vec<(usize, usize)> {
        self.partner
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.map(|j| (i, j)))
            .collect()
    }

    /// The memory this plan uses, by the liveness of its buffers: a node's
    /// new buffer (anything but a view or an in-place write) is allocated
    /// when the node runs and released after the last node that reads it or
    /// any view of it; outputs and gradients stay alive to the end. A fused
    /// kernel's output written into the buffer of an input that dies at that
    /// node allocates nothing (see [`Plan::in_place_outputs`]).
    pub fn memory_plan(&self) -> MemoryPlan {
        let g = &self.graph;
        let bytes = |v: ValueId| -> usize {
            let info = &g.values[v];
            info.shape.iter().product::<usize>() * info.dtype.itemsize()
        };
        // The root of each value's storage, and when that storage is last needed.
        let roots: Vec<ValueId> = (0..g.values.len()).map(|v| g.storage_root(v)).collect();
        let mut release: Vec<Option<usize>> = vec![None; g.values.len()];
        let end = g.nodes.len();
        for (i, frees) in self.free_after.iter().enumerate() {
            for &v in frees {
                let r = roots[v];
                release[r] = Some(release[r].map_or(i, |x: usize| x.max(i)));
            }
        }
        let mut pinned = vec![false; g.values.len()];
        for &o in &g.outputs {
            pinned[roots[o]] = true;
        }
        for s in &g.set_grads {
            if let Some(v) = s.value {
                pinned[roots[v]] = true;
            }
        }
        let mut input_bytes = 0;
        for inp in &g.inputs {
            input_bytes += bytes(inp.value);
        }
        let mut live = 0usize;
        let mut peak = 0usize;
        let mut total = 0usize;
        let mut allocations = 0usize;
        let mut reused = 0usize;
        let mut recycled = 0usize;
        let mut live_after = Vec::with_capacity(end);
        // Bytes each root's buffer holds (a buffer handed on to an output
        // that reuses it moves to that output).
        let mut held = vec![0usize; g.values.len()];
        let mut freeing: Vec<Vec<ValueId>> = vec![vec![]; end];
        for i in 0..end {
            // Nodes run now, in the executor's order: none for a node run early
            // beside its partner, both for a pair.
            let now = match (self.early[i], self.partner[i]) {
                (true, _) => [None, None],
                (false, p) => [Some(i), p],
            };
            for x in now.into_iter().flatten() {
                let n = &g.nodes[x];
                // In-place ops return the buffer they wrote (the SGD step returns
                // the momentum buffers it creates on the first step).
                let in_place = n.call.effect() == super::Effect::Mutates
                    && !matches!(n.call, OpCall::SgdStep { .. });
                for (j, &o) in n.outputs.iter().enumerate() {
                    if roots[o] != o || in_place {
                        continue; // a view, or a write into an existing buffer
                    }
                    if let Some(&(_, k)) = self.reuse[x].iter().find(|&&(oj, _)| oj == j) {
                        // Written into a dying input's buffer: no new allocation.
                        let src = n.inputs[k];
                        held[o] = std::mem::take(&mut held[src]);
                        reused += 1;
                    } else {
                        let b = bytes(o);
                        held[o] = b;
                        live += b;
                        total += b;
                        allocations += 1;
                        if self.spare_class[o] != NO_SPARE && !pinned[o] {
                            recycled += 1;
                        }
                    }
                    if !pinned[o] {
                        // Unread results are released as soon as their node is done.
                        freeing[release[o].unwrap_or(x)].push(o);
                    }
                }
            }
            peak = peak.max(live);
            for r in freeing[i].drain(..) {
                live -= std::mem::take(&mut held[r]);
            }
            live_after.push(live);
        }
        let output_bytes = g.outputs.iter().map(|&o| bytes(roots[o])).sum();
        MemoryPlan {
            peak_bytes: peak,
            total_bytes: total,
            input_bytes,
            output_bytes,
            allocations,
            in_place: reused,
            recycled,
            live_after,
        }
    }

    /// Offer node `i` a kept buffer for each result it makes of a recycled
    /// size (see [`crate::tensor::offer`]); returns whether any was offered.
    fn offer(&self, i: usize, spares: &mut [Vec<Tensor>]) -> bool {
        let mut any = false;
        for &o in &self.graph.nodes[i].outputs {
            let c = self.spare_class[o];
            if c == NO_SPARE {
                continue;
            }
            if let Some(t) = spares[c as usize].pop() {
                crate::tensor::offer(t);
                any = true;
            }
        }
        any
    }

    /// Keep `t` (recyclable) among the spares of its size, if that size is
    /// recycled and fewer are kept than one run can take (more would only
    /// pile up: a `.grad` a run replaces joins the spares every run, whether
    /// or not a node of its size takes one; those go back to the allocator).
    fn keep_spare(&self, spares: &mut [Vec<Tensor>], t: Tensor) {
        if let Ok(c) = self.spare_bytes.binary_search(&t.storage().nbytes()) {
            if spares[c].len() < self.spare_cap[c] {
                spares[c].push(t);
            }
        }
    }

    /// Node `i`'s inputs into `ins`; inputs it writes over in place leave `vals`.
    fn gather(&self, i: usize, vals: &mut [Option<Tensor>], ins: &mut Vec<Tensor>) {
        let n = &self.graph.nodes[i];
        ins.clear();
        ins.extend(
            n.inputs
                .iter()
                .map(|&v| vals[v].clone().expect("value defined before use")),
        );
        for &(_, k) in &self.reuse[i] {
            // The input dies here: its only holder becomes the input list.
            vals[n.inputs[k]] = None;
        }
    }

    /// Node `i`'s inputs as bitwise copies of the tensors `vals` holds, for
    /// a node that takes none of them over (no in-place reuse): no reference
    /// count changes hands. The copies must not outlive this node's run, and
    /// `vals` must not change while they live (the caller clears `ins` right
    /// after the node has run and before storing its results).
    fn gather_borrowed(
        &self,
        i: usize,
        vals: &[Option<Tensor>],
        ins: &mut Vec<std::mem::ManuallyDrop<Tensor>>,
    ) {
        ins.clear();
        ins.extend(self.graph.nodes[i].inputs.iter().map(|&v| {
            let t = vals[v].as_ref().expect("value defined before use");
            // SAFETY: a copy that is never dropped (`ManuallyDrop`) of a
            // tensor that `vals` keeps alive and unchanged while it is used.
            std::mem::ManuallyDrop::new(unsafe { std::ptr::read(t) })
        }));
    }

    /// Run node `i` on `ins` (with its wall time in seconds when `timing`).
    fn exec_at(&self, i: usize, ins: &[Tensor], timing: bool) -> (Result<Outs>, f64) {
        let g = &self.graph;
        let n = &g.nodes[i];
        let reuse = &self.reuse[i];
        let t0 = timing.then(std::time::Instant::now);
        // A fused node runs no op function: the profiler sees it here.
        let _profiled = match &n.call {
            OpCall::Fused { .. } => {
                crate::tensor::profile::scope("fused", crate::tensor::profile::Kind::Graph)
            }
            _ => None,
        };
        #[cfg(feature = "gpu")]
        let live = self.live.get(i).copied().unwrap_or(false) && live_begin(i, ins);
        let outs = match &n.call {
            OpCall::Fused { kernel } if !reuse.is_empty() && n.aux == 0 => {
                exec_fused_reusing(kernel, ins, reuse)
            }
            call => exec_node(n, call, ins, false),
        }
        .map_err(|e| e.with_note(&node_note(g, i)));
        #[cfg(feature = "gpu")]
        if live {
            if let (Ok(o), Some(gpu)) = (&outs, crate::backend::wgpu::context::started()) {
                gpu.with_capture(|rec| rec.live_end(o.len()));
            }
        }
        (outs, t0.map_or(0.0, |t| t.elapsed().as_secs_f64()))
    }

    /// Bind node `i`'s results.
    fn store(&self, i: usize, outs: Outs, vals: &mut [Option<Tensor>]) -> Result<()> {
        let n = &self.graph.nodes[i];
        check_output_count(&self.graph, i, outs.len())?;
        for (&v, t) in n.outputs.iter().zip(outs) {
            vals[v] = Some(t);
        }
        Ok(())
    }

    fn run_timed(&self, args: &[Tensor], times: Option<&mut Profile>) -> Result<Vec<Tensor>> {
        let _profiled =
            crate::tensor::profile::scope("graph_run", crate::tensor::profile::Kind::Graph);
        let inputs = self.resolve_inputs(args)?;
        self.run_inputs(inputs, times)
    }

    /// The tensors the graph's inputs take for a run on `args`, in order.
    fn resolve_inputs(&self, args: &[Tensor]) -> Result<Vec<Tensor>> {
        let g = &self.graph;
        let mut out: Vec<Tensor> = Vec::with_capacity(g.inputs.len());
        for (k, inp) in g.inputs.iter().enumerate() {
            let t = match &inp.kind {
                InputKind::Arg(i) => {
                    let t = args.get(*i).ok_or_else(|| {
                        Error::value(
                            "graph",
                            format!(
                                "the graph takes at least {} tensor arguments, got {}",
                                i + 1,
                                args.len()
                            ),
                        )
                    })?;
                    check_arg(g, inp.value, inp.name.as_deref(), t)?;
                    t.clone()
                }
                InputKind::Ref(t) => t.clone(),
                InputKind::Const(t) => {
                    if self.mutated_consts[k] {
                        let _no = GradMode::set(false);
                        crate::ops::elementwise::clone(t)?
                    } else {
                        t.clone()
                    }
                }
                InputKind::Grad(b) => {
                    let owner = self
                        .input_position(*b)
                        .filter(|&j| j < k)
                        .map(|j| &out[j])
                        .expect("grad input after its tensor");
                    owner.meta().and_then(|m| m.grad()).ok_or_else(|| {
                        Error::runtime(
                            "graph",
                            format!(
                                "the captured graph reads the .grad of a tensor of shape {:?}, which has no gradient now",
                                owner.shape()
                            ),
                        )
                    })?
                }
            };
            out.push(t);
        }
        Ok(out)
    }

    /// Run on the graph's inputs `inputs` (from [`Plan::resolve_inputs`]).
    fn run_inputs(&self, inputs: Vec<Tensor>, times: Option<&mut Profile>) -> Result<Vec<Tensor>> {
        let g = &self.graph;
        let mut vals: Vec<Option<Tensor>> = self
            .slots
            .try_lock()
            .map(|mut s| std::mem::take(&mut *s))
            .unwrap_or_default();
        if vals.len() != g.values.len() {
            // All `None` otherwise: the last run emptied every slot it kept.
            vals.clear();
            vals.resize(g.values.len(), None);
        }
        for (inp, t) in g.inputs.iter().zip(inputs) {
            vals[inp.value] = Some(t);
        }
        let recording = self.record_autograd && ag::is_grad_enabled();
        let _mode = GradMode::set(recording);
        // Buffers of values that died in earlier runs, offered to the nodes
        // that make results of their size. A run that finds them taken (one
        // running on another thread) allocates as usual.
        // (A run that is still going left an empty list in their place.)
        // They go back when the run ends, also when it fails.
        let mut kept = KeptBuffers {
            home: &self.spares,
            spares: if self.spare_bytes.is_empty() {
                None
            } else {
                self.spares
                    .try_lock()
                    .filter(|s| s.len() == self.spare_bytes.len())
                    .map(|mut s| std::mem::take(&mut *s))
            },
        };
        let spares = &mut kept.spares;
        // Dead values some view still shares a buffer with, and replaced
        // gradients: looked at again at the end of the run, when most of
        // those views are gone.
        let mut later: Vec<Tensor> = Vec::new();
        // Interrupts are taken between nodes until the first node that writes
        // to existing tensors (an optimizer step): from there the run finishes,
        // so an interrupted step never leaves parameters half-updated.
        let mut wrote = false;
        // One input list reused by every node (no allocation per node).
        let mut ins: Vec<Tensor> = Vec::with_capacity(8);
        let mut borrowed: Vec<std::mem::ManuallyDrop<Tensor>> = Vec::with_capacity(8);
        let timing = times.is_some();
        let nt = if timing { g.nodes.len() } else { 0 };
        let mut node_times = vec![0.0f64; nt];
        let mut node_alloc = vec![0u64; nt];
        let mut node_live = vec![0i64; nt];
        // Bytes in use when the run starts: `live` is measured from here.
        let base = if timing {
            crate::backend::memory_counters().1 as i64
        } else {
            0
        };
        for (i, n) in g.nodes.iter().enumerate() {
            if !wrote {
                crate::par::poll("graph")?;
                wrote = n.call.effect() == super::Effect::Mutates;
            }
            if !self.early[i] {
                match self.partner[i] {
                    None => {
                        // Inputs are lent, not cloned (a clone and a drop are
                        // two atomic reference-count updates per input), unless
                        // the node takes one over in place or the run records
                        // autograd, which may give an input its autograd state
                        // (a lent copy would keep it apart).
                        let offered = spares.as_mut().is_some_and(|sp| self.offer(i, sp));
                        let before = if timing {
                            crate::backend::memory_counters().0
                        } else {
                            0
                        };
                        let (outs, t) = if !recording && self.reuse[i].is_empty() {
                            self.gather_borrowed(i, &vals, &mut borrowed);
                            // SAFETY: `ManuallyDrop<Tensor>` has `Tensor`'s layout.
                            let lent: &[Tensor] = unsafe {
                                std::slice::from_raw_parts(borrowed.as_ptr().cast(), borrowed.len())
                            };
                            let r = self.exec_at(i, lent, timing);
                            borrowed.clear();
                            r
                        } else {
                            self.gather(i, &mut vals, &mut ins);
                            let r = self.exec_at(i, &ins, timing);
                            ins.clear(); // inputs released as soon as the node is done
                            r
                        };
                        if offered {
                            if let Some(sp) = spares.as_mut() {
                                crate::tensor::take_back_offers(|t| self.keep_spare(sp, t));
                            }
                        }
                        let outs = outs?;
                        if timing {
                            node_times[i] = t;
                            node_alloc[i] = crate::backend::memory_counters().0 - before;
                        }
                        self.store(i, outs, &mut vals)?;
                    }
                    Some(j) => {
                        self.gather(i, &mut vals, &mut ins);
                        // Views the partner reads, made now (metadata only).
                        for &v in &self.pre[i] {
                            let mut ins_v = Vec::with_capacity(1);
                            self.gather(v, &mut vals, &mut ins_v);
                            let outs = self.exec_at(v, &ins_v, false).0?;
                            self.store(v, outs, &mut vals)?;
                        }
                        let mut ins_j = Vec::with_capacity(g.nodes[j].inputs.len());
                        self.gather(j, &mut vals, &mut ins_j);
                        let ((oi, ti), (oj, tj)) = if timing {
                            // Measured one at a time, so each node's bytes are its own.
                            let a0 = crate::backend::memory_counters().0;
                            let ri = self.exec_at(i, &ins, timing);
                            let a1 = crate::backend::memory_counters().0;
                            let rj = self.exec_at(j, &ins_j, timing);
                            node_alloc[i] = a1 - a0;
                            node_alloc[j] = crate::backend::memory_counters().0 - a1;
                            (ri, rj)
                        } else if crate::par::threads() > 1 {
                            {
                                crate::par::join(
                                    || {
                                        let _no = GradMode::set(false);
                                        self.exec_at(i, &ins, timing)
                                    },
                                    || {
                                        let _no = GradMode::set(false);
                                        self.exec_at(j, &ins_j, timing)
                                    },
                                )
                            }
                        } else {
                            (
                                self.exec_at(i, &ins, timing),
                                self.exec_at(j, &ins_j, timing),
                            )
                        };
                        ins.clear();
                        drop(ins_j);
                        // The earlier node's error first, as a sequential run reports it.
                        let (oi, oj) = (oi?, oj?);
                        if timing {
                            node_times[i] = ti;
                            node_times[j] = tj;
                        }
                        self.store(i, oi, &mut vals)?;
                        self.store(j, oj, &mut vals)?;
                    }
                }
            }
            for &v in &self.free_after[i] {
                let dead = vals[v].take();
                if let (Some(mut t), Some(sp)) = (dead, spares.as_mut()) {
                    if self.spare_class[v] != NO_SPARE {
                        if t.recyclable() {
                            self.keep_spare(sp, t);
                        } else {
                            later.push(t);
                        }
                    }
                }
            }
            if timing {
                node_live[i] = crate::backend::memory_counters().1 as i64 - base;
            }
        }
        if let Some(p) = times {
            p.seconds = node_times;
            p.allocated = node_alloc;
            p.live = node_live;
        }
        for s in &g.set_grads {
            let target = vals[s.target].as_ref().expect("grad target bound");
            let m = target.init_meta(|| ag::AutogradMeta::leaf(true));
            let old = m.replace_grad(
                s.value
                    .map(|v| vals[v].as_ref().expect("grad value computed").detach()),
            );
            // The gradient this one replaces makes the next run's, when
            // nothing else holds it.
            if spares.is_some() {
                later.extend(old);
            }
        }
        let outs = g
            .outputs
            .iter()
            .map(|&o| vals[o].clone().expect("output computed"))
            .collect();
        if let Some(sp) = spares.as_mut() {
            for mut t in later {
                if t.recyclable() {
                    self.keep_spare(sp, t);
                }
            }
        }
        drop(kept);
        if let Some(mut s) = self.slots.try_lock() {
            // Nothing stays alive through the kept table: empty the slots
            // still holding a tensor (most were freed during the run).
            for v in vals.iter_mut().filter(|v| v.is_some()) {
                *v = None;
            }
            *s = vals;
        }
        Ok(outs)
    }
}

/// The buffers a run took from its plan (see [`Plan::run_inputs`]), put
/// back when the run ends however it ends.
struct KeptBuffers<'a> {
    home: &'a parking_lot::Mutex<Vec<Vec<Tensor>>>,
    spares: Option<Vec<Vec<Tensor>>>,
}

impl Drop for KeptBuffers<'_> {
    fn drop(&mut self) {
        if let Some(sp) = self.spares.take() {
            *self.home.lock() = sp;
        }
    }
}

/// Marks a value whose buffer a plan does not keep for reuse.
const NO_SPARE: u32 = u32::MAX;

/// The largest buffer a plan keeps between runs for reuse. Allocating a
/// small result (and freeing it) costs as much as a small op's kernel; for
/// large ones the caching allocator's cost is negligible beside the work,
/// and keeping them would hold memory between runs.
const SPARE_MAX_BYTES: usize = 1 << 18;

/// The size classes of the buffers a CPU plan recycles and each value's
/// class (see [`Plan::run_inputs`]): results of nodes that make a new
/// buffer (not views, not in-place writes), of at most [`SPARE_MAX_BYTES`],
/// and how many values each class has.
fn spare_classes(g: &Graph, record_autograd: bool) -> (Vec<usize>, Vec<u32>, Vec<usize>) {
    let mut class = vec![NO_SPARE; g.values.len()];
    if record_autograd || g.device != Device::Cpu {
        return (vec![], class, vec![]);
    }
    let bytes = |v: ValueId| -> usize {
        let info = &g.values[v];
        info.shape.iter().product::<usize>() * info.dtype.itemsize()
    };
    let mut sizes: Vec<usize> = Vec::new();
    let mut keep = vec![false; g.values.len()];
    for n in &g.nodes {
        if n.call.effect() == super::Effect::Mutates {
            continue;
        }
        for &o in &n.outputs {
            let b = bytes(o);
            if g.storage_root(o) == o && b > 0 && b <= SPARE_MAX_BYTES {
                keep[o] = true;
                sizes.push(b);
            }
        }
    }
    sizes.sort_unstable();
    sizes.dedup();
    let mut count = vec![0; sizes.len()];
    for (v, k) in keep.iter().enumerate() {
        if *k {
            let c = sizes.binary_search(&bytes(v)).expect("size listed");
            class[v] = c as u32;
            count[c] += 1;
        }
    }
    (sizes, class, count)
}

/// Work below which a node is not worth handing to another thread (about
/// tens of microseconds of one core: a thread hand-off costs microseconds).
const BRANCH_MIN_WORK: f64 = (1u64 << 20) as f64;
/// Work from which a node keeps the whole pool to itself: its kernel splits
/// it over every thread already, and two such nodes run side by side only
/// contend for the threads and the caches (two large matrix products
/// nested that way ran slower than one after the other).
const BRANCH_MAX_WORK: f64 = (1u64 << 26) as f64;
/// How far ahead a node's partner is looked for.
const BRANCH_WINDOW: usize = 8;

/// A rough cost of node `n` (floating-point operations; memory-bound ops
/// count a few per element moved).
fn node_work(g: &Graph, n: &super::Node) -> f64 {
    let numel = |v: ValueId| g.values[v].shape.iter().product::<usize>() as f64;
    let out: f64 = n.outputs.iter().map(|&v| numel(v)).sum();
    let inp: f64 = n.inputs.iter().map(|&v| numel(v)).sum();
    let last = |k: usize| {
        n.inputs
            .get(k)
            .and_then(|&v| g.values[v].shape.last().copied())
            .unwrap_or(1) as f64
    };
    let tail = |k: usize| {
        n.inputs.get(k).map_or(1.0, |&v| {
            g.values[v].shape.iter().skip(1).product::<usize>() as f64
        })
    };
    match &n.call {
        OpCall::Matmul | OpCall::Bmm | OpCall::Linear { .. } | OpCall::LinearFused { .. } => {
            2.0 * out * last(0)
        }
        OpCall::Conv2d { .. } | OpCall::Conv1d { .. } | OpCall::Conv2dP { .. } => {
            2.0 * out * tail(1)
        }
        OpCall::Conv2dFused { pool2, .. } => 2.0 * out * tail(1) * if *pool2 { 4.0 } else { 1.0 },
        OpCall::Conv2dInputGrad { .. } | OpCall::Conv2dWeightGrad { .. } => 2.0 * (out + inp) * 9.0,
        _ => 4.0 * (out + inp),
    }
}

/// Pairs of nodes that run at the same time: for node `i`, a later node `j`
/// (within [`BRANCH_WINDOW`]) that needs nothing made at or after `i` except
/// through views of earlier values (those view nodes run first, on the
/// calling thread), with no write, random draw or control flow from `i` to
/// `j`, both pure and each worth at least [`BRANCH_MIN_WORK`] and less than
/// [`BRANCH_MAX_WORK`]; of the
/// candidates, the one whose work is closest to balancing `i`'s. Running `j`
/// early changes no result: it reads only values already computed, and
/// nothing between writes them. Returns each node's partner and, for each
/// node, the view nodes to run before its pair.
fn branch_pairs(g: &Graph) -> (Vec<Option<usize>>, Vec<Vec<usize>>) {
    use super::{Effect, Producer};
    let nn = g.nodes.len();
    let mut partner = vec![None; nn];
    let mut pre: Vec<Vec<usize>> = vec![vec![]; nn];
    let work: Vec<f64> = g.nodes.iter().map(|n| node_work(g, n)).collect();
    let eligible: Vec<bool> = g
        .nodes
        .iter()
        .zip(&work)
        .map(|(n, &w)| {
            n.call.effect() == Effect::Pure
                && n.aux == 0
                && !matches!(n.call, OpCall::Vjp { .. })
                && (BRANCH_MIN_WORK..BRANCH_MAX_WORK).contains(&w)
        })
        .collect();
    let mut taken = vec![false; nn];
    // Whether value `v` is computed before node `i` runs, possibly by view
    // nodes in `i..` that can run first (collected into `views`).
    fn ready(g: &Graph, v: ValueId, i: usize, taken: &[bool], views: &mut Vec<usize>) -> bool {
        match g.values[v].producer {
            Producer::Node { node, .. } if node >= i => {
                let p = &g.nodes[node];
                if taken[node] || p.call.effect() != super::Effect::View || p.aux != 0 {
                    return false;
                }
                if !p.inputs.iter().all(|&w| ready(g, w, i, taken, views)) {
                    return false;
                }
                if !views.contains(&node) {
                    views.push(node);
                }
                true
            }
            Producer::Removed => false,
            _ => true,
        }
    }
    for i in 0..nn {
        if taken[i] || !eligible[i] {
            continue;
        }
        let mut best: Option<(f64, usize, Vec<usize>)> = None;
        for j in i + 1..nn.min(i + 1 + BRANCH_WINDOW) {
            let between = &g.nodes[j - 1];
            if j - 1 > i && matches!(between.call.effect(), Effect::Mutates | Effect::Random) {
                break;
            }
            if taken[j] || !eligible[j] {
                continue;
            }
            let mut views = vec![];
            let ok = g.nodes[j]
                .inputs
                .iter()
                .all(|&v| ready(g, v, i, &taken, &mut views));
            let balance = work[i].min(work[j]);
            if ok && best.as_ref().is_none_or(|b| balance > b.0) {
                views.sort_unstable();
                best = Some((balance, j, views));
            }
        }
        if let Some((_, j, views)) = best {
            partner[i] = Some(j);
            taken[i] = true;
            taken[j] = true;
            for &v in &views {
                taken[v] = true;
            }
            pre[i] = views;
        }
    }
    (partner, pre)
}

/// Outputs of fused kernels that can be written into an input's buffer: the
/// input is made by an earlier node (never a graph input: arguments,
/// parameters and constants belong to the caller), owns its buffer, has the
/// output's shape and dtype, and neither it nor any view of it is read after
/// this node or kept as a result. The kernel reads each element of such an
/// input only to compute the same element of the output, so the write is
/// safe; the run still checks that nothing else holds the buffer.
fn in_place_reuse(g: &Graph, free_after: &[Vec<ValueId>]) -> Vec<Vec<(usize, usize)>> {
    use super::Producer;
    let nv = g.values.len();
    let roots: Vec<ValueId> = (0..nv).map(|v| g.storage_root(v)).collect();
    // When each buffer is last needed (over all its views); kept ones never die.
    let mut release: Vec<Option<usize>> = vec![None; nv];
    for (i, frees) in free_after.iter().enumerate() {
        for &v in frees {
            let r = roots[v];
            release[r] = Some(release[r].map_or(i, |x: usize| x.max(i)));
        }
    }
    let mut kept = vec![false; nv];
    for &o in &g.outputs {
        kept[roots[o]] = true;
    }
    for s in &g.set_grads {
        kept[roots[s.target]] = true;
        if let Some(v) = s.value {
            kept[roots[v]] = true;
        }
    }
    // Buffers some node writes into (their values are not plain results).
    let mut written = vec![false; nv];
    for n in &g.nodes {
        for i in n.call.written_inputs(n.inputs.len()) {
            written[roots[n.inputs[i]]] = true;
        }
    }
    let mut out = vec![vec![]; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        let OpCall::Fused { kernel } = &n.call else {
            continue;
        };
        if kernel
            .outputs
            .iter()
            .any(|&(r, _)| matches!(kernel.instrs[r], FInstr::Load(_) | FInstr::Const(_)))
        {
            continue; // an output that is an input's value read straight through
        }
        let mut taken = vec![false; n.inputs.len()];
        for (j, &(_, d)) in kernel.outputs.iter().enumerate() {
            let found = n.inputs.iter().enumerate().position(|(k, &v)| {
                let info = &g.values[v];
                !taken[k]
                    && roots[v] == v
                    && matches!(info.producer, Producer::Node { node, .. }
                        if g.nodes[node].call.effect() != super::Effect::Mutates)
                    && release[v] == Some(i)
                    && !kept[v]
                    && !written[v]
                    && info.dtype == d
                    && info.shape == kernel.shape
                    && n.inputs.iter().filter(|&&w| w == v).count() == 1
            });
            if let Some(k) = found {
                taken[k] = true;
                out[i].push((j, k));
            }
        }
    }
    out
}

/// Run fused kernel `kernel` on `ins`, writing output `j` into the buffer of
/// input `k` for each `(j, k)` in `reuse` whose input is contiguous, in
/// memory this library allocated (CPU or GPU) and held by nobody else
/// (otherwise the output gets a new buffer).
fn exec_fused_reusing(
    kernel: &crate::graph::fused::FusedKernel,
    ins: &[Tensor],
    reuse: &[(usize, usize)],
) -> Result<Outs> {
    let device = ins.first().map_or(Device::Cpu, |t| t.device());
    let mut outs = Outs::with_capacity(kernel.outputs.len());
    for (j, &(_, d)) in kernel.outputs.iter().enumerate() {
        let src = reuse
            .iter()
            .find(|&&(oj, _)| oj == j)
            .map(|&(_, k)| &ins[k])
            .filter(|t| {
                device.has_data()
                    && std::sync::Arc::strong_count(t.storage()) == 1
                    && t.dtype() == d
                    && t.shape() == kernel.shape.as_slice()
                    && t.offset() == 0
                    && t.is_contiguous()
                    && !t.storage().is_readonly()
                    && !t.storage().is_foreign()
            });
        outs.push(match src {
            Some(t) => {
                Tensor::from_parts(t.storage().clone(), Layout::contiguous(&kernel.shape), d)?
            }
            None => Tensor::empty(&kernel.shape, d, device)?,
        });
    }
    for r in &kernel.reductions {
        outs.push(Tensor::empty(
            &r.shape(&kernel.shape),
            kernel.compute,
            device,
        )?);
    }
    if !crate::backend::backend(device).fused(kernel, ins, &outs)? {
        crate::graph::fused::run_unfused(kernel, ins, &outs)?;
    }
    Ok(outs)
}

/// Run a node's call (`dry`: on shape-only tensors), with its aux outputs.
pub(super) fn exec_node(n: &super::Node, call: &OpCall, ins: &[Tensor], dry: bool) -> Result<Outs> {
    let run = || {
        if dry {
            super::call::dry_run(|| call.exec(ins))
        } else {
            call.exec(ins)
        }
    };
    if n.aux == 0 {
        return run();
    }
    let (outs, aux) = super::trace::with_aux(true, run);
    let mut outs = outs?;
    outs.extend(aux);
    Ok(outs)
}

pub(super) fn node_note(g: &Graph, i: usize) -> String {
    let n = &g.nodes[i];
    match &n.loc {
        Some(l) => format!(" (in captured op {} at {l})", n.call.name()),
        None => format!(" (in captured op {}, node {i})", n.call.name()),
    }
}

/// Why runs of the plan of `g` never replay their device work (`None`: they may).
#[cfg(feature = "gpu")]
fn replay_refusal(
    g: &Graph,
    record_autograd: bool,
    mutated_consts: &[bool],
) -> Option<&'static str> {
    if std::env::var("FG_GPU_REPLAY").is_ok_and(|v| matches!(v.trim(), "0" | "off" | "false")) {
        return Some("FG_GPU_REPLAY=0");
    }
    if record_autograd {
        return Some("its outputs record autograd");
    }
    if mutated_consts.iter().any(|&m| m) {
        return Some("it writes into a constant (copied afresh every run)");
    }
    // Random draws replay: each replay reserves new streams and uploads new
    // draws (see `backend::wgpu::drawn`); uninitialised memory (`empty`) is
    // a buffer like any other. Seeding runs on the host every run, and
    // branches on data decide on the host which work runs.
    if g.nodes
        .iter()
        .any(|n| matches!(n.call, OpCall::ManualSeed { .. }))
    {
        return Some("it seeds a random generator (on the host, every run)");
    }
    if g.nodes
        .iter()
        .any(|n| matches!(n.call, OpCall::Cond { .. } | OpCall::While { .. }))
    {
        return Some("it branches on data");
    }
    if g.set_grads
        .iter()
        .any(|s| !g.inputs.iter().any(|i| i.value == s.target))
    {
        return Some("it sets the gradient of a tensor that is not an input");
    }
    None
}
