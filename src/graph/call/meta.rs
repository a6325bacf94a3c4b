//! What an [`OpCall`] is, without running it: its name, effect on its
//! inputs, randomness, device, and its VJP bridge.

use std::sync::Arc;

use crate::error::Result;
use crate::ops::reduce::{ArgOp, CumOp};
use crate::tensor::{Device, Tensor};

use super::*;

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
            ScatterReduce { .. } => "scatter_reduce",
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
            LinearFused { .. } => "linear_fused",
            Einsum { .. } => "einsum",
            Conv2d { .. } | Conv2dP { .. } => "conv2d",
            Conv2dFused { .. } => "conv2d_fused",
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
            General { op } => op.name(),
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
            General { op } if !op.pure() => Effect::Random,
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
                then_g: Sub(Arc::new(then_g.graph().relocated(from, to))),
                else_g: Sub(Arc::new(else_g.graph().relocated(from, to))),
            },
            While { cond, body } => While {
                cond: Sub(Arc::new(cond.graph().relocated(from, to))),
                body: Sub(Arc::new(body.graph().relocated(from, to))),
            },
            c if c.factory_device() == Some(from) => c.on_device(to),
            c => c.clone(),
        }
    }

    /// Apply a [`OpCall::Vjp`] node's rule to its inputs.
    pub(super) fn vjp_apply(&self, ins: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
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
}
