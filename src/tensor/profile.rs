//! The profiler's recording side: a process-wide switch every op checks (one
//! relaxed atomic load; nothing else happens while it is off) and the events
//! recorded while it is on.
//!
//! An event is a name, a kind, a start and a duration in nanoseconds (from a
//! monotonic clock, measured from the first use of the profiler in this
//! process), the thread that ran it (a small number, one per thread) and,
//! when shapes are recorded, its inputs' shapes. Ops open a [`Scope`] at their
//! start; it records the event when dropped, at the op's end, so an op run
//! inside another (an op's inner ops, the ops a backward node runs) is a
//! nested event. Events go to one process-wide list under a lock that is
//! taken only while profiling; the Python profiler drains it.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

static ENABLED: AtomicBool = AtomicBool::new(false);
static SHAPES: AtomicBool = AtomicBool::new(false);
static EVENTS: Mutex<Vec<Event>> = Mutex::new(Vec::new());
static EPOCH: OnceLock<Instant> = OnceLock::new();
static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

/// What recorded an event.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An eager op (also one a compiled graph's node runs).
    Op,
    /// An autograd node's gradient, run by the backward engine.
    Backward,
    /// A whole run of a compiled graph, or one of its nodes that is no op.
    Graph,
    /// A range the user named (`record_function`).
    User,
}

impl Kind {
    /// The kind's name as the Python profiler reports it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Op => "op",
            Kind::Backward => "backward",
            Kind::Graph => "graph",
            Kind::User => "user",
        }
    }
}

/// One recorded event.
#[derive(Clone, Debug)]
pub struct Event {
    pub name: Cow<'static, str>,
    pub kind: Kind,
    pub start_ns: u64,
    pub dur_ns: u64,
    pub thread: u64,
    /// The inputs' shapes (empty unless shapes are recorded).
    pub shapes: Vec<Vec<usize>>,
}

/// Whether the profiler records (checked by every op; cheap).
#[inline(always)]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Whether recorded events carry their inputs' shapes.
pub fn record_shapes() -> bool {
    SHAPES.load(Ordering::Relaxed)
}

/// Start recording (discarding events left from before), or stop.
pub fn set_enabled(on: bool, shapes: bool) {
    if on {
        now_ns(); // the clock's origin is set before the first event
        take();
    }
    SHAPES.store(on && shapes, Ordering::Relaxed);
    ENABLED.store(on, Ordering::Relaxed);
}

/// Nanoseconds since the profiler's origin (a monotonic clock).
pub fn now_ns() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// This thread's number in events.
pub fn thread_id() -> u64 {
    THREAD.with(|t| *t)
}

/// Record a finished event.
pub fn push(ev: Event) {
    let mut v = EVENTS.lock().unwrap_or_else(|e| e.into_inner());
    v.push(ev);
}

/// The events recorded so far, removed from the list.
pub fn take() -> Vec<Event> {
    let mut v = EVENTS.lock().unwrap_or_else(|e| e.into_inner());
    std::mem::take(&mut *v)
}

/// An open event: records itself when dropped.
pub struct Scope {
    name: Cow<'static, str>,
    kind: Kind,
    start: u64,
    shapes: Vec<Vec<usize>>,
}

impl Scope {
    /// Open an event now (whether or not the profiler is on).
    pub fn open(name: impl Into<Cow<'static, str>>, kind: Kind, shapes: Vec<Vec<usize>>) -> Scope {
        Scope {
            name: name.into(),
            kind,
            start: now_ns(),
            shapes,
        }
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let end = now_ns();
        push(Event {
            name: std::mem::take(&mut self.name),
            kind: self.kind,
            start_ns: self.start,
            dur_ns: end.saturating_sub(self.start),
            thread: thread_id(),
            shapes: std::mem::take(&mut self.shapes),
        });
    }
}

/// An event named `name` from now until the result is dropped, while the
/// profiler is on (`None`, and no cost but the check, while it is off).
#[inline(always)]
pub fn scope(name: &'static str, kind: Kind) -> Option<Scope> {
    if enabled() {
        Some(Scope::open(name, kind, Vec::new()))
    } else {
        None
    }
}

/// [`scope`] for an op with inputs of these shapes (kept when shapes are recorded).
#[inline(always)]
pub fn op_scope<'a>(
    name: &'static str,
    shapes: impl FnOnce() -> Vec<&'a [usize]>,
) -> Option<Scope> {
    if enabled() {
        Some(open_with_shapes(name, Kind::Op, shapes))
    } else {
        None
    }
}

#[cold]
fn open_with_shapes<'a>(
    name: &'static str,
    kind: Kind,
    shapes: impl FnOnce() -> Vec<&'a [usize]>,
) -> Scope {
    let s = if record_shapes() {
        shapes().into_iter().map(|s| s.to_vec()).collect()
    } else {
        Vec::new()
    };
    Scope::open(name, kind, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_records_nothing_and_scopes_nest() {
        // One test: the switch is process-wide.
        set_enabled(false, false);
        assert!(scope("x", Kind::Op).is_none());
        set_enabled(true, true);
        {
            let _outer = scope("outer", Kind::User);
            let _inner = op_scope("inner", || vec![&[2usize, 3][..]]);
        }
        set_enabled(false, false);
        let ev = take();
        let mine: Vec<_> = ev.iter().filter(|e| e.thread == thread_id()).collect();
        assert_eq!(mine.len(), 2);
        let (inner, outer) = (mine[0], mine[1]);
        assert_eq!((&*inner.name, &*outer.name), ("inner", "outer"));
        assert_eq!(inner.shapes, vec![vec![2, 3]]);
        assert!(outer.start_ns <= inner.start_ns);
        assert!(inner.start_ns + inner.dur_ns <= outer.start_ns + outer.dur_ns);
    }
}
