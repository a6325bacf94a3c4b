//! The fork-join team that runs the kernels' parallel loops.
//!
//! Handing a loop to a pool whose threads sleep costs a futex wake each way,
//! and on some machines (virtual ones especially) a wake takes several
//! microseconds: a rayon `install` + `join` measured 25 µs, more than many
//! kernels take in all. The team avoids both hops. The calling thread runs
//! tasks of its own loop; the other members claim tasks from a shared
//! counter; between jobs they spin for [`SPIN`] before they sleep, so the
//! back-to-back kernels of a training step start at once (a hand-off then
//! costs well under a microsecond).
//!
//! One job runs at a time. A loop started while another runs (a second
//! Python thread) or from inside a task (a nested loop) runs all its tasks
//! on the calling thread. Tasks see the caller's interrupt flag
//! ([`super::cancelled`]). A panic in a task stops the handing out of
//! further tasks and is resumed on the calling thread once every member
//! has left the job.

use std::any::Any;
use std::cell::Cell;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::{threads, JobCancel, JOB_CANCEL};

/// How long an idle member spins for the next job before it sleeps.
const SPIN: Duration = Duration::from_micros(200);

/// A participant: claims task indices from the counter until none are left.
type Participant<'a> = dyn Fn(&AtomicUsize, usize) + Sync + 'a;

struct Job<'a> {
    run: &'a Participant<'a>,
    n: usize,
    next: AtomicUsize,
    cancel: Option<Arc<AtomicBool>>,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

impl Job<'_> {
    /// Take part in the job; a panic is kept for the caller, and no further
    /// tasks are handed out.
    fn take_part(&self) {
        if let Err(p) = catch_unwind(AssertUnwindSafe(|| (self.run)(&self.next, self.n))) {
            self.next.store(self.n, Ordering::Relaxed);
            self.panic.lock().get_or_insert(p);
        }
    }
}

struct Shared {
    /// The running job, or null.
    job: AtomicPtr<Job<'static>>,
    /// Counts published jobs, so a member takes part in each at most once.
    epoch: AtomicU64,
    /// Members inside the current job (the caller waits for zero).
    active: AtomicUsize,
    /// Members asleep on `wake`.
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
    quit: AtomicBool,
}

struct Team {
    size: usize,
    pid: u32,
    shared: Arc<Shared>,
}

static TEAM: Mutex<Option<Team>> = Mutex::new(None);
/// Held by the caller of the running job.
static BUSY: Mutex<()> = Mutex::new(());

thread_local! {
    /// True on members, and on a caller while its job runs.
    static IN_TEAM: Cell<bool> = const { Cell::new(false) };
    /// True on the team's own threads.
    static MEMBER: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is one of the team's own threads.
pub fn is_member() -> bool {
    MEMBER.with(|c| c.get())
}

/// The team at the requested size, or `None` when there is one thread.
fn team() -> Option<Arc<Shared>> {
    let want = threads();
    if want <= 1 {
        return None;
    }
    let pid = std::process::id();
    let mut slot = TEAM.lock();
    if let Some(t) = slot.as_ref() {
        if t.size == want && t.pid == pid {
            return Some(t.shared.clone());
        }
    }
    if let Some(old) = slot.take() {
        if old.pid == pid {
            old.shared.quit.store(true, Ordering::SeqCst);
            let _g = old.shared.lock.lock();
            old.shared.wake.notify_all();
        } else {
            // A forked child: the old members do not exist here, and their
            // lock may be held forever. Keep it alive for good.
            std::mem::forget(old);
        }
    }
    let shared = Arc::new(Shared {
        job: AtomicPtr::new(std::ptr::null_mut()),
        epoch: AtomicU64::new(0),
        active: AtomicUsize::new(0),
        sleepers: AtomicUsize::new(0),
        lock: Mutex::new(()),
        wake: Condvar::new(),
        quit: AtomicBool::new(false),
    });
    for i in 1..want {
        let sh = shared.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("ferrograd-team-{i}"))
            .spawn(move || member(sh));
        if spawned.is_err() {
            // Could not start a thread: run the loops on the caller alone.
            shared.quit.store(true, Ordering::SeqCst);
            return None;
        }
    }
    *slot = Some(Team {
        size: want,
        pid,
        shared: shared.clone(),
    });
    Some(shared)
}

/// A member's life: wait for a job it has not seen, take part, repeat.
fn member(sh: Arc<Shared>) {
    IN_TEAM.with(|c| c.set(true));
    MEMBER.with(|c| c.set(true));
    let mut seen = 0u64;
    let ready = |seen: u64| {
        !sh.job.load(Ordering::SeqCst).is_null() && sh.epoch.load(Ordering::SeqCst) != seen
    };
    loop {
        let start = Instant::now();
        let mut spins = 0u32;
        while !ready(seen) {
            if sh.quit.load(Ordering::Relaxed) {
                return;
            }
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) && start.elapsed() > SPIN {
                let mut g = sh.lock.lock();
                sh.sleepers.fetch_add(1, Ordering::SeqCst);
                while !ready(seen) && !sh.quit.load(Ordering::SeqCst) {
                    sh.wake.wait(&mut g);
                }
                sh.sleepers.fetch_sub(1, Ordering::SeqCst);
            }
        }
        sh.active.fetch_add(1, Ordering::SeqCst);
        let p = sh.job.load(Ordering::SeqCst);
        if !p.is_null() {
            // The pointer and the epoch belong to one job: its caller clears
            // the pointer and then waits for `active` to reach zero before a
            // new job can be published.
            seen = sh.epoch.load(Ordering::SeqCst);
            // SAFETY: the caller keeps the job alive until `active` is zero.
            let job = unsafe { &*p };
            let _flag = JobCancel::set(job.cancel.clone());
            job.take_part();
        }
        sh.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Run `run` on the calling thread and on the idle members of the team.
fn launch(n: usize, run: &Participant<'_>) {
    let counter = AtomicUsize::new(0);
    let serial = n <= 1 || IN_TEAM.with(|c| c.get());
    let team = if serial { None } else { team() };
    let busy = team.as_ref().and_then(|_| BUSY.try_lock());
    let (Some(sh), Some(_busy)) = (team, busy) else {
        run(&counter, n);
        return;
    };
    let job = Job {
        run,
        n,
        next: counter,
        cancel: JOB_CANCEL.with(|c| c.borrow().clone()),
        panic: Mutex::new(None),
    };
    sh.epoch.fetch_add(1, Ordering::SeqCst);
    // SAFETY (lifetime erasure): the pointer is cleared below, and this
    // function waits until no member is inside the job before returning.
    let ptr = &job as *const Job<'_> as *mut Job<'static>;
    sh.job.store(ptr, Ordering::SeqCst);
    if sh.sleepers.load(Ordering::SeqCst) > 0 {
        let _g = sh.lock.lock();
        sh.wake.notify_all();
    }
    IN_TEAM.with(|c| c.set(true));
    job.take_part();
    IN_TEAM.with(|c| c.set(false));
    sh.job.store(std::ptr::null_mut(), Ordering::SeqCst);
    while sh.active.load(Ordering::SeqCst) != 0 {
        std::hint::spin_loop();
    }
    if let Some(p) = job.panic.into_inner() {
        resume_unwind(p);
    }
}

/// Run `f(i)` for every `i` in `0..n` on the team (the calling thread
/// included); tasks are claimed in index order, one at a time.
pub fn for_each(n: usize, f: impl Fn(usize) + Sync) {
    launch(n, &|next: &AtomicUsize, n: usize| loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        f(i);
    });
}

/// [`for_each`] with a state per participating thread, made by `init` on
/// its first task (scratch buffers reused across tasks).
pub fn for_each_init<S>(n: usize, init: impl Fn() -> S + Sync, f: impl Fn(&mut S, usize) + Sync) {
    launch(n, &|next: &AtomicUsize, n: usize| {
        let mut state: Option<S> = None;
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            f(state.get_or_insert_with(&init), i);
        }
    });
}

/// A pointer that tasks may share (each index is written by one task).
struct Slots<T>(*mut Option<T>);
// SAFETY: tasks write disjoint slots; the vector outlives the job.
unsafe impl<T: Send> Sync for Slots<T> {}

/// `[f(0), f(1), …, f(n-1)]`, computed on the team.
pub fn map<T: Send>(n: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    map_init(n, || (), |_, i| f(i))
}

/// [`map`] with a state per participating thread (see [`for_each_init`]).
pub fn map_init<S, T: Send>(
    n: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize) -> T + Sync,
) -> Vec<T> {
    let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let slots = Slots(out.as_mut_ptr());
    let slots = &slots;
    for_each_init(n, init, |s, i| {
        let v = f(s, i);
        // SAFETY: `i < n` and slot `i` is written by this task only.
        unsafe { *slots.0.add(i) = Some(v) };
    });
    out.into_iter()
        .map(|v| v.expect("every task of a finished job ran"))
        .collect()
}

/// [`map_init`] whose tasks are `parts` contiguous blocks of indices, so
/// that each thread streams through one range of memory (a long reduction
/// read in order keeps the hardware prefetchers on one stream per thread).
/// The results, and so anything combined from them in index order, do not
/// depend on `parts`.
pub fn map_init_blocks<S, T: Send>(
    n: usize,
    parts: usize,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, usize) -> T + Sync,
) -> Vec<T> {
    let parts = parts.clamp(1, n.max(1));
    let per = n.div_ceil(parts);
    let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let slots = Slots(out.as_mut_ptr());
    let slots = &slots;
    for_each_init(parts, init, |s, b| {
        for i in b * per..n.min((b + 1) * per) {
            let v = f(s, i);
            // SAFETY: `i < n` and slot `i` belongs to block `b` only.
            unsafe { *slots.0.add(i) = Some(v) };
        }
    });
    out.into_iter()
        .map(|v| v.expect("every task of a finished job ran"))
        .collect()
}

/// Run `a` and `b`, on two threads of the team when one is idle.
pub fn join<RA: Send, RB: Send>(
    a: impl FnOnce() -> RA + Send,
    b: impl FnOnce() -> RB + Send,
) -> (RA, RB) {
    let a = Mutex::new(Some(a));
    let b = Mutex::new(Some(b));
    let (ra, rb) = (Mutex::new(None), Mutex::new(None));
    for_each(2, |i| {
        if i == 0 {
            let f = a.lock().take().expect("task 0 runs once");
            *ra.lock() = Some(f());
        } else {
            let f = b.lock().take().expect("task 1 runs once");
            *rb.lock() = Some(f());
        }
    });
    (
        ra.into_inner().expect("task 0 ran"),
        rb.into_inner().expect("task 1 ran"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_runs_once_in_index_order_results() {
        for n in [0usize, 1, 2, 3, 17, 1000] {
            let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            for_each(n, |i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            assert_eq!(map(n, |i| i * i), (0..n).map(|i| i * i).collect::<Vec<_>>());
            for parts in [1, 2, 3, 16] {
                let v = map_init_blocks(n, parts, || (), |_, i| i + 1);
                assert_eq!(v, (1..=n).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn nested_loops_and_joins_complete() {
        let total = AtomicUsize::new(0);
        for_each(8, |_| {
            for_each(4, |_| {
                total.fetch_add(1, Ordering::Relaxed);
            });
        });
        assert_eq!(total.load(Ordering::Relaxed), 32);
        let (x, y) = join(|| map(5, |i| i).len(), || 7);
        assert_eq!((x, y), (5, 7));
    }

    #[test]
    fn states_are_per_thread_and_reused() {
        let made = AtomicUsize::new(0);
        let v = map_init(
            64,
            || {
                made.fetch_add(1, Ordering::Relaxed);
                Vec::<usize>::new()
            },
            |buf, i| {
                buf.push(i);
                i
            },
        );
        assert_eq!(v, (0..64).collect::<Vec<_>>());
        assert!(made.load(Ordering::Relaxed) <= threads().max(1));
    }

    #[test]
    fn a_panicking_task_reaches_the_caller_and_the_team_survives() {
        let r = catch_unwind(|| {
            for_each(100, |i| {
                if i == 37 {
                    panic!("task 37");
                }
            })
        });
        assert!(r.is_err());
        assert_eq!(map(10, |i| i + 1).iter().sum::<usize>(), 55);
    }

    #[test]
    fn concurrent_callers_all_finish() {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    (0..200)
                        .map(|k| map(16, |i| i + k + t).iter().sum::<usize>())
                        .sum::<usize>()
                })
            })
            .collect();
        for (t, h) in handles.into_iter().enumerate() {
            let want: usize = (0..200)
                .map(|k| (0..16).map(|i| i + k + t).sum::<usize>())
                .sum();
            assert_eq!(h.join().unwrap(), want);
        }
    }
}
