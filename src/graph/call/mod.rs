//! [`OpCall`]: one registry op applied with its non-tensor arguments.
//!
//! A captured graph is a list of op calls over tensor values. Each variant
//! names one op function of `crate::ops` and holds the arguments that are
//! not tensors (dims, shapes, scalars, dtypes, generators); the tensor
//! arguments are the node's inputs, in the order [`OpCall::exec`] expects.
//! Running a node means calling the very op function eager mode calls
//! (with its shape/dtype rules, kernels and autograd recording), so a
//! captured graph and eager execution cannot disagree on what an op does.
//!
//! The node kinds themselves are defined with the ops (`crate::ops::call`);
//! this module runs them ([`OpCall::exec`]), infers their types and rewrites
//! them.

use crate::error::Result;
use crate::ops::elementwise::Operand;
use crate::ops::index::IndexItem;
use crate::ops::join::SplitArg;
use crate::ops::random::Generator;
use crate::tensor::Tensor;
use std::sync::Arc;

pub use crate::ops::call::{Arg, Gen, KeyItem, NodeRef, OpCall, OpName, SplitSpec, Sub, SubBody};

impl KeyItem {
    /// Rebuild a key, taking its tensors from `ts` in order.
    pub(super) fn join(key: &[KeyItem], ts: &[Tensor]) -> Vec<IndexItem> {
        let mut it = ts.iter();
        key.iter()
            .map(|k| match k {
                KeyItem::Int(i) => IndexItem::Int(*i),
                KeyItem::Slice { start, stop, step } => IndexItem::Slice {
                    start: *start,
                    stop: *stop,
                    step: *step,
                },
                KeyItem::NewAxis => IndexItem::NewAxis,
                KeyItem::Ellipsis => IndexItem::Ellipsis,
                KeyItem::Tensor => IndexItem::Tensor(it.next().expect("key tensor").clone()),
            })
            .collect()
    }

    pub(super) fn count_tensors(key: &[KeyItem]) -> usize {
        key.iter().filter(|k| matches!(k, KeyItem::Tensor)).count()
    }
}

impl Arg {
    pub(super) fn take(&self, it: &mut std::slice::Iter<'_, Tensor>) -> Operand {
        match self {
            Arg::Scalar(s) => Operand::S(*s),
            Arg::Tensor => Operand::T(it.next().expect("operand tensor").clone()),
        }
    }
}

impl Gen {
    pub(super) fn get(&self) -> Option<&Arc<Generator>> {
        self.0.as_ref()
    }
}

impl SplitSpec {
    pub(super) fn arg(&self) -> SplitArg {
        match self {
            SplitSpec::Size(s) => SplitArg::Size(*s),
            SplitSpec::Sections(v) => SplitArg::Sections(v.clone()),
        }
    }
}

/// What a node does besides producing its outputs.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Reads its inputs, writes fresh outputs only.
    Pure,
    /// Outputs alias the storage of input 0 (views).
    View,
    /// Writes into inputs in place (listed by [`OpCall::written_inputs`]).
    Mutates,
    /// Draws from a random generator (never merged or reordered across another draw).
    Random,
}

/// A node's results: most nodes have one or two, held inline (a heap
/// vector per node would be a `malloc`/`free` pair on every small op).
pub type Outs = smallvec::SmallVec<[Tensor; 1]>;

fn one(v: Tensor) -> Result<Outs> {
    Ok(smallvec::smallvec![v])
}

mod interp;
mod meta;
mod slots;
mod symbolic;

use slots::apply_dyn;
pub(crate) use slots::SEED_DRY_RUN;
pub use slots::{dry_run, with_slots, Dyn, DynField};
