//! Scalar slots: optimizer arguments a captured graph reads at every run,
//! and the dry-run flag that suppresses seeding during shape inference.

pub use crate::ops::call::{Dyn, DynField};

thread_local! {
    /// Scalar slot values of the graph run in progress on this thread.
    static SLOTS: std::cell::RefCell<Vec<f64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Run `f` with `values` as the scalar slots [`Dyn`] arguments read.
pub fn with_slots<R>(values: &[f64], f: impl FnOnce() -> R) -> R {
    let prev = SLOTS.with(|s| std::mem::replace(&mut *s.borrow_mut(), values.to_vec()));
    let r = f();
    SLOTS.with(|s| *s.borrow_mut() = prev);
    r
}

/// The value of slot `k` in the current run (`None` outside a run, e.g.
/// while capturing: the value given at capture then stands).
pub(super) fn slot(k: usize) -> Option<f64> {
    SLOTS.with(|s| s.borrow().get(k).copied())
}

pub(super) fn apply_dyn(dynamic: &[Dyn], mut set: impl FnMut(&DynField, f64)) {
    for d in dynamic {
        if let Some(v) = slot(d.slot) {
            set(&d.field, v);
        }
    }
}

thread_local! {
    /// Set while ops run on shape-only tensors (capture, plan checks): seeding is skipped.
    pub(crate) static SEED_DRY_RUN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `f` with generator seeding suppressed (shape inference only).
pub fn dry_run<R>(f: impl FnOnce() -> R) -> R {
    let prev = SEED_DRY_RUN.with(|d| d.replace(true));
    let r = f();
    SEED_DRY_RUN.with(|d| d.set(prev));
    r
}
