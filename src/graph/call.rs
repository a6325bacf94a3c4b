//! [`OpCall`]: one registry op applied with its non-tensor arguments.
//!
//! A captured graph is a list of op calls over tensor values. Each variant
//! names one op function of `crate::ops` and holds the arguments that are
//! not tensors (dims, shapes, scalars, dtypes, generators); the tensor
//! arguments are the node's inputs, in the order [`OpCall::exec`] expects.
//! Running a node means calling the very op function eager mode calls
//! (with its shape/dtype rules, kernels and autograd recording), so a
//! captured graph and eager execution cannot disagree on what an op does.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ops::conv::{self, Conv2dParams, Padding};
use crate::ops::elementwise::{self as ew, BinaryOp, Operand, UnaryOp};
use crate::ops::index::{self as ix, IndexItem};
use crate::ops::join::{self, PadMode, SplitArg};
use crate::ops::optim::{AdamHyper, RmspropHyper, SgdHyper};
use crate::ops::random::{self as rnd, Generator};
use crate::ops::reduce::{self as red, ArgOp, CumOp};
use crate::ops::{creation, linalg, norm, optim, shape};
use crate::tensor::{DType, Device, Scalar, Tensor};

/// One element of an indexing key; tensors are node inputs.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum KeyItem {
    Int(isize),
    Slice {
        start: Option<isize>,
        stop: Option<isize>,
        step: isize,
    },
    NewAxis,
    Ellipsis,
    /// The next tensor input.
    Tensor,
}

impl KeyItem {
    /// Split an indexing key into its tensor-free form and its tensors.
    pub fn split(items: &[IndexItem]) -> (Vec<KeyItem>, Vec<Tensor>) {
        let mut ts = vec![];
        let key = items
            .iter()
            .map(|it| match it {
                IndexItem::Int(i) => KeyItem::Int(*i),
                IndexItem::Slice { start, stop, step } => KeyItem::Slice {
                    start: *start,
                    stop: *stop,
                    step: *step,
                },
                IndexItem::NewAxis => KeyItem::NewAxis,
                IndexItem::Ellipsis => KeyItem::Ellipsis,
                IndexItem::Tensor(t) => {
                    ts.push(t.clone());
                    KeyItem::Tensor
                }
            })
            .collect();
        (key, ts)
    }

    /// Rebuild a key, taking its tensors from `ts` in order.
    fn join(key: &[KeyItem], ts: &[Tensor]) -> Vec<IndexItem> {
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

    fn count_tensors(key: &[KeyItem]) -> usize {
        key.iter().filter(|k| matches!(k, KeyItem::Tensor)).count()
    }
}

/// A scalar-or-tensor argument; a tensor is the next node input.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Arg {
    Scalar(Scalar),
    Tensor,
}

impl Arg {
    pub fn of(o: &Operand) -> (Arg, Option<Tensor>) {
        match o {
            Operand::S(s) => (Arg::Scalar(*s), None),
            Operand::T(t) => (Arg::Tensor, Some(t.clone())),
        }
    }
    fn take(&self, it: &mut std::slice::Iter<'_, Tensor>) -> Operand {
        match self {
            Arg::Scalar(s) => Operand::S(*s),
            Arg::Tensor => Operand::T(it.next().expect("operand tensor").clone()),
        }
    }
}

/// A recorded backward node, by reference (its rule is called at run time).
#[derive(Clone)]
pub struct NodeRef(pub Arc<crate::autograd::Node>);

impl PartialEq for NodeRef {
    fn eq(&self, o: &NodeRef) -> bool {
        Arc::ptr_eq(&self.0, &o.0)
    }
}

impl std::fmt::Debug for NodeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name())
    }
}

/// A generator argument: the default generator, or a particular one (by reference).
#[derive(Clone, Debug)]
pub struct Gen(pub Option<Arc<Generator>>);

impl PartialEq for Gen {
    fn eq(&self, o: &Gen) -> bool {
        match (&self.0, &o.0) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Gen {
    fn get(&self) -> Option<&Arc<Generator>> {
        self.0.as_ref()
    }
}

/// An op name carried as an argument (an alias, so that serde reads it as an
/// owned name mapped back to the registry's, not as borrowed text).
pub type OpName = &'static str;

/// A registry op with its non-tensor arguments (see the module docs).
/// Serialisable for saved graphs (see [`crate::graph::save`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum OpCall {
    // ---- elementwise
    ToDtype {
        dtype: DType,
    },
    Contiguous,
    Clone,
    Unary {
        op: UnaryOp,
    },
    UnaryInplace {
        op: UnaryOp,
    },
    Binary {
        op: BinaryOp,
    },
    BinaryScalar {
        op: BinaryOp,
        s: Scalar,
        reflected: bool,
    },
    BinaryInplace {
        op: BinaryOp,
    },
    BinaryScalarInplace {
        op: BinaryOp,
        s: Scalar,
    },
    Where,
    WhereScalar {
        a: Arg,
        b: Arg,
    },
    MaskedFill {
        value: Scalar,
    },
    Fill {
        value: Scalar,
    },
    Copy,
    /// Copy `src` into `dst` without recording autograd (internal writes).
    CopyData,
    ClampTensor {
        min: bool,
        max: bool,
    },
    // ---- shape
    View {
        spec: Vec<isize>,
    },
    Reshape {
        spec: Vec<isize>,
    },
    Permute {
        dims: Vec<isize>,
    },
    Transpose {
        d0: isize,
        d1: isize,
    },
    TAll,
    MT,
    Squeeze {
        dims: Option<Vec<isize>>,
    },
    Unsqueeze {
        dim: isize,
    },
    Expand {
        spec: Vec<isize>,
    },
    BroadcastTo {
        shape: Vec<usize>,
    },
    /// A copy on another device (captured only when the devices differ).
    ToDevice {
        device: Device,
    },
    Flatten {
        start: isize,
        end: isize,
    },
    Narrow {
        dim: isize,
        start: isize,
        length: usize,
    },
    Select {
        dim: isize,
        index: isize,
    },
    Slice {
        dim: isize,
        start: Option<isize>,
        stop: Option<isize>,
        step: isize,
    },
    Flip {
        dims: Vec<isize>,
    },
    AsStrided {
        size: Vec<usize>,
        stride: Vec<isize>,
        offset: usize,
    },
    /// A view of another layout on its input's storage (a view an op made
    /// internally); `base` is the input's layout when captured, checked at run time.
    Restride {
        size: Vec<usize>,
        stride: Vec<isize>,
        offset: usize,
        base: crate::tensor::Layout,
    },
    // ---- index
    Index {
        key: Vec<KeyItem>,
    },
    IndexPutInplace {
        #[serde(with = "crate::graph::save::static_name")]
        op: OpName,
        key: Vec<KeyItem>,
        accumulate: bool,
    },
    IndexPut {
        #[serde(with = "crate::graph::save::static_name")]
        op: OpName,
        key: Vec<KeyItem>,
        accumulate: bool,
    },
    Nonzero,
    MaskedSelect,
    IndexSelect {
        dim: isize,
    },
    Gather {
        dim: isize,
    },
    TakeAlongDim {
        dim: Option<isize>,
    },
    ScatterAddInplace {
        dim: isize,
    },
    ScatterAdd {
        dim: isize,
    },
    ScatterInplace {
        dim: isize,
    },
    Scatter {
        dim: isize,
    },
    // ---- join
    Cat {
        dim: isize,
    },
    Stack {
        dim: isize,
    },
    Split {
        sizes: SplitSpec,
        dim: isize,
    },
    Chunk {
        chunks: isize,
        dim: isize,
    },
    Unbind {
        dim: isize,
    },
    Diagonal {
        offset: isize,
        dim1: isize,
        dim2: isize,
    },
    Diag {
        k: isize,
    },
    Repeat {
        sizes: Vec<isize>,
    },
    Roll {
        shifts: Vec<isize>,
        dims: Vec<isize>,
    },
    Pad {
        pads: Vec<isize>,
        mode: PadMode,
        value: Scalar,
    },
    Tril {
        k: i64,
    },
    Triu {
        k: i64,
    },
    // ---- creation
    Empty {
        shape: Vec<usize>,
        dtype: DType,
        device: Device,
    },
    Full {
        shape: Vec<usize>,
        value: Scalar,
        dtype: DType,
        device: Device,
    },
    Arange {
        start: Scalar,
        end: Scalar,
        step: Scalar,
        dtype: Option<DType>,
        device: Device,
    },
    Linspace {
        start: f64,
        end: f64,
        steps: usize,
        dtype: DType,
        device: Device,
    },
    Eye {
        n: usize,
        m: usize,
        dtype: DType,
        device: Device,
    },
    // ---- linalg
    Matmul,
    Mm,
    Bmm,
    Mv,
    Dot,
    Outer,
    Linear {
        bias: bool,
    },
    Einsum {
        equation: String,
    },
    // ---- conv
    Conv2d {
        stride: Vec<usize>,
        padding: Padding,
        dilation: Vec<usize>,
        groups: usize,
        bias: bool,
    },
    Conv1d {
        stride: Vec<usize>,
        padding: Padding,
        dilation: Vec<usize>,
        groups: usize,
        bias: bool,
    },
    /// A 4-D convolution with resolved geometry (internal, VJPs).
    Conv2dP {
        p: Conv2dParams,
        bias: bool,
    },
    Conv2dInputGrad {
        hw: [usize; 2],
        p: Conv2dParams,
    },
    Conv2dWeightGrad {
        k: [usize; 2],
        p: Conv2dParams,
    },
    MaxPool2d {
        kernel: Vec<usize>,
        stride: Option<Vec<usize>>,
        padding: Vec<usize>,
        dilation: Vec<usize>,
        ceil_mode: bool,
        return_indices: bool,
    },
    AvgPool2d {
        kernel: Vec<usize>,
        stride: Option<Vec<usize>>,
        padding: Vec<usize>,
        ceil_mode: bool,
        count_include_pad: bool,
        divisor_override: Option<usize>,
    },
    AdaptiveAvgPool2d {
        output_size: [Option<usize>; 2],
    },
    /// `out[p, i] = x[p, idx[p, i]]` (internal, max-pool VJP).
    PlaneGather,
    /// `out[p, idx[p, i]] += g[p, i]` into zeros `(P, len)` (internal, max-pool VJP).
    PlaneScatter {
        len: usize,
    },
    // ---- reduce
    Sum {
        dims: Option<Vec<isize>>,
        keepdim: bool,
        dtype: Option<DType>,
    },
    Prod {
        dims: Option<Vec<isize>>,
        keepdim: bool,
        dtype: Option<DType>,
    },
    Mean {
        dims: Option<Vec<isize>>,
        keepdim: bool,
        dtype: Option<DType>,
    },
    AmaxAmin {
        op: ArgOp,
        dims: Option<Vec<isize>>,
        keepdim: bool,
    },
    MaxAll {
        op: ArgOp,
    },
    MaxDim {
        op: ArgOp,
        dim: isize,
        keepdim: bool,
    },
    ArgMaxMin {
        op: ArgOp,
        dim: Option<isize>,
        keepdim: bool,
    },
    Var {
        dims: Option<Vec<isize>>,
        correction: f64,
        keepdim: bool,
        std: bool,
    },
    Logsumexp {
        dims: Option<Vec<isize>>,
        keepdim: bool,
    },
    AllAny {
        all: bool,
        dims: Option<Vec<isize>>,
        keepdim: bool,
    },
    Softmax {
        dim: isize,
        log: bool,
        dtype: Option<DType>,
    },
    Cumulative {
        op: CumOp,
        dim: isize,
        dtype: Option<DType>,
    },
    // ---- norm
    LayerNorm {
        normalized_shape: Vec<usize>,
        weight: bool,
        bias: bool,
        eps: f64,
    },
    CrossEntropy {
        weight: bool,
        ignore_index: i64,
        reduction: crate::ops::loss::Reduction,
        label_smoothing: f64,
    },
    RmsNorm {
        normalized_shape: Vec<usize>,
        weight: bool,
        eps: Option<f64>,
    },
    /// Fused gradient of a unary op (internal, its VJP); inputs `[x, y, g]`.
    UnaryGrad {
        op: UnaryOp,
    },
    /// Fused gradient of `softmax` / `log_softmax` along `dim` (internal, its
    /// VJP); inputs `[y, g]`.
    SoftmaxGrad {
        dim: usize,
        log: bool,
    },
    /// Fused gradient of `layer_norm` / `rms_norm` over the `k` trailing dims
    /// (internal, its VJP); inputs `[x, g, mean, rstd]` then the weight when
    /// `weight`; outputs the input, weight and bias gradients asked for.
    NormGrad {
        rms: bool,
        k: usize,
        weight: bool,
        dx: bool,
        dw: bool,
        db: bool,
    },
    /// Logit-row gradients of `cross_entropy` (internal, its VJP); inputs
    /// `[x2, t2, lse, gr]` then the class weights when `weight`.
    CrossEntropyGradRows {
        c: usize,
        ignore_index: i64,
        smoothing: f64,
        weight: bool,
    },
    // ---- random
    Rand {
        shape: Vec<usize>,
        dtype: DType,
        device: Device,
        gen: Gen,
    },
    Randn {
        shape: Vec<usize>,
        dtype: DType,
        device: Device,
        gen: Gen,
    },
    Randint {
        low: i64,
        high: i64,
        shape: Vec<usize>,
        dtype: DType,
        device: Device,
        gen: Gen,
    },
    Normal {
        mean: Arg,
        std: Arg,
        size: Option<Vec<usize>>,
        dtype: Option<DType>,
        device: Device,
        gen: Gen,
    },
    UniformInplace {
        low: f64,
        high: f64,
        gen: Gen,
    },
    NormalInplace {
        mean: f64,
        std: f64,
        gen: Gen,
    },
    Bernoulli {
        gen: Gen,
    },
    BernoulliP {
        p: f64,
        gen: Gen,
    },
    BernoulliInplace {
        p: Arg,
        gen: Gen,
    },
    Randperm {
        n: usize,
        dtype: DType,
        device: Device,
        gen: Gen,
    },
    Multinomial {
        num_samples: usize,
        replacement: bool,
        gen: Gen,
    },
    RandLike {
        dtype: Option<DType>,
        gen: Gen,
    },
    RandnLike {
        dtype: Option<DType>,
        gen: Gen,
    },
    RandintLike {
        low: i64,
        high: i64,
        dtype: Option<DType>,
        gen: Gen,
    },
    /// Outputs `[y]`, or `[]` when dropout is the identity (the input is the result).
    Dropout {
        p: f64,
        training: bool,
        gen: Gen,
    },
    DropoutInplace {
        p: f64,
        training: bool,
        gen: Gen,
    },
    /// Dropout's keep mask (bool) for an input like `x`.
    DropoutKeep {
        p: f64,
        gen: Gen,
    },
    /// Seed a generator (no tensors in or out; an effect ordered with the draws).
    ManualSeed {
        seed: u64,
        gen: Gen,
    },
    // ---- optim (inputs: params, grads, then state lists; all but grads written).
    // `dynamic` lists arguments read afresh at every run (see [`Dyn`]).
    SgdStep {
        n: usize,
        bufs: Vec<bool>,
        h: SgdHyper,
        dynamic: Vec<Dyn>,
    },
    AdamStep {
        n: usize,
        steps: Vec<u64>,
        h: AdamHyper,
        dynamic: Vec<Dyn>,
    },
    RmspropStep {
        n: usize,
        h: RmspropHyper,
        dynamic: Vec<Dyn>,
    },
    // ---- autograd
    /// A vector-Jacobian product run as one node: inputs are the saved
    /// tensors, then the output gradients that are present; outputs are the
    /// input gradients the rule produces (`produced`).
    Vjp {
        node: NodeRef,
        n_saved: usize,
        present: Vec<bool>,
        needs: Vec<bool>,
        produced: Vec<bool>,
    },
    // ---- control flow (see [`crate::graph::control`])
    /// Run `then_g` or `else_g` on the operands, by the condition's value.
    Cond {
        then_g: Sub,
        else_g: Sub,
    },
    /// Repeat `body` on the loop variables while `cond` holds.
    While {
        cond: Sub,
        body: Sub,
    },
    // ---- made by graph passes
    /// A fused elementwise kernel (see [`crate::graph::fused`]).
    Fused {
        kernel: Arc<crate::graph::fused::FusedKernel>,
    },
}

/// A control-flow sub-graph held by a node (compared by identity).
#[derive(Clone, Debug)]
pub struct Sub(pub Arc<crate::graph::control::SubGraph>);

impl PartialEq for Sub {
    fn eq(&self, o: &Sub) -> bool {
        Arc::ptr_eq(&self.0, &o.0)
    }
}

/// An optimizer argument that a captured graph reads at every run from a
/// scalar slot (a learning rate a scheduler changes, a step count, whether
/// a momentum buffer is still fresh) instead of fixing it at capture.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Dyn {
    pub field: DynField,
    pub slot: usize,
}

/// Which optimizer argument a [`Dyn`] supplies.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum DynField {
    Lr,
    Momentum,
    Dampening,
    WeightDecay,
    Beta1,
    Beta2,
    Eps,
    Alpha,
    /// The step count of parameter `i` (Adam).
    Step(usize),
    /// Whether parameter `i`'s momentum buffer starts from the gradient (SGD).
    First(usize),
}

impl DynField {
    pub fn parse(name: &str, index: Option<usize>) -> Option<DynField> {
        Some(match (name, index) {
            ("lr", None) => DynField::Lr,
            ("momentum", None) => DynField::Momentum,
            ("dampening", None) => DynField::Dampening,
            ("weight_decay", None) => DynField::WeightDecay,
            ("beta1", None) => DynField::Beta1,
            ("beta2", None) => DynField::Beta2,
            ("eps", None) => DynField::Eps,
            ("alpha", None) => DynField::Alpha,
            ("step", Some(i)) => DynField::Step(i),
            ("first", Some(i)) => DynField::First(i),
            _ => return None,
        })
    }
}

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
fn slot(k: usize) -> Option<f64> {
    SLOTS.with(|s| s.borrow().get(k).copied())
}

fn apply_dyn(dynamic: &[Dyn], mut set: impl FnMut(&DynField, f64)) {
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

/// `split`'s second argument.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum SplitSpec {
    Size(isize),
    Sections(Vec<isize>),
}

impl SplitSpec {
    pub fn of(a: &SplitArg) -> SplitSpec {
        match a {
            SplitArg::Size(s) => SplitSpec::Size(*s),
            SplitArg::Sections(v) => SplitSpec::Sections(v.clone()),
        }
    }
    fn arg(&self) -> SplitArg {
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

fn opt(o: Option<&Tensor>) -> Vec<Tensor> {
    o.into_iter().cloned().collect()
}

impl OpCall {
    /// The registry name of the op (or of the internal op of a VJP).
    pub fn name(&self) -> &'static str {
        use OpCall::*;
        match self {
            ToDtype { .. } => "to",
            Contiguous => "contiguous",
            Clone => "clone",
            Unary { op } => op.name(),
            UnaryInplace { .. } => "unary_",
            Binary { op } | BinaryScalar { op, .. } => op.name(),
            BinaryInplace { .. } | BinaryScalarInplace { .. } => "binary_",
            Where | WhereScalar { .. } => "where",
            MaskedFill { .. } => "masked_fill",
            Fill { .. } => "fill_",
            Copy => "copy_",
            CopyData => "copy_data",
            ClampTensor { .. } => "clamp",
            View { .. } => "view",
            Reshape { .. } => "reshape",
            Permute { .. } => "permute",
            Transpose { .. } | TAll | MT => "transpose",
            Squeeze { .. } => "squeeze",
            Unsqueeze { .. } => "unsqueeze",
            Expand { .. } => "expand",
            BroadcastTo { .. } => "broadcast_to",
            ToDevice { .. } => "to",
            Flatten { .. } => "flatten",
            Narrow { .. } => "narrow",
            Select { .. } => "select",
            Slice { .. } => "slice",
            Flip { .. } => "flip",
            AsStrided { .. } | Restride { .. } => "as_strided",
            Index { .. } => "getitem",
            IndexPutInplace { .. } => "index_put_",
            IndexPut { .. } => "index_put",
            Nonzero => "nonzero",
            MaskedSelect => "masked_select",
            IndexSelect { .. } => "index_select",
            Gather { .. } => "gather",
            TakeAlongDim { .. } => "take_along_dim",
            ScatterAddInplace { .. } => "scatter_add_",
            ScatterAdd { .. } => "scatter_add",
            ScatterInplace { .. } => "scatter_",
            Scatter { .. } => "scatter",
            Cat { .. } => "cat",
            Stack { .. } => "stack",
            Split { .. } => "split",
            Chunk { .. } => "chunk",
            Unbind { .. } => "unbind",
            Diagonal { .. } => "diagonal",
            Diag { .. } => "diag",
            Repeat { .. } => "repeat",
            Roll { .. } => "roll",
            Pad { .. } => "pad",
            Tril { .. } => "tril",
            Triu { .. } => "triu",
            Empty { .. } => "empty",
            Full { .. } => "full",
            Arange { .. } => "arange",
            Linspace { .. } => "linspace",
            Eye { .. } => "eye",
            Matmul => "matmul",
            Mm => "mm",
            Bmm => "bmm",
            Mv => "mv",
            Dot => "dot",
            Outer => "outer",
            Linear { .. } => "linear",
            Einsum { .. } => "einsum",
            Conv2d { .. } | Conv2dP { .. } => "conv2d",
            Conv1d { .. } => "conv1d",
            Conv2dInputGrad { .. } => "conv2d_input_grad",
            Conv2dWeightGrad { .. } => "conv2d_weight_grad",
            MaxPool2d { .. } => "max_pool2d",
            AvgPool2d { .. } => "avg_pool2d",
            AdaptiveAvgPool2d { .. } => "adaptive_avg_pool2d",
            PlaneGather => "max_pool2d_gather",
            PlaneScatter { .. } => "max_pool2d_scatter",
            Sum { .. } => "sum",
            Prod { .. } => "prod",
            Mean { .. } => "mean",
            AmaxAmin { op: ArgOp::Max, .. } => "amax",
            AmaxAmin { op: ArgOp::Min, .. } => "amin",
            MaxAll { op: ArgOp::Max } | MaxDim { op: ArgOp::Max, .. } => "max",
            MaxAll { op: ArgOp::Min } | MaxDim { op: ArgOp::Min, .. } => "min",
            ArgMaxMin { op: ArgOp::Max, .. } => "argmax",
            ArgMaxMin { op: ArgOp::Min, .. } => "argmin",
            Var { std: false, .. } => "var",
            Var { std: true, .. } => "std",
            Logsumexp { .. } => "logsumexp",
            AllAny { all: true, .. } => "all",
            AllAny { all: false, .. } => "any",
            Softmax { log: false, .. } => "softmax",
            Softmax { log: true, .. } => "log_softmax",
            Cumulative { op: CumOp::Sum, .. } => "cumsum",
            Cumulative {
                op: CumOp::Prod, ..
            } => "cumprod",
            LayerNorm { .. } => "layer_norm",
            RmsNorm { .. } => "rms_norm",
            CrossEntropy { .. } => "cross_entropy",
            CrossEntropyGradRows { .. } => "cross_entropy_grad",
            UnaryGrad { .. } => "unary_grad",
            SoftmaxGrad { .. } => "softmax_grad",
            NormGrad { rms: false, .. } => "layer_norm_grad",
            NormGrad { rms: true, .. } => "rms_norm_grad",
            Rand { .. } => "rand",
            Randn { .. } => "randn",
            Randint { .. } => "randint",
            Normal { .. } => "normal",
            UniformInplace { .. } => "uniform_",
            NormalInplace { .. } => "normal_",
            Bernoulli { .. } | BernoulliP { .. } => "bernoulli",
            BernoulliInplace { .. } => "bernoulli_",
            Randperm { .. } => "randperm",
            Multinomial { .. } => "multinomial",
            RandLike { .. } => "rand_like",
            RandnLike { .. } => "randn_like",
            RandintLike { .. } => "randint_like",
            Dropout { .. } | DropoutInplace { .. } => "dropout",
            ManualSeed { .. } => "manual_seed",
            DropoutKeep { .. } => "dropout_mask",
            SgdStep { .. } => "sgd_step",
            AdamStep { .. } => "adam_step",
            RmspropStep { .. } => "rmsprop_step",
            Fused { .. } => "fused",
            Vjp { .. } => "vjp",
            Cond { .. } => "cond",
            While { .. } => "while_loop",
        }
    }

    /// What the node does besides computing its outputs.
    pub fn effect(&self) -> Effect {
        use OpCall::*;
        match self {
            View { .. }
            | Permute { .. }
            | Transpose { .. }
            | TAll
            | MT
            | Squeeze { .. }
            | Unsqueeze { .. }
            | Expand { .. }
            | BroadcastTo { .. }
            | Narrow { .. }
            | Select { .. }
            | Slice { .. }
            | Flip { .. }
            | AsStrided { .. }
            | Split { .. }
            | Chunk { .. }
            | Unbind { .. }
            | Diagonal { .. }
            | Restride { .. } => Effect::View,
            // May return their input itself (a view in the aliasing sense).
            Reshape { .. } | Flatten { .. } | Contiguous => Effect::View,
            UnaryInplace { .. }
            | BinaryInplace { .. }
            | BinaryScalarInplace { .. }
            | Fill { .. }
            | Copy
            | CopyData
            | IndexPutInplace { .. }
            | ScatterAddInplace { .. }
            | ScatterInplace { .. }
            | SgdStep { .. }
            | AdamStep { .. }
            | RmspropStep { .. } => Effect::Mutates,
            // Draws: in place into their input, or into fresh outputs.
            UniformInplace { .. }
            | NormalInplace { .. }
            | BernoulliInplace { .. }
            | DropoutInplace { .. } => Effect::Mutates,
            _ if self.is_random() => Effect::Random,
            // Uninitialised memory: never merged with another allocation.
            Empty { .. } => Effect::Random,
            // Data-dependent work: never merged, folded or reordered.
            Cond { .. } | While { .. } => Effect::Random,
            _ => Effect::Pure,
        }
    }

    /// Indices of the inputs this node writes in place (`n_inputs` = its input count).
    pub fn written_inputs(&self, n_inputs: usize) -> Vec<usize> {
        use OpCall::*;
        match self {
            SgdStep { n, bufs, .. } => {
                let nb = bufs.iter().filter(|&&b| b).count();
                (0..*n).chain(2 * n..2 * n + nb).collect()
            }
            AdamStep { n, .. } | RmspropStep { n, .. } => (0..*n).chain(2 * n..n_inputs).collect(),
            _ if self.effect() == Effect::Mutates => vec![0],
            _ => vec![],
        }
    }

    /// Whether the op reads dynamic scalar arguments (an optimizer step whose
    /// learning rate, step counts or flags are given per run).
    pub fn reads_scalars(&self) -> bool {
        use OpCall::*;
        match self {
            SgdStep { dynamic, .. } | AdamStep { dynamic, .. } | RmspropStep { dynamic, .. } => {
                !dynamic.is_empty()
            }
            _ => false,
        }
    }

    /// Whether the op draws random numbers (its repetitions give other values).
    pub fn is_random(&self) -> bool {
        use OpCall::*;
        matches!(
            self,
            Rand { .. }
                | Randn { .. }
                | Randint { .. }
                | Normal { .. }
                | Bernoulli { .. }
                | BernoulliP { .. }
                | Randperm { .. }
                | Multinomial { .. }
                | RandLike { .. }
                | RandnLike { .. }
                | RandintLike { .. }
                | Dropout { .. }
                | UniformInplace { .. }
                | NormalInplace { .. }
                | BernoulliInplace { .. }
                | DropoutInplace { .. }
                | ManualSeed { .. }
                | DropoutKeep { .. }
        )
    }

    /// The same call creating its outputs on `device` (factories only; other
    /// ops follow their inputs' device).
    pub fn on_device(&self, device: Device) -> OpCall {
        use OpCall::*;
        let mut c = self.clone();
        match &mut c {
            Empty { device: d, .. }
            | Full { device: d, .. }
            | Arange { device: d, .. }
            | Linspace { device: d, .. }
            | Eye { device: d, .. }
            | Rand { device: d, .. }
            | Randn { device: d, .. }
            | Randint { device: d, .. }
            | Normal { device: d, .. }
            | Randperm { device: d, .. } => *d = device,
            _ => {}
        }
        c
    }

    /// The same call with every device `from` it names (a factory's device,
    /// a copy's target, inside control-flow bodies too) replaced by `to`.
    pub fn relocated(&self, from: Device, to: Device) -> OpCall {
        use OpCall::*;
        match self {
            ToDevice { device } if *device == from => ToDevice { device: to },
            Cond { then_g, else_g } => Cond {
                then_g: Sub(Arc::new(then_g.0.relocated(from, to))),
                else_g: Sub(Arc::new(else_g.0.relocated(from, to))),
            },
            While { cond, body } => While {
                cond: Sub(Arc::new(cond.0.relocated(from, to))),
                body: Sub(Arc::new(body.0.relocated(from, to))),
            },
            c if c.factory_device() == Some(from) => c.on_device(to),
            c => c.clone(),
        }
    }

    /// Apply a [`OpCall::Vjp`] node's rule to its inputs.
    fn vjp_apply(&self, ins: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
        let OpCall::Vjp {
            node,
            n_saved,
            present,
            needs,
            ..
        } = self
        else {
            unreachable!("vjp_apply on a Vjp call")
        };
        let (saved, rest) = ins.split_at(*n_saved);
        let mut it = rest.iter();
        let grads: Vec<Option<Tensor>> = present
            .iter()
            .map(|&p| if p { it.next().cloned() } else { None })
            .collect();
        node.0.apply_backward(saved, &grads, needs)
    }

    /// Which gradients a [`OpCall::Vjp`] produces (its rule run on `ins`).
    pub fn exec_vjp_probe(&self, ins: &[Tensor]) -> Result<Vec<bool>> {
        Ok(self.vjp_apply(ins)?.iter().map(|g| g.is_some()).collect())
    }

    /// The device a factory creates its output on (`None` for other ops).
    pub fn factory_device(&self) -> Option<Device> {
        use OpCall::*;
        match self {
            Empty { device, .. }
            | Full { device, .. }
            | Arange { device, .. }
            | Linspace { device, .. }
            | Eye { device, .. }
            | Rand { device, .. }
            | Randn { device, .. }
            | Randint { device, .. }
            | Normal { device, .. }
            | Randperm { device, .. } => Some(*device),
            _ => None,
        }
    }

    /// Run the op on `ins` (the node's inputs, in order); returns its outputs.
    pub fn exec(&self, ins: &[Tensor]) -> Result<Outs> {
        use OpCall::*;
        let x = || ins.first().ok_or_else(|| missing(self));
        match self {
            ToDtype { dtype } => one(ew::to_dtype(x()?, *dtype)?),
            Contiguous => one(ew::contiguous(x()?)?),
            Clone => one(ew::clone(x()?)?),
            Unary { op } => one(ew::unary(*op, x()?)?),
            UnaryInplace { op } => ew::unary_(*op, x()?).map(|_| Outs::new()),
            Binary { op } => one(ew::binary(*op, &ins[0], &ins[1])?),
            BinaryScalar { op, s, reflected } => one(ew::binary_scalar(*op, x()?, *s, *reflected)?),
            BinaryInplace { op } => ew::binary_(*op, &ins[0], &ins[1]).map(|_| Outs::new()),
            BinaryScalarInplace { op, s } => ew::binary_scalar_(*op, x()?, *s).map(|_| Outs::new()),
            Where => one(ew::where_(&ins[0], &ins[1], &ins[2])?),
            WhereScalar { a, b } => {
                let mut it = ins[1..].iter();
                let a = a.take(&mut it);
                let b = b.take(&mut it);
                one(ew::where_scalar(&ins[0], a, b)?)
            }
            MaskedFill { value } => one(ew::masked_fill(&ins[0], &ins[1], *value)?),
            Fill { value } => ew::fill_(x()?, *value).map(|_| Outs::new()),
            Copy => ew::copy_(&ins[0], &ins[1]).map(|_| Outs::new()),
            CopyData => ew::copy_data(&ins[0], &ins[1]).map(|_| Outs::new()),
            ClampTensor { min, max } => {
                let mut it = ins[1..].iter();
                let lo = if *min { it.next() } else { None };
                let hi = if *max { it.next() } else { None };
                one(ew::clamp_tensor(&ins[0], lo, hi)?)
            }
            View { spec } => one(shape::view(x()?, spec)?),
            Reshape { spec } => one(shape::reshape(x()?, spec)?),
            Permute { dims } => one(shape::permute(x()?, dims)?),
            Transpose { d0, d1 } => one(shape::transpose(x()?, *d0, *d1)?),
            TAll => one(shape::t_all(x()?)?),
            MT => one(shape::mt(x()?)?),
            Squeeze { dims } => one(shape::squeeze(x()?, dims.as_deref())?),
            Unsqueeze { dim } => one(shape::unsqueeze(x()?, *dim)?),
            Expand { spec } => one(shape::expand(x()?, spec)?),
            BroadcastTo { shape: s } => one(shape::broadcast_to(x()?, s)?),
            ToDevice { device } => one(ew::to_device(x()?, *device)?),
            Flatten { start, end } => one(shape::flatten(x()?, *start, *end)?),
            Narrow { dim, start, length } => one(shape::narrow(x()?, *dim, *start, *length)?),
            Select { dim, index } => one(shape::select(x()?, *dim, *index)?),
            Slice {
                dim,
                start,
                stop,
                step,
            } => one(shape::slice(x()?, *dim, *start, *stop, *step)?),
            Flip { dims } => one(shape::flip(x()?, dims)?),
            AsStrided {
                size,
                stride,
                offset,
            } => one(shape::as_strided(x()?, size, stride, *offset)?),
            Restride {
                size,
                stride,
                offset,
                base,
            } => {
                let x = x()?;
                if x.layout() != base {
                    return Err(Error::runtime(
                        "graph",
                        format!(
                            "an input has strides {:?} and offset {} where the captured graph had {:?} and {}; pass contiguous tensors or capture again",
                            x.strides(),
                            x.offset(),
                            &base.strides[..],
                            base.offset
                        ),
                    ));
                }
                let l = crate::tensor::Layout {
                    shape: size.as_slice().into(),
                    strides: stride.as_slice().into(),
                    offset: *offset,
                };
                one(Tensor::from_parts(x.storage().clone(), l, x.dtype())?)
            }
            Index { key } => one(ix::index(&ins[0], &KeyItem::join(key, &ins[1..]))?),
            IndexPutInplace {
                op,
                key,
                accumulate,
            } => {
                let k = KeyItem::count_tensors(key);
                let items = KeyItem::join(key, &ins[1..1 + k]);
                ix::index_put_with(op, &ins[0], &items, &ins[1 + k], *accumulate)
                    .map(|_| Outs::new())
            }
            IndexPut {
                op,
                key,
                accumulate,
            } => {
                let k = KeyItem::count_tensors(key);
                let items = KeyItem::join(key, &ins[1..1 + k]);
                one(ix::index_put(
                    op,
                    &ins[0],
                    &items,
                    &ins[1 + k],
                    *accumulate,
                )?)
            }
            Nonzero => one(ix::nonzero(x()?)?),
            MaskedSelect => one(ix::masked_select(&ins[0], &ins[1])?),
            IndexSelect { dim } => one(ix::index_select(&ins[0], *dim, &ins[1])?),
            Gather { dim } => one(ix::gather(&ins[0], *dim, &ins[1])?),
            TakeAlongDim { dim } => one(ix::take_along_dim(&ins[0], &ins[1], *dim)?),
            ScatterAddInplace { dim } => {
                ix::scatter_add_(&ins[0], *dim, &ins[1], &ins[2]).map(|_| Outs::new())
            }
            ScatterAdd { dim } => one(ix::scatter_add(&ins[0], *dim, &ins[1], &ins[2])?),
            ScatterInplace { dim } => {
                ix::scatter_(&ins[0], *dim, &ins[1], &ins[2]).map(|_| Outs::new())
            }
            Scatter { dim } => one(ix::scatter(&ins[0], *dim, &ins[1], &ins[2])?),
            Cat { dim } => one(join::cat(ins, *dim)?),
            Stack { dim } => one(join::stack(ins, *dim)?),
            Split { sizes, dim } => join::split(x()?, &sizes.arg(), *dim).map(Outs::from_vec),
            Chunk { chunks, dim } => join::chunk(x()?, *chunks, *dim).map(Outs::from_vec),
            Unbind { dim } => join::unbind(x()?, *dim).map(Outs::from_vec),
            Diagonal { offset, dim1, dim2 } => one(join::diagonal(x()?, *offset, *dim1, *dim2)?),
            Diag { k } => one(join::diag(x()?, *k)?),
            Repeat { sizes } => one(join::repeat(x()?, sizes)?),
            Roll { shifts, dims } => one(join::roll(x()?, shifts, dims)?),
            Pad { pads, mode, value } => one(join::pad(x()?, pads, *mode, *value)?),
            Tril { k } => one(join::tril(x()?, *k)?),
            Triu { k } => one(join::triu(x()?, *k)?),
            Empty {
                shape: s,
                dtype,
                device,
            } => one(creation::empty(s, *dtype, *device)?),
            Full {
                shape: s,
                value,
                dtype,
                device,
            } => one(creation::full(s, *value, *dtype, *device)?),
            Arange {
                start,
                end,
                step,
                dtype,
                device,
            } => one(creation::arange(*start, *end, *step, *dtype, *device)?),
            Linspace {
                start,
                end,
                steps,
                dtype,
                device,
            } => one(creation::linspace(*start, *end, *steps, *dtype, *device)?),
            Eye {
                n,
                m,
                dtype,
                device,
            } => one(creation::eye(*n, *m, *dtype, *device)?),
            Matmul => one(linalg::matmul(&ins[0], &ins[1])?),
            Mm => one(linalg::mm(&ins[0], &ins[1])?),
            Bmm => one(linalg::bmm(&ins[0], &ins[1])?),
            Mv => one(linalg::mv(&ins[0], &ins[1])?),
            Dot => one(linalg::dot(&ins[0], &ins[1])?),
            Outer => one(linalg::outer(&ins[0], &ins[1])?),
            Linear { bias } => one(linalg::linear(&ins[0], &ins[1], bias.then(|| &ins[2]))?),
            Einsum { equation } => one(linalg::einsum(equation, ins)?),
            Conv2d {
                stride,
                padding,
                dilation,
                groups,
                bias,
            } => one(conv::conv2d(
                &ins[0],
                &ins[1],
                bias.then(|| &ins[2]),
                stride,
                padding,
                dilation,
                *groups,
            )?),
            Conv1d {
                stride,
                padding,
                dilation,
                groups,
                bias,
            } => one(conv::conv1d(
                &ins[0],
                &ins[1],
                bias.then(|| &ins[2]),
                stride,
                padding,
                dilation,
                *groups,
            )?),
            Conv2dP { p, bias } => {
                one(conv::conv2d_p(&ins[0], &ins[1], bias.then(|| &ins[2]), *p)?)
            }
            Conv2dInputGrad { hw, p } => one(conv::conv2d_input_grad(&ins[0], &ins[1], *hw, p)?),
            Conv2dWeightGrad { k, p } => one(conv::conv2d_weight_grad(&ins[0], &ins[1], *k, p)?),
            MaxPool2d {
                kernel,
                stride,
                padding,
                dilation,
                ceil_mode,
                return_indices,
            } => {
                let (y, i) = conv::max_pool2d(
                    x()?,
                    kernel,
                    stride.as_deref(),
                    padding,
                    dilation,
                    *ceil_mode,
                    *return_indices,
                )?;
                Ok(std::iter::once(y).chain(i).collect())
            }
            AvgPool2d {
                kernel,
                stride,
                padding,
                ceil_mode,
                count_include_pad,
                divisor_override,
            } => one(conv::avg_pool2d(
                x()?,
                kernel,
                stride.as_deref(),
                padding,
                *ceil_mode,
                *count_include_pad,
                *divisor_override,
            )?),
            AdaptiveAvgPool2d { output_size } => {
                one(conv::adaptive_avg_pool2d(x()?, *output_size)?)
            }
            PlaneGather => one(conv::plane_gather(&ins[0], &ins[1])?),
            PlaneScatter { len } => one(conv::plane_scatter(&ins[0], &ins[1], *len)?),
            Sum {
                dims,
                keepdim,
                dtype,
            } => one(red::sum(x()?, dims.as_deref(), *keepdim, *dtype)?),
            Prod {
                dims,
                keepdim,
                dtype,
            } => one(red::prod(x()?, dims.as_deref(), *keepdim, *dtype)?),
            Mean {
                dims,
                keepdim,
                dtype,
            } => one(red::mean(x()?, dims.as_deref(), *keepdim, *dtype)?),
            AmaxAmin { op, dims, keepdim } => {
                one(red::amax_amin(*op, x()?, dims.as_deref(), *keepdim)?)
            }
            MaxAll { op } => one(red::max_all(*op, x()?)?),
            MaxDim { op, dim, keepdim } => {
                let (v, i) = red::max_dim(*op, x()?, *dim, *keepdim)?;
                Ok(smallvec::smallvec![v, i])
            }
            ArgMaxMin { op, dim, keepdim } => one(red::argmax_argmin(*op, x()?, *dim, *keepdim)?),
            Var {
                dims,
                correction,
                keepdim,
                std,
            } => one(red::var(
                x()?,
                dims.as_deref(),
                *correction,
                *keepdim,
                *std,
            )?),
            Logsumexp { dims, keepdim } => one(red::logsumexp(x()?, dims.as_deref(), *keepdim)?),
            AllAny { all, dims, keepdim } => {
                one(red::all_any(*all, x()?, dims.as_deref(), *keepdim)?)
            }
            Softmax { dim, log, dtype } => one(red::softmax(x()?, *dim, *log, *dtype)?),
            Cumulative { op, dim, dtype } => one(red::cumulative(*op, x()?, *dim, *dtype)?),
            LayerNorm {
                normalized_shape,
                weight,
                bias,
                eps,
            } => {
                let mut it = ins[1..].iter();
                let w = if *weight { it.next() } else { None };
                let b = if *bias { it.next() } else { None };
                one(norm::layer_norm(&ins[0], normalized_shape, w, b, *eps)?)
            }
            CrossEntropy {
                weight,
                ignore_index,
                reduction,
                label_smoothing,
            } => one(crate::ops::loss::cross_entropy(
                &ins[0],
                &ins[1],
                weight.then(|| &ins[2]),
                *ignore_index,
                *reduction,
                *label_smoothing,
            )?),
            UnaryGrad { op } => one(crate::ops::elementwise_grad::unary_grad(
                *op, &ins[0], &ins[1], &ins[2],
            )?),
            SoftmaxGrad { dim, log } => one(red::softmax_grad(&ins[0], &ins[1], *dim, *log)?),
            NormGrad {
                rms,
                k,
                weight,
                dx,
                dw,
                db,
            } => norm::norm_grad(
                &ins[0],
                &ins[1],
                &ins[2],
                &ins[3],
                weight.then(|| &ins[4]),
                *rms,
                *k,
                [*dx, *dw, *db],
            )
            .map(Outs::from_vec),
            CrossEntropyGradRows {
                c,
                ignore_index,
                smoothing,
                weight,
            } => one(crate::ops::loss::cross_entropy_grad_rows(
                &ins[0],
                &ins[1],
                weight.then(|| &ins[4]),
                &ins[2],
                &ins[3],
                crate::ops::loss::CeCfg {
                    c: *c,
                    ignore_index: *ignore_index,
                    smoothing: *smoothing,
                },
            )?),
            RmsNorm {
                normalized_shape,
                weight,
                eps,
            } => one(norm::rms_norm(
                &ins[0],
                normalized_shape,
                weight.then(|| &ins[1]),
                *eps,
            )?),
            Rand {
                shape: s,
                dtype,
                device,
                gen,
            } => one(rnd::rand(s, *dtype, *device, gen.get())?),
            Randn {
                shape: s,
                dtype,
                device,
                gen,
            } => one(rnd::randn(s, *dtype, *device, gen.get())?),
            Randint {
                low,
                high,
                shape: s,
                dtype,
                device,
                gen,
            } => one(rnd::randint(*low, *high, s, *dtype, *device, gen.get())?),
            Normal {
                mean,
                std,
                size,
                dtype,
                device,
                gen,
            } => {
                let mut it = ins.iter();
                let m = mean.take(&mut it);
                let s = std.take(&mut it);
                one(rnd::normal(
                    &m,
                    &s,
                    size.as_deref(),
                    *dtype,
                    *device,
                    gen.get(),
                )?)
            }
            UniformInplace { low, high, gen } => {
                rnd::uniform_(x()?, *low, *high, gen.get()).map(|_| Outs::new())
            }
            NormalInplace { mean, std, gen } => {
                rnd::normal_(x()?, *mean, *std, gen.get()).map(|_| Outs::new())
            }
            Bernoulli { gen } => one(rnd::bernoulli(x()?, gen.get())?),
            BernoulliP { p, gen } => one(rnd::bernoulli_p(x()?, *p, gen.get())?),
            BernoulliInplace { p, gen } => {
                let mut it = ins[1..].iter();
                let p = p.take(&mut it);
                rnd::bernoulli_(&ins[0], &p, gen.get()).map(|_| Outs::new())
            }
            Randperm {
                n,
                dtype,
                device,
                gen,
            } => one(rnd::randperm(*n, *dtype, *device, gen.get())?),
            Multinomial {
                num_samples,
                replacement,
                gen,
            } => one(rnd::multinomial(
                x()?,
                *num_samples,
                *replacement,
                gen.get(),
            )?),
            RandLike { dtype, gen } => one(rnd::rand_like(x()?, *dtype, gen.get())?),
            RandnLike { dtype, gen } => one(rnd::randn_like(x()?, *dtype, gen.get())?),
            RandintLike {
                low,
                high,
                dtype,
                gen,
            } => one(rnd::randint_like(x()?, *low, *high, *dtype, gen.get())?),
            Dropout { p, training, gen } => Ok(rnd::dropout(x()?, *p, *training, gen.get())?
                .into_iter()
                .collect()),
            DropoutInplace { p, training, gen } => {
                rnd::dropout_(x()?, *p, *training, gen.get()).map(|_| Outs::new())
            }
            DropoutKeep { p, gen } => one(rnd::dropout_keep(x()?, *p, gen.get())?),
            ManualSeed { seed, gen } => {
                if SEED_DRY_RUN.with(|d| d.get()) {
                    return Ok(Outs::new());
                }
                rnd::manual_seed(gen.get(), *seed).map(|_| Outs::new())
            }
            SgdStep {
                n,
                bufs,
                h,
                dynamic,
            } => {
                let (p, rest) = ins.split_at(*n);
                let (g, rest) = rest.split_at(*n);
                let mut h = *h;
                let mut first = vec![false; *n];
                let mut explicit = false;
                apply_dyn(dynamic, |f, v| match f {
                    DynField::Lr => h.lr = v,
                    DynField::Momentum => h.momentum = v,
                    DynField::Dampening => h.dampening = v,
                    DynField::WeightDecay => h.weight_decay = v,
                    DynField::First(i) => {
                        explicit = true;
                        if let Some(x) = first.get_mut(*i) {
                            *x = v != 0.0;
                        }
                    }
                    _ => {}
                });
                if explicit && bufs.iter().all(|&b| b) {
                    optim::sgd_step_first(p, g, rest, &first, &h)?;
                    return Ok(Outs::new());
                }
                let mut it = rest.iter();
                let b: Vec<Option<Tensor>> = bufs
                    .iter()
                    .map(|&has| if has { it.next().cloned() } else { None })
                    .collect();
                let out = optim::sgd_step(p, g, &b, &h)?;
                // Outputs: the buffers created for `None` entries.
                Ok(out
                    .into_iter()
                    .zip(bufs)
                    .filter_map(|(o, &had)| if had { None } else { o })
                    .collect())
            }
            AdamStep {
                n,
                steps,
                h,
                dynamic,
            } => {
                let (p, rest) = ins.split_at(*n);
                let (g, rest) = rest.split_at(*n);
                let (m, rest) = rest.split_at(*n);
                let (v, mx) = rest.split_at(*n);
                let mut h = *h;
                let mut steps = steps.clone();
                apply_dyn(dynamic, |f, x| match f {
                    DynField::Lr => h.lr = x,
                    DynField::Beta1 => h.beta1 = x,
                    DynField::Beta2 => h.beta2 = x,
                    DynField::Eps => h.eps = x,
                    DynField::WeightDecay => h.weight_decay = x,
                    DynField::Step(i) => {
                        if let Some(s) = steps.get_mut(*i) {
                            *s = x.max(1.0) as u64;
                        }
                    }
                    _ => {}
                });
                optim::adam_step(p, g, m, v, mx, &steps, &h)?;
                Ok(Outs::new())
            }
            Vjp { produced, .. } => {
                let r = self.vjp_apply(ins)?;
                let mut out = Outs::new();
                for (g, &p) in r.into_iter().zip(produced) {
                    match (g, p) {
                        (Some(g), true) => out.push(g),
                        (None, false) => {}
                        _ => {
                            return Err(Error::runtime(
                                "vjp",
                                "internal error: a gradient rule produced other gradients than when it was captured",
                            ))
                        }
                    }
                }
                Ok(out)
            }
            Cond { then_g, else_g } => {
                crate::graph::control::run_cond(&then_g.0, &else_g.0, ins).map(Outs::from_vec)
            }
            While { cond, body } => {
                crate::graph::control::run_while(&cond.0, &body.0, ins).map(Outs::from_vec)
            }
            Fused { kernel } => {
                let device = ins.first().map_or(Device::Cpu, |t| t.device());
                let outs = kernel
                    .output_types()
                    .iter()
                    .map(|(s, d)| Tensor::empty(s, *d, device))
                    .collect::<Result<Outs>>()?;
                crate::backend::backend(device).fused(kernel, ins, &outs)?;
                Ok(outs)
            }
            RmspropStep { n, h, dynamic } => {
                let (p, rest) = ins.split_at(*n);
                let (g, rest) = rest.split_at(*n);
                let (s, rest) = rest.split_at(*n);
                let nb = if h.momentum > 0.0 { *n } else { 0 };
                let (b, a) = rest.split_at(nb);
                let mut h = *h;
                apply_dyn(dynamic, |f, x| match f {
                    DynField::Lr => h.lr = x,
                    DynField::Alpha => h.alpha = x,
                    DynField::Eps => h.eps = x,
                    DynField::WeightDecay => h.weight_decay = x,
                    DynField::Momentum => h.momentum = x,
                    _ => {}
                });
                optim::rmsprop_step(p, g, s, b, a, &h)?;
                Ok(Outs::new())
            }
        }
    }
}

fn missing(c: &OpCall) -> Error {
    Error::runtime(
        c.name(),
        "a graph node has too few inputs for its op (a corrupt or hand-edited graph)",
    )
}

/// Inputs for an op call with an optional tensor argument.
pub fn with_opt(mut v: Vec<Tensor>, o: Option<&Tensor>) -> Vec<Tensor> {
    v.extend(opt(o));
    v
}

fn map_vec(v: &mut [isize], f: &mut dyn FnMut(i64) -> i64) {
    for x in v {
        *x = f(*x as i64) as isize;
    }
}

fn map_uvec(v: &mut [usize], f: &mut dyn FnMut(i64) -> i64) {
    for x in v {
        *x = f(*x as i64).max(0) as usize;
    }
}

fn map_scalar(s: &mut Scalar, f: &mut dyn FnMut(i64) -> i64) {
    if let Scalar::Int(i) = s {
        *i = f(*i);
    }
}

impl OpCall {
    /// Apply `f` to every integer argument that can hold a size or an index
    /// (shapes, view specs, slice bounds, split sizes, ...): how a graph
    /// with symbolic dimensions is specialised to concrete sizes.
    pub fn map_ints(&mut self, f: &mut dyn FnMut(i64) -> i64) {
        use OpCall::*;
        let u = |x: &mut usize, f: &mut dyn FnMut(i64) -> i64| *x = f(*x as i64).max(0) as usize;
        let i = |x: &mut isize, f: &mut dyn FnMut(i64) -> i64| *x = f(*x as i64) as isize;
        match self {
            View { spec } | Reshape { spec } | Expand { spec } => map_vec(spec, f),
            BroadcastTo { shape } => map_uvec(shape, f),
            Narrow { start, length, .. } => {
                i(start, f);
                u(length, f);
            }
            Select { index, .. } => i(index, f),
            Slice { start, stop, .. } => {
                if let Some(s) = start {
                    i(s, f);
                }
                if let Some(s) = stop {
                    i(s, f);
                }
            }
            AsStrided {
                size,
                stride,
                offset,
            } => {
                map_uvec(size, f);
                map_vec(stride, f);
                u(offset, f);
            }
            Restride {
                size,
                stride,
                offset,
                base,
            } => {
                map_uvec(size, f);
                map_vec(stride, f);
                u(offset, f);
                for d in base.shape.iter_mut() {
                    *d = f(*d as i64).max(0) as usize;
                }
                for st in base.strides.iter_mut() {
                    *st = f(*st as i64) as isize;
                }
                base.offset = f(base.offset as i64).max(0) as usize;
            }
            Index { key } | IndexPutInplace { key, .. } | IndexPut { key, .. } => {
                for k in key {
                    match k {
                        KeyItem::Int(x) => i(x, f),
                        KeyItem::Slice { start, stop, .. } => {
                            if let Some(s) = start {
                                i(s, f);
                            }
                            if let Some(s) = stop {
                                i(s, f);
                            }
                        }
                        _ => {}
                    }
                }
            }
            Split { sizes, .. } => match sizes {
                SplitSpec::Size(s) => i(s, f),
                SplitSpec::Sections(v) => map_vec(v, f),
            },
            Repeat { sizes } => map_vec(sizes, f),
            Roll { shifts, .. } => map_vec(shifts, f),
            Pad { pads, value, .. } => {
                map_vec(pads, f);
                map_scalar(value, f);
            }
            Empty { shape, .. }
            | Rand { shape, .. }
            | Randn { shape, .. }
            | Randint { shape, .. } => map_uvec(shape, f),
            Normal { size: Some(s), .. } => map_uvec(s, f),
            Arange {
                start, end, step, ..
            } => {
                map_scalar(start, f);
                map_scalar(end, f);
                map_scalar(step, f);
            }
            Linspace { steps, .. } => u(steps, f),
            Eye { n, m, .. } => {
                u(n, f);
                u(m, f);
            }
            Randperm { n, .. } => u(n, f),
            Conv2dInputGrad { hw, .. } => map_uvec(hw, f),
            PlaneScatter { len } => u(len, f),
            LayerNorm {
                normalized_shape, ..
            }
            | RmsNorm {
                normalized_shape, ..
            } => map_uvec(normalized_shape, f),
            Multinomial { num_samples, .. } => u(num_samples, f),
            // Integer scalars can be sizes too (`g / n` in a mean's gradient).
            BinaryScalar { s, .. } | BinaryScalarInplace { s, .. } => map_scalar(s, f),
            Full { shape, value, .. } => {
                map_uvec(shape, f);
                map_scalar(value, f);
            }
            MaskedFill { value } | Fill { value } => map_scalar(value, f),
            WhereScalar { a, b } => {
                if let Arg::Scalar(x) = a {
                    map_scalar(x, f);
                }
                if let Arg::Scalar(x) = b {
                    map_scalar(x, f);
                }
            }
            Fused { kernel } => {
                let mut k = (**kernel).clone();
                map_uvec(&mut k.shape, f);
                for ins in &mut k.instrs {
                    if let crate::graph::fused::FInstr::Const(c) = ins {
                        map_scalar(c, f);
                    }
                }
                *kernel = Arc::new(k);
            }
            Cond { then_g, else_g } => {
                *then_g = Sub(Arc::new(then_g.0.specialise(f)));
                *else_g = Sub(Arc::new(else_g.0.specialise(f)));
            }
            While { cond, body } => {
                *cond = Sub(Arc::new(cond.0.specialise(f)));
                *body = Sub(Arc::new(body.0.specialise(f)));
            }
            _ => {}
        }
    }
}
