//! The graph IR's node kinds: [`OpCall`], one registry op applied with its
//! non-tensor arguments, and the argument types it carries.
//!
//! A captured graph is a list of op calls over tensor values. Each variant
//! names one op function of `crate::ops` and holds the arguments that are
//! not tensors (dims, shapes, scalars, dtypes, generators); the tensor
//! arguments are the node's inputs. The ops build their own call when a
//! graph is being captured (see [`super::capture`]); the graph layer above
//! runs, rewrites and saves them (`crate::graph::call`). Running a node
//! means calling the very op function eager mode calls, so a captured graph
//! and eager execution cannot disagree on what an op does.

use std::sync::Arc;

use crate::ops::conv::{Conv2dParams, Padding};
use crate::ops::elementwise::{BinaryOp, Operand, UnaryOp};
use crate::ops::index::IndexItem;
use crate::ops::join::{PadMode, SplitArg};
use crate::ops::optim::{AdamHyper, RmspropHyper, SgdHyper};
use crate::ops::random::Generator;
use crate::ops::reduce::{ArgOp, CumOp};
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

/// An op name carried as an argument (an alias, so that serde reads it as an
/// owned name mapped back to the registry's, not as borrowed text).
pub type OpName = &'static str;

/// A registry op with its non-tensor arguments (see the module docs).
/// Serialisable for saved graphs (by the graph layer).
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
        #[serde(with = "crate::ops::registry::static_name")]
        op: OpName,
        key: Vec<KeyItem>,
        accumulate: bool,
    },
    IndexPut {
        #[serde(with = "crate::ops::registry::static_name")]
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
    ScatterReduce {
        dim: isize,
        reduce: crate::kernel::ScatterReduction,
        include_self: bool,
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
    /// `act(linear(x, w, bias)) + residual` in one kernel on a pre-packed
    /// weight (internal: inference graphs fuse `linear → activation → add`
    /// into it, see `passes::epilogue`). Inputs: `x, w[, bias][, residual]`.
    LinearFused {
        bias: bool,
        act: Option<UnaryOp>,
        residual: bool,
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
    /// A 4-D convolution with resolved geometry and an epilogue: `relu`,
    /// then a 2×2 stride-2 `max_pool2d` (internal: inference graphs fuse
    /// `conv2d → relu → max_pool2d` into it, see `passes::epilogue`).
    Conv2dFused {
        p: Conv2dParams,
        bias: bool,
        relu: bool,
        pool2: bool,
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
    // ---- general ops (each defined once in `crate::kernel::general`)
    /// A general op; its definition holds its attributes.
    General {
        op: crate::kernel::GeneralOp,
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
    // ---- control flow (run by the graph layer)
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
    /// A fused elementwise kernel (see [`crate::kernel::fused`]).
    Fused {
        kernel: Arc<crate::kernel::fused::FusedKernel>,
    },
}

/// A control-flow body held by a node (compared by identity). The graph
/// layer makes and runs it; the IR only carries it (see [`SubBody`]).
#[derive(Clone, Debug)]
pub struct Sub(pub Arc<dyn SubBody>);

/// What a [`Sub`] holds: a captured sub-graph, whose type belongs to the
/// graph layer (`crate::graph::control::SubGraph`).
pub trait SubBody: std::any::Any + Send + Sync + std::fmt::Debug {
    /// The body as `Any`, for the graph layer to get its own type back.
    fn as_any(&self) -> &dyn std::any::Any;
}

impl PartialEq for Sub {
    fn eq(&self, o: &Sub) -> bool {
        Arc::ptr_eq(&self.0, &o.0)
    }
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
