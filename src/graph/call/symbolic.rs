//! Specialising symbolic sizes: [`OpCall::map_ints`] rewrites every integer
//! argument that can hold a size or an index.

use std::sync::Arc;

use crate::tensor::Scalar;

use super::*;

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
                *then_g = Sub(Arc::new(then_g.graph().specialise(f)));
                *else_g = Sub(Arc::new(else_g.graph().specialise(f)));
            }
            While { cond, body } => {
                *cond = Sub(Arc::new(cond.graph().specialise(f)));
                *body = Sub(Arc::new(body.graph().specialise(f)));
            }
            _ => {}
        }
    }
}
