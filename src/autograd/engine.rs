//! The backward engine: walks the recorded graph from the outputs to the
//! leaves without recursion, in dependency order, summing gradients that
//! meet at a node and calling each node's VJP once.

use std::cell::RefCell;
use std::collections::HashMap as StdHashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use super::{AutogradMeta, Edge, GradMode, Node};
use crate::error::{Error, Result};
use crate::ops::elementwise::{self as ew, BinaryOp};
use crate::tensor::Tensor;

/// Hashes a pointer key with one multiply (the maps below are keyed by
/// node and leaf addresses; SipHash costs more than the rest of a small step).
#[derive(Default)]
struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type HashMap<K, V> = StdHashMap<K, V, BuildHasherDefault<PtrHasher>>;

fn key(n: &Arc<Node>) -> usize {
    Arc::as_ptr(n) as usize
}

fn add_grads(a: Option<Tensor>, b: Tensor) -> Result<Tensor> {
    match a {
        None => Ok(b),
        Some(a) => ew::binary(BinaryOp::Add, &a, &b),
    }
}

/// A function queued to run once when the current backward finishes.
pub type Callback = Box<dyn FnOnce() -> Result<()> + Send>;

thread_local! {
    /// One list of queued callbacks per backward running on this thread
    /// (a hook may start a nested backward; the innermost one is last).
    static CALLBACKS: RefCell<Vec<Vec<Callback>>> = const { RefCell::new(Vec::new()) };
}

/// Queue `cb` to run once when the innermost backward running on this thread
/// finishes, after every leaf's `.grad` is written (PyTorch's
/// `queue_callback`). Callbacks run in the order queued; one may queue more.
/// A backward that fails drops its callbacks unrun. Outside a backward: an error.
pub fn queue_callback(cb: Callback) -> Result<()> {
    CALLBACKS.with(|c| match c.borrow_mut().last_mut() {
        Some(frame) => {
            frame.push(cb);
            Ok(())
        }
        None => Err(Error::runtime(
            "queue_callback",
            "a callback can only be queued while a backward pass is running (from a hook)",
        )),
    })
}

/// Opens this run's callback list; dropping it closes the list (unrun on error).
struct CallbackFrame;

impl CallbackFrame {
    fn open() -> CallbackFrame {
        CALLBACKS.with(|c| c.borrow_mut().push(Vec::new()));
        CallbackFrame
    }
    /// Run the queued callbacks, including any they queue, in order.
    fn run(&self) -> Result<()> {
        loop {
            let batch = CALLBACKS.with(|c| {
                c.borrow_mut()
                    .last_mut()
                    .map(std::mem::take)
                    .unwrap_or_default()
            });
            if batch.is_empty() {
                return Ok(());
            }
            for cb in batch {
                cb()?;
            }
        }
    }
}

impl Drop for CallbackFrame {
    fn drop(&mut self) {
        // Dropped callbacks may re-enter Python (releasing its objects): take
        // the list out before it drops.
        let frame = CALLBACKS.with(|c| c.borrow_mut().pop());
        drop(frame);
    }
}

/// Where the engine delivers gradients.
pub enum Sink<'a> {
    /// Accumulate into leaves' `.grad` (`backward()`).
    Accumulate,
    /// Return the gradients flowing into these edges (`autograd.grad`).
    Capture(&'a [Edge]),
}

fn edge_eq(a: &Edge, b: &Edge) -> bool {
    match (a, b) {
        (Edge::Node(x, i), Edge::Node(y, j)) => Arc::ptr_eq(x, y) && i == j,
        (Edge::Leaf(x), Edge::Leaf(y)) => Arc::ptr_eq(x, y),
        _ => false,
    }
}

/// Gradients reaching leaves during one run, summed per leaf until the leaf is final.
#[derive(Default)]
struct LeafGrads {
    index: HashMap<usize, usize>,
    items: Vec<(Arc<AutogradMeta>, Option<Tensor>)>,
}

impl LeafGrads {
    fn add(&mut self, m: &Arc<AutogradMeta>, g: Tensor) -> Result<()> {
        match self.index.get(&(Arc::as_ptr(m) as usize)) {
            Some(&i) => {
                let slot = &mut self.items[i].1;
                *slot = Some(add_grads(slot.take(), g)?);
            }
            None => {
                self.index.insert(Arc::as_ptr(m) as usize, self.items.len());
                self.items.push((m.clone(), Some(g)));
            }
        }
        Ok(())
    }

    /// Take the summed gradient of `m` out (None when none reached it).
    fn take(&mut self, m: &Arc<AutogradMeta>) -> Option<Tensor> {
        let i = self.index.remove(&(Arc::as_ptr(m) as usize))?;
        self.items[i].1.take()
    }

    /// Take every gradient still held, in first-reached order.
    fn drain(&mut self) -> Vec<(Arc<AutogradMeta>, Tensor)> {
        self.index.clear();
        self.items
            .drain(..)
            .filter_map(|(m, g)| g.map(|g| (m, g)))
            .collect()
    }
}

/// Add `g` into a leaf's `.grad`, stealing `g` when nothing else holds its storage.
fn accumulate_leaf(m: &Arc<AutogradMeta>, g: Tensor, create_graph: bool) -> Result<()> {
    if crate::ops::capture::recording() && crate::ops::capture::tracks(m) {
        // Inside a captured graph: the update is an effect of the graph.
        let old = crate::ops::capture::current_grad(m)?;
        let g = if create_graph {
            g
        } else {
            ew::clone(&g.detach())?
        };
        let new = match old {
            None => g,
            Some(o) => {
                let _mode = GradMode::set(create_graph);
                let s = ew::binary(BinaryOp::Add, &o, &g)?;
                if create_graph {
                    s
                } else {
                    s.detach()
                }
            }
        };
        return crate::ops::capture::set_grad(m, Some(new));
    }
    let g = if create_graph {
        g
    } else if Arc::strong_count(g.storage()) == 1 && g.is_contiguous() {
        g.detach()
    } else {
        ew::clone(&g)?
    };
    // (With a capture paused that has set this leaf's gradient, the real one is kept aside.)
    let paused = crate::ops::capture::paused_grad(m);
    let old = match &paused {
        Some(o) => o.clone(),
        None => m.grad(),
    };
    let new = match old {
        None => g,
        Some(o) => {
            let _mode = GradMode::set(create_graph);
            let s = ew::binary(BinaryOp::Add, &o, &g)?;
            if create_graph {
                s
            } else {
                s.detach()
            }
        }
    };
    if paused.is_none() || !crate::ops::capture::set_paused_grad(m, Some(new.clone())) {
        m.set_grad(Some(new));
    }
    Ok(())
}

/// Run backward from `roots` (each an edge and the gradient flowing into it).
///
/// A leaf's hooks run on its summed gradient as soon as that gradient is
/// final (no node still to run has an edge to the leaf), during the walk;
/// the `.grad` writes wait until the walk is over, so a walk stopped by an
/// error or an interrupt leaves every `.grad` as it was. Callbacks queued
/// during the run ([`queue_callback`]) run last, after the writes.
///
/// Returns, for [`Sink::Capture`], one entry per captured edge.
pub fn run(
    roots: Vec<(Edge, Tensor)>,
    retain_graph: bool,
    create_graph: bool,
    sink: Sink<'_>,
) -> Result<Vec<Option<Tensor>>> {
    run_then(roots, retain_graph, create_graph, sink, Ok)
}

/// [`run`], with `deliver` applied to the captured gradients before the
/// queued callbacks run: `backward(inputs=...)` writes its `.grad`s there, so
/// callbacks see them as after a plain `backward()`.
pub fn run_then<R>(
    roots: Vec<(Edge, Tensor)>,
    retain_graph: bool,
    create_graph: bool,
    sink: Sink<'_>,
    deliver: impl FnOnce(Vec<Option<Tensor>>) -> Result<R>,
) -> Result<R> {
    let frame = CallbackFrame::open();
    let captured = walk(roots, retain_graph, create_graph, &sink)?;
    let r = deliver(captured)?;
    frame.run()?;
    Ok(r)
}

/// Run a leaf's hooks on its final gradient; the result waits in `done`.
fn finish_leaf(
    m: Arc<AutogradMeta>,
    g: Tensor,
    done: &mut Vec<(Arc<AutogradMeta>, Tensor)>,
) -> Result<()> {
    let g = if m.has_hooks() { m.run_hooks(g)? } else { g };
    done.push((m, g));
    Ok(())
}

fn walk(
    roots: Vec<(Edge, Tensor)>,
    retain_graph: bool,
    create_graph: bool,
    sink: &Sink<'_>,
) -> Result<Vec<Option<Tensor>>> {
    let mut captured: Vec<Option<Tensor>> = match sink {
        Sink::Capture(es) => vec![None; es.len()],
        Sink::Accumulate => vec![],
    };
    // 1. Discover the graph and count, for each node and each leaf, the
    //    edges that reach it.
    let mut nodes: HashMap<usize, Arc<Node>> = HashMap::default();
    let mut deps: HashMap<usize, usize> = HashMap::default();
    let mut leaf_deps: HashMap<usize, usize> = HashMap::default();
    let mut stack: Vec<Arc<Node>> = vec![];
    for (e, _) in &roots {
        if let Edge::Node(n, _) = e {
            if let std::collections::hash_map::Entry::Vacant(v) = nodes.entry(key(n)) {
                v.insert(n.clone());
                stack.push(n.clone());
            }
        }
    }
    while let Some(n) = stack.pop() {
        for e in n.next.iter().flatten() {
            match e {
                Edge::Node(c, _) => {
                    *deps.entry(key(c)).or_insert(0) += 1;
                    if let std::collections::hash_map::Entry::Vacant(v) = nodes.entry(key(c)) {
                        v.insert(c.clone());
                        stack.push(c.clone());
                    }
                }
                Edge::Leaf(m) => *leaf_deps.entry(Arc::as_ptr(m) as usize).or_insert(0) += 1,
            }
        }
    }
    // 2. Seed the gradient buffers.
    let mut buffers: HashMap<usize, Vec<Option<Tensor>>> = HashMap::default();
    // Leaf gradients are summed until final, so hooks see (and may replace) the total once.
    let mut leaves = LeafGrads::default();
    // Final (hooked) leaf gradients, in the order they became final.
    let mut done: Vec<(Arc<AutogradMeta>, Tensor)> = vec![];
    let capture_of = |e: &Edge| -> Option<usize> {
        match sink {
            Sink::Capture(es) => es.iter().position(|c| edge_eq(c, e)),
            Sink::Accumulate => None,
        }
    };
    let mut root_leaves: Vec<Arc<AutogradMeta>> = vec![];
    for (e, g) in roots {
        match &e {
            Edge::Node(n, nr) => {
                let b = buffers
                    .entry(key(n))
                    .or_insert_with(|| vec![None; n.out_info.len()]);
                let slot = &mut b[*nr as usize];
                *slot = Some(add_grads(slot.take(), g)?);
            }
            Edge::Leaf(m) => {
                leaves.add(m, g)?;
                root_leaves.push(m.clone());
            }
        }
    }
    // Roots that are leaves no node reaches are final already.
    for m in root_leaves {
        if !leaf_deps.contains_key(&(Arc::as_ptr(&m) as usize)) {
            if let Some(g) = leaves.take(&m) {
                crate::par::poll("backward")?;
                finish_leaf(m, g, &mut done)?;
            }
        }
    }
    // 3. Process nodes whose every consumer has delivered.
    let mut ready: Vec<Arc<Node>> = nodes
        .values()
        .filter(|n| deps.get(&key(n)).copied().unwrap_or(0) == 0)
        .cloned()
        .collect();
    ready.sort_by_key(|n| n.seq);
    while let Some(node) = ready.pop() {
        // Leaf gradients are only written after the loop: stopping here
        // leaves every `.grad` as it was.
        crate::par::poll("backward")?;
        let k = key(&node);
        let mut grads = buffers
            .remove(&k)
            .unwrap_or_else(|| vec![None; node.out_info.len()]);
        // Hooks, retained grads and captures on this node's outputs.
        for (i, g) in grads.iter_mut().enumerate() {
            let Some(gi) = g.take() else { continue };
            let mut gi = node.run_output_hooks(i, gi)?;
            if let Some(m) = node.outputs.get(i).and_then(|w| w.upgrade()) {
                // Hooks registered while the tensor was a leaf of no history.
                if m.has_hooks() {
                    gi = m.run_hooks(gi)?;
                }
                if m.retains_grad() && matches!(sink, Sink::Accumulate) {
                    let keep = if create_graph {
                        gi.clone()
                    } else {
                        gi.detach()
                    };
                    let new = match m.grad() {
                        None => ew::clone(&keep)?,
                        Some(o) => ew::binary(BinaryOp::Add, &o, &keep)?,
                    };
                    m.set_grad(Some(new));
                }
            }
            if let Some(ci) = capture_of(&Edge::Node(node.clone(), i as u32)) {
                captured[ci] = Some(add_grads(captured[ci].take(), gi.clone())?);
            }
            *g = Some(gi);
        }
        let any = grads.iter().any(|g| g.is_some());
        let results = if any {
            let saved = Node::unpack(&node, create_graph)?;
            let needs: Vec<bool> = node.next.iter().map(|e| e.is_some()).collect();
            let r = {
                let _mode = GradMode::set(create_graph);
                if crate::ops::capture::active() {
                    crate::ops::capture::vjp(&node, &saved, &grads, &needs)?
                } else {
                    let _profiled = crate::tensor::profile::scope(
                        node.name(),
                        crate::tensor::profile::Kind::Backward,
                    );
                    node.backward.apply(&saved, &grads, &needs)?
                }
            };
            if r.len() != node.next.len() {
                return Err(Error::runtime(
                    "backward",
                    format!(
                        "internal error: {} returned {} gradients for {} inputs",
                        node.name(),
                        r.len(),
                        node.next.len()
                    ),
                ));
            }
            r
        } else {
            vec![None; node.next.len()]
        };
        if !retain_graph {
            node.release();
        }
        for (e, g) in node.next.iter().zip(results) {
            let Some(e) = e else { continue };
            match e {
                Edge::Node(c, nr) => {
                    let ck = key(c);
                    if let Some(g) = g {
                        let b = buffers
                            .entry(ck)
                            .or_insert_with(|| vec![None; c.out_info.len()]);
                        let slot = &mut b[*nr as usize];
                        *slot = Some(add_grads(slot.take(), g)?);
                    }
                    let d = deps.get_mut(&ck).expect("discovered edge");
                    *d -= 1;
                    if *d == 0 {
                        ready.push(c.clone());
                    }
                }
                Edge::Leaf(m) => {
                    if let Some(g) = g {
                        leaves.add(m, g)?;
                    }
                    let d = leaf_deps
                        .get_mut(&(Arc::as_ptr(m) as usize))
                        .expect("discovered leaf edge");
                    *d -= 1;
                    if *d == 0 {
                        // No node still to run reaches this leaf: its gradient is final.
                        if let Some(g) = leaves.take(m) {
                            finish_leaf(m.clone(), g, &mut done)?;
                        }
                    }
                }
            }
        }
    }
    // Anything not yet final (none in a complete walk) is final now.
    for (m, g) in leaves.drain() {
        finish_leaf(m, g, &mut done)?;
    }
    // 4. Leaves: accumulate or capture the hooked gradients.
    for (m, g) in done {
        match sink {
            Sink::Accumulate => accumulate_leaf(&m, g, create_graph)?,
            Sink::Capture(_) => {
                if let Some(i) = capture_of(&Edge::Leaf(m.clone())) {
                    captured[i] = Some(add_grads(captured[i].take(), g)?);
                }
            }
        }
    }
    Ok(captured)
}

/// The edge gradients of `t` flow into, or an error if `t` has no history and needs no grad.
pub fn edge_for(op: &'static str, t: &Tensor) -> Result<Edge> {
    match t.meta() {
        Some(m) if m.requires_grad() => Ok(match super::grad_fn_of(t) {
            Some(e) => e,
            None => Edge::Leaf(m.clone()),
        }),
        _ => Err(Error::runtime(
            op,
            format!(
                "element of shape {:?} does not require grad and does not have a grad_fn",
                t.shape()
            ),
        )),
    }
}
