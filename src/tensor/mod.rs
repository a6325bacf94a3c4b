//! The tensor: (storage, layout, dtype).

pub mod capture;
pub mod defer;
pub mod dtype;
pub mod layout;
pub mod profile;
pub mod shared;
pub mod storage;

use std::sync::Arc;

/// A once-set cell whose clone of a set cell is a plain copy (std's
/// `OnceLock` clones through its one-time initialisation, a slow path taken
/// on every clone of a tensor that has autograd state).
type MetaCell = once_cell::sync::OnceCell<Arc<AutogradMeta>>;

use crate::autograd::AutogradMeta;

pub use dtype::{Category, DType, Element, U8};
pub use layout::{Layout, Shape, Strides};
pub use storage::{Device, Storage};

use crate::error::{Error, Result};
use crate::with_dtype;

/// A Python-style scalar: used for fills and for operands that are plain numbers.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl Scalar {
    pub fn category(self) -> Category {
        match self {
            Scalar::Bool(_) => Category::Bool,
            Scalar::Int(_) => Category::Int,
            Scalar::Float(_) => Category::Float,
        }
    }
    pub fn to_f64(self) -> f64 {
        match self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::Float(f) => f,
        }
    }
    pub fn to_i64(self) -> i64 {
        match self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::Float(f) => f as i64,
        }
    }
    /// The dtype a scalar gets when it becomes a tensor on its own.
    pub fn default_dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::I64,
            Scalar::Float(_) => DType::default_float(),
        }
    }
    /// Convert to the element type `T`.
    pub fn to_elem<T: Element>(self) -> T {
        match self {
            Scalar::Float(f) => T::from_f64(f),
            _ if T::DTYPE.is_floating_point() => T::from_f64(self.to_f64()),
            _ => T::from_i64(self.to_i64()),
        }
    }
}

/// An n-dimensional view of typed elements in a [`Storage`].
///
/// Cloning is cheap (an `Arc` bump and the layout); clones share storage.
#[derive(Clone)]
pub struct Tensor {
    storage: Arc<Storage>,
    layout: Layout,
    dtype: DType,
    /// Autograd state, set when the tensor requires grad or is an op's
    /// recorded output. Clones share it (they are the same tensor); views
    /// and op outputs start without it.
    meta: MetaCell,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor(shape={:?}, strides={:?}, offset={}, dtype={}, device={})",
            &self.layout.shape[..],
            &self.layout.strides[..],
            self.layout.offset,
            self.dtype,
            self.device()
        )
    }
}

/// Bytes needed for `shape` of `dtype`, checked for overflow.
pub fn nbytes_for(op: &'static str, shape: &[usize], dtype: DType) -> Result<usize> {
    layout::numel_checked(shape)
        .and_then(|n| n.checked_mul(dtype.itemsize()))
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or(Error::Memory {
            op,
            bytes: usize::MAX,
        })
}

thread_local! {
    /// Buffers offered to the op running on this thread for its results
    /// (see [`offer`]). Almost always empty.
    static OFFERED: std::cell::RefCell<Vec<Tensor>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Whether `OFFERED` may hold a buffer: a plain flag, so that every
    /// other allocation pays one thread-local load and no more.
    static OFFERING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Offer `t` (a tensor for which [`Tensor::recyclable`] held) to the next
/// [`Tensor::empty_for`] on this thread that asks for as many bytes on the
/// CPU: that result takes over `t`'s buffer instead of allocating one. A
/// compiled graph's executor offers the buffers of values that died in an
/// earlier run to the node about to run, and takes back what was not used
/// with [`take_back_offers`].
pub(crate) fn offer(t: Tensor) {
    OFFERED.with(|o| o.borrow_mut().push(t));
    OFFERING.set(true);
}

/// The offered buffers no result took (see [`offer`]).
pub(crate) fn take_back_offers(mut f: impl FnMut(Tensor)) {
    OFFERING.set(false);
    OFFERED.with(|o| o.borrow_mut().drain(..).for_each(&mut f));
}

/// An offered buffer of exactly the bytes `shape` of `dtype` needs, as a
/// fresh contiguous tensor of that shape and dtype.
#[inline]
fn take_offered(shape: &[usize], dtype: DType) -> Option<Tensor> {
    if !OFFERING.get() {
        return None;
    }
    OFFERED.with(|o| {
        let mut o = o.try_borrow_mut().ok()?;
        if o.is_empty() {
            return None;
        }
        let nbytes = layout::numel_checked(shape)?.checked_mul(dtype.itemsize())?;
        let k = o.iter().position(|t| t.storage.nbytes() == nbytes)?;
        let mut t = o.swap_remove(k);
        if t.layout.shape[..] != *shape {
            t.layout = Layout::contiguous(shape);
        }
        t.dtype = dtype;
        Some(t)
    })
}

impl Tensor {
    /// Assemble a tensor from parts, checking that the layout stays inside the storage.
    pub fn from_parts(storage: Arc<Storage>, layout: Layout, dtype: DType) -> Result<Tensor> {
        let (lo, hi) = layout.span();
        let cap = (storage.nbytes() / dtype.itemsize()) as isize;
        if layout.numel() > 0 && (lo < 0 || hi > cap) {
            return Err(Error::value(
                "as_strided",
                format!(
                    "layout (shape {:?}, strides {:?}, offset {}) reaches elements [{lo}, {hi}) outside storage of {cap} elements",
                    &layout.shape[..],
                    &layout.strides[..],
                    layout.offset
                ),
            ));
        }
        Ok(Tensor {
            storage,
            layout,
            dtype,
            meta: MetaCell::new(),
        })
    }

    /// A view sharing storage with `self` (the caller derived `layout` from ours).
    #[inline]
    pub fn with_layout(&self, layout: Layout) -> Tensor {
        Tensor {
            storage: self.storage.clone(),
            layout,
            dtype: self.dtype,
            meta: MetaCell::new(),
        }
    }

    /// Uninitialised contiguous tensor.
    pub fn empty(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        Tensor::empty_for("empty", shape, dtype, device)
    }

    /// Uninitialised contiguous tensor made as op `op`'s result: an error
    /// (memory or a device limit) names `op` and the result's shape and dtype.
    pub fn empty_for(
        op: &'static str,
        shape: &[usize],
        dtype: DType,
        device: Device,
    ) -> Result<Tensor> {
        if device == Device::Cpu {
            if let Some(t) = take_offered(shape, dtype) {
                return Ok(t);
            }
        }
        let storage = nbytes_for(op, shape, dtype)
            .and_then(|nbytes| match device {
                Device::Cpu => Storage::new_cpu(nbytes).map_err(|e| e.for_op(op)),
                Device::Meta => Ok(Storage::new_meta(nbytes)),
                Device::Gpu(_) => crate::backend::gpu_storage(op, nbytes, dtype, device),
            })
            .map_err(|e| {
                e.with_note(&format!(
                    " (the result of shape {shape:?} and dtype {dtype} on {device})"
                ))
            })?;
        Ok(Tensor {
            storage: Arc::new(storage),
            layout: Layout::contiguous(shape),
            dtype,
            meta: MetaCell::new(),
        })
    }

    /// Zero-filled contiguous tensor.
    pub fn zeros(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        // Zeros made at the top level of a captured computation (by a VJP,
        // say) are part of the graph.
        if capture::active() {
            return capture::zeros(shape, dtype, device);
        }
        let nbytes = nbytes_for("zeros", shape, dtype)?;
        let mut zero_fill = false;
        let storage = match device {
            Device::Cpu => Storage::zeroed_cpu(nbytes)?,
            Device::Meta => Storage::new_meta(nbytes),
            Device::Gpu(_) => {
                let s = crate::backend::gpu_storage("zeros", nbytes, dtype, device)?;
                zero_fill = true;
                s
            }
        };
        let t = Tensor {
            storage: Arc::new(storage),
            layout: Layout::contiguous(shape),
            dtype,
            meta: MetaCell::new(),
        };
        if zero_fill {
            crate::backend::backend(device).fill(&t, Scalar::Int(0))?;
        }
        Ok(t)
    }

    /// A contiguous tensor holding `data`, for `device`: on the `Meta`
    /// device (a graph being captured) only the shape is kept.
    pub fn from_vec_on<T: Element>(
        data: Vec<T>,
        shape: &[usize],
        device: Device,
    ) -> Result<Tensor> {
        if let Device::Gpu(_) = device {
            return crate::backend::transfer(&Tensor::from_vec(data, shape)?, device);
        }
        if device == Device::Meta {
            let n: usize = shape.iter().product();
            if n != data.len() {
                return Err(Error::shape(
                    "tensor",
                    format!("{} values do not fill shape {:?}", data.len(), shape),
                ));
            }
            if capture::tracing() {
                // Data an op builds from sizes (an index for padding, say)
                // while it is captured: a constant of the graph, so that the
                // graph has it when the op, or its gradient, runs.
                let t = Tensor::from_vec(data, shape)?;
                let on = capture::graph_device();
                let t = capture::suspended(|| crate::backend::transfer(&t, on))?;
                return capture::constant(&t);
            }
            return Tensor::empty(shape, T::DTYPE, device);
        }
        Tensor::from_vec(data, shape)
    }

    /// A contiguous CPU tensor holding `data`.
    pub fn from_vec<T: Element>(data: Vec<T>, shape: &[usize]) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(Error::shape(
                "tensor",
                format!("{} values do not fill shape {:?}", data.len(), shape),
            ));
        }
        let t = Tensor::empty(shape, T::DTYPE, Device::Cpu)?;
        // SAFETY: fresh storage of n elements of T.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), t.data_ptr::<T>(), n);
        }
        Ok(t)
    }

    #[inline]
    pub fn shape(&self) -> &[usize] {
        &self.layout.shape
    }
    #[inline]
    pub fn strides(&self) -> &[isize] {
        &self.layout.strides
    }
    #[inline]
    pub fn offset(&self) -> usize {
        self.layout.offset
    }
    #[inline]
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    #[inline]
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    #[inline]
    pub fn ndim(&self) -> usize {
        self.layout.ndim()
    }
    #[inline]
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }
    #[inline]
    pub fn device(&self) -> Device {
        self.storage.device()
    }
    #[inline]
    pub fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }
    /// True when both tensors view the same storage.
    pub fn shares_storage(&self, other: &Tensor) -> bool {
        Arc::ptr_eq(&self.storage, &other.storage)
    }
    /// The autograd state, if any.
    #[inline]
    pub fn meta(&self) -> Option<&Arc<AutogradMeta>> {
        self.meta.get()
    }

    /// Whether this tensor's buffer may be handed to a new result (see
    /// [`offer`]): it is the only holder of host memory this library
    /// allocated, views all of it from the start, has no autograd state,
    /// and nothing else can reach the bytes (no weak reference from the
    /// deferred queue, never exported to NumPy, DLPack or `data_ptr`).
    ///
    /// Taking `self` by `&mut` (an owned tensor) makes the reference counts
    /// final: with one strong and no weak reference nobody else can make a
    /// new one.
    pub(crate) fn recyclable(&mut self) -> bool {
        let s = &*self.storage;
        self.meta.get().is_none()
            && self.layout.offset == 0
            && Arc::strong_count(&self.storage) == 1
            && Arc::weak_count(&self.storage) == 0
            && s.is_owned()
            && s.device() == Device::Cpu
            && !s.is_readonly()
            && s.defer_flags() == 0
            && s.nbytes() > 0
            && s.nbytes() == self.layout.numel() * self.dtype.itemsize()
            && self.layout.is_contiguous()
    }

    /// A tensor over `storage` with this layout and dtype that shares this
    /// tensor's autograd state (gradients reaching it reach this tensor).
    pub fn twin_with_storage(&self, storage: Arc<Storage>) -> Tensor {
        Tensor {
            storage,
            layout: self.layout.clone(),
            dtype: self.dtype,
            meta: self.meta.clone(),
        }
    }

    /// This tensor's autograd state over `src`'s data (storage, layout and
    /// dtype): what `t.data = src` makes of `t`. Tensors cloned from `self`
    /// earlier (saved for a backward pass, read by a captured graph) keep
    /// the old data.
    pub fn with_data_of(&self, src: &Tensor) -> Tensor {
        Tensor {
            storage: src.storage.clone(),
            layout: src.layout.clone(),
            dtype: src.dtype,
            meta: self.meta.clone(),
        }
    }

    /// Attach autograd state (once). Returns the state now attached.
    pub fn init_meta(&self, make: impl FnOnce() -> AutogradMeta) -> &Arc<AutogradMeta> {
        self.meta.get_or_init(|| Arc::new(make()))
    }

    /// Whether gradients flow to this tensor.
    #[inline]
    pub fn requires_grad(&self) -> bool {
        self.meta.get().is_some_and(|m| m.requires_grad())
    }

    /// The same data with no autograd history (shares storage).
    pub fn detach(&self) -> Tensor {
        self.with_layout(self.layout.clone())
    }

    /// Version counter of the underlying storage.
    pub fn version(&self) -> u64 {
        self.storage.version()
    }

    /// Pointer to element `[0, ...]` (CPU only). Kernels use this with the strides.
    #[inline]
    pub fn data_ptr<T>(&self) -> *mut T {
        debug_assert_eq!(self.storage.device(), Device::Cpu);
        // SAFETY: from_parts/with_layout keep offsets inside the storage.
        unsafe { (self.storage.as_ptr() as *mut T).add(self.layout.offset) }
    }

    /// Raw pointer to the start of the element at offset 0 in bytes.
    pub fn byte_ptr(&self) -> *mut u8 {
        // SAFETY: see data_ptr.
        unsafe {
            self.storage
                .as_ptr()
                .add(self.layout.offset * self.dtype.itemsize())
        }
    }

    /// [`Tensor::byte_ptr`] for code outside this library (NumPy, DLPack,
    /// `data_ptr`), which may write the storage without us seeing it; see
    /// [`Storage::export_ptr`]. Zero-size tensors give the storage's address.
    pub fn export_byte_ptr(&self) -> *mut u8 {
        let base = self.storage.export_ptr();
        if self.numel() == 0 {
            return base;
        }
        // SAFETY: the offset is inside the storage (checked when the layout was made).
        unsafe { base.add(self.layout.offset * self.dtype.itemsize()) }
    }

    /// Contiguous elements as a slice (CPU, contiguous tensors only).
    ///
    /// # Safety
    /// No other thread may write the storage while the slice lives.
    pub unsafe fn as_slice<T: Element>(&self) -> &[T] {
        debug_assert!(self.is_contiguous());
        debug_assert_eq!(T::DTYPE, self.dtype);
        std::slice::from_raw_parts(self.data_ptr::<T>(), self.numel())
    }

    /// Error unless the tensor's storage may be written.
    pub fn check_writable(&self, op: &'static str) -> Result<()> {
        if self.storage.is_readonly() {
            return Err(Error::value(
                op,
                format!(
                    "cannot write to a read-only tensor (shape {:?}, dtype {}); it borrows read-only memory — copy it with .clone() first",
                    self.shape(),
                    self.dtype
                ),
            ));
        }
        Ok(())
    }

    /// Error unless the tensor holds readable values (not a symbolic `Meta`
    /// tensor of a graph being captured).
    pub fn check_has_data(&self, op: &'static str) -> Result<()> {
        if self.device().has_data() {
            return Ok(());
        }
        Err(Error::Symbolic {
            op,
            msg: format!(
                "the value of a tensor being captured into a graph (shape {:?}, dtype {}) is not known until the graph runs; for control flow that depends on values use fg.cond / fg.while_loop, or fg.compile(..., fallback=\"eager\") to run such a function eagerly",
                self.shape(),
                self.dtype
            ),
        })
    }

    /// Copy out the elements in logical (row-major) order, converted to f64.
    ///
    /// A GPU tensor is read through the device's materialise path (a sync point).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        if let Device::Gpu(_) = self.device() {
            return match crate::backend::transfer(self, Device::Cpu) {
                Ok(h) => h.to_f64_vec(),
                Err(e) => panic!("reading a gpu tensor failed: {e}"),
            };
        }
        let mut out = Vec::with_capacity(self.numel());
        with_dtype!(self.dtype, T => {
            layout::walk_offsets(self.shape(), self.strides(), 0, self.numel(), |off| {
                // SAFETY: offsets come from the layout, inside the storage.
                let v = unsafe { *self.data_ptr::<T>().offset(off) };
                out.push(v.to_f64());
            });
        });
        out
    }

    /// The single element of a one-element tensor, as a [`Scalar`].
    pub fn item(&self) -> Result<Scalar> {
        self.check_has_data("item")?;
        if self.numel() != 1 {
            return Err(Error::value(
                "item",
                format!(
                    "a Tensor with {} elements (shape {:?}) cannot be converted to a Python scalar",
                    self.numel(),
                    self.shape()
                ),
            ));
        }
        if let Device::Gpu(_) = self.device() {
            return crate::backend::transfer(self, Device::Cpu)?.item();
        }
        // SAFETY: one element at the offset.
        let s = with_dtype!(self.dtype, T => unsafe {
            let v = *self.data_ptr::<T>();
            match self.dtype.category() {
                Category::Float => Scalar::Float(v.to_f64()),
                Category::Int => Scalar::Int(v.to_i64()),
                Category::Bool => Scalar::Bool(v.to_i64() != 0),
            }
        });
        Ok(s)
    }
}
