//! Indexing: `x[key]` and `x[key] = value`.
//!
//! Basic keys (ints, slices, `None`, `...`) produce views. A key holding
//! integer or boolean tensors is advanced indexing (NumPy semantics) and
//! produces a copy; boolean masks make the output shape depend on data.

use crate::autograd::{self as ag, sum_to, Backward, GradMode, Save};
use crate::backend::backend;
use crate::error::{Error, Result};
pub use crate::kernel::params::IndexArgs;
use crate::ops::elementwise::{self, BinaryOp};
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::ops::shape;
use crate::tensor::layout::{broadcast_shapes, fmt_shape, norm_dim};
use crate::tensor::{DType, Scalar, Shape, Tensor};

pub const OPS: &[OpInfo] = &[
    OpInfo::prim("getitem", "index", DTypes::ALL)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("setitem", "index", DTypes::ALL)
        .mutates(0)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("index_put_", "index", DTypes::ALL)
        .mutates(0)
        .grad(),
    OpInfo::prim("nonzero", "index", DTypes::ALL).data_dependent(),
    OpInfo::prim("masked_select", "index", DTypes::ALL)
        .kind(OpKind::Composite)
        .data_dependent()
        .grad(),
    OpInfo::prim("index_select", "index", DTypes::ALL).grad(),
    OpInfo::prim("gather", "index", DTypes::ALL).grad(),
    OpInfo::prim("take_along_dim", "index", DTypes::ALL)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("scatter_add_", "index", DTypes::ALL)
        .mutates(0)
        .grad(),
    OpInfo::prim("scatter_add", "index", DTypes::ALL)
        .kind(OpKind::Composite)
        .grad(),
    OpInfo::prim("scatter_", "index", DTypes::ALL)
        .mutates(0)
        .grad(),
    OpInfo::prim("scatter", "index", DTypes::ALL)
        .kind(OpKind::Composite)
        .grad(),
];

/// One element of an indexing key.
#[derive(Clone, Debug)]
pub enum IndexItem {
    Int(isize),
    /// Python slice; `step != 0`.
    Slice {
        start: Option<isize>,
        stop: Option<isize>,
        step: isize,
    },
    NewAxis,
    Ellipsis,
    /// Integer (int32/int64) or bool tensor.
    Tensor(Tensor),
}

/// Python's `slice.indices(n)` followed by the slice length.
pub fn slice_range(
    start: Option<isize>,
    stop: Option<isize>,
    step: isize,
    n: usize,
) -> (isize, usize) {
    let n = n as isize;
    let (lower, upper) = if step > 0 { (0, n) } else { (-1, n - 1) };
    let norm = |v: Option<isize>, default: isize| -> isize {
        match v {
            None => default,
            Some(v) if v < 0 => (v + n).max(lower),
            Some(v) => v.min(upper),
        }
    };
    let s = norm(start, if step > 0 { lower } else { upper });
    let e = norm(stop, if step > 0 { upper } else { lower });
    let len = if step > 0 {
        if e > s {
            (e - s - 1) / step + 1
        } else {
            0
        }
    } else if s > e {
        (s - e - 1) / (-step) + 1
    } else {
        0
    };
    (s, len as usize)
}

fn has_tensor(items: &[IndexItem]) -> bool {
    items.iter().any(|i| matches!(i, IndexItem::Tensor(_)))
}

fn too_many(op: &'static str, x: &Tensor) -> Error {
    Error::index(
        op,
        format!(
            "too many indices for tensor of dimension {} (shape {})",
            x.ndim(),
            fmt_shape(x.shape())
        ),
    )
}

fn count_ellipses(op: &'static str, items: &[IndexItem]) -> Result<()> {
    let n = items
        .iter()
        .filter(|i| matches!(i, IndexItem::Ellipsis))
        .count();
    if n > 1 {
        return Err(Error::index(
            op,
            "an index can only have a single ellipsis ('...')",
        ));
    }
    Ok(())
}

/// Apply a key made only of basic items (ints, slices, `None`, `...`): a view.
pub fn basic_view(op: &'static str, x: &Tensor, items: &[IndexItem]) -> Result<Tensor> {
    count_ellipses(op, items)?;
    let consumed = items
        .iter()
        .filter(|it| matches!(it, IndexItem::Int(_) | IndexItem::Slice { .. }))
        .count();
    if consumed > x.ndim() {
        return Err(too_many(op, x));
    }
    let mut layout = x.layout().clone();
    let mut d = 0usize; // current dim in the view
    let mut src = 0usize; // the dim of x it came from
    for it in items {
        match it {
            IndexItem::Int(i) => {
                layout = layout.select(op, d, *i).map_err(|_| {
                    Error::index(
                        op,
                        format!(
                            "index {i} is out of bounds for dimension {src} with size {} (shape {})",
                            layout.shape[d],
                            fmt_shape(x.shape())
                        ),
                    )
                })?;
                src += 1;
            }
            IndexItem::Slice { start, stop, step } => {
                let (s, len) = slice_range(*start, *stop, *step, layout.shape[d]);
                layout = layout.slice(d, s.max(0) as usize, len, *step);
                d += 1;
                src += 1;
            }
            IndexItem::NewAxis => {
                layout = layout.unsqueeze(op, d as isize)?;
                d += 1;
            }
            IndexItem::Ellipsis => {
                d += x.ndim() - consumed;
                src += x.ndim() - consumed;
            }
            IndexItem::Tensor(_) => {
                return Err(Error::runtime(op, "basic_view got a tensor index"));
            }
        }
    }
    Ok(x.with_layout(layout))
}

/// A key with advanced items, resolved against a tensor (NumPy's rules).
///
/// Integer scalars in such a key count as 0-d index arrays; a 0-d boolean
/// adds a length-1 dim indexed by `[0]` (true) or `[]` (false); a k-d
/// boolean mask becomes the k index arrays of its non-zero positions.
struct AdvKey {
    /// The tensor with the basic items applied (slices, new axes).
    view: Tensor,
    /// Dims of `view` taken by index arrays, ascending.
    dims: Vec<usize>,
    /// The dim of the original tensor each entry of `dims` came from.
    names: Vec<usize>,
    /// Index arrays broadcast to `b_shape`.
    indices: Vec<Tensor>,
    b_shape: Shape,
    /// Position of the `B` dims among the remaining dims in the result.
    insert_at: usize,
}

impl AdvKey {
    fn new(op: &'static str, x: &Tensor, items: &[IndexItem]) -> Result<AdvKey> {
        count_ellipses(op, items)?;
        let consumed = items
            .iter()
            .map(|it| match it {
                IndexItem::Int(_) | IndexItem::Slice { .. } => 1,
                IndexItem::Tensor(t) if t.dtype() == DType::Bool => t.ndim(),
                IndexItem::Tensor(_) => 1,
                IndexItem::NewAxis | IndexItem::Ellipsis => 0,
            })
            .sum::<usize>();
        if consumed > x.ndim() {
            return Err(too_many(op, x));
        }
        let mut layout = x.layout().clone();
        let mut d = 0usize;
        let mut src = 0usize;
        let mut adv: Vec<(usize, usize, Tensor)> = vec![];
        let mut adv_items: Vec<usize> = vec![];
        for (pos, it) in items.iter().enumerate() {
            match it {
                IndexItem::Int(i) => {
                    adv_items.push(pos);
                    adv.push((
                        d,
                        src,
                        Tensor::from_vec_on(vec![*i as i64], &[], x.device())?,
                    ));
                    d += 1;
                    src += 1;
                }
                IndexItem::Slice { start, stop, step } => {
                    let (s, len) = slice_range(*start, *stop, *step, layout.shape[d]);
                    layout = layout.slice(d, s.max(0) as usize, len, *step);
                    d += 1;
                    src += 1;
                }
                IndexItem::NewAxis => {
                    layout = layout.unsqueeze(op, d as isize)?;
                    d += 1;
                }
                IndexItem::Ellipsis => {
                    d += x.ndim() - consumed;
                    src += x.ndim() - consumed;
                }
                IndexItem::Tensor(t) if t.dtype() == DType::Bool => {
                    adv_items.push(pos);
                    if t.ndim() == 0 {
                        layout = layout.unsqueeze(op, d as isize)?;
                        let idx = if t.item()?.to_i64() != 0 {
                            Tensor::from_vec_on(vec![0i64], &[1], x.device())?
                        } else {
                            Tensor::from_vec_on(Vec::<i64>::new(), &[0], x.device())?
                        };
                        adv.push((d, src, idx));
                        d += 1;
                        continue;
                    }
                    let k = t.ndim();
                    for i in 0..k {
                        if layout.shape[d + i] != t.shape()[i] {
                            return Err(Error::index(
                                op,
                                format!(
                                    "boolean index did not match indexed tensor along dimension {}; size of dimension is {} but size of corresponding boolean dimension is {} (mask shape {}, tensor shape {})",
                                    src + i,
                                    layout.shape[d + i],
                                    t.shape()[i],
                                    fmt_shape(t.shape()),
                                    fmt_shape(x.shape())
                                ),
                            ));
                        }
                    }
                    let nz = nonzero(t).map_err(|e| match e {
                        Error::Symbolic { .. } => Error::symbolic(
                            op,
                            format!(
                                "a boolean mask index (mask shape {}) selects as many elements as it has true values, which are not known while a graph is being captured; keep shapes fixed with `where(mask, x, 0)` or `masked_fill`, or a loss's `ignore_index`",
                                fmt_shape(t.shape())
                            ),
                        ),
                        e => e,
                    })?;
                    for j in 0..k {
                        adv.push((d + j, src + j, shape::select(&nz, 1, j as isize)?));
                    }
                    d += k;
                    src += k;
                }
                IndexItem::Tensor(t) => {
                    if !matches!(t.dtype(), DType::I32 | DType::I64) {
                        return Err(Error::index(
                            op,
                            format!(
                                "tensors used as indices must be long, int or bool tensors, got {} (index shape {}); convert with .long() (indices) or .bool() (a mask)",
                                t.dtype(),
                                fmt_shape(t.shape())
                            ),
                        ));
                    }
                    adv_items.push(pos);
                    adv.push((d, src, t.clone()));
                    d += 1;
                    src += 1;
                }
            }
        }
        let mut b_shape = Shape::new();
        for (_, _, t) in &adv {
            b_shape = broadcast_shapes(op, &b_shape, t.shape()).map_err(|_| {
                Error::index(
                    op,
                    format!(
                        "shape mismatch: indexing tensors could not be broadcast together with shapes {}",
                        adv.iter()
                            .map(|(_, _, t)| fmt_shape(t.shape()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })?;
        }
        let adjacent = adv_items.last().unwrap() - adv_items[0] + 1 == adv_items.len();
        let insert_at = if adjacent { adv[0].0 } else { 0 };
        let mut indices = Vec::with_capacity(adv.len());
        for (_, _, t) in &adv {
            indices.push(t.with_layout(t.layout().expand(op, &b_shape)?));
        }
        Ok(AdvKey {
            view: x.with_layout(layout),
            dims: adv.iter().map(|a| a.0).collect(),
            names: adv.iter().map(|a| a.1).collect(),
            indices,
            b_shape,
            insert_at,
        })
    }

    /// Shape of `x[key]`.
    fn out_shape(&self) -> Vec<usize> {
        let rest: Vec<usize> = (0..self.view.ndim())
            .filter(|d| !self.dims.contains(d))
            .map(|d| self.view.shape()[d])
            .collect();
        let mut s = rest[..self.insert_at].to_vec();
        s.extend_from_slice(&self.b_shape);
        s.extend_from_slice(&rest[self.insert_at..]);
        s
    }

    /// Permutation taking the result's dims to the kernels' order (`B` first).
    fn kernel_perm(&self) -> Vec<isize> {
        let nb = self.b_shape.len();
        let total = self.view.ndim() - self.dims.len() + nb;
        let p = self.insert_at;
        (p..p + nb)
            .chain(0..p)
            .chain(p + nb..total)
            .map(|d| d as isize)
            .collect()
    }

    fn args(&self, op: &'static str) -> IndexArgs<'_> {
        IndexArgs {
            op,
            dims: &self.dims,
            dim_names: &self.names,
            indices: &self.indices,
        }
    }
}

/// `x[items]`: a view for basic keys, a copy (gathered by the backend) for advanced ones.
///
/// The gradient of an advanced key is `index_put` with `accumulate=True` of
/// the output gradient into zeros (repeated positions add up).
/// The key with its CPU index tensors (from Python lists, NumPy arrays or
/// CPU tensors) copied to `x`'s device when `x` lives on another one: a GPU
/// tensor takes host indices, as in PyTorch. Small integer uploads keep a
/// host copy, so the GPU kernels' range checks read no data back.
fn key_on_device<'a>(
    op: &'static str,
    x: &Tensor,
    items: &'a [IndexItem],
) -> Result<std::borrow::Cow<'a, [IndexItem]>> {
    use crate::tensor::Device;
    if !x.device().has_data() {
        return Ok(std::borrow::Cow::Borrowed(items));
    }
    for i in items {
        if let IndexItem::Tensor(t) = i {
            let d = t.device();
            if d != x.device() && d.has_data() && d != Device::Cpu {
                return Err(Error::runtime(
                    op,
                    format!(
                        "expected all tensors to be on the same device, but found {} and {d} (indices on {d} for a tensor on {})",
                        x.device(),
                        x.device()
                    ),
                ));
            }
        }
    }
    let moves = |i: &IndexItem| matches!(i, IndexItem::Tensor(t) if t.device() == Device::Cpu);
    if x.device() == Device::Cpu || !items.iter().any(moves) {
        return Ok(std::borrow::Cow::Borrowed(items));
    }
    items
        .iter()
        .map(|i| match i {
            IndexItem::Tensor(t) if moves(i) => {
                Ok(IndexItem::Tensor(crate::backend::transfer(t, x.device())?))
            }
            other => Ok(other.clone()),
        })
        .collect::<Result<Vec<_>>>()
        .map(std::borrow::Cow::Owned)
}

pub fn index(x: &Tensor, items: &[IndexItem]) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Index {
            key: crate::ops::call::KeyItem::split(items).0
        },
        [x] + crate::ops::call::KeyItem::split(items).1,
        one
    );
    let items = &*key_on_device("getitem", x, items)?;
    if !has_tensor(items) {
        let v = basic_view("getitem", x, items)?;
        if ag::needs_grad(&[x]) {
            let key = items.to_vec();
            let bw = shape::slice_bw(x, "IndexBackward", move |t| basic_view("getitem", t, &key));
            ag::record(bw, &[x], &[&v], &[]);
        }
        return Ok(v);
    }
    let key = AdvKey::new("getitem", x, items)?;
    let out = Tensor::empty_for("index", &key.out_shape(), x.dtype(), x.device())?;
    let kout = out.with_layout(out.layout().permute("getitem", &key.kernel_perm())?);
    backend(x.device()).index_gather(&key.args("getitem"), &key.view, &kout)?;
    if ag::needs_grad(&[x]) {
        let (skel, ts) = split_key(items);
        let saves: Vec<Save<'_>> = ts.iter().map(|t| Save::Tensor(t)).collect();
        ag::record(
            AdvIndexBackward {
                skel,
                in_shape: x.shape().into(),
            },
            &[x],
            &[&out],
            &saves,
        );
    }
    Ok(out)
}

/// A key with its tensors taken out (`None` marks the next saved tensor), so
/// that backward gets them through the version-checked saved values.
type KeySkel = Vec<Option<IndexItem>>;

fn split_key(items: &[IndexItem]) -> (KeySkel, Vec<&Tensor>) {
    let mut ts = vec![];
    let skel = items
        .iter()
        .map(|it| match it {
            IndexItem::Tensor(t) => {
                ts.push(t);
                None
            }
            other => Some(other.clone()),
        })
        .collect();
    (skel, ts)
}

fn rebuild_key(skel: &[Option<IndexItem>], saved: &[Tensor]) -> Vec<IndexItem> {
    let mut it = saved.iter();
    skel.iter()
        .map(|s| match s {
            Some(item) => item.clone(),
            None => IndexItem::Tensor(it.next().expect("saved index tensor").clone()),
        })
        .collect()
}

/// Backward of advanced `x[key]`: accumulate the gradient into zeros at the key.
struct AdvIndexBackward {
    skel: KeySkel,
    in_shape: Shape,
}

impl Backward for AdvIndexBackward {
    fn name(&self) -> &'static str {
        "IndexBackward"
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &grads[0] else {
            return Ok(vec![None]);
        };
        let items = rebuild_key(&self.skel, saved);
        let z = Tensor::zeros(&self.in_shape, g.dtype(), g.device())?;
        Ok(vec![Some(index_put("getitem", &z, &items, g, true)?)])
    }
}

/// Error unless writing through `v` touches each element at most once.
pub(crate) fn check_no_overlap(op: &'static str, v: &Tensor) -> Result<()> {
    if v.shape()
        .iter()
        .zip(v.strides())
        .any(|(&n, &s)| n > 1 && s == 0)
    {
        return Err(Error::runtime(
            op,
            format!(
                "unsupported operation: more than one element of the written-to tensor (shape {}, strides {:?}) refers to a single memory location; clone() it first",
                fmt_shape(v.shape()),
                v.strides()
            ),
        ));
    }
    Ok(())
}

/// Broadcast `value` (converted to `dtype`) to `target`, dropping extra leading 1-dims.
fn value_for(op: &'static str, value: &Tensor, target: &[usize], dtype: DType) -> Result<Tensor> {
    let v = elementwise::to_dtype(value, dtype)?;
    let mut l = v.layout().clone();
    while l.ndim() > target.len() && l.shape[0] == 1 {
        l = l.select(op, 0, 0)?;
    }
    let l = l.expand(op, target).map_err(|_| {
        Error::shape(
            op,
            format!(
                "shape mismatch: value tensor of shape {} cannot be broadcast to indexing result of shape {}",
                fmt_shape(value.shape()),
                fmt_shape(target)
            ),
        )
    })?;
    Ok(v.with_layout(l))
}

/// `x[items] = value` (value broadcast to the indexed shape, converted to x's dtype).
pub fn index_put_(x: &Tensor, items: &[IndexItem], value: &Tensor) -> Result<()> {
    index_put_with("setitem", x, items, value, false)
}

fn check_same_device(op: &'static str, x: &Tensor, value: &Tensor) -> Result<()> {
    if value.device() != x.device() {
        return Err(Error::runtime(
            op,
            format!(
                "expected the value on the tensor's device {}, got {}",
                x.device(),
                value.device()
            ),
        ));
    }
    Ok(())
}

/// Record an in-place write into `x` that has just happened: a node whose
/// inputs are `x` (still with its history from before the write) and
/// `other`, and whose output is `x`'s new value.
pub(crate) fn record_inplace(
    x: &Tensor,
    other: &Tensor,
    bw: impl Backward + 'static,
    saves: &[Save<'_>],
) -> Result<()> {
    let out = x.detach();
    ag::record_alias(bw, &[x, other], &[&out], saves);
    ag::rebase_history(x, &out)
}

/// `x[items] = value`, or `x[items] += value` with `accumulate` (repeated
/// positions then add up). Without `accumulate`, for repeated positions the
/// last value in row-major order of the index arrays wins. Nothing is written
/// when the call fails.
///
/// When `x` or `value` requires grad (an error for leaves that require grad),
/// the write is recorded like [`index_put`]'s and `x` becomes its output.
pub fn index_put_with(
    op: &'static str,
    x: &Tensor,
    items: &[IndexItem],
    value: &Tensor,
    accumulate: bool,
) -> Result<()> {
    capture!(
        crate::ops::call::OpCall::IndexPutInplace {
            op,
            key: crate::ops::call::KeyItem::split(items).0,
            accumulate
        },
        [x] + crate::ops::call::KeyItem::split(items)
            .1
            .into_iter()
            .chain([value.clone()]),
        unit
    );
    let items = &*key_on_device(op, x, items)?;
    x.check_writable(op)?;
    check_same_device(op, x, value)?;
    let grad = x.dtype().is_floating_point() && ag::needs_grad(&[x, value]);
    if grad {
        ag::check_inplace(op, x)?;
    }
    put_raw(op, x, items, value, accumulate)?;
    if grad {
        let (bw, ts) = put_backward(op, items, value, accumulate);
        let saves: Vec<Save<'_>> = ts.iter().map(|t| Save::Tensor(t)).collect();
        record_inplace(x, value, bw, &saves)?;
    }
    Ok(())
}

/// The write of [`index_put_with`], without recording.
fn put_raw(
    op: &'static str,
    x: &Tensor,
    items: &[IndexItem],
    value: &Tensor,
    accumulate: bool,
) -> Result<()> {
    let _no = GradMode::set(false);
    if !has_tensor(items) {
        let v = basic_view(op, x, items)?;
        let val = value_for(op, value, v.shape(), x.dtype())?;
        let val = if accumulate {
            elementwise::binary(BinaryOp::Add, &v, &val)?
        } else {
            val
        };
        check_no_overlap(op, &v)?;
        return elementwise::copy_(&v, &val).map_err(|e| match e {
            Error::Shape { msg, .. } => Error::Shape { op, msg },
            other => other,
        });
    }
    let key = AdvKey::new(op, x, items)?;
    check_no_overlap(op, &key.view)?;
    let val = value_for(op, value, &key.out_shape(), x.dtype())?;
    let val = val.with_layout(val.layout().permute(op, &key.kernel_perm())?);
    let val = if val.shares_storage(x) {
        elementwise::clone(&val)?
    } else {
        val
    };
    backend(x.device()).index_put(&key.args(op), &key.view, &val, accumulate)?;
    x.storage().bump_version();
    Ok(())
}

/// Out-of-place `index_put`: a copy of `x` with `value` written (or, with
/// `accumulate`, added) at `items`.
///
/// Gradients: `x` gets the output gradient with the written positions zeroed
/// (all of it with `accumulate`); `value` gets the output gradient gathered
/// at `items`, summed over the dims it was broadcast along. Without
/// `accumulate`, every occurrence of a repeated position (whose winner is
/// unspecified) receives that position's gradient, as in PyTorch.
pub fn index_put(
    op: &'static str,
    x: &Tensor,
    items: &[IndexItem],
    value: &Tensor,
    accumulate: bool,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::IndexPut {
            op,
            key: crate::ops::call::KeyItem::split(items).0,
            accumulate
        },
        [x] + crate::ops::call::KeyItem::split(items)
            .1
            .into_iter()
            .chain([value.clone()]),
        one
    );
    let items = &*key_on_device(op, x, items)?;
    check_same_device(op, x, value)?;
    let out = {
        let _no = GradMode::set(false);
        elementwise::clone(x)?
    };
    put_raw(op, &out, items, value, accumulate)?;
    if x.dtype().is_floating_point() && ag::needs_grad(&[x, value]) {
        let (bw, ts) = put_backward(op, items, value, accumulate);
        let saves: Vec<Save<'_>> = ts.iter().map(|t| Save::Tensor(t)).collect();
        ag::record(bw, &[x, value], &[&out], &saves);
    }
    Ok(out)
}

/// The backward node of a put, and the key's tensors it saves.
fn put_backward<'a>(
    op: &'static str,
    items: &'a [IndexItem],
    value: &Tensor,
    accumulate: bool,
) -> (IndexPutBackward, Vec<&'a Tensor>) {
    let (skel, ts) = split_key(items);
    let bw = IndexPutBackward {
        op,
        skel,
        accumulate,
        v_shape: value.shape().into(),
        v_dtype: value.dtype(),
    };
    (bw, ts)
}

/// Sum a gradient of the indexed region's shape down to the shape of the
/// value [`value_for`] broadcast into it (extra leading 1-dims included).
fn value_grad(g: &Tensor, v_shape: &[usize], v_dtype: DType) -> Result<Tensor> {
    let mut vs = v_shape;
    while vs.len() > g.ndim() && vs[0] == 1 {
        vs = &vs[1..];
    }
    let s = sum_to(g, vs)?;
    let spec: Vec<isize> = v_shape.iter().map(|&d| d as isize).collect();
    let s = shape::reshape(&s, &spec)?;
    elementwise::to_dtype(&s, v_dtype)
}

struct IndexPutBackward {
    op: &'static str,
    skel: KeySkel,
    accumulate: bool,
    v_shape: Shape,
    v_dtype: DType,
}

impl Backward for IndexPutBackward {
    fn name(&self) -> &'static str {
        if self.accumulate {
            "IndexPutAccumulateBackward"
        } else {
            "IndexPutBackward"
        }
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &grads[0] else {
            return Ok(vec![None, None]);
        };
        let items = rebuild_key(&self.skel, saved);
        let gx = if !needs[0] {
            None
        } else if self.accumulate {
            Some(g.clone())
        } else {
            let z = elementwise::scalar_tensor(Scalar::Float(0.0), g.dtype(), g.device())?;
            Some(index_put(self.op, g, &items, &z, false)?)
        };
        let gv = if needs[1] && self.v_dtype.is_floating_point() {
            let gi = index(g, &items)?;
            Some(value_grad(&gi, &self.v_shape, self.v_dtype)?)
        } else {
            None
        };
        Ok(vec![gx, gv])
    }
}

/// Indices of non-zero elements: an int64 tensor of shape `[n, ndim]`, in row-major order.
pub fn nonzero(x: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Nonzero, [x], one);
    let be = backend(x.device());
    let n = be.nonzero_count(x)?;
    let out = Tensor::empty(&[n, x.ndim()], DType::I64, x.device())?;
    be.nonzero_fill(x, &out)?;
    Ok(out)
}

/// `x[mask]` with `mask` broadcast against `x`: a 1-D copy of the selected elements.
pub fn masked_select(x: &Tensor, mask: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::MaskedSelect, [x, mask], one);
    let op = "masked_select";
    if mask.dtype() != DType::Bool {
        return Err(Error::dtype(
            op,
            format!("mask must be a bool tensor, got {}", mask.dtype()),
        ));
    }
    let s = broadcast_shapes(op, x.shape(), mask.shape())?;
    // A composite of broadcast_to and advanced indexing (both recorded).
    let xe = shape::broadcast_to(x, &s)?;
    let me = mask.with_layout(mask.layout().expand(op, &s)?);
    index(&xe, &[IndexItem::Tensor(me)]).map_err(|e| rename(e, op))
}

pub(crate) fn check_index_dtype(op: &'static str, index: &Tensor) -> Result<()> {
    if !matches!(index.dtype(), DType::I32 | DType::I64) {
        return Err(Error::dtype(
            op,
            format!(
                "index must be an integer (int64 or int32) tensor, got {} (index shape {})",
                index.dtype(),
                fmt_shape(index.shape())
            ),
        ));
    }
    Ok(())
}

pub(crate) fn same_device(op: &'static str, a: &Tensor, b: &Tensor) -> Result<()> {
    if a.device() != b.device() {
        return Err(Error::runtime(
            op,
            format!(
                "expected all tensors to be on the same device, but found {} and {}",
                a.device(),
                b.device()
            ),
        ));
    }
    Ok(())
}

/// `index_select(x, dim, index)`: entries of `x` along `dim` at `index` (1-D;
/// negative indices count from the end).
pub fn index_select(x: &Tensor, dim: isize, index: &Tensor) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::IndexSelect { dim },
        [x, index],
        one
    );
    let op = "index_select";
    check_index_dtype(op, index)?;
    same_device(op, x, index)?;
    if index.ndim() > 1 {
        return Err(Error::index(
            op,
            format!(
                "index is supposed to be a vector (0-d or 1-d), got shape {}",
                fmt_shape(index.shape())
            ),
        ));
    }
    let d = norm_dim(op, dim, x.ndim())?;
    let (x1, idx) = {
        let _no = GradMode::set(false);
        (at_least_1d(x)?, at_least_1d(index)?)
    };
    let mut oshape = x1.shape().to_vec();
    oshape[d] = idx.numel();
    let out = Tensor::empty_for(op, &oshape, x.dtype(), x.device())?;
    let perm: Vec<isize> = std::iter::once(d)
        .chain((0..x1.ndim()).filter(|&k| k != d))
        .map(|k| k as isize)
        .collect();
    let kout = out.with_layout(out.layout().permute(op, &perm)?);
    let args = IndexArgs {
        op,
        dims: &[d],
        dim_names: &[d],
        indices: std::slice::from_ref(&idx),
    };
    backend(x.device()).index_gather(&args, &x1, &kout)?;
    let out = if x.ndim() == 0 && index.ndim() == 0 {
        out.with_layout(crate::tensor::Layout::contiguous(&[]))
    } else {
        out
    };
    if ag::needs_grad(&[x]) {
        ag::record(
            IndexSelectBackward {
                d,
                in_shape: x.shape().into(),
                x1_shape: x1.shape().into(),
                out1_shape: oshape.as_slice().into(),
            },
            &[x],
            &[&out],
            &[Save::Tensor(index)],
        );
    }
    Ok(out)
}

fn ispec(s: &[usize]) -> Vec<isize> {
    s.iter().map(|&d| d as isize).collect()
}

const ALL: IndexItem = IndexItem::Slice {
    start: None,
    stop: None,
    step: 1,
};

/// Backward of `index_select`: the gradient added into zeros at the selected
/// positions along `d` (an `index_put` with `accumulate`; repeats add up).
struct IndexSelectBackward {
    d: usize,
    in_shape: Shape,
    x1_shape: Shape,
    out1_shape: Shape,
}

impl Backward for IndexSelectBackward {
    fn name(&self) -> &'static str {
        "IndexSelectBackward"
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &grads[0] else {
            return Ok(vec![None]);
        };
        let idx = at_least_1d(&saved[0])?;
        let g1 = shape::reshape(g, &ispec(&self.out1_shape))?;
        let z = Tensor::zeros(&self.x1_shape, g.dtype(), g.device())?;
        let mut items = vec![ALL; self.d];
        items.push(IndexItem::Tensor(idx));
        let gx = index_put("index_select", &z, &items, &g1, true)?;
        Ok(vec![Some(shape::reshape(&gx, &ispec(&self.in_shape))?)])
    }
}

/// Shapes for gather/scatter: both 0-d tensors act as 1-D of length 1 (an
/// unrecorded view: the ops using it record their own gradients).
pub(crate) fn at_least_1d(t: &Tensor) -> Result<Tensor> {
    if t.ndim() == 0 {
        Ok(t.with_layout(t.layout().unsqueeze("at_least_1d", 0)?))
    } else {
        Ok(t.clone())
    }
}

/// `gather(x, dim, index)`: `out[i][j] = x[index[i][j]][j]` for `dim = 0`, and so on.
pub fn gather(x: &Tensor, dim: isize, index: &Tensor) -> Result<Tensor> {
    capture!(crate::ops::call::OpCall::Gather { dim }, [x, index], one);
    let op = "gather";
    check_index_dtype(op, index)?;
    same_device(op, x, index)?;
    if x.ndim() != index.ndim() {
        return Err(Error::shape(
            op,
            format!(
                "index tensor must have the same number of dimensions as input tensor (input shape {}, index shape {})",
                fmt_shape(x.shape()),
                fmt_shape(index.shape())
            ),
        ));
    }
    let d = norm_dim(op, dim, x.ndim())?;
    let (x1, i1) = (at_least_1d(x)?, at_least_1d(index)?);
    for k in 0..x1.ndim() {
        if k != d && i1.shape()[k] > x1.shape()[k] {
            return Err(Error::shape(
                op,
                format!(
                    "size of index {} must not exceed the input's {} at dimension {k} (dimensions other than dim = {d})",
                    fmt_shape(index.shape()),
                    fmt_shape(x.shape())
                ),
            ));
        }
    }
    let out = Tensor::empty_for(op, index.shape(), x.dtype(), x.device())?;
    if out.numel() > 0 {
        let o1 = at_least_1d(&out)?;
        backend(x.device()).gather(&x1, d, &i1, &o1)?;
    }
    if ag::needs_grad(&[x]) {
        ag::record(
            GatherBackward {
                d,
                in_shape: x.shape().into(),
            },
            &[x],
            &[&out],
            &[Save::Tensor(index)],
        );
    }
    Ok(out)
}

/// Backward of `gather`: `scatter_add` of the gradient into zeros (repeats add up).
struct GatherBackward {
    d: usize,
    in_shape: Shape,
}

impl Backward for GatherBackward {
    fn name(&self) -> &'static str {
        "GatherBackward"
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &grads[0] else {
            return Ok(vec![None]);
        };
        // Through the public op, so a captured graph records this gradient as
        // ops (a graph with a symbolic batch binds their sizes at each run).
        let z = Tensor::zeros(&self.in_shape, g.dtype(), g.device())?;
        let gx = scatter_add(&z, self.d as isize, &saved[0], g)?;
        Ok(vec![Some(gx)])
    }
}

/// `take_along_dim(x, indices, dim)`: `gather` after broadcasting `x` and
/// `indices` in every dim but `dim`; with no dim, on the flattened tensors.
pub fn take_along_dim(x: &Tensor, indices: &Tensor, dim: Option<isize>) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::TakeAlongDim { dim },
        [x, indices],
        one
    );
    let op = "take_along_dim";
    check_index_dtype(op, indices)?;
    let Some(dim) = dim else {
        let xf = shape::reshape(x, &[-1])?;
        let idf = shape::reshape(indices, &[-1])?;
        return gather(&xf, 0, &idf).map_err(|e| rename(e, op));
    };
    if x.ndim() != indices.ndim() {
        return Err(Error::shape(
            op,
            format!(
                "input and indices should have the same number of dimensions (input shape {}, indices shape {})",
                fmt_shape(x.shape()),
                fmt_shape(indices.shape())
            ),
        ));
    }
    let d = norm_dim(op, dim, x.ndim())?;
    if x.ndim() == 0 {
        return gather(x, 0, indices).map_err(|e| rename(e, op));
    }
    let mut xs = x.shape().to_vec();
    let mut is = indices.shape().to_vec();
    xs[d] = 1;
    is[d] = 1;
    let b = broadcast_shapes(op, &xs, &is)?;
    let (mut xb, mut ib) = (b.to_vec(), b.to_vec());
    xb[d] = x.shape()[d];
    ib[d] = indices.shape()[d];
    let xe = shape::broadcast_to(x, &xb).map_err(|e| rename(e, op))?;
    let ie = indices.with_layout(indices.layout().expand(op, &ib)?);
    gather(&xe, d as isize, &ie).map_err(|e| rename(e, op))
}

/// Report an error raised by an inner op under the outer op's name.
pub fn rename(e: Error, op: &'static str) -> Error {
    match e {
        Error::Shape { msg, .. } => Error::Shape { op, msg },
        Error::DType { msg, .. } => Error::DType { op, msg },
        Error::Index { msg, .. } => Error::Index { op, msg },
        Error::Value { msg, .. } => Error::Value { op, msg },
        Error::Runtime { msg, .. } => Error::Runtime { op, msg },
        Error::Symbolic { msg, .. } => Error::Symbolic { op, msg },
        Error::Memory { bytes, .. } => Error::Memory { op, bytes },
        Error::Interrupted { .. } => Error::Interrupted { op },
    }
}

/// The scatter family's shape rule: `x`, `index` and `src` have the same
/// number of dimensions, and `index` is no larger than `src` in any of them
/// nor than `x` in those other than `dim`. Returns `dim` normalised and the
/// three as at least 1-d.
pub(crate) fn scatter_shapes(
    op: &'static str,
    dim: isize,
    x: &Tensor,
    index: &Tensor,
    src: &Tensor,
) -> Result<(usize, Tensor, Tensor, Tensor)> {
    if x.ndim() != index.ndim() || src.ndim() != index.ndim() {
        return Err(Error::shape(
            op,
            format!(
                "index, src and self must have the same number of dimensions (self shape {}, index shape {}, src shape {})",
                fmt_shape(x.shape()),
                fmt_shape(index.shape()),
                fmt_shape(src.shape())
            ),
        ));
    }
    let d = norm_dim(op, dim, x.ndim())?;
    let (x1, i1, s1) = (at_least_1d(x)?, at_least_1d(index)?, at_least_1d(src)?);
    for k in 0..x1.ndim() {
        if i1.shape()[k] > s1.shape()[k] || (k != d && i1.shape()[k] > x1.shape()[k]) {
            return Err(Error::shape(
                op,
                format!(
                    "index of shape {} must not be larger than src {} in any dimension, nor than self {} in dimensions other than dim = {d}",
                    fmt_shape(index.shape()),
                    fmt_shape(src.shape()),
                    fmt_shape(x.shape())
                ),
            ));
        }
    }
    Ok((d, x1, i1, s1))
}

/// Shared checks and dispatch of the scatter family; `dst` is written in place.
fn scatter_into(
    op: &'static str,
    dst: &Tensor,
    dim: isize,
    index: &Tensor,
    src: &Tensor,
    accumulate: bool,
) -> Result<()> {
    let _no = GradMode::set(false);
    check_index_dtype(op, index)?;
    same_device(op, dst, index)?;
    same_device(op, dst, src)?;
    if !elementwise::can_cast(src.dtype(), dst.dtype()) {
        return Err(Error::dtype(
            op,
            format!(
                "src of dtype {} cannot be written into a tensor of dtype {}",
                src.dtype(),
                dst.dtype()
            ),
        ));
    }
    let (d, x1, i1, s1) = scatter_shapes(op, dim, dst, index, src)?;
    check_no_overlap(op, &x1)?;
    let i1 = if i1.shares_storage(dst) {
        elementwise::clone(&i1)?
    } else {
        i1
    };
    let s1 = elementwise::to_dtype(&s1, dst.dtype())?;
    let s1 = if s1.shares_storage(dst) {
        elementwise::clone(&s1)?
    } else {
        s1
    };
    backend(dst.device()).scatter(op, &x1, d, &i1, &s1, accumulate)
}

/// `x.scatter_add_(dim, index, src)`: `x[index[i][j]][j] += src[i][j]` (for `dim = 0`).
pub fn scatter_add_(x: &Tensor, dim: isize, index: &Tensor, src: &Tensor) -> Result<()> {
    capture!(
        crate::ops::call::OpCall::ScatterAddInplace { dim },
        [x, index, src],
        unit
    );
    scatter_inplace("scatter_add_", x, dim, index, src, true)
}

/// Out-of-place `scatter_add`: a copy of `x` with `src` added at `index` along `dim`.
pub fn scatter_add(x: &Tensor, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::ScatterAdd { dim },
        [x, index, src],
        one
    );
    scatter_out("scatter_add", x, dim, index, src, true)
}

/// `x.scatter_(dim, index, src)`: `x[index[i][j]][j] = src[i][j]` (for `dim = 0`);
/// for repeated positions the last in row-major order of `index` wins.
pub fn scatter_(x: &Tensor, dim: isize, index: &Tensor, src: &Tensor) -> Result<()> {
    capture!(
        crate::ops::call::OpCall::ScatterInplace { dim },
        [x, index, src],
        unit
    );
    scatter_inplace("scatter_", x, dim, index, src, false)
}

/// Out-of-place `scatter`.
pub fn scatter(x: &Tensor, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Scatter { dim },
        [x, index, src],
        one
    );
    scatter_out("scatter", x, dim, index, src, false)
}

/// The in-place scatters; when `x` or `src` requires grad (an error for
/// leaves that require grad), the write is recorded like [`scatter_out`]'s
/// and `x` becomes its output.
fn scatter_inplace(
    op: &'static str,
    x: &Tensor,
    dim: isize,
    index: &Tensor,
    src: &Tensor,
    accumulate: bool,
) -> Result<()> {
    x.check_writable(op)?;
    let grad = x.dtype().is_floating_point() && ag::needs_grad(&[x, src]);
    if grad {
        ag::check_inplace(op, x)?;
    }
    scatter_into(op, x, dim, index, src, accumulate)?;
    x.storage().bump_version();
    if grad {
        let bw = scatter_backward(dim, src, accumulate);
        record_inplace(x, src, bw, &[Save::Tensor(index)])?;
    }
    Ok(())
}

/// The out-of-place scatters: a copy of `x` with `src` written (or added) at `index`.
///
/// Gradients: `src` gets the output gradient gathered at `index` (zeros where
/// `src` extends beyond `index`); `x` gets the output gradient, with the
/// scattered positions zeroed unless `accumulate`. Without `accumulate`, every
/// occurrence of a repeated position (whose winner is unspecified) receives
/// that position's gradient, as in PyTorch.
fn scatter_out(
    op: &'static str,
    x: &Tensor,
    dim: isize,
    index: &Tensor,
    src: &Tensor,
    accumulate: bool,
) -> Result<Tensor> {
    let out = {
        let _no = GradMode::set(false);
        let out = elementwise::clone(x)?;
        scatter_into(op, &out, dim, index, src, accumulate)?;
        out
    };
    if x.dtype().is_floating_point() && ag::needs_grad(&[x, src]) {
        let bw = scatter_backward(dim, src, accumulate);
        ag::record(bw, &[x, src], &[&out], &[Save::Tensor(index)]);
    }
    Ok(out)
}

/// The gradient of a scatter's `src` from `g`, the gradient of its leading
/// block (of `index`'s shape): padded with zeros to `src_shape` (a `src`
/// larger than `index` has entries that take no part) and cast to `src`'s
/// dtype.
pub(crate) fn src_grad_padded(g: &Tensor, src_shape: &[usize], src_dtype: DType) -> Result<Tensor> {
    let pads: Vec<isize> = (0..g.ndim())
        .rev()
        .flat_map(|k| [0, (src_shape[k] - g.shape()[k]) as isize])
        .collect();
    let g = if pads.iter().any(|&p| p != 0) {
        crate::ops::join::pad(
            g,
            &pads,
            crate::ops::join::PadMode::Constant,
            Scalar::Int(0),
        )?
    } else {
        g.clone()
    };
    elementwise::to_dtype(&g, src_dtype)
}

fn scatter_backward(dim: isize, src: &Tensor, accumulate: bool) -> ScatterBackward {
    ScatterBackward {
        dim,
        accumulate,
        src_shape: src.shape().into(),
        src_dtype: src.dtype(),
    }
}

struct ScatterBackward {
    dim: isize,
    accumulate: bool,
    src_shape: Shape,
    src_dtype: DType,
}

impl Backward for ScatterBackward {
    fn name(&self) -> &'static str {
        if self.accumulate {
            "ScatterAddBackward"
        } else {
            "ScatterBackward"
        }
    }
    fn apply(
        &self,
        saved: &[Tensor],
        grads: &[Option<Tensor>],
        needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &grads[0] else {
            return Ok(vec![None, None]);
        };
        let index = &saved[0];
        let gx = if !needs[0] {
            None
        } else if self.accumulate {
            Some(g.clone())
        } else {
            let z = Tensor::zeros(index.shape(), g.dtype(), g.device())?;
            Some(scatter(g, self.dim, index, &z)?)
        };
        let gs = if needs[1] && self.src_dtype.is_floating_point() {
            let gi = gather(g, self.dim, index)?;
            Some(src_grad_padded(&gi, &self.src_shape, self.src_dtype)?)
        } else {
            None
        };
        Ok(vec![gx, gs])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ar(shape: &[usize]) -> Tensor {
        let n: usize = shape.iter().product();
        Tensor::from_vec((0..n as i64).collect::<Vec<_>>(), shape).unwrap()
    }
    fn idx(v: &[i64]) -> IndexItem {
        IndexItem::Tensor(Tensor::from_vec(v.to_vec(), &[v.len()]).unwrap())
    }
    const ALL: IndexItem = IndexItem::Slice {
        start: None,
        stop: None,
        step: 1,
    };

    #[test]
    fn advanced_dims_placement() {
        let x = ar(&[4, 5, 6]);
        // adjacent: in place
        let r = index(&x, &[ALL, idx(&[0, 1]), idx(&[2, 3])]).unwrap();
        assert_eq!(r.shape(), &[4, 2]);
        // separated (an int counts as an index array): first
        let r = index(&x, &[IndexItem::Int(0), ALL, idx(&[1, 2])]).unwrap();
        assert_eq!(r.shape(), &[2, 5]);
        assert_eq!(
            r.to_f64_vec(),
            vec![1., 7., 13., 19., 25., 2., 8., 14., 20., 26.]
        );
        let r = index(&x, &[ALL, IndexItem::Int(-1), idx(&[-1, 0])]).unwrap();
        assert_eq!(r.shape(), &[4, 2]);
        assert_eq!(r.to_f64_vec()[..2], [29., 24.]);
    }

    #[test]
    fn errors_name_index_dim_and_size() {
        let x = ar(&[3, 4]);
        let e = index(&x, &[ALL, idx(&[1, 4])]).unwrap_err().to_string();
        assert_eq!(
            e,
            "getitem: index 4 is out of bounds for dimension 1 with size 4"
        );
        let e = index(&x, &[idx(&[0, 1]), idx(&[0, 1, 2])]).unwrap_err();
        assert!(matches!(e, Error::Index { .. }));
    }

    #[test]
    fn put_validates_before_writing() {
        let x = ar(&[5]);
        let v = Tensor::from_vec(vec![9i64, 9, 9], &[3]).unwrap();
        assert!(index_put_(&x, &[idx(&[0, 1, 5])], &v).is_err());
        assert_eq!(x.to_f64_vec(), vec![0., 1., 2., 3., 4.]);
        index_put_with("index_put_", &x, &[idx(&[1, 1, 3])], &v, true).unwrap();
        assert_eq!(x.to_f64_vec(), vec![0., 19., 2., 12., 4.]);
    }

    #[test]
    fn nonzero_row_major() {
        let x = Tensor::from_vec(vec![0.0f32, 1.0, 0.0, 2.0, 3.0, 0.0], &[2, 3]).unwrap();
        let nz = nonzero(&x).unwrap();
        assert_eq!(nz.shape(), &[3, 2]);
        assert_eq!(nz.to_f64_vec(), vec![0., 1., 1., 0., 1., 1.]);
    }
}
