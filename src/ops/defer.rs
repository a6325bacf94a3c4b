//! Deferred elementwise results: eager fusion of large elementwise chains.
//!
//! A large float elementwise op that records no gradient may return its
//! result before computing it. The output's storage is flagged
//! [`PENDING`], and the op's program (a [`FusedKernel`]) waits with its
//! inputs in a process-wide queue. An elementwise op that then reads a
//! pending result whole inlines that result's program instead of reading
//! its bytes, so `x * y + z` over tensors larger than the caches is one
//! pass over memory instead of two, and the temporary is never written.
//!
//! Every read or write of a storage's bytes goes through
//! [`Storage::as_ptr`](crate::tensor::Storage::as_ptr). It computes the whole queue (through
//! the hook [`crate::tensor::defer`] holds, so that the tensor layer names no op)
//! first when the storage is pending or is read by a queued program
//! ([`READ`]): a result is final before anyone sees its bytes, and an input
//! is never changed while a queued program still has to read it. Memory
//! that other code can write without us seeing it — foreign memory and
//! owned memory once handed to NumPy, DLPack or `data_ptr` — is flagged
//! [`SHARED`] and never read by a queued program: ops on it run at once.
//!
//! The queue runs in creation order, so a queued program may read an
//! earlier pending result that was not inlined. The fused interpreter
//! computes each op exactly as the op's own kernel does (each op rounded on
//! its own), so deferred and immediate results are bit-for-bit equal.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use crate::error::Result;
use crate::kernel::fused::{FInstr, FusedKernel};
use crate::kernel::{BinaryOp, UnaryOp};
pub use crate::tensor::defer::{PENDING, POISONED, READ, SHARED};
use crate::tensor::{defer as flags, DType, Device, Layout, Tensor};

/// Elements an output needs for its op to be deferred. Below about a
/// megabyte the temporary stays in cache and the saved pass is worth less
/// than the bookkeeping.
const DEFAULT_MIN: usize = 1 << 20;
/// Queued programs at most; a longer queue is computed first.
const MAX_QUEUE: usize = 32;
/// Instructions an inlined program may reach (the interpreter's register
/// buffers shrink its chunks as programs grow).
const MAX_INSTRS: usize = 48;

static MIN_ELEMENTS: AtomicUsize = AtomicUsize::new(DEFAULT_MIN);
static QUEUE: Mutex<Vec<Queued>> = Mutex::new(Vec::new());
/// The queue's length, readable without the lock.
static QUEUED: AtomicUsize = AtomicUsize::new(0);
/// Ops queued, ops inlined into a later program, queue runs.
static STATS: [AtomicUsize; 3] = [
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
];

thread_local! {
    /// Set while this thread runs the queue: its own reads of flagged
    /// storages are the queue's, and must not run it again.
    static FLUSHING: Cell<bool> = const { Cell::new(false) };
}

/// One deferred result: `kernel` over `ins` into the contiguous `out`.
struct Queued {
    out: Weak<crate::tensor::Storage>,
    shape: Vec<usize>,
    dtype: DType,
    kernel: FusedKernel,
    ins: Vec<Tensor>,
    /// Whether a later program has inlined this one: it is inlined at most
    /// once, so a result read by several ops is computed at most twice.
    inlined: bool,
}

/// The elementwise op being deferred.
#[derive(Copy, Clone, Debug)]
pub enum Op {
    Unary(UnaryOp),
    Binary(BinaryOp),
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Unary(op) => op.name(),
            Op::Binary(op) => op.name(),
        }
    }
    /// Whether the fused interpreter runs this op with its compute dtype as
    /// output (bitwise ops and predicates are left to their own kernels).
    fn fusible(self) -> bool {
        match self {
            Op::Unary(op) => !matches!(op, UnaryOp::BitwiseNot),
            Op::Binary(op) => {
                !op.is_predicate()
                    && !matches!(op, BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor)
            }
        }
    }
}

/// Read the threshold from `FG_DEFER_MIN` (elements; `off` disables
/// deferral), if set: called once when the Python module loads.
pub fn init_from_env() {
    if let Ok(s) = std::env::var("FG_DEFER_MIN") {
        let v = if s.trim().eq_ignore_ascii_case("off") {
            usize::MAX
        } else {
            s.trim().parse().unwrap_or(DEFAULT_MIN).max(1)
        };
        MIN_ELEMENTS.store(v, Ordering::Relaxed);
    }
}

/// Whether an output of `numel` elements is large enough to defer (the
/// one check small ops pay).
#[inline]
pub fn worth(numel: usize) -> bool {
    numel >= MIN_ELEMENTS.load(Ordering::Relaxed)
}

/// Set the deferral threshold (`usize::MAX` turns deferral off); returns the old one.
pub fn set_min_elements(n: usize) -> usize {
    MIN_ELEMENTS.swap(n.max(1), Ordering::Relaxed)
}

/// Counters: (ops queued, ops inlined into a later op, queue runs).
pub fn stats() -> (usize, usize, usize) {
    let [a, b, c] = &STATS;
    (
        a.load(Ordering::Relaxed),
        b.load(Ordering::Relaxed),
        c.load(Ordering::Relaxed),
    )
}

/// Queue `op` over `operands` (already broadcast to `shape` and cast to
/// `dtype`) and return its pending output, or `None` when the op must run
/// now: deferral off or the output small, a dtype or op the interpreter
/// does not fuse, an operand off the CPU or in shared memory.
pub fn try_defer(
    op: Op,
    operands: &[&Tensor],
    shape: &[usize],
    dtype: DType,
) -> Result<Option<Tensor>> {
    if !worth(shape.iter().product())
        || !matches!(dtype, DType::F32 | DType::F64)
        || !op.fusible()
        || FLUSHING.with(Cell::get)
        || operands
            .iter()
            .any(|t| t.device() != Device::Cpu || t.dtype() != dtype)
    {
        return Ok(None);
    }
    // The tensor layer computes the queue through this hook when someone
    // reads a flagged storage (installed before anything is flagged).
    flags::install_flush(flush);
    // Under the gate: `mark_shared` cannot slip in between this check and
    // the READ flags set below.
    let _gate = flags::gate();
    let mut q = QUEUE.lock();
    if operands
        .iter()
        .any(|t| t.storage().defer_flags() & SHARED != 0)
    {
        return Ok(None);
    }
    let out = Tensor::empty(shape, dtype, Device::Cpu)?;
    prune(&mut q);
    if q.len() >= MAX_QUEUE {
        run_queue(&mut q);
    }
    let mut b = Builder::default();
    let regs: Vec<usize> = operands.iter().map(|t| b.operand(t, &q, shape)).collect();
    b.ops.push(op.name());
    let r = b.push(match op {
        Op::Unary(u) => FInstr::Unary(u, regs[0]),
        Op::Binary(o) => FInstr::Binary(o, regs[0], regs[1]),
    });
    // Every input broadcasts to the shape (operands were expanded to it,
    // inlined programs' inputs to their own equal shape): the queued run
    // cannot fail on a layout.
    if b.ins
        .iter()
        .any(|t| t.layout().expand("fused", shape).is_err())
    {
        return Ok(None);
    }
    for t in &b.ins {
        t.storage().set_defer_flags(READ);
    }
    out.storage().set_defer_flags(PENDING);
    for &(i, _) in &b.inlined {
        q[i].inlined = true;
    }
    STATS[1].fetch_add(b.inlined.len(), Ordering::Relaxed);
    q.push(Queued {
        out: Arc::downgrade(out.storage()),
        shape: shape.to_vec(),
        dtype,
        kernel: FusedKernel {
            n_inputs: b.ins.len(),
            instrs: b.instrs,
            outputs: vec![(r, dtype)],
            shape: shape.to_vec(),
            compute: dtype,
            ops: b.ops,
            reductions: vec![],
        },
        ins: b.ins,
        inlined: false,
    });
    QUEUED.store(q.len(), Ordering::Release);
    STATS[0].fetch_add(1, Ordering::Relaxed);
    Ok(Some(out))
}

/// A program being assembled from queued programs and new operands.
#[derive(Default)]
struct Builder {
    instrs: Vec<FInstr>,
    ins: Vec<Tensor>,
    ops: Vec<&'static str>,
    /// (queue position, result register) of each program inlined here (each
    /// once: an operand read twice, as in `t * t`, reuses the register).
    inlined: Vec<(usize, usize)>,
}

impl Builder {
    fn push(&mut self, i: FInstr) -> usize {
        self.instrs.push(i);
        self.instrs.len() - 1
    }

    /// The register holding operand `t`: a queued result read whole, in its
    /// own shape, is inlined (its program copied in); anything else is loaded.
    fn operand(&mut self, t: &Tensor, q: &[Queued], shape: &[usize]) -> usize {
        let whole = t.layout() == &Layout::contiguous(shape);
        let pos = (whole && t.storage().defer_flags() & PENDING != 0)
            .then(|| {
                q.iter()
                    .position(|e| std::ptr::eq(e.out.as_ptr(), Arc::as_ptr(t.storage())))
            })
            .flatten();
        if let Some(&(_, r)) = pos.and_then(|i| self.inlined.iter().find(|&&(x, _)| x == i)) {
            return r;
        }
        let queued = pos.filter(|&i| {
            let e = &q[i];
            // A reshaped view has the same bytes but not the same
            // indexing: the program's inputs broadcast to its own shape.
            !e.inlined && e.shape == shape && self.instrs.len() + e.kernel.instrs.len() < MAX_INSTRS
        });
        let Some(i) = queued else {
            let k = self.input(t);
            return self.push(FInstr::Load(k));
        };
        let e = &q[i];
        let base = self.instrs.len();
        for ins in &e.kernel.instrs {
            let moved = match *ins {
                FInstr::Load(k) => FInstr::Load(self.input(&e.ins[k])),
                FInstr::Const(c) => FInstr::Const(c),
                FInstr::Unary(op, a) => FInstr::Unary(op, a + base),
                FInstr::Binary(op, a, b) => FInstr::Binary(op, a + base, b + base),
                FInstr::Where(c, a, b) => FInstr::Where(c + base, a + base, b + base),
            };
            self.instrs.push(moved);
        }
        self.ops.extend_from_slice(&e.kernel.ops);
        let r = base + e.kernel.outputs[0].0;
        self.inlined.push((i, r));
        r
    }

    /// The input index of `t` (one per distinct view).
    fn input(&mut self, t: &Tensor) -> usize {
        if let Some(k) = self
            .ins
            .iter()
            .position(|u| u.shares_storage(t) && u.layout() == t.layout() && u.dtype() == t.dtype())
        {
            return k;
        }
        // Without its autograd state: the queue must not keep a graph alive.
        self.ins.push(t.with_layout(t.layout().clone()));
        self.ins.len() - 1
    }
}

/// Drop queued programs whose result nobody holds any more, and clear the
/// [`READ`] flag of storages only they read.
fn prune(q: &mut Vec<Queued>) {
    if q.iter().all(|e| e.out.strong_count() > 0) {
        return;
    }
    let (live, dead): (Vec<Queued>, Vec<Queued>) = std::mem::take(q)
        .into_iter()
        .partition(|e| e.out.strong_count() > 0);
    *q = live;
    QUEUED.store(q.len(), Ordering::Release);
    for t in dead.iter().flat_map(|e| &e.ins) {
        let still_read = q.iter().any(|e| e.ins.iter().any(|u| u.shares_storage(t)));
        if !still_read {
            t.storage().clear_defer_flags(READ);
        }
    }
}

/// Marks this thread as running the queue until dropped (also on unwind).
struct Flushing;

impl Flushing {
    fn enter() -> Flushing {
        FLUSHING.with(|f| f.set(true));
        Flushing
    }
}

impl Drop for Flushing {
    fn drop(&mut self) {
        FLUSHING.with(|f| f.set(false));
    }
}

/// Compute every queued result, in order, and clear the flags.
fn run_queue(q: &mut Vec<Queued>) {
    let items = std::mem::take(q);
    if items.is_empty() {
        QUEUED.store(0, Ordering::Release);
        return;
    }
    STATS[2].fetch_add(1, Ordering::Relaxed);
    let guard = Flushing::enter();
    let mut failure = None;
    for e in &items {
        let Some(st) = e.out.upgrade() else { continue };
        // The program was checked when queued, so this cannot fail; if it
        // does all the same, the result is poisoned rather than left unwritten.
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let out = Tensor::from_parts(st.clone(), Layout::contiguous(&e.shape), e.dtype)?;
            crate::backend::cpu::graph_kernel::run(&e.kernel, &e.ins, std::slice::from_ref(&out))
        }));
        let err = match run {
            Ok(Ok(())) => continue,
            Ok(Err(err)) => err.to_string(),
            Err(_) => "panicked".to_string(),
        };
        st.set_defer_flags(POISONED);
        failure.get_or_insert(format!("{} ({err})", e.kernel.ops.join(", ")));
    }
    for e in &items {
        if let Some(st) = e.out.upgrade() {
            st.clear_defer_flags(PENDING);
        }
        for t in &e.ins {
            t.storage().clear_defer_flags(READ);
        }
    }
    drop(guard);
    // Only now: `idle()` must not report an empty queue whose results are
    // still being computed (`fg.synchronize()` returns on it).
    QUEUED.store(0, Ordering::Release);
    if let Some(f) = failure {
        panic!("internal error: a deferred elementwise program failed: {f}");
    }
}

/// Whether nothing is queued (a hint: another thread may queue at once).
#[inline]
pub fn idle() -> bool {
    QUEUED.load(Ordering::Acquire) == 0
}

/// Compute every deferred result now (`fg.synchronize()`).
#[cold]
#[inline(never)]
pub fn flush() {
    if FLUSHING.with(Cell::get) {
        return;
    }
    run_queue(&mut QUEUE.lock());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::elementwise::{binary, binary_, unary};

    fn big(f: impl Fn(usize) -> f32) -> Tensor {
        let n = DEFAULT_MIN;
        Tensor::from_vec((0..n).map(f).collect(), &[n]).unwrap()
    }

    #[test]
    fn chains_fuse_match_immediate_and_see_no_later_write() {
        let x = big(|i| (i % 97) as f32 * 0.25);
        let y = big(|i| (i % 13) as f32 - 6.0);
        let want: Vec<f64> = x
            .to_f64_vec()
            .iter()
            .zip(y.to_f64_vec())
            .map(|(&a, b)| ((a as f32 * b as f32).tanh() + a as f32) as f64)
            .collect();
        let (queued, inlined, _) = stats();
        let prod = binary(BinaryOp::Mul, &x, &y).unwrap();
        let r = binary(BinaryOp::Add, &unary(UnaryOp::Tanh, &prod).unwrap(), &x).unwrap();
        // (Other tests may queue concurrently: the counters only grow.)
        assert!(stats().0 >= queued + 3 && stats().1 >= inlined + 2);
        // A write to an input: the queue runs first, with the old values.
        binary_(BinaryOp::Add, &x, &big(|_| 1000.0)).unwrap();
        assert_eq!(r.storage().defer_flags() & (PENDING | READ), 0);
        assert_eq!(r.to_f64_vec(), want);
        assert_eq!(x.to_f64_vec()[1], 1000.25);
    }

    #[test]
    fn shared_memory_is_never_read_late() {
        let x = big(|i| i as f32);
        x.storage().set_defer_flags(SHARED);
        let r = binary(BinaryOp::Mul, &x, &x).unwrap();
        assert_eq!(r.storage().defer_flags() & PENDING, 0, "ran at once");
        assert_eq!(r.to_f64_vec()[3], 9.0);
    }
}
