//! The interpreter: [`OpCall::exec`] runs a node by calling the op function
//! eager mode calls.

use crate::error::{Error, Result};
use crate::ops::conv::{self};
use crate::ops::elementwise::{self as ew};
use crate::ops::index::{self as ix};
use crate::ops::join::{self};
use crate::ops::random::{self as rnd};
use crate::ops::reduce::{self as red};
use crate::ops::{creation, linalg, norm, optim, shape};
use crate::tensor::{Device, Tensor};

use super::*;

impl OpCall {
    /// Run the op on `ins` (the node's inputs, in order); returns its outputs.
    /// Autocast is off while it runs: the node's inputs already have the
    /// dtypes its capture gave them (see `crate::ops::autocast`).
    pub fn exec(&self, ins: &[Tensor]) -> Result<Outs> {
        crate::ops::autocast::suspended(|| self.exec_node(ins))
    }

    fn exec_node(&self, ins: &[Tensor]) -> Result<Outs> {
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
            ScatterReduce {
                dim,
                reduce,
                include_self,
            } => one(crate::ops::scatter_reduce::scatter_reduce(
                &ins[0],
                *dim,
                &ins[1],
                &ins[2],
                *reduce,
                *include_self,
            )?),
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
            LinearFused {
                bias,
                act,
                residual,
            } => one(linalg::linear_fused(
                &ins[0],
                &ins[1],
                bias.then(|| &ins[2]),
                *act,
                residual.then(|| &ins[2 + usize::from(*bias)]),
            )?),
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
            Conv2dFused {
                p,
                bias,
                relu,
                pool2,
            } => one(conv::conv2d_fused(
                &ins[0],
                &ins[1],
                bias.then(|| &ins[2]),
                *p,
                *relu,
                *pool2,
            )?),
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
            General { op } => {
                let refs: Vec<&Tensor> = ins.iter().collect();
                Ok(crate::ops::general::run(op, &refs)?.into())
            }
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
                crate::graph::control::run_cond(then_g.graph(), else_g.graph(), ins)
                    .map(Outs::from_vec)
            }
            While { cond, body } => {
                crate::graph::control::run_while(cond.graph(), body.graph(), ins)
                    .map(Outs::from_vec)
            }
            Fused { kernel } => {
                let device = ins.first().map_or(Device::Cpu, |t| t.device());
                let outs = kernel
                    .output_types()
                    .iter()
                    .map(|(s, d)| Tensor::empty(s, *d, device))
                    .collect::<Result<Outs>>()?;
                if !crate::backend::backend(device).fused(kernel, ins, &outs)? {
                    crate::graph::fused::run_unfused(kernel, ins, &outs)?;
                }
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
