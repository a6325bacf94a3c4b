//! Random ops: generators and sampling.
//!
//! Numbers come from the counter-based Philox4x32-10 generator described in
//! [`super::philox`]. A [`Generator`] is a mutex-guarded `(seed, offset)`
//! pair; each op reserves a block range from it (the offset advances by the
//! number of Philox blocks the op consumes) and the kernels compute element
//! `i` from `(seed, offset, i)` alone. Results are therefore identical for any
//! thread count, and any device implementing the same mapping reproduces them.
//!
//! Shape/dtype rules follow PyTorch: `rand`/`randn`/`normal` produce floating
//! dtypes only, `randint` any dtype whose range holds `[low, high)`,
//! `randperm` integer or exactly-representing float dtypes, `multinomial`
//! takes floating probabilities and returns int64 indices.

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::backend::backend;
use crate::error::{Error, Result};
pub use crate::kernel::params::RandomDist;
use crate::kernel::philox::{blocks_for, Draw, PhiloxStream};
use crate::ops::elementwise::{self as ew, BinaryOp, Operand};
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::tensor::layout::broadcast_shapes;
use crate::tensor::{DType, Device, Layout, Scalar, Tensor};

const fn rnd(name: &'static str, dtypes: DTypes) -> OpInfo {
    OpInfo::prim(name, "random", dtypes)
}

/// float dtypes plus the integer ones (`randperm`).
const NUMERIC: DTypes = DTypes::NUMERIC;

pub const OPS: &[OpInfo] = &[
    rnd("rand", DTypes::FLOAT).kind(OpKind::Factory),
    rnd("randn", DTypes::FLOAT).kind(OpKind::Factory),
    rnd("randint", DTypes::ALL).kind(OpKind::Factory),
    rnd("normal", DTypes::FLOAT).kind(OpKind::Factory),
    rnd("randperm", NUMERIC).kind(OpKind::Factory),
    rnd("rand_like", DTypes::FLOAT).kind(OpKind::Composite),
    rnd("randn_like", DTypes::FLOAT).kind(OpKind::Composite),
    rnd("randint_like", DTypes::ALL).kind(OpKind::Composite),
    rnd("uniform_", DTypes::FLOAT).mutates(0),
    rnd("normal_", DTypes::FLOAT).mutates(0),
    rnd("bernoulli", DTypes::FLOAT),
    rnd("bernoulli_", DTypes::ALL).mutates(0),
    rnd("multinomial", DTypes::FLOAT),
    rnd("dropout", DTypes::FLOAT).kind(OpKind::Fused).grad(),
];

/// The seed every generator starts with until seeded (a fixed value, so
/// unseeded programs are reproducible too).
pub const DEFAULT_SEED: u64 = 67_280_421_310_721;

/// A generator's full state.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct GenState {
    pub seed: u64,
    /// Next unused Philox block.
    pub offset: u64,
}

impl GenState {
    /// Bytes of the serialised state.
    pub const NBYTES: usize = 16;

    /// `seed` then `offset`, little-endian.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.seed.to_le_bytes());
        b[8..].copy_from_slice(&self.offset.to_le_bytes());
        b
    }

    pub fn from_bytes(op: &'static str, b: &[u8]) -> Result<GenState> {
        if b.len() != Self::NBYTES {
            return Err(Error::value(
                op,
                format!(
                    "a generator state is {} bytes, got {}",
                    Self::NBYTES,
                    b.len()
                ),
            ));
        }
        let seed = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        let offset = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
        Ok(GenState { seed, offset })
    }
}

/// A source of random numbers: a thread-safe `(seed, offset)` pair.
#[derive(Debug)]
pub struct Generator {
    state: Mutex<GenState>,
    device: Device,
}

impl Generator {
    /// A generator for `device`, seeded with [`DEFAULT_SEED`].
    pub fn new(device: Device) -> Generator {
        Generator {
            state: Mutex::new(GenState {
                seed: DEFAULT_SEED,
                offset: 0,
            }),
            device,
        }
    }

    pub fn device(&self) -> Device {
        self.device
    }

    /// Seed with `seed` and rewind to the start of its stream.
    pub fn manual_seed(&self, seed: u64) {
        *self.state.lock() = GenState { seed, offset: 0 };
    }

    /// Seed from a non-deterministic source; returns the seed.
    pub fn seed(&self) -> u64 {
        let s = entropy();
        self.manual_seed(s);
        s
    }

    /// The current seed.
    pub fn initial_seed(&self) -> u64 {
        self.state.lock().seed
    }

    pub fn get_state(&self) -> GenState {
        *self.state.lock()
    }

    pub fn set_state(&self, s: GenState) {
        *self.state.lock() = s;
    }

    /// Reserve `blocks` Philox blocks: returns the stream to draw them from.
    pub fn reserve(&self, blocks: u64) -> PhiloxStream {
        let mut g = self.state.lock();
        let s = PhiloxStream::new(g.seed, g.offset);
        g.offset = g.offset.wrapping_add(blocks);
        s
    }
}

/// 64 bits from the process's hash keys, the clock and the process id.
fn entropy() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(t);
    h.write_u32(std::process::id());
    h.finish()
}

/// The process-wide default generator.
pub fn default_generator() -> &'static Arc<Generator> {
    static G: OnceLock<Arc<Generator>> = OnceLock::new();
    G.get_or_init(|| Arc::new(Generator::new(Device::Cpu)))
}

/// Seed `gen` (or the default generator). Inside a captured graph the seeding
/// is an op of the graph: each run seeds again, as the eager code does.
pub fn manual_seed(gen: Option<&Arc<Generator>>, seed: u64) -> Result<()> {
    capture!(
        crate::ops::call::OpCall::ManualSeed {
            seed,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [],
        unit
    );
    gen.map_or_else(|| default_generator().as_ref(), |g| g.as_ref())
        .manual_seed(seed);
    Ok(())
}

/// Reserve `blocks` from `gen` (or the default generator) for an output on `device`.
fn stream(
    op: &'static str,
    gen: Option<&Arc<Generator>>,
    device: Device,
    blocks: u64,
) -> Result<PhiloxStream> {
    let g: &Generator = gen.map_or_else(|| default_generator().as_ref(), |g| g.as_ref());
    if device == Device::Meta {
        // A graph being captured draws nothing: the generator advances when
        // the captured op runs.
        return Ok(PhiloxStream::new(0, 0));
    }
    if gen.is_some() && g.device() != device {
        return Err(Error::value(
            op,
            format!(
                "a generator for device {} cannot produce a tensor on device {device}",
                g.device()
            ),
        ));
    }
    #[cfg(feature = "gpu")]
    if !matches!(device, Device::Gpu(_)) {
        crate::backend::wgpu::note_cpu_draw();
    } else {
        // A captured GPU run records how to reserve again (each replay draws anew).
        let gen = gen.cloned();
        crate::backend::wgpu::note_reservation(Arc::new(move || {
            gen.as_ref()
                .map_or_else(|| default_generator().as_ref(), |g| g.as_ref())
                .reserve(blocks)
        }));
    }
    Ok(g.reserve(blocks))
}

fn require_float(op: &'static str, dtype: DType) -> Result<()> {
    if !dtype.is_floating_point() {
        return Err(Error::dtype(
            op,
            format!("expected a floating dtype (float16, bfloat16, float32, float64), got {dtype}"),
        ));
    }
    Ok(())
}

/// A contiguous tensor viewed with another shape of the same size.
fn reshaped(t: &Tensor, shape: &[usize]) -> Tensor {
    debug_assert!(t.is_contiguous());
    let mut l = Layout::contiguous(shape);
    l.offset = t.offset();
    t.with_layout(l)
}

/// Fill the contiguous tensor `out` from `dist`, drawing from `gen`.
fn fill_contiguous(
    op: &'static str,
    out: &Tensor,
    dist: RandomDist,
    gen: Option<&Arc<Generator>>,
) -> Result<()> {
    debug_assert!(out.is_contiguous());
    let blocks = blocks_for(out.numel(), dist.draw(out.dtype()));
    let s = stream(op, gen, out.device(), blocks)?;
    backend(out.device()).random_fill(out, dist, s)
}

/// A new tensor of `shape` drawn from `dist`.
fn sample(
    op: &'static str,
    shape: &[usize],
    dtype: DType,
    device: Device,
    dist: RandomDist,
    gen: Option<&Arc<Generator>>,
) -> Result<Tensor> {
    let out = Tensor::empty(shape, dtype, device)?;
    fill_contiguous(op, &out, dist, gen)?;
    Ok(out)
}

/// Error for in-place writes into a tensor whose elements share memory (an
/// expanded view), where each location would receive several draws.
fn check_no_overlap(op: &'static str, x: &Tensor) -> Result<()> {
    if x.shape()
        .iter()
        .zip(x.strides())
        .any(|(&d, &s)| s == 0 && d > 1)
    {
        return Err(Error::value(
            op,
            format!(
                "cannot write in place to a tensor whose elements overlap in memory (shape {:?}, strides {:?}); clone it first",
                x.shape(),
                x.strides()
            ),
        ));
    }
    Ok(())
}

/// Write into `x` in place: directly when contiguous, else through a contiguous temporary.
fn write_inplace(
    op: &'static str,
    x: &Tensor,
    f: impl FnOnce(&Tensor) -> Result<()>,
) -> Result<()> {
    x.check_writable(op)?;
    check_no_overlap(op, x)?;
    if x.is_contiguous() {
        f(x)?;
    } else {
        let tmp = Tensor::empty(x.shape(), x.dtype(), x.device())?;
        f(&tmp)?;
        backend(x.device()).cast_copy(&tmp, x)?;
    }
    x.storage().bump_version();
    Ok(())
}

fn check_finite(op: &'static str, what: &str, v: f64) -> Result<()> {
    if !v.is_finite() {
        return Err(Error::value(op, format!("{what} must be finite, got {v}")));
    }
    Ok(())
}

fn check_uniform_range(op: &'static str, low: f64, high: f64) -> Result<()> {
    check_finite(op, "the lower bound", low)?;
    check_finite(op, "the upper bound", high)?;
    if low > high {
        return Err(Error::value(
            op,
            format!("expected low <= high for the range [low, high), got low={low}, high={high}"),
        ));
    }
    Ok(())
}

fn check_std(op: &'static str, std: f64) -> Result<()> {
    if std.is_nan() || std < 0.0 {
        return Err(Error::value(op, format!("expected std >= 0, got {std}")));
    }
    Ok(())
}

/// Uniform samples in [0, 1).
pub fn rand(
    shape: &[usize],
    dtype: DType,
    device: Device,
    gen: Option<&Arc<Generator>>,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Rand {
            shape: shape.to_vec(),
            dtype,
            device,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [],
        one
    );
    require_float("rand", dtype)?;
    sample(
        "rand",
        shape,
        dtype,
        device,
        RandomDist::Uniform {
            low: 0.0,
            high: 1.0,
        },
        gen,
    )
}

/// Standard normal samples.
pub fn randn(
    shape: &[usize],
    dtype: DType,
    device: Device,
    gen: Option<&Arc<Generator>>,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Randn {
            shape: shape.to_vec(),
            dtype,
            device,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [],
        one
    );
    require_float("randn", dtype)?;
    sample(
        "randn",
        shape,
        dtype,
        device,
        RandomDist::Normal {
            mean: 0.0,
            std: 1.0,
        },
        gen,
    )
}

/// Check that every integer in `[low, high)` fits `dtype`.
fn check_int_range(op: &'static str, low: i64, high: i64, dtype: DType) -> Result<()> {
    if low >= high {
        return Err(Error::value(
            op,
            format!("expected low < high for the range [low, high), got low={low}, high={high}"),
        ));
    }
    let (lo, hi): (i128, i128) = match dtype {
        DType::Bool => (0, 1),
        DType::U8 => (0, u8::MAX as i128),
        DType::I8 => (i8::MIN as i128, i8::MAX as i128),
        DType::I16 => (i16::MIN as i128, i16::MAX as i128),
        DType::I32 => (i32::MIN as i128, i32::MAX as i128),
        DType::I64 => (i64::MIN as i128, i64::MAX as i128),
        // Integers with magnitude up to the largest finite value.
        DType::F16 => (-65504, 65504),
        DType::BF16 | DType::F32 | DType::F64 => (i64::MIN as i128, i64::MAX as i128),
    };
    if (low as i128) < lo || (high as i128 - 1) > hi {
        return Err(Error::value(
            op,
            format!("the range [{low}, {high}) does not fit dtype {dtype} (values {lo}..={hi})"),
        ));
    }
    Ok(())
}

/// Integers uniform in `[low, high)`.
pub fn randint(
    low: i64,
    high: i64,
    shape: &[usize],
    dtype: DType,
    device: Device,
    gen: Option<&Arc<Generator>>,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Randint {
            low,
            high,
            shape: shape.to_vec(),
            dtype,
            device,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [],
        one
    );
    check_int_range("randint", low, high, dtype)?;
    let range = (high as i128 - low as i128) as u64;
    sample(
        "randint",
        shape,
        dtype,
        device,
        RandomDist::Int { low, range },
        gen,
    )
}

/// `normal(mean, std, size)` with numbers, or with tensor mean and/or std
/// (broadcast together; then `size`, if given, must equal the broadcast shape).
pub fn normal(
    mean: &Operand,
    std: &Operand,
    size: Option<&[usize]>,
    dtype: Option<DType>,
    device: Device,
    gen: Option<&Arc<Generator>>,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Normal {
            mean: crate::ops::call::Arg::of(mean).0,
            std: crate::ops::call::Arg::of(std).0,
            size: size.map(|s| s.to_vec()),
            dtype,
            device,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [] + crate::ops::call::Arg::of(mean)
            .1
            .into_iter()
            .chain(crate::ops::call::Arg::of(std).1),
        one
    );
    const OP: &str = "normal";
    match (mean, std) {
        (Operand::S(m), Operand::S(s)) => {
            let shape = size.ok_or_else(|| {
                Error::value(OP, "a size is required when mean and std are numbers")
            })?;
            let dtype = dtype.unwrap_or(DType::default_float());
            require_float(OP, dtype)?;
            let (m, s) = (m.to_f64(), s.to_f64());
            check_finite(OP, "mean", m)?;
            check_finite(OP, "std", s)?;
            check_std(OP, s)?;
            sample(
                OP,
                shape,
                dtype,
                device,
                RandomDist::Normal { mean: m, std: s },
                gen,
            )
        }
        _ => {
            let tensors: Vec<&Tensor> = [mean, std]
                .into_iter()
                .filter_map(|o| match o {
                    Operand::T(t) => Some(t),
                    Operand::S(_) => None,
                })
                .collect();
            let mut shape = tensors[0].shape().to_vec();
            let mut dt = tensors[0].dtype();
            let dev = tensors[0].device();
            for t in &tensors[1..] {
                shape = broadcast_shapes(OP, &shape, t.shape())?.to_vec();
                dt = DType::promote(dt, t.dtype());
                if t.device() != dev {
                    return Err(Error::value(
                        OP,
                        format!(
                            "mean and std are on different devices ({dev} and {})",
                            t.device()
                        ),
                    ));
                }
            }
            if let Some(sz) = size {
                if sz != shape.as_slice() {
                    return Err(Error::shape(
                        OP,
                        format!(
                            "size {sz:?} does not match the broadcast shape {shape:?} of mean and std"
                        ),
                    ));
                }
            }
            let dtype = dtype.unwrap_or(dt.to_float());
            require_float(OP, dtype)?;
            match std {
                Operand::S(s) => check_std(OP, s.to_f64())?,
                Operand::T(t) => {
                    if let Some(bad) = t.to_f64_vec().into_iter().find(|v| v.is_nan() || *v < 0.0) {
                        return Err(Error::value(
                            OP,
                            format!("expected every std >= 0, found {bad}"),
                        ));
                    }
                }
            }
            let z = randn(&shape, dtype, dev, gen)?;
            let zs = match std {
                Operand::S(s) => ew::binary_scalar(BinaryOp::Mul, &z, *s, false)?,
                Operand::T(t) => ew::binary(BinaryOp::Mul, &z, &ew::to_dtype(t, dtype)?)?,
            };
            let out = match mean {
                Operand::S(m) => ew::binary_scalar(BinaryOp::Add, &zs, *m, false)?,
                Operand::T(t) => ew::binary(BinaryOp::Add, &zs, &ew::to_dtype(t, dtype)?)?,
            };
            ew::to_dtype(&out, dtype)
        }
    }
}

/// Fill `x` in place with values uniform in `[low, high)`.
pub fn uniform_(x: &Tensor, low: f64, high: f64, gen: Option<&Arc<Generator>>) -> Result<()> {
    capture!(
        crate::ops::call::OpCall::UniformInplace {
            low,
            high,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [x],
        unit
    );
    require_float("uniform_", x.dtype())?;
    check_uniform_range("uniform_", low, high)?;
    write_inplace("uniform_", x, |t| {
        fill_contiguous("uniform_", t, RandomDist::Uniform { low, high }, gen)
    })
}

/// Fill `x` in place with normal samples.
pub fn normal_(x: &Tensor, mean: f64, std: f64, gen: Option<&Arc<Generator>>) -> Result<()> {
    capture!(
        crate::ops::call::OpCall::NormalInplace {
            mean,
            std,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [x],
        unit
    );
    require_float("normal_", x.dtype())?;
    check_finite("normal_", "mean", mean)?;
    check_finite("normal_", "std", std)?;
    check_std("normal_", std)?;
    write_inplace("normal_", x, |t| {
        fill_contiguous("normal_", t, RandomDist::Normal { mean, std }, gen)
    })
}

fn check_p(op: &'static str, p: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::value(
            op,
            format!("probability has to be between 0 and 1, but got {p}"),
        ));
    }
    Ok(())
}

/// 0/1 samples, success probability `p[i]` per element; dtype and shape of `p`.
pub fn bernoulli(p: &Tensor, gen: Option<&Arc<Generator>>) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Bernoulli {
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [p],
        one
    );
    require_float("bernoulli", p.dtype())?;
    let out = Tensor::empty(p.shape(), p.dtype(), p.device())?;
    let pc = ew::contiguous(p)?;
    let s = stream(
        "bernoulli",
        gen,
        p.device(),
        blocks_for(p.numel(), Draw::Bits32),
    )?;
    backend(p.device()).bernoulli_tensor(&pc, &out, s)?;
    Ok(out)
}

/// 0/1 samples of probability `p` with the shape and (floating) dtype of `like`.
pub fn bernoulli_p(like: &Tensor, p: f64, gen: Option<&Arc<Generator>>) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::BernoulliP {
            p,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [like],
        one
    );
    require_float("bernoulli", like.dtype())?;
    check_p("bernoulli", p)?;
    sample(
        "bernoulli",
        like.shape(),
        like.dtype(),
        like.device(),
        RandomDist::Bernoulli { p },
        gen,
    )
}

/// Fill `x` in place with 0/1 samples of probability `p` (a number, or a
/// floating tensor broadcast to `x`'s shape).
pub fn bernoulli_(x: &Tensor, p: &Operand, gen: Option<&Arc<Generator>>) -> Result<()> {
    capture!(
        crate::ops::call::OpCall::BernoulliInplace {
            p: crate::ops::call::Arg::of(p).0,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [x] + crate::ops::call::Arg::of(p).1,
        unit
    );
    const OP: &str = "bernoulli_";
    match p {
        Operand::S(s) => {
            let p = s.to_f64();
            check_p(OP, p)?;
            write_inplace(OP, x, |t| {
                fill_contiguous(OP, t, RandomDist::Bernoulli { p }, gen)
            })
        }
        Operand::T(pt) => {
            require_float(OP, pt.dtype())?;
            let shape = broadcast_shapes(OP, x.shape(), pt.shape())?;
            if shape.as_slice() != x.shape() {
                return Err(Error::shape(
                    OP,
                    format!(
                        "probabilities of shape {:?} cannot be broadcast to the tensor's shape {:?}",
                        pt.shape(),
                        x.shape()
                    ),
                ));
            }
            let pe = pt.with_layout(pt.layout().expand(OP, x.shape())?);
            let pc = ew::contiguous(&pe)?;
            write_inplace(OP, x, |t| {
                let s = stream(OP, gen, t.device(), blocks_for(t.numel(), Draw::Bits32))?;
                backend(t.device()).bernoulli_tensor(&pc, t, s)
            })
        }
    }
}

/// A random permutation of `0..n`.
pub fn randperm(
    n: usize,
    dtype: DType,
    device: Device,
    gen: Option<&Arc<Generator>>,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Randperm {
            n,
            dtype,
            device,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [],
        one
    );
    let max_exact: u64 = match dtype {
        DType::Bool => {
            return Err(Error::dtype(
                "randperm",
                "bool is not supported; use an integer or floating dtype",
            ))
        }
        DType::U8 => u8::MAX as u64 + 1,
        DType::I8 => i8::MAX as u64 + 1,
        DType::I16 => i16::MAX as u64 + 1,
        DType::I32 => i32::MAX as u64 + 1,
        DType::I64 => u64::MAX,
        DType::F16 => 2049,
        DType::BF16 => 257,
        DType::F32 => (1 << 24) + 1,
        DType::F64 => (1 << 53) + 1,
    };
    if n as u64 > max_exact {
        return Err(Error::value(
            "randperm",
            format!("n={n} is too large for dtype {dtype} (at most {max_exact})"),
        ));
    }
    let out = Tensor::empty(&[n], dtype, device)?;
    let s = stream("randperm", gen, device, blocks_for(n, Draw::Bits64))?;
    backend(device).randperm(&out, s)?;
    Ok(out)
}

/// Draw `num_samples` category indices per row of `probs` (1-D or 2-D,
/// non-negative, each row with a positive finite sum; need not be normalised).
///
/// Random indexing: with replacement, sample `s` of row `r` is element
/// `r * num_samples + s`; without replacement, category `j` of row `r` is
/// element `r * categories + j` (its exponential race key), both 64-bit draws.
pub fn multinomial(
    probs: &Tensor,
    num_samples: usize,
    replacement: bool,
    gen: Option<&Arc<Generator>>,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Multinomial {
            num_samples,
            replacement,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [probs],
        one
    );
    const OP: &str = "multinomial";
    require_float(OP, probs.dtype())?;
    let (rows, m) = match probs.shape() {
        [m] => (1, *m),
        [r, m] => (*r, *m),
        s => {
            return Err(Error::shape(
                OP,
                format!("probabilities must be 1-D or 2-D, got shape {s:?}"),
            ))
        }
    };
    if m == 0 {
        return Err(Error::value(
            OP,
            format!(
                "probabilities of shape {:?} have no categories",
                probs.shape()
            ),
        ));
    }
    if !replacement && num_samples > m {
        return Err(Error::value(
            OP,
            format!("cannot draw {num_samples} samples without replacement from {m} categories"),
        ));
    }
    let p2 = ew::contiguous(probs)?;
    let p2 = reshaped(&p2, &[rows, m]);
    let out = Tensor::empty(&[rows, num_samples], DType::I64, probs.device())?;
    let draws = if replacement {
        rows * num_samples
    } else {
        rows * m
    };
    let s = stream(OP, gen, probs.device(), blocks_for(draws, Draw::Bits64))?;
    backend(probs.device()).multinomial(&p2, &out, replacement, s)?;
    if probs.ndim() == 1 {
        return Ok(reshaped(&out, &[num_samples]));
    }
    Ok(out)
}

/// `rand` with `x`'s shape (and dtype unless given).
pub fn rand_like(x: &Tensor, dtype: Option<DType>, gen: Option<&Arc<Generator>>) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::RandLike {
            dtype,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [x],
        one
    );
    let d = dtype.unwrap_or(x.dtype());
    require_float("rand_like", d)?;
    rand(x.shape(), d, x.device(), gen)
}

/// `randn` with `x`'s shape (and dtype unless given).
pub fn randn_like(
    x: &Tensor,
    dtype: Option<DType>,
    gen: Option<&Arc<Generator>>,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::RandnLike {
            dtype,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [x],
        one
    );
    let d = dtype.unwrap_or(x.dtype());
    require_float("randn_like", d)?;
    randn(x.shape(), d, x.device(), gen)
}

/// `randint` with `x`'s shape (and dtype unless given).
pub fn randint_like(
    x: &Tensor,
    low: i64,
    high: i64,
    dtype: Option<DType>,
    gen: Option<&Arc<Generator>>,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::RandintLike {
            low,
            high,
            dtype,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [x],
        one
    );
    let d = dtype.unwrap_or(x.dtype());
    check_int_range("randint_like", low, high, d)?;
    randint(low, high, x.shape(), d, x.device(), gen)
}

/// Dropout: zero each element with probability `p` and scale the rest by
/// `1 / (1 - p)`, in one kernel (dropped elements are exactly 0, even where
/// the input is NaN or infinite). Returns `None` when the op is the identity
/// (`p == 0`, `training == false`, or no elements); `p == 1` gives zeros and
/// draws nothing.
///
/// Gradient: the same mask and scale applied to the output gradient. The mask
/// is not stored: backward saves the Philox `(seed, offset)` the forward drew
/// from and re-runs the dropout kernel on the gradient (element `i` of the
/// mask depends only on `(seed, offset, i)`), so gradient elements at dropped
/// positions are exactly 0 (even a NaN gradient there), as in the forward.
pub fn dropout(
    x: &Tensor,
    p: f64,
    training: bool,
    gen: Option<&Arc<Generator>>,
) -> Result<Option<Tensor>> {
    if crate::ops::capture::active() && training && p > 0.0 && p < 1.0 && x.numel() > 0 {
        // Captured as keep-mask (the same draws as the kernel) times scale,
        // so the gradient nodes can read the mask the forward used.
        require_float("dropout", x.dtype())?;
        let keep = dropout_keep(x, p, gen)?;
        let scaled = ew::binary_scalar(BinaryOp::Mul, x, Scalar::Float(1.0 / (1.0 - p)), false)?;
        return ew::where_scalar(&keep, Operand::T(scaled), Operand::S(Scalar::Float(0.0)))
            .map(Some);
    }
    capture!(
        crate::ops::call::OpCall::Dropout {
            p,
            training,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [x],
        optional
    );
    const OP: &str = "dropout";
    require_float(OP, x.dtype())?;
    check_p(OP, p)?;
    if p == 0.0 || !training || x.numel() == 0 {
        return Ok(None);
    }
    if p == 1.0 {
        let out = Tensor::zeros(x.shape(), x.dtype(), x.device())?;
        if crate::autograd::needs_grad(&[x]) {
            crate::autograd::record(DropoutBackward { p, s: None }, &[x], &[&out], &[]);
        }
        return Ok(Some(out));
    }
    let s = stream(OP, gen, x.device(), blocks_for(x.numel(), Draw::Bits32))?;
    dropout_with(x, p, s).map(Some)
}

/// The keep mask dropout of `x` with probability `p` would draw (bool, `x`'s
/// shape): the same draws, from the same stream position, as [`dropout`].
pub fn dropout_keep(x: &Tensor, p: f64, gen: Option<&Arc<Generator>>) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::DropoutKeep {
            p,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [x],
        one
    );
    const OP: &str = "dropout";
    check_p(OP, p)?;
    let s = stream(OP, gen, x.device(), blocks_for(x.numel(), Draw::Bits32))?;
    let _no = crate::autograd::GradMode::set(false);
    let ones = crate::ops::creation::full(x.shape(), Scalar::Float(1.0), DType::F32, x.device())?;
    let out = Tensor::empty(x.shape(), DType::F32, x.device())?;
    backend(x.device()).dropout(&ones, &out, p, s)?;
    ew::binary_scalar(BinaryOp::Ne, &out, Scalar::Float(0.0), false)
}

/// Dropout of `x` with the mask of stream `s` (`0 < p < 1`); recorded.
fn dropout_with(x: &Tensor, p: f64, s: PhiloxStream) -> Result<Tensor> {
    let xc = {
        let _no = crate::autograd::GradMode::set(false);
        ew::contiguous(x)?
    };
    let out = Tensor::empty(x.shape(), x.dtype(), x.device())?;
    backend(x.device()).dropout(&xc, &out, p, s)?;
    if crate::autograd::needs_grad(&[x]) {
        crate::autograd::record(DropoutBackward { p, s: Some(s) }, &[x], &[&out], &[]);
    }
    Ok(out)
}

/// Backward of dropout: the same mask (re-derived from the saved stream) and
/// scale applied to the gradient; itself a dropout, so differentiable again.
/// `s: None` is `p == 1` (all dropped: zero gradient).
struct DropoutBackward {
    p: f64,
    s: Option<PhiloxStream>,
}

impl crate::autograd::Backward for DropoutBackward {
    fn name(&self) -> &'static str {
        "DropoutBackward"
    }
    fn apply(
        &self,
        _saved: &[Tensor],
        grads: &[Option<Tensor>],
        _needs: &[bool],
    ) -> Result<Vec<Option<Tensor>>> {
        let Some(g) = &grads[0] else {
            return Ok(vec![None]);
        };
        // The forward's saved stream: no new reservation is noted for it.
        #[cfg(feature = "gpu")]
        crate::backend::wgpu::forget_reservation();
        let gx = match self.s {
            Some(s) => dropout_with(g, self.p, s)?,
            None => Tensor::zeros(g.shape(), g.dtype(), g.device())?,
        };
        Ok(vec![Some(gx)])
    }
}

/// In-place dropout on `x` (same numbers as [`dropout`]).
pub fn dropout_(x: &Tensor, p: f64, training: bool, gen: Option<&Arc<Generator>>) -> Result<()> {
    if crate::ops::capture::active() {
        // Captured as the out-of-place form and a copy.
        if let Some(y) = dropout(x, p, training, gen)? {
            ew::copy_(x, &y)?;
        }
        return Ok(());
    }
    capture!(
        crate::ops::call::OpCall::DropoutInplace {
            p,
            training,
            gen: crate::ops::call::Gen(gen.cloned())
        },
        [x],
        unit
    );
    x.check_writable("dropout")?;
    check_no_overlap("dropout", x)?;
    if crate::autograd::needs_grad(&[x]) {
        crate::autograd::check_inplace("dropout", x)?;
    }
    if let Some(out) = dropout(x, p, training, gen)? {
        backend(x.device()).cast_copy(&out, x)?;
        x.storage().bump_version();
        crate::autograd::rebase_history(x, &out)?;
    }
    Ok(())
}
