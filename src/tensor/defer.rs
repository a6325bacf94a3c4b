//! The tensor layer's part of deferred elementwise results (the queue
//! itself is `crate::ops::defer`): the flags a storage carries, and the
//! hook through which reading a flagged storage computes the queue.
//!
//! The ops layer installs the hook before it flags anything, so a storage
//! found flagged always finds the hook; the tensor layer names no op.

use std::sync::OnceLock;

use parking_lot::{Mutex, MutexGuard};

use super::Storage;

/// The storage's bytes are not computed yet.
pub const PENDING: u8 = 1;
/// A queued program reads the storage.
pub const READ: u8 = 2;
/// Code outside this library may write the storage: never read it later.
pub const SHARED: u8 = 4;
/// The storage's deferred program failed: reading it is an error.
pub const POISONED: u8 = 8;

/// Computes every queued result (the ops layer's queue runner).
static FLUSH: OnceLock<fn()> = OnceLock::new();
/// Held while a storage is flagged [`SHARED`], and by the queue while it
/// checks its operands for that flag and flags them [`READ`]: neither can
/// slip in between the other's check and write.
static GATE: Mutex<()> = Mutex::new(());

/// Install the queue runner (the first call wins; later ones are no-ops).
#[inline]
pub fn install_flush(f: fn()) {
    if FLUSH.get().is_none() {
        let _ = FLUSH.set(f);
    }
}

/// The gate between flagging a storage [`SHARED`] and queuing a read of it.
pub fn gate() -> MutexGuard<'static, ()> {
    GATE.lock()
}

/// Flag `s` [`SHARED`]: no program queued from now on reads it.
pub(crate) fn mark_shared(s: &Storage) {
    let _g = GATE.lock();
    s.set_defer_flags(SHARED);
}

/// What `Storage::as_ptr` does for a flagged storage: compute the queue,
/// and refuse a result whose program failed.
#[cold]
#[inline(never)]
pub(crate) fn settle(s: &Storage) {
    if let Some(f) = FLUSH.get() {
        f();
    }
    if s.defer_flags() & POISONED != 0 {
        panic!("this tensor's deferred elementwise program failed; its values are unavailable");
    }
}
