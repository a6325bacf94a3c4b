//! The capture state every layer may read: whether ops on this thread are
//! being captured, whether a computation escaped the capture, and the few
//! questions tensor code asks the graph being captured.
//!
//! The graph layer owns capturing; it sets these flags and installs the
//! [`TensorHooks`] when a capture starts, so that no lower layer names it.
//! The op-level hooks (recording a call, gradients) are in
//! `crate::ops::capture`, which builds on this module.

use std::cell::Cell;
use std::sync::OnceLock;

use super::{DType, Device, Tensor};
use crate::error::{Error, Result};

thread_local! {
    /// True while a trace is active on this thread and no op is running inside it.
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// Set when a computation escaped the capture (see [`note_gap`]).
    static GAP: Cell<bool> = const { Cell::new(false) };
}

/// The graph layer's answers to tensor code, installed by the first capture.
pub struct TensorHooks {
    /// Whether a trace exists on this thread (active, inside an op, or paused).
    pub tracing: fn() -> bool,
    /// The device a captured value will be on when the graph runs.
    pub device_of: fn(&Tensor) -> Option<Device>,
    /// The device the graph being captured runs on so far.
    pub graph_device: fn() -> Device,
    /// A real tensor's current data as a constant of the graph.
    pub constant: fn(&Tensor) -> Result<Tensor>,
    /// Zeros made at the top level of the computation being captured, as
    /// a node of the graph (the `zeros` op).
    pub zeros: fn(&[usize], DType, Device) -> Result<Tensor>,
}

static HOOKS: OnceLock<TensorHooks> = OnceLock::new();

/// Install the graph layer's hooks (the first call wins; later ones are no-ops).
pub fn install(h: TensorHooks) {
    let _ = HOOKS.set(h);
}

/// Whether ops on this thread are being captured (cheap; checked by every op).
#[inline(always)]
pub fn active() -> bool {
    ACTIVE.with(|a| a.get())
}

/// Set whether ops on this thread are captured; returns the previous state
/// (the graph layer's capture start, pause and end).
pub fn set_active(on: bool) -> bool {
    ACTIVE.with(|a| a.replace(on))
}

/// Run `f` with capture suspended (ops run normally on real tensors).
pub fn suspended<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            ACTIVE.with(|a| a.set(self.0));
        }
    }
    let _r = Restore(ACTIVE.with(|a| a.replace(false)));
    f()
}

/// Note that a computation ran outside the captured ops (a kernel called
/// at the top level of a trace, or a shape-only tensor the trace did not
/// produce): the code that did it cannot be captured op by op.
pub fn note_gap() {
    GAP.with(|g| g.set(true));
}

/// Whether a gap was noted since the last call; clears the note.
pub fn take_gap() -> bool {
    GAP.with(|g| g.replace(false))
}

/// Whether a trace exists on this thread.
pub fn tracing() -> bool {
    HOOKS.get().is_some_and(|h| (h.tracing)())
}

/// The device the captured value `t` will be on when the graph runs (`None`
/// when `t` is not a value of the current trace).
pub fn device_of(t: &Tensor) -> Option<Device> {
    HOOKS.get().and_then(|h| (h.device_of)(t))
}

/// The device the graph being captured runs on so far (the CPU outside a capture).
pub fn graph_device() -> Device {
    HOOKS
        .get()
        .map_or_else(Device::default, |h| (h.graph_device)())
}

/// The device `t` is on, or for a captured value the device it will be on
/// when the graph runs (what `tensor.device` reports while tracing).
pub fn run_device(t: &Tensor) -> Device {
    match t.device() {
        Device::Meta => device_of(t).unwrap_or(Device::Meta),
        d => d,
    }
}

/// A constant: `t`'s current data becomes part of the graph being captured.
pub fn constant(t: &Tensor) -> Result<Tensor> {
    match HOOKS.get() {
        Some(h) => (h.constant)(t),
        None => Err(Error::runtime(
            "capture",
            "a graph constant outside a capture",
        )),
    }
}

/// Zeros made while capturing, as a node of the graph being captured.
pub fn zeros(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
    match HOOKS.get() {
        Some(h) => (h.zeros)(shape, dtype, device),
        None => Err(Error::runtime("zeros", "a graph node outside a capture")),
    }
}
