//! The capture hook point: how ops (and the autograd engine) reach a graph
//! being captured without depending on the graph layer.
//!
//! Every public op function starts with `capture!`, which calls
//! [`intercept`]: outside a capture that is one thread-local read and the op
//! runs. While a capture is active, the op hands its [`OpCall`] and tensor
//! inputs to the recorder the graph layer installed ([`install`]) and returns
//! the recorded, shape-only outputs. The other questions ops and autograd
//! ask while capturing (the device a captured value will run on, whether an
//! integer is a symbolic size, where a gradient goes) are answered by the
//! same installed [`Hooks`]. The flag every op checks (a plain thread-local
//! read) and the questions tensor code asks are one layer down, in
//! `crate::tensor::capture`, re-exported here.
//!
//! Nothing is installed until a capture starts; before that every query
//! answers as "not capturing".

use std::cell::{Cell, RefCell};
use std::sync::{Arc, OnceLock};

use super::call::OpCall;
use crate::autograd::{AutogradMeta, Node};
use crate::error::{Error, Result};
use crate::tensor::profile::{self, Kind, Scope};
use crate::tensor::{DType, Scalar, Tensor};

/// How ops report tensors they save for their gradient (see [`push_aux`]).
#[derive(Copy, Clone, PartialEq, Eq)]
enum AuxMode {
    Off,
    /// Capturing: an op pushes the tensors its recorded gradient saves.
    Capture,
    /// Running a captured node that has them: the op pushes them again.
    Replay,
}

pub use crate::tensor::capture::{
    active, constant, device_of, graph_device, note_gap, run_device, set_active, suspended,
    take_gap, tracing, TensorHooks,
};

thread_local! {
    /// Set to capture the next op through its inner ops instead of as one node.
    static BYPASS: Cell<bool> = const { Cell::new(false) };
    static AUX_MODE: Cell<AuxMode> = const { Cell::new(AuxMode::Off) };
    static AUX: RefCell<Vec<Tensor>> = const { RefCell::new(Vec::new()) };
}

/// A gradient function's result: the input gradients it produced.
pub type Grads = Vec<Option<Tensor>>;

/// Captures an autograd node's vector-Jacobian product: the node, its saved
/// tensors, the output gradients present, which input gradients are needed.
pub type VjpFn = fn(&Arc<Node>, &[Tensor], &[Option<Tensor>], &[bool]) -> Result<Grads>;

/// The graph layer's side of capturing, installed once by the first capture.
pub struct Hooks {
    /// Record `call` on its tensor inputs; returns the shape-only outputs.
    pub record: fn(OpCall, &[Tensor]) -> Result<Vec<Tensor>>,
    /// Whether what runs now belongs to a graph being captured (a trace
    /// exists and is not paused).
    pub recording: fn() -> bool,
    /// Whether an integer given to an op stands for a symbolic size.
    pub is_symbolic: fn(i64) -> bool,
    /// A 0-d tensor holding a symbolic size, recorded as a node.
    pub symbolic_scalar: fn(Scalar, DType) -> Result<Tensor>,
    /// Capture an autograd node's vector-Jacobian product.
    pub vjp: VjpFn,
    /// Whether the capture tracks this leaf's gradient.
    pub tracks: fn(&Arc<AutogradMeta>) -> bool,
    /// The leaf's gradient as the capture sees it so far.
    pub current_grad: fn(&Arc<AutogradMeta>) -> Result<Option<Tensor>>,
    /// Record a gradient write to a tracked leaf.
    pub set_grad: fn(&Arc<AutogradMeta>, Option<Tensor>) -> Result<()>,
    /// While a capture is paused: the gradient it set aside for this leaf.
    pub paused_grad: fn(&Arc<AutogradMeta>) -> Option<Option<Tensor>>,
    /// While a capture is paused: replace the gradient it set aside.
    pub set_paused_grad: fn(&Arc<AutogradMeta>, Option<Tensor>) -> bool,
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// Install the graph layer's hooks (the first call wins; later ones are no-ops).
pub fn install(h: Hooks) {
    let _ = HOOKS.set(h);
}

#[inline]
fn hooks() -> Option<&'static Hooks> {
    HOOKS.get()
}

/// Have the next op captured through the ops it is made of (`on`), or not.
pub fn set_bypass(on: bool) {
    BYPASS.with(|b| b.set(on));
}

/// Called at the top of every op function: `None` when not capturing (run
/// the op), else the op's captured (shape-only) outputs.
#[inline(always)]
pub fn intercept(f: impl FnOnce() -> (OpCall, Vec<Tensor>)) -> Option<Result<Vec<Tensor>>> {
    if !active() {
        return None;
    }
    if BYPASS.with(|b| b.replace(false)) {
        // This op is being captured through its inner ops.
        return None;
    }
    let (call, ins) = f();
    Some(match hooks() {
        Some(h) => (h.record)(call, &ins),
        None => Err(Error::runtime(
            "capture",
            "internal error: capturing with no recorder installed",
        )),
    })
}

/// How the profiler names an op from its call (installed by the bindings,
/// which may use the graph layer's names; "op" until then).
pub type Namer = fn(&OpCall) -> &'static str;

static NAMER: OnceLock<Namer> = OnceLock::new();

/// Install the profiler's op names (the first call wins).
pub fn install_namer(f: Namer) {
    let _ = NAMER.set(f);
}

/// Called by every op function after [`intercept`]: while the profiler
/// records, the op's open event (closed when dropped); else `None`, at the
/// cost of one atomic load.
#[inline(always)]
pub fn profile(f: impl FnOnce() -> (OpCall, Vec<Tensor>)) -> Option<Scope> {
    if !profile::enabled() {
        return None;
    }
    Some(profile_call(f))
}

#[cold]
fn profile_call(f: impl FnOnce() -> (OpCall, Vec<Tensor>)) -> Scope {
    let (call, ins) = f();
    let name = NAMER.get().map_or("op", |n| n(&call));
    let shapes = if profile::record_shapes() {
        ins.iter().map(|t| t.shape().to_vec()).collect()
    } else {
        Vec::new()
    };
    Scope::open(name, Kind::Op, shapes)
}

/// Whether what this thread runs now belongs to a graph being captured.
pub fn recording() -> bool {
    hooks().is_some_and(|h| (h.recording)())
}

/// Whether the integer `v`, given to an op while capturing, stands for a
/// size derived from a symbolic dimension.
pub fn is_symbolic(v: i64) -> bool {
    hooks().is_some_and(|h| (h.is_symbolic)(v))
}

fn not_capturing(what: &str) -> Error {
    Error::runtime("capture", format!("{what} outside a capture"))
}

/// A 0-d tensor holding the symbolic size `s` (as `dtype`), recorded as a node.
pub fn symbolic_scalar(s: Scalar, dtype: DType) -> Result<Tensor> {
    match hooks() {
        Some(h) => (h.symbolic_scalar)(s, dtype),
        None => Err(not_capturing("a symbolic size")),
    }
}

/// Capture the vector-Jacobian product of an autograd node.
pub fn vjp(
    node: &Arc<Node>,
    saved: &[Tensor],
    grads: &[Option<Tensor>],
    needs: &[bool],
) -> Result<Grads> {
    match hooks() {
        Some(h) => (h.vjp)(node, saved, grads, needs),
        None => Err(not_capturing("a captured gradient")),
    }
}

/// Whether the capture tracks this leaf's gradient.
pub fn tracks(m: &Arc<AutogradMeta>) -> bool {
    hooks().is_some_and(|h| (h.tracks)(m))
}

/// The leaf's gradient as the capture sees it so far.
pub fn current_grad(m: &Arc<AutogradMeta>) -> Result<Option<Tensor>> {
    match hooks() {
        Some(h) => (h.current_grad)(m),
        None => Err(not_capturing("a captured gradient")),
    }
}

/// Record a gradient write to a tracked leaf.
pub fn set_grad(m: &Arc<AutogradMeta>, g: Option<Tensor>) -> Result<()> {
    match hooks() {
        Some(h) => (h.set_grad)(m, g),
        None => Err(not_capturing("a captured gradient")),
    }
}

/// While a capture is paused: the gradient it set aside for this leaf.
pub fn paused_grad(m: &Arc<AutogradMeta>) -> Option<Option<Tensor>> {
    hooks().and_then(|h| (h.paused_grad)(m))
}

/// While a capture is paused: replace the gradient it set aside (false when
/// it set none aside).
pub fn set_paused_grad(m: &Arc<AutogradMeta>, g: Option<Tensor>) -> bool {
    hooks().is_some_and(|h| (h.set_paused_grad)(m, g))
}

/// Whether an op should compute the tensors it would save for its gradient
/// even though it records none (a captured node that has them is running).
pub fn aux_replay() -> bool {
    AUX_MODE.with(|m| m.get()) == AuxMode::Replay
}

/// An op computed `t` to save it for its gradient (`saved`: it recorded a
/// gradient). A captured node gets such tensors as extra outputs, so the
/// gradient nodes captured later can read them; running the node makes the
/// op push them again.
pub fn push_aux(t: &Tensor, saved: bool) {
    let push = match AUX_MODE.with(|m| m.get()) {
        AuxMode::Off => false,
        AuxMode::Capture => saved,
        AuxMode::Replay => true,
    };
    if push {
        AUX.with(|a| a.borrow_mut().push(t.clone()));
    }
}

/// Run `f` collecting the tensors ops push with [`push_aux`] (`replay`:
/// re-running a captured node).
pub fn with_aux<R>(replay: bool, f: impl FnOnce() -> R) -> (R, Vec<Tensor>) {
    let prev_mode = AUX_MODE.with(|m| {
        m.replace(if replay {
            AuxMode::Replay
        } else {
            AuxMode::Capture
        })
    });
    let prev = AUX.with(|a| std::mem::take(&mut *a.borrow_mut()));
    let r = f();
    let got = AUX.with(|a| std::mem::replace(&mut *a.borrow_mut(), prev));
    AUX_MODE.with(|m| m.set(prev_mode));
    (r, got)
}

// ---- result adapters for `capture!` (the captured outputs as the op's return type)

fn missing(what: &str) -> Error {
    Error::runtime(
        "capture",
        format!("internal error: op captured without {what}"),
    )
}

/// The single output.
pub fn one(v: Vec<Tensor>) -> Result<Tensor> {
    v.into_iter().next().ok_or_else(|| missing("output"))
}
/// No output (in-place ops).
pub fn unit(_: Vec<Tensor>) -> Result<()> {
    Ok(())
}
/// All outputs.
pub fn all(v: Vec<Tensor>) -> Result<Vec<Tensor>> {
    Ok(v)
}
/// Two outputs.
pub fn pair(v: Vec<Tensor>) -> Result<(Tensor, Tensor)> {
    let mut it = v.into_iter();
    match (it.next(), it.next()) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(missing("two outputs")),
    }
}
/// An optional output.
pub fn optional(v: Vec<Tensor>) -> Result<Option<Tensor>> {
    Ok(v.into_iter().next())
}
/// An output and an optional second one.
pub fn one_and_optional(v: Vec<Tensor>) -> Result<(Tensor, Option<Tensor>)> {
    let mut it = v.into_iter();
    let a = it.next().ok_or_else(|| missing("output"))?;
    Ok((a, it.next()))
}
