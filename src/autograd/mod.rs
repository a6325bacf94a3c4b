//! Eager reverse-mode autodiff: grad mode, per-tensor autograd state, the
//! recorded graph of backward nodes, and the backward engine ([`engine`]).
//!
//! When grad mode is on and an input of an op requires grad, the op records a
//! [`Node`]: its [`Backward`] rule (the op's vector-Jacobian product, written
//! next to the op in terms of other ops, so the same rule gives higher-order
//! gradients when run with recording on), the values it saved, and an
//! [`Edge`] per input to where that input's gradient goes (the node that
//! produced it, or the leaf's accumulator). Outputs hold their node through
//! their [`AutogradMeta`]; nothing points back from a node to its outputs
//! except weak references, so dropping the last output frees the graph.

pub mod engine;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::tensor::{DType, Shape, Tensor};

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether ops record the graph on this thread.
#[inline]
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(|g| g.get())
}

/// Turn recording on or off for this thread; returns the previous setting.
pub fn set_grad_enabled(on: bool) -> bool {
    GRAD_ENABLED.with(|g| g.replace(on))
}

/// Restores the previous grad mode when dropped.
pub struct GradMode(bool);

impl GradMode {
    pub fn set(on: bool) -> GradMode {
        GradMode(set_grad_enabled(on))
    }
}

impl Drop for GradMode {
    fn drop(&mut self) {
        set_grad_enabled(self.0);
    }
}

/// A gradient hook: may return a replacement gradient.
pub type Hook = Arc<dyn Fn(&Tensor) -> Result<Option<Tensor>> + Send + Sync>;

/// The autograd state of one tensor.
pub struct AutogradMeta {
    requires_grad: AtomicBool,
    grad: Mutex<Option<Tensor>>,
    grad_fn: Mutex<Option<Edge>>,
    retains_grad: AtomicBool,
    hooks: Mutex<Vec<(u64, Hook)>>,
    /// Set for a differentiable view of a tensor that requires grad.
    view: std::sync::OnceLock<ViewInfo>,
}

/// The link of a view to the tensor it views (the root of its chain of views).
///
/// In-place ops on the view rewrite the base's history (the write lands in the
/// base's memory), and when the shared storage was written after the view's
/// history was last set, the view's history is re-derived from the base's.
struct ViewInfo {
    base: Tensor,
    /// Storage version at which the view's `grad_fn` was last set.
    version: AtomicU64,
}

static HOOK_IDS: AtomicU64 = AtomicU64::new(1);

impl AutogradMeta {
    /// State for a leaf.
    pub fn leaf(requires_grad: bool) -> AutogradMeta {
        AutogradMeta {
            requires_grad: AtomicBool::new(requires_grad),
            grad: Mutex::new(None),
            grad_fn: Mutex::new(None),
            retains_grad: AtomicBool::new(false),
            hooks: Mutex::new(vec![]),
            view: std::sync::OnceLock::new(),
        }
    }

    #[inline]
    pub fn requires_grad(&self) -> bool {
        self.requires_grad.load(Ordering::Relaxed)
    }
    pub fn is_leaf(&self) -> bool {
        self.grad_fn.lock().is_none()
    }
    pub fn grad_fn(&self) -> Option<Edge> {
        self.grad_fn.lock().clone()
    }
    pub fn set_grad_fn(&self, e: Option<Edge>) {
        *self.grad_fn.lock() = e;
    }
    pub fn grad(&self) -> Option<Tensor> {
        self.grad.lock().clone()
    }
    pub fn set_grad(&self, g: Option<Tensor>) {
        *self.grad.lock() = g;
    }
    /// Set the gradient; returns the one it replaces.
    pub fn replace_grad(&self, g: Option<Tensor>) -> Option<Tensor> {
        std::mem::replace(&mut *self.grad.lock(), g)
    }
    pub fn retains_grad(&self) -> bool {
        self.retains_grad.load(Ordering::Relaxed)
    }
    pub fn set_retains_grad(&self) {
        self.retains_grad.store(true, Ordering::Relaxed);
    }
    /// Register a hook; returns its id for removal. A non-leaf's hooks live
    /// on the node that produces it (as in PyTorch), so they still run when
    /// the tensor itself has been dropped before `backward()`.
    pub fn add_hook(&self, h: Hook) -> u64 {
        let id = HOOK_IDS.fetch_add(1, Ordering::Relaxed);
        match self.grad_fn() {
            Some(Edge::Node(n, i)) => n.hooks.lock().push((i, id, h)),
            _ => self.hooks.lock().push((id, h)),
        }
        id
    }
    pub fn remove_hook(&self, id: u64) -> bool {
        if let Some(Edge::Node(n, _)) = self.grad_fn() {
            let mut hs = n.hooks.lock();
            let len = hs.len();
            hs.retain(|(_, i, _)| *i != id);
            if hs.len() != len {
                return true;
            }
        }
        let mut hs = self.hooks.lock();
        let n = hs.len();
        hs.retain(|(i, _)| *i != id);
        hs.len() != n
    }
    /// Run the hooks on `g` in registration order.
    pub fn run_hooks(&self, mut g: Tensor) -> Result<Tensor> {
        let hooks: Vec<Hook> = self.hooks.lock().iter().map(|(_, h)| h.clone()).collect();
        for h in hooks {
            if let Some(r) = h(&g)? {
                g = r;
            }
        }
        Ok(g)
    }
    pub fn has_hooks(&self) -> bool {
        !self.hooks.lock().is_empty()
    }
    /// Whether this is the state of a differentiable view of another tensor.
    pub fn is_view(&self) -> bool {
        self.view.get().is_some()
    }
}

/// Where a gradient goes: output `nr` of a node, or a leaf's accumulator.
#[derive(Clone)]
pub enum Edge {
    Node(Arc<Node>, u32),
    Leaf(Arc<AutogradMeta>),
}

/// A vector-Jacobian product rule.
pub trait Backward: Send + Sync {
    /// Readable name shown as `grad_fn` (e.g. `"MulBackward"`).
    fn name(&self) -> &'static str;
    /// Gradients with respect to each input, given the saved tensors and the
    /// gradient of each output (`None` = no gradient reached that output:
    /// treat as zeros). Entries of the result for inputs with `needs[i] ==
    /// false` may be `None`.
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>>;
}

struct SavedTensor {
    data: Tensor,
    /// For saved non-leaf inputs: their history, kept apart from their
    /// autograd state (which may link back to this node through a view's base).
    edge: Option<Edge>,
    /// Saved outputs are stored without their autograd state (that would be
    /// a cycle) and re-linked to this node when unpacked.
    output_nr: Option<u32>,
    version: u64,
}

/// A recorded op in the backward graph.
pub struct Node {
    backward: Box<dyn Backward>,
    next: Vec<Option<Edge>>,
    saved: Mutex<Option<Vec<SavedTensor>>>,
    had_saved: bool,
    outputs: Vec<Weak<AutogradMeta>>,
    out_info: Vec<(Shape, DType)>,
    seq: u64,
    /// Hooks registered on the outputs: (output number, hook id, hook).
    hooks: Mutex<Vec<(u32, u64, Hook)>>,
}

static SEQ: AtomicU64 = AtomicU64::new(0);

/// The creation number the next recorded node will get.
pub fn next_seq() -> u64 {
    SEQ.load(Ordering::Relaxed)
}

impl Node {
    pub fn name(&self) -> &'static str {
        self.backward.name()
    }
    /// The tensors this node saved (empty once released).
    pub fn saved_tensors(&self) -> Vec<Tensor> {
        self.saved
            .lock()
            .as_ref()
            .map(|v| v.iter().map(|s| s.data.clone()).collect())
            .unwrap_or_default()
    }
    /// Apply this node's vector-Jacobian product (see [`Backward::apply`]).
    pub fn apply_backward(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        self.backward.apply(saved, grads, needs)
    }
    pub fn next_edges(&self) -> &[Option<Edge>] {
        &self.next
    }
    /// Shapes and dtypes of the node's outputs.
    pub fn outputs_info(&self) -> &[(Shape, DType)] {
        &self.out_info
    }
    /// Creation order (later nodes have larger numbers).
    pub fn seq(&self) -> u64 {
        self.seq
    }
    /// Run the hooks of output `nr` on `g` in registration order.
    pub fn run_output_hooks(&self, nr: usize, mut g: Tensor) -> Result<Tensor> {
        let hooks: Vec<Hook> = self
            .hooks
            .lock()
            .iter()
            .filter(|(i, _, _)| *i as usize == nr)
            .map(|(_, _, h)| h.clone())
            .collect();
        for h in hooks {
            if let Some(r) = h(&g)? {
                g = r;
            }
        }
        Ok(g)
    }
}

impl Drop for Node {
    /// Drop long chains iteratively instead of recursing through `next`.
    fn drop(&mut self) {
        let mut stack: Vec<Arc<Node>> = vec![];
        let take = |next: &mut Vec<Option<Edge>>, stack: &mut Vec<Arc<Node>>| {
            for e in next.drain(..).flatten() {
                if let Edge::Node(n, _) = e {
                    stack.push(n);
                }
            }
        };
        take(&mut self.next, &mut stack);
        while let Some(n) = stack.pop() {
            if let Ok(mut node) = Arc::try_unwrap(n) {
                take(&mut node.next, &mut stack);
                // `node` drops here with an empty `next`.
            }
        }
    }
}

/// What to save for backward.
pub enum Save<'a> {
    /// An input or any tensor not produced by this op.
    Tensor(&'a Tensor),
    /// Output number `i` of this op.
    Output(usize),
}

/// True when an op on `inputs` must record a node.
#[inline]
pub fn needs_grad(inputs: &[&Tensor]) -> bool {
    is_grad_enabled() && inputs.iter().any(|t| t.requires_grad())
}

fn edge_of(t: &Tensor) -> Option<Edge> {
    let m = t.meta()?;
    if !m.requires_grad() {
        return None;
    }
    refresh_view(t, m);
    Some(match m.grad_fn() {
        Some(e) => e,
        None => Edge::Leaf(m.clone()),
    })
}

/// The node that produced `t` (None for leaves and tensors without history),
/// re-deriving a view's history if its storage was written since.
pub fn grad_fn_of(t: &Tensor) -> Option<Edge> {
    let m = t.meta()?;
    refresh_view(t, m);
    m.grad_fn()
}

/// If `t` is a view whose storage was written after its history was set,
/// make its history "this region of the base's current value".
fn refresh_view(t: &Tensor, m: &Arc<AutogradMeta>) {
    let Some(v) = m.view.get() else { return };
    let now = t.version();
    if v.version.load(Ordering::Acquire) == now || !v.base.requires_grad() {
        return;
    }
    if let Ok(pos) = view_positions(&v.base, t) {
        link_view(t, m, v, pos);
    }
}

/// Set the history of view `t` to a gather of its positions from the base.
fn link_view(t: &Tensor, m: &Arc<AutogradMeta>, v: &ViewInfo, positions: Tensor) {
    let alias = t.detach();
    record_impl(
        ViewOfBaseBackward {
            positions,
            base_shape: Shape::from_slice(v.base.shape()),
        },
        &[&v.base],
        &[&alias],
        &[],
        false,
    );
    m.requires_grad.store(true, Ordering::Relaxed);
    m.set_grad_fn(alias.meta().and_then(|a| a.grad_fn()));
    v.version.store(t.version(), Ordering::Release);
}

/// For each element of `view` (row-major), its row-major position in `base`
/// (both over the same storage; `base` must not overlap itself).
fn view_positions(base: &Tensor, view: &Tensor) -> Result<Tensor> {
    let err = || {
        Error::runtime(
            "in-place",
            format!(
                "cannot relate a view of shape {:?} to the tensor of shape {:?} it views",
                view.shape(),
                base.shape()
            ),
        )
    };
    let bl = base.layout();
    let (lo, hi) = bl.span();
    let mut slot = vec![-1i64; (hi - lo).max(0) as usize];
    for (i, off) in offsets(bl).enumerate() {
        let k = (off - lo) as usize;
        if slot[k] >= 0 {
            return Err(err());
        }
        slot[k] = i as i64;
    }
    let mut pos = Vec::with_capacity(view.numel());
    for off in offsets(view.layout()) {
        let p = off
            .checked_sub(lo)
            .filter(|&k| k >= 0 && (k as usize) < slot.len())
            .map(|k| slot[k as usize])
            .filter(|&p| p >= 0)
            .ok_or_else(err)?;
        pos.push(p);
    }
    Tensor::from_vec(pos, &[view.numel()])
}

/// Element offsets of a layout in row-major order.
fn offsets(l: &crate::tensor::layout::Layout) -> impl Iterator<Item = isize> + '_ {
    let n = l.numel();
    let nd = l.shape.len();
    let mut idx = vec![0usize; nd];
    let mut off = l.offset as isize;
    (0..n).map(move |k| {
        if k > 0 {
            let mut d = nd;
            while d > 0 {
                d -= 1;
                idx[d] += 1;
                off += l.strides[d];
                if idx[d] < l.shape[d] {
                    break;
                }
                off -= l.strides[d] * l.shape[d] as isize;
                idx[d] = 0;
            }
        }
        off
    })
}

/// Backward of a view re-derived from its base: scatter into zeros of the base's shape.
struct ViewOfBaseBackward {
    positions: Tensor,
    base_shape: Shape,
}

impl Backward for ViewOfBaseBackward {
    fn name(&self) -> &'static str {
        "AsStridedBackward"
    }
    fn apply(
        &self,
        _s: &[Tensor],
        g: &[Option<Tensor>],
        _n: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &g[0] else {
            return Ok(vec![None]);
        };
        let n = self.base_shape.iter().product::<usize>();
        let z = Tensor::zeros(&[n], g.dtype(), g.device())?;
        let flat = crate::ops::shape::reshape(g, &[-1])?;
        let items = [crate::ops::index::IndexItem::Tensor(self.positions.clone())];
        let full = crate::ops::index::index_put("in-place", &z, &items, &flat, true)?;
        let dims: Vec<isize> = self.base_shape.iter().map(|&d| d as isize).collect();
        Ok(vec![Some(crate::ops::shape::reshape(&full, &dims)?)])
    }
}

/// Backward of an in-place write into a view, seen from the base: the old
/// base gets the gradient outside the view, the written value the part inside.
struct CopySlicesBackward {
    positions: Tensor,
    view_shape: Shape,
}

impl Backward for CopySlicesBackward {
    fn name(&self) -> &'static str {
        "CopySlices"
    }
    fn apply(
        &self,
        _s: &[Tensor],
        g: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &g[0] else {
            return Ok(vec![None, None]);
        };
        let dims: Vec<isize> = g.shape().iter().map(|&d| d as isize).collect();
        let flat = crate::ops::shape::reshape(g, &[-1])?;
        let items = [crate::ops::index::IndexItem::Tensor(self.positions.clone())];
        let old = if needs[0] {
            let z = Tensor::zeros(&[], g.dtype(), g.device())?;
            let cut = crate::ops::index::index_put("in-place", &flat, &items, &z, false)?;
            Some(crate::ops::shape::reshape(&cut, &dims)?)
        } else {
            None
        };
        let new = if needs[1] {
            let part = crate::ops::index::index_select(&flat, 0, &self.positions)?;
            let vd: Vec<isize> = self.view_shape.iter().map(|&d| d as isize).collect();
            Some(crate::ops::shape::reshape(&part, &vd)?)
        } else {
            None
        };
        Ok(vec![old, new])
    }
}

/// Record `backward` as the node producing `outputs` from `inputs`.
///
/// Call only when [`needs_grad`] is true. Non-floating outputs are left
/// without history (they are not differentiable).
pub fn record(
    backward: impl Backward + 'static,
    inputs: &[&Tensor],
    outputs: &[&Tensor],
    save: &[Save<'_>],
) {
    record_impl(backward, inputs, outputs, save, true)
}

/// [`record`] for a node whose output is a fresh alias of an input written in
/// place (followed by [`rebase_history`]); the alias is not a view.
pub fn record_alias(
    backward: impl Backward + 'static,
    inputs: &[&Tensor],
    outputs: &[&Tensor],
    save: &[Save<'_>],
) {
    record_impl(backward, inputs, outputs, save, false)
}

fn record_impl(
    backward: impl Backward + 'static,
    inputs: &[&Tensor],
    outputs: &[&Tensor],
    save: &[Save<'_>],
    detect_views: bool,
) {
    let mut saved = Vec::with_capacity(save.len());
    for s in save {
        saved.push(match s {
            Save::Tensor(t) => match t.meta() {
                Some(m) if m.requires_grad() && !m.is_leaf() => SavedTensor {
                    data: t.detach(),
                    edge: grad_fn_of(t),
                    output_nr: None,
                    version: t.version(),
                },
                _ => SavedTensor {
                    data: (*t).clone(),
                    edge: None,
                    output_nr: None,
                    version: t.version(),
                },
            },
            Save::Output(i) => SavedTensor {
                data: outputs[*i].detach(),
                edge: None,
                output_nr: Some(*i as u32),
                version: outputs[*i].version(),
            },
        });
    }
    let metas: Vec<Option<Arc<AutogradMeta>>> = outputs
        .iter()
        .map(|o| {
            if o.dtype().is_floating_point() && o.meta().is_none() {
                Some(o.init_meta(|| AutogradMeta::leaf(true)).clone())
            } else {
                None
            }
        })
        .collect();
    let node = Arc::new(Node {
        backward: Box::new(backward),
        next: inputs.iter().map(|t| edge_of(t)).collect(),
        had_saved: !saved.is_empty(),
        saved: Mutex::new(Some(saved)),
        outputs: metas
            .iter()
            .map(|m| m.as_ref().map_or_else(Weak::new, Arc::downgrade))
            .collect(),
        out_info: outputs
            .iter()
            .map(|o| (Shape::from_slice(o.shape()), o.dtype()))
            .collect(),
        seq: SEQ.fetch_add(1, Ordering::Relaxed),
        hooks: Mutex::new(vec![]),
    });
    for (i, m) in metas.iter().enumerate() {
        if let Some(m) = m {
            m.set_grad_fn(Some(Edge::Node(node.clone(), i as u32)));
            if detect_views {
                mark_view(outputs[i], m, inputs);
            }
        }
    }
}

/// An output sharing storage with an input that requires grad is a view of it.
fn mark_view(out: &Tensor, m: &Arc<AutogradMeta>, inputs: &[&Tensor]) {
    let Some(src) = inputs
        .iter()
        .find(|t| t.requires_grad() && out.shares_storage(t))
    else {
        return;
    };
    let base = match src.meta().and_then(|sm| sm.view.get()) {
        Some(v) => v.base.clone(),
        None => (*src).clone(),
    };
    let _ = m.view.set(ViewInfo {
        base,
        version: AtomicU64::new(out.version()),
    });
}

/// Make `t` the output of a node recorded for an in-place op: its history is
/// replaced by `from`'s (the out-of-place result whose data was copied in).
pub fn rebase_history(t: &Tensor, from: &Tensor) -> Result<()> {
    if let Some((m, v)) = t.meta().and_then(|m| m.view.get().map(|v| (m, v))) {
        if v.base.requires_grad() {
            // The write landed in the base's memory: the base's new value is its
            // old value outside the view and `from` inside.
            let pos = view_positions(&v.base, t)?;
            let base_alias = v.base.detach();
            record_impl(
                CopySlicesBackward {
                    positions: pos.clone(),
                    view_shape: Shape::from_slice(t.shape()),
                },
                &[&v.base, from],
                &[&base_alias],
                &[],
                false,
            );
            if let Some(bm) = v.base.meta() {
                bm.set_grad_fn(base_alias.meta().and_then(|a| a.grad_fn()));
            }
            link_view(t, m, v, pos);
            return Ok(());
        }
    }
    let Some(src) = from.meta().and_then(|m| m.grad_fn()) else {
        return Ok(());
    };
    let m = t.init_meta(|| AutogradMeta::leaf(true));
    m.requires_grad.store(true, Ordering::Relaxed);
    m.set_grad_fn(Some(src));
    Ok(())
}

/// Error for in-place ops on leaves that require grad (their value is an input of the graph).
pub fn check_inplace(op: &'static str, t: &Tensor) -> Result<()> {
    if is_grad_enabled() {
        if let Some(m) = t.meta() {
            let of_leaf = m
                .view
                .get()
                .and_then(|v| v.base.meta())
                .is_some_and(|b| b.requires_grad() && b.is_leaf());
            if of_leaf {
                return Err(Error::runtime(
                    op,
                    "a view of a leaf tensor that requires grad is being used in an in-place operation; wrap the update in `with fg.no_grad():`",
                ));
            }
            if m.requires_grad() && m.is_leaf() {
                return Err(Error::runtime(
                    op,
                    "a leaf tensor that requires grad is being used in an in-place operation; wrap the update in `with fg.no_grad():`",
                ));
            }
        }
    }
    Ok(())
}

/// Set `requires_grad` on a tensor (leaves only; floating dtypes only when turning on).
pub fn set_requires_grad(t: &Tensor, on: bool) -> Result<()> {
    if on && !t.dtype().is_floating_point() {
        return Err(Error::dtype(
            "requires_grad_",
            format!(
                "only tensors of floating point dtype can require gradients (got {})",
                t.dtype()
            ),
        ));
    }
    match t.meta() {
        Some(m) => {
            if !m.is_leaf() && !on {
                return Err(Error::runtime(
                    "requires_grad_",
                    "you can only change requires_grad flags of leaf tensors; use .detach() to get a tensor without history",
                ));
            }
            m.requires_grad.store(on, Ordering::Relaxed);
        }
        None => {
            if on {
                t.init_meta(|| AutogradMeta::leaf(true));
            }
        }
    }
    Ok(())
}

impl Node {
    /// Unpack saved tensors, checking versions; outputs are re-linked to `this`.
    fn unpack(this: &Arc<Node>, link_outputs: bool) -> Result<Vec<Tensor>> {
        let g = this.saved.lock();
        let Some(saved) = g.as_ref() else {
            if this.had_saved {
                return Err(Error::runtime(
                    "backward",
                    format!(
                        "trying to backward through the graph a second time (or to use saved values after they were freed) in {}; pass retain_graph=True to the first backward() if you need to backward twice",
                        this.name()
                    ),
                ));
            }
            return Ok(vec![]);
        };
        saved
            .iter()
            .map(|s| {
                if s.data.version() != s.version {
                    return Err(Error::runtime(
                        "backward",
                        format!(
                            "one of the tensors needed for gradient computation (shape {:?}, dtype {}, saved by {}) has been modified by an in-place operation: it is at version {}; expected version {}",
                            s.data.shape(),
                            s.data.dtype(),
                            this.name(),
                            s.data.version(),
                            s.version
                        ),
                    ));
                }
                Ok(match s.output_nr {
                    Some(nr) if link_outputs => {
                        let t = s.data.detach();
                        let m = t.init_meta(|| AutogradMeta::leaf(true));
                        m.set_grad_fn(Some(Edge::Node(this.clone(), nr)));
                        t
                    }
                    None if link_outputs && s.edge.is_some() => {
                        let t = s.data.detach();
                        let m = t.init_meta(|| AutogradMeta::leaf(true));
                        m.set_grad_fn(s.edge.clone());
                        t
                    }
                    _ => s.data.clone(),
                })
            })
            .collect()
    }

    fn release(&self) {
        *self.saved.lock() = None;
    }
}

/// Sum `g` down to `shape` (undoing broadcasting), as VJPs of broadcasting ops need.
pub fn sum_to(g: &Tensor, shape: &[usize]) -> Result<Tensor> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let lead = g.ndim() - shape.len();
    let mut dims: Vec<isize> = (0..lead as isize).collect();
    for (i, &d) in shape.iter().enumerate() {
        if d == 1 && g.shape()[lead + i] != 1 {
            dims.push((lead + i) as isize);
        }
    }
    if lead > 0 && dims.len() == lead {
        // Only leading dims go (a bias gradient): the sum without keepdim
        // already has the target shape.
        return crate::ops::reduce::sum(g, Some(&dims), false, None);
    }
    let s = crate::ops::reduce::sum(g, Some(&dims), true, None)?;
    let spec: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
    crate::ops::shape::reshape(&s, &spec)
}
