//! The profiler's bindings: switch recording on and off, drain the recorded
//! events, and record the ranges Python names (`record_function`).

use pyo3::prelude::*;

use crate::tensor::profile::{self, Event, Kind};

/// One event as `(name, kind, start_ns, dur_ns, thread, input_shapes)`.
type PyEvent = (String, &'static str, u64, u64, u64, Vec<Vec<usize>>);

fn to_py(e: Event) -> PyEvent {
    (
        e.name.into_owned(),
        e.kind.name(),
        e.start_ns,
        e.dur_ns,
        e.thread,
        e.shapes,
    )
}

/// Start recording (events left from before are discarded).
#[pyfunction]
#[pyo3(signature = (record_shapes = false))]
fn _profiler_start(record_shapes: bool) {
    profile::set_enabled(true, record_shapes);
}

/// Stop recording; returns the events recorded since the start.
#[pyfunction]
fn _profiler_stop() -> Vec<PyEvent> {
    profile::set_enabled(false, false);
    profile::take().into_iter().map(to_py).collect()
}

/// The events recorded so far (recording goes on).
#[pyfunction]
fn _profiler_take() -> Vec<PyEvent> {
    profile::take().into_iter().map(to_py).collect()
}

/// Whether the profiler records.
#[pyfunction]
fn _profiler_enabled() -> bool {
    profile::enabled()
}

/// The profiler's clock: nanoseconds since its origin (monotonic).
#[pyfunction]
fn _profiler_now() -> u64 {
    profile::now_ns()
}

/// This thread's number in events.
#[pyfunction]
fn _profiler_thread() -> u64 {
    profile::thread_id()
}

/// Record a range named `name` from `start_ns` (the profiler's clock) to now.
#[pyfunction]
fn _profiler_record(name: String, start_ns: u64) {
    let end = profile::now_ns();
    profile::push(Event {
        name: name.into(),
        kind: Kind::User,
        start_ns,
        dur_ns: end.saturating_sub(start_ns),
        thread: profile::thread_id(),
        shapes: Vec::new(),
    });
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    crate::ops::capture::install_namer(|c| c.name());
    m.add_function(wrap_pyfunction!(_profiler_start, m)?)?;
    m.add_function(wrap_pyfunction!(_profiler_stop, m)?)?;
    m.add_function(wrap_pyfunction!(_profiler_take, m)?)?;
    m.add_function(wrap_pyfunction!(_profiler_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(_profiler_now, m)?)?;
    m.add_function(wrap_pyfunction!(_profiler_thread, m)?)?;
    m.add_function(wrap_pyfunction!(_profiler_record, m)?)?;
    Ok(())
}
