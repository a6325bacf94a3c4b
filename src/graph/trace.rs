//! Capturing a graph: every op called while a trace is active on this thread
//! is run on shape-only tensors and recorded.
//!
//! Each public op function starts with [`intercept`]: outside a trace it is
//! one thread-local read. Inside one, the op's arguments are mapped to graph
//! values (tensors the trace produced are found by their storage and
//! layout; any other tensor becomes an input, read by reference), the op
//! runs on their `Meta` twins — so its own shape, dtype and argument rules
//! decide the result — and a [`Node`] is appended. Ops an op calls
//! internally are not recorded (the trace is inactive while one runs), while
//! the ops a backward pass runs at the top level (the VJP rules) are: a
//! training step's gradient computation is captured as ordinary nodes.
//!
//! Autograd: the twin of a leaf tensor shares that tensor's autograd state,
//! so `backward()` inside a trace reaches the real parameters; gradient
//! updates then go through [`accumulate_grad`], which records them as
//! [`SetGrad`] effects instead of storing shape-only tensors for good (the
//! original gradients are restored when the trace ends).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};

use super::call::OpCall;
use super::sym::{Symbol, SENTINELS};
use super::{Graph, Input, InputKind, LeafRef, Node, Producer, SetGrad, ValueId, ValueInfo};
use crate::autograd::AutogradMeta;
use crate::error::{Error, Result};
use crate::ops::capture;
pub use crate::ops::capture::{
    active, all, aux_replay, intercept, note_gap, one, one_and_optional, optional, pair, push_aux,
    run_device, suspended, unit, with_aux,
};
use crate::tensor::{Layout, Storage, Tensor};

thread_local! {
    /// True while the trace on this thread is paused by its owner ([`set_active`]):
    /// what runs then is eager work on real tensors, not part of the graph.
    static PAUSED: Cell<bool> = const { Cell::new(false) };
    /// While a backward pass captures the vector-Jacobian product of an
    /// autograd node: the `loc` of the forward node that made it (see [`vjp`]).
    static BACKWARD_OF: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
    /// The trace, and above it the traces of control-flow bodies being captured.
    static TRACER: RefCell<Vec<Tracer>> = const { RefCell::new(Vec::new()) };
}

/// Supplies the user's source location (`file:line`) of the op being captured.
pub type LocFn = fn() -> Option<String>;
static LOCATION: OnceLock<LocFn> = OnceLock::new();

/// Install the function that reports the user's source line (the Python layer does).
pub fn set_location_provider(f: LocFn) {
    let _ = LOCATION.set(f);
}

/// Whether a trace exists on this thread (active, inside an op, or paused).
pub fn tracing() -> bool {
    TRACER.with(|t| !t.borrow().is_empty())
}

/// Whether what this thread runs now belongs to a graph being captured: a
/// trace exists and its owner has not paused it ([`set_active`]). Autograd
/// (`backward`, `.grad`) is recorded only then; while a trace is paused it
/// runs eagerly on the real tensors, as with no trace at all.
pub fn recording() -> bool {
    tracing() && !PAUSED.with(|p| p.get())
}

/// Identity of a tensor as a graph value: its storage, layout and dtype.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    storage: usize,
    layout: Layout,
    dtype: u8,
}

fn key(t: &Tensor) -> Key {
    Key {
        storage: Arc::as_ptr(t.storage()) as usize,
        layout: t.layout().clone(),
        dtype: t.dtype() as u8,
    }
}

/// A leaf's autograd state, its gradient before the trace, and the value
/// standing for its gradient now (None: no gradient).
type GradRecord = (Arc<AutogradMeta>, Option<Tensor>, Option<ValueId>);

struct Tracer {
    graph: Graph,
    /// Value of each tensor seen so far.
    values: HashMap<Key, ValueId>,
    /// The shape-only tensor standing for each value.
    twins: Vec<Tensor>,
    /// The device each value is on when the graph runs.
    devices: Vec<crate::tensor::Device>,
    /// Storages referenced by `values` (kept alive so addresses stay unique).
    keep: Vec<Arc<Storage>>,
    /// The first value seen on each storage (for views made inside ops).
    by_storage: HashMap<usize, ValueId>,
    /// Input value bound to each leaf's autograd state.
    leaf_of_meta: HashMap<usize, ValueId>,
    /// Gradients set during the trace (by leaf autograd state), and the
    /// original gradient to restore when the trace ends.
    grads: HashMap<usize, GradRecord>,
    /// Inputs standing for the pre-trace `.grad` of a bound input.
    grad_inputs: HashMap<ValueId, ValueId>,
    /// Bound leaves whose `.grad` the traced code saw as None.
    grad_absent: Vec<ValueId>,
    /// For the body of a control-flow op: values of the enclosing trace
    /// (read by the body, they become extra arguments), the number of the
    /// body's own arguments, and the enclosing tensors captured so far.
    outer: Option<HashMap<Key, ValueId>>,
    n_args: usize,
    captures: Vec<Tensor>,
    /// The device of the first argument or by-reference tensor bound (where
    /// the graph runs).
    device: Option<crate::tensor::Device>,
    /// The `loc` of the node that recorded each autograd node (by address,
    /// checked through the weak reference), for the nodes of its backward.
    fwd_locs: HashMap<usize, (Weak<crate::autograd::Node>, Arc<str>)>,
    /// For a capture begun while another was paused: that one's
    /// (active, paused) state, restored when this one ends.
    resume: Option<(bool, bool)>,
}

/// How far the capture has got, to undo what follows ([`rollback`]).
#[derive(Clone, Copy)]
pub struct Checkpoint {
    values: usize,
    inputs: usize,
    nodes: usize,
    set_grads: usize,
}

/// The current position of the capture.
pub fn checkpoint() -> Result<Checkpoint> {
    with(|tr| {
        Ok(Checkpoint {
            values: tr.graph.values.len(),
            inputs: tr.graph.inputs.len(),
            nodes: tr.graph.nodes.len(),
            set_grads: tr.graph.set_grads.len(),
        })
    })
}

/// Forget everything captured after `cp`.
pub fn rollback(cp: Checkpoint) -> Result<()> {
    with(|tr| {
        let g = &mut tr.graph;
        g.values.truncate(cp.values);
        g.inputs.truncate(cp.inputs);
        g.nodes.truncate(cp.nodes);
        g.set_grads.truncate(cp.set_grads);
        tr.twins.truncate(cp.values);
        tr.values.retain(|_, v| *v < cp.values);
        tr.by_storage.retain(|_, v| *v < cp.values);
        // Keys a later value had taken over point again at the latest earlier value.
        for (v, t) in tr.twins.iter().enumerate() {
            tr.values.insert(key(t), v);
        }
        tr.leaf_of_meta.retain(|_, v| *v < cp.values);
        tr.grad_absent.retain(|v| *v < cp.values);
        tr.grad_inputs
            .retain(|b, v| *b < cp.values && *v < cp.values);
        Ok(())
    })
}

/// Capture a vector-Jacobian product run by the backward engine: its ops
/// are captured one by one (so passes see and fuse them); if it computes
/// something outside the captured ops, that is undone and the whole
/// product becomes one node that calls the same rule when the graph runs.
pub fn vjp(
    node: &Arc<crate::autograd::Node>,
    saved: &[Tensor],
    grads: &[Option<Tensor>],
    needs: &[bool],
) -> Result<Vec<Option<Tensor>>> {
    struct Restore(Option<Arc<str>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            BACKWARD_OF.with(|b| *b.borrow_mut() = self.0.take());
        }
    }
    // The nodes of this product belong where the forward node was captured.
    let fwd = with(|tr| Ok(tr.forward_location(node)))?;
    let _restore = fwd.map(|l| Restore(BACKWARD_OF.with(|b| b.borrow_mut().replace(l))));
    let cp = checkpoint()?;
    capture::take_gap();
    let r = node.apply_backward(saved, grads, needs);
    let gap = capture::take_gap();
    match r {
        Ok(r) if !gap => return Ok(r),
        Err(e) if !gap => return Err(e),
        _ => {}
    }
    rollback(cp)?;
    let present: Vec<bool> = grads.iter().map(|g| g.is_some()).collect();
    let call = OpCall::Vjp {
        node: super::call::NodeRef(node.clone()),
        n_saved: saved.len(),
        present: present.clone(),
        needs: needs.to_vec(),
        produced: vec![],
    };
    let mut ins: Vec<Tensor> = saved.to_vec();
    ins.extend(grads.iter().flatten().cloned());
    // Which inputs get a gradient: known from the rule run on shape-only tensors.
    let probe = suspended(|| super::call::dry_run(|| call.exec_vjp_probe(&ins)))?;
    let call = match call {
        OpCall::Vjp {
            node,
            n_saved,
            present,
            needs,
            ..
        } => OpCall::Vjp {
            node,
            n_saved,
            present,
            needs,
            produced: probe.clone(),
        },
        _ => unreachable!(),
    };
    let outs = record(call, &ins)?;
    let mut it = outs.into_iter();
    Ok(probe
        .iter()
        .map(|&p| if p { it.next() } else { None })
        .collect())
}

/// Turn recording on or off while a trace exists (for code that must run
/// on real tensors in the middle of a capture); returns the previous state.
///
/// Turned off, the trace is paused: besides ops, autograd runs eagerly
/// (see [`recording`]) until it is turned on again.
pub fn set_active(on: bool) -> bool {
    let exists = tracing();
    let on = on && exists;
    PAUSED.with(|p| p.set(exists && !on));
    capture::set_active(on)
}

/// Give the ops and the autograd engine this module's answers while
/// capturing (see `crate::ops::capture`).
fn install_hooks() {
    crate::tensor::capture::install(capture::TensorHooks {
        tracing,
        device_of,
        graph_device,
        constant,
        zeros: crate::ops::creation::zeros,
    });
    capture::install(capture::Hooks {
        record,
        recording,
        is_symbolic,
        symbolic_scalar,
        vjp,
        tracks,
        current_grad,
        set_grad,
        paused_grad,
        set_paused_grad,
    });
}

/// Start capturing on this thread.
///
/// While another capture is open but paused ([`set_active`]), the new one
/// is captured on its own, above it (a finished graph's session, or a
/// compiled function's first call, in the middle of building another);
/// when it ends, the paused capture is as it was. A capture that is
/// recording cannot have another started inside it.
pub fn begin() -> Result<()> {
    install_hooks();
    let resume = (active(), PAUSED.with(|p| p.get()));
    TRACER.with(|t| {
        let mut t = t.borrow_mut();
        if !t.is_empty() && !resume.1 {
            return Err(Error::runtime(
                "capture",
                "a graph is already being captured on this thread",
            ));
        }
        let mut tr = Tracer::new(None, 0);
        if !t.is_empty() {
            tr.resume = Some(resume);
        }
        t.push(tr);
        Ok(())
    })?;
    crate::kernel::general::set_capture_hook(capture_general);
    PAUSED.with(|p| p.set(false));
    capture::set_active(true);
    Ok(())
}

/// Finds the graph value of a tensor the trace produced, after the trace ended.
pub struct Lookup {
    values: HashMap<Key, ValueId>,
    _keep: Vec<Arc<Storage>>,
}

impl Lookup {
    /// The value `t` stands for, if the trace produced or bound it.
    pub fn get(&self, t: &Tensor) -> Option<ValueId> {
        self.values.get(&key(t)).copied()
    }
}

/// Stop capturing; returns the graph whose outputs are `outputs`.
pub fn end(outputs: &[Tensor]) -> Result<Graph> {
    end_with_lookup(outputs).map(|(g, _)| g)
}

/// [`end`], also returning a [`Lookup`] from captured tensors to values.
pub fn end_with_lookup(outputs: &[Tensor]) -> Result<(Graph, Lookup)> {
    let r = set_outputs(outputs);
    let tracer = finish();
    r?;
    let mut g = tracer.graph;
    g.device = tracer.device.unwrap_or_default();
    // Only the last gradient written to each tensor matters.
    let mut seen = std::collections::HashSet::new();
    let mut sg: Vec<SetGrad> = g
        .set_grads
        .iter()
        .rev()
        .filter(|s| seen.insert(s.target))
        .cloned()
        .collect();
    sg.reverse();
    g.set_grads = sg;
    for &b in &tracer.grad_absent {
        let leaf = g
            .inputs
            .iter()
            .find(|i| i.value == b)
            .and_then(|i| match &i.kind {
                InputKind::Arg(p) => Some(LeafRef::Arg(*p)),
                InputKind::Ref(t) => Some(LeafRef::Tensor(t.clone())),
                _ => None,
            });
        g.grad_absent.extend(leaf);
    }
    // A tensor names the first value it stood for: an op that hands back its
    // input (a fused loss returning the logits it saved, `contiguous` of a
    // contiguous value) makes a later value with the same key, and fetching
    // the tensor must not pull in that op.
    let mut values = tracer.values;
    let mut first: HashMap<Key, ValueId> = HashMap::new();
    for (v, t) in tracer.twins.iter().enumerate() {
        first.entry(key(t)).or_insert(v);
    }
    for (k, v) in first {
        values.insert(k, v);
    }
    Ok((
        g,
        Lookup {
            values,
            _keep: tracer.keep,
        },
    ))
}

/// Abandon the capture (after an error), restoring gradients it touched.
/// (Only the innermost capture: a paused capture below it stays open.)
pub fn abort() {
    while tracing() {
        if finish().outer.is_none() {
            break;
        }
    }
}

/// Remove the innermost trace; the paused capture below it (if any) is
/// paused again, as it was when this one began.
fn finish() -> Tracer {
    let tr = pop();
    let (active, paused) = tr.resume.unwrap_or((false, false));
    capture::set_active(active);
    PAUSED.with(|p| p.set(paused));
    tr
}

/// Remove the innermost trace, restoring the gradients it touched.
fn pop() -> Tracer {
    let tr = TRACER
        .with(|t| t.borrow_mut().pop())
        .expect("a trace is active");
    for (m, orig, _) in tr.grads.values() {
        m.set_grad(orig.clone());
    }
    tr
}

/// Start capturing the body of a control-flow op (a branch of `cond`, the
/// condition or body of `while_loop`) as a graph of its own, inside the
/// current trace. `args` (values of the current trace) become the body's
/// arguments; returns the tensors standing for them inside the body.
/// Values of the enclosing trace the body reads become further arguments.
pub fn begin_sub(args: &[Tensor]) -> Result<Vec<Tensor>> {
    for a in args {
        with(|tr| tr.value_of(a).map(|_| ()))?;
    }
    TRACER.with(|t| {
        let mut t = t.borrow_mut();
        let Some(parent) = t.last() else {
            return Err(Error::runtime("capture", "no graph is being captured"));
        };
        if parent.outer.is_some() {
            return Err(Error::value(
                "capture",
                "control flow nested inside the body of another fg.cond/fg.while_loop is not supported; \
                 move the inner loop or branch out, or use Python control flow (unrolled at trace time)",
            ));
        }
        let mut sub = Tracer::new(Some(parent.values.clone()), args.len());
        sub.graph.symbols = parent.graph.symbols.clone();
        sub.device = parent.device;
        let mut twins = Vec::with_capacity(args.len());
        for (i, a) in args.iter().enumerate() {
            let storage = Arc::new(Storage::new_meta(crate::tensor::nbytes_for("capture", a.shape(), a.dtype())?));
            let twin = Tensor::from_parts(storage, Layout::contiguous(a.shape()), a.dtype())?;
            let v = sub.add_input(InputKind::Arg(i), twin, None);
            twins.push(sub.twin(v));
        }
        t.push(sub);
        Ok(twins)
    })
}

/// A control-flow body captured by [`begin_sub`]/[`end_sub`]: its graph
/// (arguments first, then the enclosing values it reads) and those
/// enclosing values.
pub struct SubCapture {
    pub graph: Graph,
    pub captures: Vec<Tensor>,
}

/// Stop capturing a control-flow body; `outputs` are its results.
pub fn end_sub(outputs: &[Tensor]) -> Result<SubCapture> {
    let is_sub = TRACER.with(|t| t.borrow().last().is_some_and(|tr| tr.outer.is_some()));
    if !is_sub {
        return Err(Error::runtime(
            "capture",
            "no control-flow body is being captured",
        ));
    }
    let r = set_outputs(outputs);
    let tr = pop();
    r?;
    let mut g = tr.graph;
    g.device = tr.device.unwrap_or_default();
    if g.has_backward || !g.set_grads.is_empty() || !tr.grads.is_empty() {
        return Err(Error::value(
            "capture",
            "a control-flow body cannot run backward() or change .grad; compute gradients outside fg.cond/fg.while_loop",
        ));
    }
    for n in &g.nodes {
        for i in n.call.written_inputs(n.inputs.len()) {
            let root = g.storage_root(n.inputs[i]);
            if matches!(g.values[root].producer, Producer::Input(_)) {
                return Err(Error::value(
                    "capture",
                    format!(
                        "a control-flow body may not update a tensor from outside it in place ({}{}); return the new value instead",
                        n.call.name(),
                        n.loc.as_deref().map(|l| format!(" at {l}")).unwrap_or_default()
                    ),
                ));
            }
        }
    }
    Ok(SubCapture {
        graph: g,
        captures: tr.captures,
    })
}

/// Abandon the capture of a control-flow body (after an error in it).
pub fn abort_sub() {
    let is_sub = TRACER.with(|t| t.borrow().last().is_some_and(|tr| tr.outer.is_some()));
    if is_sub {
        pop();
    }
}

/// Make `outputs` the current trace's graph outputs.
fn set_outputs(outputs: &[Tensor]) -> Result<()> {
    with(|tr| {
        tr.graph.outputs = outputs
            .iter()
            .map(|t| tr.value_of(t))
            .collect::<Result<_>>()?;
        Ok(())
    })
}

fn with<R>(f: impl FnOnce(&mut Tracer) -> Result<R>) -> Result<R> {
    TRACER.with(|t| match t.borrow_mut().last_mut() {
        Some(tr) => f(tr),
        None => Err(Error::runtime("capture", "no graph is being captured")),
    })
}

/// The `loc` of a node being captured: the user's source line, module path
/// and region (from the location provider); for a node of a backward pass,
/// the source line and module path of the forward node it differentiates,
/// so that a module's backward is grouped with it.
fn location() -> Option<Arc<str>> {
    let cur = LOCATION.get().and_then(|f| f());
    match BACKWARD_OF.with(|b| b.borrow().clone()) {
        Some(fwd) => Some(backward_location(&fwd, cur.as_deref())),
        None => cur.map(Arc::from),
    }
}

/// The regions a `loc` may end with (see the Python `_capture._user_location`).
const REGIONS: [&str; 2] = [" (backward)", " (optimizer)"];

/// `loc` without its region suffix, and that suffix (if any).
fn split_region(loc: &str) -> (&str, Option<&str>) {
    for r in REGIONS {
        if let Some(base) = loc.strip_suffix(r) {
            return (base, Some(r));
        }
    }
    (loc, None)
}

/// The `loc` of a node of the backward of a forward node at `fwd`, captured
/// where the provider reports `cur`: `fwd`'s source line and module path,
/// in `cur`'s region (the backward region when `cur` names none).
fn backward_location(fwd: &str, cur: Option<&str>) -> Arc<str> {
    let (base, _) = split_region(fwd);
    let region = cur.and_then(|c| split_region(c).1).unwrap_or(REGIONS[0]);
    Arc::from(format!("{base}{region}"))
}

impl Tracer {
    /// An empty trace; `outer`: the enclosing trace's values, for a control-flow body with `n_args` arguments.
    fn new(outer: Option<HashMap<Key, ValueId>>, n_args: usize) -> Tracer {
        Tracer {
            graph: Graph::default(),
            values: HashMap::new(),
            twins: vec![],
            keep: vec![],
            devices: vec![],
            by_storage: HashMap::new(),
            leaf_of_meta: HashMap::new(),
            grads: HashMap::new(),
            grad_inputs: HashMap::new(),
            grad_absent: Vec::new(),
            outer,
            n_args,
            captures: vec![],
            device: None,
            fwd_locs: HashMap::new(),
            resume: None,
        }
    }

    fn add_value(&mut self, twin: Tensor, producer: Producer) -> ValueId {
        let id = self.graph.values.len();
        self.graph.values.push(ValueInfo {
            shape: twin.shape().to_vec(),
            dtype: twin.dtype(),
            requires_grad: twin.requires_grad(),
            producer,
        });
        self.keep.push(twin.storage().clone());
        self.values.insert(key(&twin), id);
        self.by_storage
            .entry(Arc::as_ptr(twin.storage()) as usize)
            .or_insert(id);
        self.twins.push(twin);
        self.devices.push(self.device.unwrap_or_default());
        id
    }

    fn add_input(&mut self, kind: InputKind, twin: Tensor, name: Option<String>) -> ValueId {
        let idx = self.graph.inputs.len();
        let v = self.add_value(twin, Producer::Input(idx));
        self.graph.inputs.push(Input {
            kind,
            value: v,
            name,
        });
        v
    }

    /// A shape-only tensor with `t`'s layout and dtype, sharing its autograd
    /// state when `t` is a leaf (so gradients reach it).
    fn twin_of(t: &Tensor) -> Tensor {
        let storage = Arc::new(Storage::new_meta(t.storage().nbytes()));
        match t.meta() {
            Some(m) if m.is_leaf() => t.twin_with_storage(storage),
            _ => {
                let tw = t.detach().twin_with_storage(storage);
                if t.requires_grad() {
                    tw.init_meta(|| AutogradMeta::leaf(true));
                }
                tw
            }
        }
    }

    /// Record that the argument value `v` will be on `device` at run time
    /// (the graph's device when it is the first argument or reference).
    fn set_arg_device(&mut self, v: ValueId, device: crate::tensor::Device) {
        if device.has_data() {
            self.device.get_or_insert(device);
            self.devices[v] = device;
        }
    }

    /// Bind a real tensor as an input of `kind`.
    fn bind(&mut self, t: &Tensor, kind: InputKind, name: Option<String>) -> ValueId {
        let twin = Self::twin_of(t);
        if self.device.is_none()
            && t.device().has_data()
            && matches!(kind, InputKind::Arg(_) | InputKind::Ref(_))
        {
            self.device = Some(t.device());
        }
        let leaf = t.meta().filter(|m| m.is_leaf()).cloned();
        // The real tensor's storage stays alive with the graph (kind holds it).
        let v = self.add_input(kind, twin, name);
        if t.device().has_data() {
            self.devices[v] = t.device();
        }
        self.values.insert(key(t), v);
        self.keep.push(t.storage().clone());
        if let Some(m) = leaf {
            self.leaf_of_meta
                .entry(Arc::as_ptr(&m) as usize)
                .or_insert(v);
        }
        v
    }

    /// The value `t` stands for, binding unseen real tensors as by-reference inputs.
    fn value_of(&mut self, t: &Tensor) -> Result<ValueId> {
        if let Some(&v) = self.values.get(&key(t)) {
            if t.device().has_data() {
                self.adopt_leaf(t, v);
            }
            return Ok(v);
        }
        if !t.device().has_data() {
            if self.outer.as_ref().is_some_and(|o| o.contains_key(&key(t))) {
                // A value of the enclosing trace read by a control-flow body.
                let pos = self.n_args + self.captures.len();
                self.captures.push(t.clone());
                return Ok(self.add_input(InputKind::Arg(pos), t.clone(), None));
            }
            note_gap();
            return Err(Error::runtime(
                "capture",
                format!(
                    "internal error: a symbolic tensor of shape {:?} ({}) was produced outside the captured graph (please report)",
                    t.shape(),
                    t.dtype()
                ),
            ));
        }
        Ok(self.bind(t, InputKind::Ref(t.clone()), None))
    }

    fn twin(&self, v: ValueId) -> Tensor {
        self.twins[v].clone()
    }

    /// The `loc` of the captured node whose op recorded the autograd node `n`.
    fn forward_location(&self, n: &Arc<crate::autograd::Node>) -> Option<Arc<str>> {
        let (w, loc) = self.fwd_locs.get(&(Arc::as_ptr(n) as usize))?;
        w.upgrade()
            .is_some_and(|m| Arc::ptr_eq(&m, n))
            .then(|| loc.clone())
    }

    /// A real tensor is found by its memory, so a leaf that requires grad
    /// and a detached alias of it (`p.detach()`) are one value. When the
    /// alias was bound first, the value's twin has no autograd state: the
    /// leaf met now gives it its own (same storage, so the same key), so
    /// that gradients reach the leaf. Nodes recorded before keep the
    /// detached twin they read.
    fn adopt_leaf(&mut self, t: &Tensor, v: ValueId) {
        let Some(m) = t.meta().filter(|m| m.is_leaf() && m.requires_grad()) else {
            return;
        };
        let k = Arc::as_ptr(m) as usize;
        let Producer::Input(i) = self.graph.values[v].producer else {
            return;
        };
        if self.leaf_of_meta.contains_key(&k) || self.twins[v].requires_grad() {
            return;
        }
        if let InputKind::Ref(r) = &mut self.graph.inputs[i].kind {
            // The graph reads the leaf itself (the same memory), and sets its `.grad`.
            *r = t.clone();
        }
        self.twins[v] = t.twin_with_storage(self.twins[v].storage().clone());
        self.graph.values[v].requires_grad = true;
        self.leaf_of_meta.insert(k, v);
    }

    /// The twin an op reads for the real tensor `t` (value `v`): the bound
    /// twin, detached when `t` is a detached alias of a tensor that requires
    /// grad (so no gradient flows back through it, as in eager).
    fn twin_for(&self, t: &Tensor, v: ValueId) -> Tensor {
        let tw = self.twin(v);
        if tw.requires_grad() && !t.requires_grad() {
            tw.detach()
        } else {
            tw
        }
    }
}

/// The general ops' capture hook (see `crate::kernel::general::intercept`).
fn capture_general(op: &crate::kernel::GeneralOp, ins: &[&Tensor]) -> Option<Result<Vec<Tensor>>> {
    intercept(|| {
        (
            OpCall::General { op: op.clone() },
            ins.iter().map(|t| (*t).clone()).collect(),
        )
    })
}

/// Record `call` on `ins`; returns the shape-only outputs.
pub fn record(call: OpCall, ins: &[Tensor]) -> Result<Vec<Tensor>> {
    // A view an op made of a captured value (and saved for its gradient, say)
    // becomes a view node of that value.
    for t in ins {
        if t.device().has_data() {
            continue;
        }
        let base = with(|tr| {
            if tr.values.contains_key(&key(t)) {
                return Ok(None);
            }
            Ok(tr
                .by_storage
                .get(&(Arc::as_ptr(t.storage()) as usize))
                .map(|&v| tr.twin(v))
                .filter(|b| {
                    b.dtype() == t.dtype()
                        && b.device() == t.device()
                        && tr.values.contains_key(&key(b))
                }))
        })?;
        if let Some(base) = base {
            let call = OpCall::Restride {
                size: t.shape().to_vec(),
                stride: t.strides().to_vec(),
                offset: t.offset(),
                base: base.layout().clone(),
            };
            record(call, &[base])?;
            with(|tr| {
                if !tr.values.contains_key(&key(t)) {
                    // Left for the unknown-input error below.
                    note_gap();
                }
                Ok(())
            })?;
        }
    }
    let cp = checkpoint()?;
    let seq0 = crate::autograd::next_seq();
    let outs = record_node(call.clone(), ins)?;
    if !opaque_saved(&outs, seq0)? {
        return Ok(outs);
    }
    // The op's gradient saved values computed inside it, which the graph
    // cannot reproduce: capture the op through the ops it is made of.
    rollback(cp)?;
    capture::set_bypass(true);
    capture::take_gap();
    let r = call.exec(ins);
    capture::set_bypass(false);
    if capture::take_gap() {
        // Its inner ops cannot be captured either: keep it as one node (its
        // gradient, if needed, is then refused when captured).
        rollback(cp)?;
        return record_node(call, ins);
    }
    r.map(|o| o.into_vec())
}

/// Whether an autograd node the just-captured op recorded (creation number
/// `>= seq0`, reachable from `outs`) saved a shape-only tensor the graph has
/// no value for (not a value, nor a view of one).
fn opaque_saved(outs: &[Tensor], seq0: u64) -> Result<bool> {
    let mut stack: Vec<Arc<crate::autograd::Node>> = vec![];
    for o in outs {
        if let Some(crate::autograd::Edge::Node(n, _)) = crate::autograd::grad_fn_of(o) {
            stack.push(n);
        }
    }
    let mut seen = std::collections::HashSet::new();
    while let Some(n) = stack.pop() {
        if n.seq() < seq0 || !seen.insert(Arc::as_ptr(&n) as usize) {
            continue;
        }
        for t in n.saved_tensors() {
            if t.device().has_data() || t.numel() == 0 {
                continue;
            }
            let known = with(|tr| {
                Ok(tr.values.contains_key(&key(&t))
                    || tr
                        .by_storage
                        .contains_key(&(Arc::as_ptr(t.storage()) as usize)))
            })?;
            if !known {
                return Ok(true);
            }
        }
        for e in n.next_edges().iter().flatten() {
            if let crate::autograd::Edge::Node(c, _) = e {
                stack.push(c.clone());
            }
        }
    }
    Ok(false)
}

/// Record one node for `call` on `ins` (see [`record`]).
fn record_node(call: OpCall, ins: &[Tensor]) -> Result<Vec<Tensor>> {
    let loc = location();
    // A factory asked for the device of a captured value (`zeros_like(x)`)
    // creates its output where the graph runs.
    let call = match call.factory_device() {
        Some(crate::tensor::Device::Meta) => {
            call.on_device(with(|tr| Ok(tr.device.unwrap_or_default()))?)
        }
        _ => call,
    };
    let (ids, twins) = with(|tr| {
        let mut ids = Vec::with_capacity(ins.len());
        let mut twins = Vec::with_capacity(ins.len());
        for t in ins {
            let v = tr
                .value_of(t)
                .map_err(|e| e.with_note(&format!(" (an input of {})", call.name())))?;
            ids.push(v);
            // A captured tensor is its own twin (keeping the autograd state it
            // has now); a real tensor is replaced by its bound twin.
            twins.push(if t.device().has_data() {
                tr.twin_for(t, v)
            } else {
                t.clone()
            });
        }
        Ok((ids, twins))
    })?;
    let meta_call = call.on_device(crate::tensor::Device::Meta);
    let (outs, aux) = with_aux(false, || {
        suspended(|| super::call::dry_run(|| meta_call.exec(&twins)))
    });
    let outs = match outs {
        Ok(o) => o,
        Err(e) => return Err(e.with_note(&loc_note(&loc))),
    };
    with(|tr| {
        let node = tr.graph.nodes.len();
        let mut out_ids = Vec::with_capacity(outs.len() + aux.len());
        // Where the outputs will be: a factory's or a copy's device, else its inputs'.
        let device = match (&call, call.factory_device()) {
            (_, Some(d)) => d,
            (OpCall::ToDevice { device }, _) => *device,
            _ => ids
                .first()
                .map_or(tr.device.unwrap_or_default(), |&v| tr.devices[v]),
        };
        for (i, o) in outs.iter().chain(&aux).enumerate() {
            let v = tr.add_value(o.clone(), Producer::Node { node, out: i });
            tr.devices[v] = device;
            out_ids.push(v);
        }
        // The autograd nodes the op recorded: their backward is grouped with it.
        if let Some(l) = &loc {
            for o in &outs {
                if let Some(crate::autograd::Edge::Node(n, _)) = crate::autograd::grad_fn_of(o) {
                    tr.fwd_locs
                        .insert(Arc::as_ptr(&n) as usize, (Arc::downgrade(&n), l.clone()));
                }
            }
        }
        tr.graph.nodes.push(Node {
            call,
            inputs: ids,
            outputs: out_ids,
            aux: aux.len(),
            loc,
        });
        Ok(())
    })?;
    Ok(outs.into_vec())
}

fn loc_note(loc: &Option<Arc<str>>) -> String {
    match loc {
        Some(l) => format!(" (captured at {l})"),
        None => String::new(),
    }
}

/// The device the captured value `t` will be on when the graph runs (`None`
/// when `t` is not a value of the current trace).
pub fn device_of(t: &Tensor) -> Option<crate::tensor::Device> {
    with(|tr| Ok(tr.values.get(&key(t)).map(|&v| tr.devices[v])))
        .ok()
        .flatten()
}

/// The device the graph being captured runs on so far (that of its first
/// argument or by-reference tensor; the CPU before any): where data an op
/// makes for "the device of a captured value" is put.
pub fn graph_device() -> crate::tensor::Device {
    with(|tr| Ok(tr.device.unwrap_or_default())).unwrap_or_default()
}

/// Bind the tensor argument at `position`; dims listed in `symbolic` become
/// symbols (a named symbol is shared by every dim naming it). Returns the
/// tensor standing for it in the traced code.
pub fn arg(
    t: &Tensor,
    position: usize,
    symbolic: &[(usize, Option<String>)],
    name: Option<String>,
) -> Result<Tensor> {
    with(|tr| {
        let mut shape = t.shape().to_vec();
        for (d, sym_name) in symbolic {
            let d = *d;
            if d >= shape.len() {
                return Err(Error::value(
                    "capture",
                    format!(
                        "dim {d} is out of range for an argument of shape {:?}",
                        t.shape()
                    ),
                ));
            }
            shape[d] = match sym_name {
                Some(n) => named_symbol(tr, n, d)?,
                None => new_symbol(tr, name.as_deref(), d)?,
            };
        }
        let v = if shape == t.shape() {
            tr.bind(t, InputKind::Arg(position), name)
        } else {
            let storage = Arc::new(Storage::new_meta(crate::tensor::nbytes_for(
                "capture",
                &shape,
                t.dtype(),
            )?));
            let twin = Tensor::from_parts(storage, Layout::contiguous(&shape), t.dtype())?;
            if t.requires_grad() {
                crate::autograd::set_requires_grad(&twin, true)?;
            }
            let meta = twin.meta().cloned();
            let v = tr.add_input(InputKind::Arg(position), twin, name);
            tr.set_arg_device(v, t.device());
            if let Some(m) = meta {
                tr.leaf_of_meta.insert(Arc::as_ptr(&m) as usize, v);
            }
            v
        };
        Ok(tr.twin(v))
    })
}

/// A dimension of a placeholder.
pub enum PDim {
    Fixed(usize),
    /// A new symbol of its own.
    New,
    /// The symbol of this name (created on first use; shared by every dim naming it).
    Named(String),
}

/// A placeholder: an argument of the given shape and dtype, fed on `device`.
pub fn placeholder(
    shape: &[PDim],
    dtype: crate::tensor::DType,
    position: usize,
    name: Option<String>,
    device: crate::tensor::Device,
) -> Result<Tensor> {
    with(|tr| {
        let mut dims = Vec::with_capacity(shape.len());
        for (i, d) in shape.iter().enumerate() {
            dims.push(match d {
                PDim::Fixed(n) => *n,
                PDim::New => new_symbol(tr, name.as_deref(), i)?,
                PDim::Named(s) => named_symbol(tr, s, i)?,
            });
        }
        let storage = Arc::new(Storage::new_meta(crate::tensor::nbytes_for(
            "placeholder",
            &dims,
            dtype,
        )?));
        let twin = Tensor::from_parts(storage, Layout::contiguous(&dims), dtype)?;
        let v = tr.add_input(InputKind::Arg(position), twin, name);
        tr.set_arg_device(v, device);
        Ok(tr.twin(v))
    })
}

fn named_symbol(tr: &mut Tracer, name: &str, axis: usize) -> Result<usize> {
    if let Some(x) = tr.graph.symbols.iter().find(|x| x.name == name) {
        return Ok(x.sentinel);
    }
    let v = new_symbol(tr, None, axis)?;
    tr.graph.symbols.last_mut().expect("just added").name = name.to_string();
    Ok(v)
}

fn new_symbol(tr: &mut Tracer, name: Option<&str>, axis: usize) -> Result<usize> {
    let k = tr.graph.symbols.len();
    let Some(&sentinel) = SENTINELS.get(k) else {
        return Err(Error::value(
            "capture",
            format!(
                "at most {} symbolic dimensions are supported",
                SENTINELS.len()
            ),
        ));
    };
    tr.graph.symbols.push(Symbol {
        name: match name {
            Some(n) => format!("{n}.{axis}"),
            None => format!("s{k}"),
        },
        sentinel,
    });
    Ok(sentinel)
}

/// Whether the integer `v`, given to an op while capturing, stands for a
/// size derived from a symbolic dimension (`s`, `2*s`, `s - 1`, ...).
pub fn is_symbolic(v: i64) -> bool {
    with(|tr| Ok(super::sym::decompose(v, &tr.graph.symbols).is_some())).unwrap_or(false)
}

/// A 0-d tensor holding the symbolic size `s` (as `dtype`), made inside an
/// op being captured (and maybe saved for its gradient: `loss / x.shape[0]`
/// saves its divisor): a `full` node, whose value each run binds to its
/// sizes, where a constant would keep the size the trace saw.
pub fn symbolic_scalar(s: crate::tensor::Scalar, dtype: crate::tensor::DType) -> Result<Tensor> {
    let call = OpCall::Full {
        shape: vec![],
        value: s,
        dtype,
        device: graph_device(),
    };
    record_node(call, &[])?
        .pop()
        .ok_or_else(|| Error::runtime("capture", "full made no tensor"))
}

/// A constant: `t`'s current data becomes part of the graph.
pub fn constant(t: &Tensor) -> Result<Tensor> {
    with(|tr| {
        let v = tr.bind(t, InputKind::Const(t.clone()), None);
        Ok(tr.twin(v))
    })
}

/// Bind `t` (a real tensor) by reference under `name`, as a captured variable.
pub fn reference(t: &Tensor, name: Option<String>) -> Result<Tensor> {
    with(|tr| {
        if let Some(&v) = tr.values.get(&key(t)) {
            return Ok(tr.twin(v));
        }
        let v = tr.bind(t, InputKind::Ref(t.clone()), name);
        Ok(tr.twin(v))
    })
}

/// Make sure the leaf tensor `t` is bound to the graph (by reference when unseen).
pub fn bind_leaf(t: &Tensor) -> Result<()> {
    with(|tr| tr.value_of(t).map(|_| ()))
}

/// Mark that a backward pass ran inside the trace.
pub fn note_backward() {
    let _ = with(|tr| {
        tr.graph.has_backward = true;
        Ok(())
    });
}

/// The input value whose tensor owns the leaf autograd state `m`.
fn binding_of(tr: &Tracer, m: &Arc<AutogradMeta>) -> Result<ValueId> {
    tr.leaf_of_meta
        .get(&(Arc::as_ptr(m) as usize))
        .copied()
        .ok_or_else(|| {
            Error::runtime(
                "capture",
                "internal error: a gradient reached a tensor that is not an input of the captured graph",
            )
        })
}

/// The current `.grad` of the leaf with autograd state `m`, as seen by the
/// traced code: a value set earlier in the trace, or (bound as an input) the
/// gradient the tensor holds when the graph runs.
pub fn current_grad(m: &Arc<AutogradMeta>) -> Result<Option<Tensor>> {
    with(|tr| {
        let k = Arc::as_ptr(m) as usize;
        if let Some((_, _, v)) = tr.grads.get(&k) {
            return Ok(v.map(|v| tr.twin(v)));
        }
        let Some(g) = m.grad() else {
            // The graph treats this leaf's gradient as absent: it holds
            // only while it is (checked before each run).
            if let Ok(b) = binding_of(tr, m) {
                if !tr.grad_absent.contains(&b) {
                    tr.grad_absent.push(b);
                }
            }
            return Ok(None);
        };
        if !g.device().has_data() {
            // Set by the traced code itself (e.g. a retained grad).
            return Ok(Some(g));
        }
        let b = binding_of(tr, m)?;
        let v = match tr.grad_inputs.get(&b) {
            Some(&v) => v,
            None => {
                let twin = Tracer::twin_of(&g.detach());
                let v = tr.add_input(InputKind::Grad(b), twin, None);
                tr.grad_inputs.insert(b, v);
                v
            }
        };
        Ok(Some(tr.twin(v)))
    })
}

/// Set the `.grad` of the leaf `m` to `g` inside the trace: recorded as an
/// effect of the graph (the real tensor's gradient is restored when the
/// trace ends and set when the graph runs).
pub fn set_grad(m: &Arc<AutogradMeta>, g: Option<Tensor>) -> Result<()> {
    with(|tr| {
        let b = binding_of(tr, m)?;
        let v = match &g {
            Some(t) => Some(tr.value_of(t)?),
            None => None,
        };
        let k = Arc::as_ptr(m) as usize;
        match tr.grads.get_mut(&k) {
            Some(e) => e.2 = v,
            None => {
                tr.grads.insert(k, (m.clone(), m.grad(), v));
            }
        }
        tr.graph.set_grads.push(SetGrad {
            target: b,
            value: v,
        });
        Ok(())
    })?;
    m.set_grad(g);
    Ok(())
}

/// While the capture is paused: the real `.grad` of the leaf `m` when the
/// capture has set its gradient (the leaf holds the capture's value until
/// the capture ends, when this one is restored); None otherwise (also while
/// recording), when the leaf's own `.grad` is the real one.
pub fn paused_grad(m: &Arc<AutogradMeta>) -> Option<Option<Tensor>> {
    if !tracing() || recording() {
        return None;
    }
    let k = Arc::as_ptr(m) as usize;
    TRACER.with(|t| {
        t.borrow()
            .iter()
            .rev()
            .find_map(|tr| tr.grads.get(&k).map(|e| e.1.clone()))
    })
}

/// While the capture is paused, set the real `.grad` of a leaf whose
/// gradient the capture has set (kept when the capture ends); false when
/// [`paused_grad`] does not apply (set the leaf's own `.grad`).
pub fn set_paused_grad(m: &Arc<AutogradMeta>, g: Option<Tensor>) -> bool {
    if !tracing() || recording() {
        return false;
    }
    let k = Arc::as_ptr(m) as usize;
    TRACER.with(|t| {
        match t
            .borrow_mut()
            .iter_mut()
            .rev()
            .find_map(|tr| tr.grads.get_mut(&k))
        {
            Some(e) => {
                e.1 = g;
                true
            }
            None => false,
        }
    })
}

/// Whether `m` is a leaf whose gradient the trace tracks (a bound input).
pub fn tracks(m: &Arc<AutogradMeta>) -> bool {
    TRACER.with(|t| {
        t.borrow()
            .last()
            .is_some_and(|tr| tr.leaf_of_meta.contains_key(&(Arc::as_ptr(m) as usize)))
    })
}

/// The graph value of `t` in the current trace, if it is one.
pub fn value_id(t: &Tensor) -> Option<ValueId> {
    TRACER.with(|tr| {
        tr.borrow()
            .last()
            .and_then(|tr| tr.values.get(&key(t)).copied())
    })
}

/// The graph captured so far (for inspection while tracing).
pub fn snapshot() -> Option<Graph> {
    TRACER.with(|tr| tr.borrow().last().map(|tr| tr.graph.clone()))
}
