//! The CPU threads, the deterministic mode and cooperative interrupts.
//!
//! Kernels ask [`split`] how many parts to cut work into and run their
//! parallel loops on the fork-join team ([`for_each`], [`map`], [`join`]
//! and their `_init` forms; see `team.rs`). Code that needs rayon (the
//! `gemm` crate's threads, parallel sorting) enters the project's own rayon
//! pool with [`install`]. Both are rebuilt when [`set_threads`] changes
//! their size, and after a `fork()` (a child process inherits their
//! bookkeeping but not their threads, so using them there would hang).
//!
//! **Deterministic mode** ([`set_deterministic`]): kernels whose partition
//! of the work depends on the thread count (reductions cut into partial
//! sums, GEMM splits) partition as if there were [`DET_SPLIT`] threads, and
//! partial results are always combined in index order, so the bits of every
//! result depend on the shapes only, not on the number of threads.
//!
//! **Interrupts** (Ctrl-C): the Python layer installs a signal hook. A long
//! single call started by [`run_interruptible`] runs on the pool while the
//! calling thread asks the hook; on an interrupt, [`cancelled`] turns true
//! for that job only, its kernels stop at their next check and the op
//! returns [`Error::Interrupted`]. Loops that run on the calling thread (the backward
//! engine, the graph executor) call [`poll`] between steps instead.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::error::{Error, Result};

mod team;
pub use team::{for_each, for_each_init, join, map, map_init, map_init_blocks};

/// The partition width used in deterministic mode, whatever the pool's size.
pub const DET_SPLIT: usize = 16;

/// Requested pool size (0: not set, use the machine's parallelism).
static REQUESTED: AtomicUsize = AtomicUsize::new(0);
static DETERMINISTIC: AtomicBool = AtomicBool::new(false);

struct Pool {
    threads: usize,
    pid: u32,
    pool: Arc<ThreadPool>,
}

static POOL: Mutex<Option<Pool>> = Mutex::new(None);

fn default_threads() -> usize {
    if let Some(n) = std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        return n;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The number of threads kernels run on.
#[inline]
pub fn threads() -> usize {
    match REQUESTED.load(Ordering::Relaxed) {
        0 => {
            let n = default_threads();
            // Remember it so the environment is read once.
            let _ = REQUESTED.compare_exchange(0, n, Ordering::Relaxed, Ordering::Relaxed);
            n
        }
        n => n,
    }
}

/// Set the number of threads kernels run on (at least 1). The pool is
/// rebuilt lazily, on the next parallel kernel.
pub fn set_threads(n: usize) -> Result<()> {
    if n == 0 {
        return Err(Error::value(
            "set_num_threads",
            "the number of threads must be at least 1",
        ));
    }
    REQUESTED.store(n, Ordering::Relaxed);
    Ok(())
}

/// How many parts a kernel cuts splittable work into: the thread count, or
/// [`DET_SPLIT`] in deterministic mode (so the partition, and with it the
/// order of floating-point additions, does not depend on the thread count).
#[inline]
pub fn split() -> usize {
    if DETERMINISTIC.load(Ordering::Relaxed) {
        DET_SPLIT
    } else {
        threads()
    }
}

/// Turn the deterministic mode on or off.
pub fn set_deterministic(on: bool) {
    DETERMINISTIC.store(on, Ordering::Relaxed);
}

/// Whether the deterministic mode is on.
pub fn deterministic() -> bool {
    DETERMINISTIC.load(Ordering::Relaxed)
}

/// The project's pool at the requested size (built or rebuilt as needed).
fn pool() -> Arc<ThreadPool> {
    let want = threads();
    let pid = std::process::id();
    let mut slot = POOL.lock();
    if let Some(p) = slot.as_ref() {
        if p.threads == want && p.pid == pid {
            return p.pool.clone();
        }
    }
    if let Some(old) = slot.take() {
        if old.pid != pid {
            // A forked child: the old pool's threads do not exist here, and
            // dropping it could wait for them. Keep it alive for good.
            std::mem::forget(old);
        }
    }
    let built = ThreadPoolBuilder::new()
        .num_threads(want)
        .thread_name(|i| format!("ferrograd-{i}"))
        .start_handler(|_| IN_POOL.with(|c| c.set(true)))
        .build()
        .map(Arc::new)
        .expect("could not start the CPU thread pool");
    *slot = Some(Pool {
        threads: want,
        pid,
        pool: built.clone(),
    });
    built
}

/// Run `f` inside the project's pool (at once when already on a pool thread),
/// so that rayon's parallel iterators inside it use that pool.
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if IN_POOL.with(|c| c.get()) {
        return f();
    }
    // Work entering from outside belongs to no interruptible job, even when
    // a pool thread picks it up while it waits inside one (work stealing):
    // that job's cancel flag must not stop it.
    pool().install(|| {
        let _outside = JobCancel::set(None);
        f()
    })
}

/// Sets this thread's job cancel flag, restoring the previous one on drop
/// (also when unwinding).
struct JobCancel(Option<Arc<AtomicBool>>);

impl JobCancel {
    fn set(flag: Option<Arc<AtomicBool>>) -> JobCancel {
        JobCancel(JOB_CANCEL.with(|c| c.replace(flag)))
    }
}

impl Drop for JobCancel {
    fn drop(&mut self) {
        let prev = self.0.take();
        JOB_CANCEL.with(|c| *c.borrow_mut() = prev);
    }
}

/// [`install`] when `parallel`, else `f()` on the calling thread (for
/// parallel iterators that may have a single task: those run inline).
#[inline]
pub fn install_if<R: Send>(parallel: bool, f: impl FnOnce() -> R + Send) -> R {
    if parallel {
        install(f)
    } else {
        f()
    }
}

/// Whether the work running on this thread has been asked to stop (by an
/// interrupt): true only inside a [`run_interruptible`] job whose caller saw
/// one. Kernels check it on the thread that runs the job (between GEMM
/// blocks, convolution samples), so a cancel never reaches other work.
#[inline]
pub fn cancelled() -> bool {
    JOB_CANCEL.with(|c| {
        c.borrow()
            .as_ref()
            .is_some_and(|f| f.load(Ordering::Relaxed))
    })
}

/// `Err(Interrupted)` once the running work has been asked to stop (see
/// [`cancelled`]): kernels call this where stopping leaves no user-visible
/// data half-written (outputs of the interrupted op are discarded).
#[inline]
pub fn check(op: &'static str) -> Result<()> {
    if cancelled() {
        Err(Error::Interrupted { op })
    } else {
        Ok(())
    }
}

/// How often [`poll`] and [`run_interruptible`] ask the signal hook.
pub const POLL_EVERY: Duration = Duration::from_millis(20);

/// Asks whether an interrupt arrived (set by the Python layer: it checks
/// Python's signal handlers, keeping the exception to raise later).
static SIGNAL_HOOK: OnceLock<fn() -> bool> = OnceLock::new();

thread_local! {
    /// True on the threads of the project's pools.
    static IN_POOL: Cell<bool> = const { Cell::new(false) };
    /// When [`poll`] last asked the signal hook ([`coarse_ms`] time).
    static LAST_POLL: Cell<Option<u64>> = const { Cell::new(None) };
    /// The cancel flag of the interruptible job running on this thread.
    static JOB_CANCEL: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Whether this thread is one of the core's worker threads (of the pool or
/// the team), which are never attached to the Python interpreter.
pub fn on_worker() -> bool {
    IN_POOL.with(|c| c.get()) || team::is_member()
}

/// Install the function that [`poll`] and [`run_interruptible`] call to learn
/// of interrupts (once; later calls are ignored).
pub fn set_signal_hook(f: fn() -> bool) {
    let _ = SIGNAL_HOOK.set(f);
}

/// A check point on the calling thread, for loops that run there (the
/// backward engine, the graph executor): `Err(Interrupted)` when the work was
/// cancelled or, at most every [`POLL_EVERY`], the signal hook reports an
/// interrupt. Call it only where stopping leaves no user-visible data
/// half-written.
pub fn poll(op: &'static str) -> Result<()> {
    check(op)?;
    let Some(hook) = SIGNAL_HOOK.get() else {
        return Ok(());
    };
    let now = coarse_ms();
    let due = LAST_POLL.with(|c| match c.get() {
        Some(t) if now.saturating_sub(t) < POLL_EVERY.as_millis() as u64 => false,
        _ => {
            c.set(Some(now));
            true
        }
    });
    if due && hook() {
        return Err(Error::Interrupted { op });
    }
    Ok(())
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
extern "C" {
    fn clock_gettime(clock: i32, ts: *mut [i64; 2]) -> i32;
}

/// Milliseconds of a monotonic clock, read cheaply: [`poll`] runs once per
/// graph node, where `Instant::now` was a measurable part of small nodes.
/// On Linux the coarse clock (a few milliseconds' resolution, enough for
/// [`POLL_EVERY`]); elsewhere `Instant`.
fn coarse_ms() -> u64 {
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    {
        const CLOCK_MONOTONIC_COARSE: i32 = 6;
        let mut ts = [0i64; 2];
        // SAFETY: `ts` is a valid timespec (two 64-bit fields on 64-bit Linux).
        if unsafe { clock_gettime(CLOCK_MONOTONIC_COARSE, &mut ts) } == 0 {
            return ts[0] as u64 * 1000 + ts[1] as u64 / 1_000_000;
        }
    }
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Run `f` on the pool while the calling thread asks the signal hook every
/// [`POLL_EVERY`]; on an interrupt, [`cancelled`] turns true inside `f` (its
/// kernels stop at their next check). Returns `f`'s result and whether an
/// interrupt was seen (the result is then incomplete). The calling thread
/// always waits for `f` to finish, so `f` may borrow local data.
pub fn run_interruptible<R: Send>(f: impl FnOnce() -> R + Send) -> (R, bool) {
    let hook = match SIGNAL_HOOK.get() {
        Some(h) if !IN_POOL.with(|c| c.get()) => *h,
        _ => return (install(f), false),
    };
    let flag = Arc::new(AtomicBool::new(false));
    let job_flag = flag.clone();
    let (tx, rx) = mpsc::sync_channel::<std::thread::Result<R>>(1);
    let task: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
        let r = {
            let _job = JobCancel::set(Some(job_flag));
            catch_unwind(AssertUnwindSafe(f))
        };
        let _ = tx.send(r);
    });
    // SAFETY: the task is erased to 'static only to cross into the pool. This
    // function neither returns nor unwinds before the task has run to its end
    // and sent its result (a panic inside is caught and sent too), so every
    // borrow the task holds outlives its use.
    let task: Box<dyn FnOnce() + Send + 'static> = unsafe {
        std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Box<dyn FnOnce() + Send + 'static>>(
            task,
        )
    };
    pool().spawn(task);
    let mut seen = false;
    let r = loop {
        match rx.recv_timeout(POLL_EVERY) {
            Ok(r) => break r,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if !seen && hook() {
                    seen = true;
                    flag.store(true, Ordering::Relaxed);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                // The task always sends before dropping its sender.
                unreachable!("the pool dropped a task without running it")
            }
        }
    };
    match r {
        Ok(v) => (v, seen),
        Err(p) => resume_unwind(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_uses_the_requested_size() {
        set_threads(3).unwrap();
        assert_eq!(install(rayon::current_num_threads), 3);
        set_threads(1).unwrap();
        assert_eq!(install(rayon::current_num_threads), 1);
        assert!(set_threads(0).is_err());
        set_threads(default_threads()).unwrap();
    }

    thread_local! {
        static INTERRUPT_HERE: Cell<bool> = const { Cell::new(false) };
    }

    /// Reports an interrupt only to threads that asked for one, so tests
    /// running beside this one never see it.
    fn test_hook() -> bool {
        INTERRUPT_HERE.with(|c| c.get())
    }

    #[test]
    fn interruptible_work_sees_the_cancel_flag() {
        set_signal_hook(test_hook);
        INTERRUPT_HERE.with(|c| c.set(true));
        let data = [1u32, 2, 3];
        let (sum, seen) = run_interruptible(|| {
            // Spin until cancelled, borrowing local data meanwhile.
            while !cancelled() {
                std::thread::yield_now();
            }
            data.iter().sum::<u32>()
        });
        assert_eq!((sum, seen), (6, true));
        assert!(!cancelled());
        std::thread::sleep(POLL_EVERY);
        assert!(matches!(poll("x"), Err(Error::Interrupted { op: "x" })));
        // Not due again within POLL_EVERY.
        assert!(poll("x").is_ok());
        INTERRUPT_HERE.with(|c| c.set(false));
        let (v, seen) = run_interruptible(|| 7);
        assert_eq!((v, seen), (7, false));
    }
}
