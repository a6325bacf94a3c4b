//! Random sampling: generators, factories (`rand`, `randn`, `randint`,
//! `normal`, `randperm`, `*_like`), in-place fills (`uniform_`, `normal_`,
//! `bernoulli_`), `bernoulli`, `multinomial` and `dropout`.

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyTuple};

use super::creation::leaf;
use super::{
    as_operand, as_scalar, parse_device, parse_dtype_opt, run, run_heavy, shape_args, PyDevice,
    PyTensor,
};
use crate::ops::elementwise::Operand;
use crate::ops::random::{self as rnd, GenState, Generator};
use crate::tensor::DType;

/// A random number generator: a seed and a position in its Philox stream.
///
/// `Generator(device="cpu")` starts from the same fixed seed as the default
/// generator; seed it with `manual_seed`. Pass it as `generator=` to any
/// sampling function to draw from it instead of the process default.
#[pyclass(name = "Generator", module = "ferrograd", frozen)]
pub struct PyGenerator {
    pub g: Arc<Generator>,
}

/// A Python int in `[-2**63, 2**64)` as a 64-bit seed (negatives wrap).
fn parse_seed(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(v) = obj.extract::<u64>() {
        return Ok(v);
    }
    if let Ok(v) = obj.extract::<i64>() {
        return Ok(v as u64);
    }
    if obj.is_instance_of::<pyo3::types::PyInt>() {
        return Err(PyValueError::new_err(format!(
            "manual_seed: seed {} is outside [-2**63, 2**64)",
            obj.repr()?
        )));
    }
    Err(PyTypeError::new_err(format!(
        "manual_seed: expected an int seed, got {}",
        obj.get_type().name()?
    )))
}

/// Generator state from `bytes`/`bytearray` or a tensor of 16 byte values.
fn parse_state(obj: &Bound<'_, PyAny>) -> PyResult<GenState> {
    let bytes: Vec<u8> = if let Ok(b) = obj.cast::<PyBytes>() {
        b.as_bytes().to_vec()
    } else if let Ok(b) = obj.cast::<PyByteArray>() {
        b.to_vec()
    } else if let Ok(t) = obj.cast::<PyTensor>() {
        let t_ref = t.borrow();
        let t = &t_ref.t;
        if t.dtype().is_floating_point() || t.dtype() == DType::Bool {
            return Err(PyTypeError::new_err(format!(
                "set_state: a state tensor holds byte values in an integer dtype, got {}",
                t.dtype()
            )));
        }
        t.to_f64_vec()
            .into_iter()
            .map(|v| {
                if (0.0..=255.0).contains(&v) {
                    Ok(v as u8)
                } else {
                    Err(PyValueError::new_err(format!(
                        "set_state: a state tensor holds byte values 0..=255, found {v}"
                    )))
                }
            })
            .collect::<PyResult<_>>()?
    } else {
        return Err(PyTypeError::new_err(format!(
            "set_state: expected bytes or a tensor from get_state(), got {}",
            obj.get_type().name()?
        )));
    };
    run(|| GenState::from_bytes("set_state", &bytes))
}

#[pymethods]
impl PyGenerator {
    #[new]
    #[pyo3(signature = (device=None))]
    fn py_new(device: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let dev = parse_device(device)?;
        Ok(PyGenerator {
            g: Arc::new(Generator::new(dev)),
        })
    }

    /// Seed the generator (and rewind its stream); returns the generator.
    fn manual_seed<'py>(
        slf: &Bound<'py, Self>,
        seed: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, Self>> {
        let s = parse_seed(seed)?;
        let g = slf.get().g.clone();
        super::run(|| rnd::manual_seed(Some(&g), s))?;
        Ok(slf.clone())
    }

    /// Seed from a non-deterministic source; returns the new seed.
    fn seed(&self) -> u64 {
        self.g.seed()
    }

    /// The seed in use.
    fn initial_seed(&self) -> u64 {
        self.g.initial_seed()
    }

    /// The state as 16 bytes (seed, then stream offset; little-endian).
    fn get_state<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.g.get_state().to_bytes())
    }

    /// Restore a state from `get_state()`; returns the generator.
    fn set_state<'py>(
        slf: &Bound<'py, Self>,
        state: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, Self>> {
        slf.get().g.set_state(parse_state(state)?);
        Ok(slf.clone())
    }

    /// The device this generator produces numbers for.
    #[getter]
    fn device(&self) -> PyDevice {
        PyDevice { d: self.g.device() }
    }

    fn __repr__(&self) -> String {
        let s = self.g.get_state();
        format!(
            "Generator(device='{}', seed={}, offset={})",
            self.g.device(),
            s.seed,
            s.offset
        )
    }
}

type Gen<'py> = Option<Bound<'py, PyGenerator>>;

fn gen_arc(g: &Gen<'_>) -> Option<Arc<Generator>> {
    g.as_ref().map(|b| b.get().g.clone())
}

fn default_gen(py: Python<'_>) -> PyResult<Py<PyGenerator>> {
    Py::new(
        py,
        PyGenerator {
            g: rnd::default_generator().clone(),
        },
    )
}

/// Seed the default generator; returns it.
#[pyfunction]
fn manual_seed(py: Python<'_>, seed: &Bound<'_, PyAny>) -> PyResult<Py<PyGenerator>> {
    let s = parse_seed(seed)?;
    super::run(|| rnd::manual_seed(None, s))?;
    default_gen(py)
}

/// Seed the default generator non-deterministically; returns the seed.
#[pyfunction]
fn seed() -> u64 {
    rnd::default_generator().seed()
}

/// The default generator's seed.
#[pyfunction]
fn initial_seed() -> u64 {
    rnd::default_generator().initial_seed()
}

/// The default generator's state (16 bytes).
#[pyfunction]
fn get_rng_state(py: Python<'_>) -> Bound<'_, PyBytes> {
    PyBytes::new(py, &rnd::default_generator().get_state().to_bytes())
}

/// Restore the default generator's state from `get_rng_state()`.
#[pyfunction]
fn set_rng_state(state: &Bound<'_, PyAny>) -> PyResult<()> {
    rnd::default_generator().set_state(parse_state(state)?);
    Ok(())
}

/// A `size` argument: an int or a sequence of non-negative ints.
fn size_arg(op: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    let v: Vec<isize> = if let Ok(n) = obj.extract::<isize>() {
        vec![n]
    } else {
        obj.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "{op}: size must be an int or a sequence of ints, got {}",
                obj.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?
    };
    v.iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| {
                PyValueError::new_err(format!("{op}: negative dimension {d} in size {v:?}"))
            })
        })
        .collect()
}

/// `f(2, 3)`, `f((2, 3))` or `f(size=(2, 3))`.
fn shape_or_size(
    op: &str,
    shape: &Bound<'_, PyTuple>,
    size: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<usize>> {
    match size {
        Some(s) if !s.is_none() => {
            if !shape.is_empty() {
                return Err(PyTypeError::new_err(format!(
                    "{op}: give the shape either positionally or as size=, not both"
                )));
            }
            size_arg(op, s)
        }
        _ => shape_args(op, shape),
    }
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Uniform samples in [0, 1): `rand(2, 3)`, `rand((2, 3))` or `rand(size=(2, 3))`.
/// Floating dtypes only.
#[pyfunction]
#[pyo3(signature = (*shape, size=None, generator=None, dtype=None, device=None, requires_grad=false))]
#[allow(clippy::too_many_arguments)]
fn rand(
    py: Python<'_>,
    shape: &Bound<'_, PyTuple>,
    size: Option<&Bound<'_, PyAny>>,
    generator: Gen<'_>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let s = shape_or_size("rand", shape, size)?;
    let d = parse_dtype_opt(dtype)?.unwrap_or(DType::default_float());
    let dev = parse_device(device)?;
    let g = gen_arc(&generator);
    run_heavy(py, numel(&s), || rnd::rand(&s, d, dev, g.as_ref()))
        .and_then(|t| leaf(t, requires_grad))
}

/// Standard normal samples: `randn(2, 3)`, `randn((2, 3))` or `randn(size=(2, 3))`.
/// Floating dtypes only.
#[pyfunction]
#[pyo3(signature = (*shape, size=None, generator=None, dtype=None, device=None, requires_grad=false))]
#[allow(clippy::too_many_arguments)]
fn randn(
    py: Python<'_>,
    shape: &Bound<'_, PyTuple>,
    size: Option<&Bound<'_, PyAny>>,
    generator: Gen<'_>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let s = shape_or_size("randn", shape, size)?;
    let d = parse_dtype_opt(dtype)?.unwrap_or(DType::default_float());
    let dev = parse_device(device)?;
    let g = gen_arc(&generator);
    run_heavy(py, numel(&s), || rnd::randn(&s, d, dev, g.as_ref()))
        .and_then(|t| leaf(t, requires_grad))
}

fn int_arg(op: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<i64> {
    obj.extract::<i64>().map_err(|_| {
        PyTypeError::new_err(format!(
            "{op}: {name} must be an int, got {}",
            obj.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })
}

/// Integers uniform in `[low, high)`: `randint(high, size)` or
/// `randint(low, high, size)` (`size` may also be a keyword). Default dtype int64.
#[pyfunction]
#[pyo3(signature = (*args, size=None, low=None, high=None, generator=None, dtype=None, device=None))]
#[allow(clippy::too_many_arguments)]
fn randint(
    py: Python<'_>,
    args: &Bound<'_, PyTuple>,
    size: Option<&Bound<'_, PyAny>>,
    low: Option<i64>,
    high: Option<i64>,
    generator: Gen<'_>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    const OP: &str = "randint";
    let a: Vec<Bound<'_, PyAny>> = args.iter().collect();
    let twice = |name: &str| {
        PyTypeError::new_err(format!(
            "randint: `{name}` given both by position and by keyword"
        ))
    };
    let (lo, hi, sz) = match (a.len(), size) {
        (3, None) => {
            if low.is_some() {
                return Err(twice("low"));
            }
            if high.is_some() {
                return Err(twice("high"));
            }
            (
                int_arg(OP, "low", &a[0])?,
                int_arg(OP, "high", &a[1])?,
                a[2].clone(),
            )
        }
        (2, None) => {
            if high.is_some() {
                return Err(twice("high"));
            }
            (low.unwrap_or(0), int_arg(OP, "high", &a[0])?, a[1].clone())
        }
        (2, Some(s)) => {
            if low.is_some() {
                return Err(twice("low"));
            }
            if high.is_some() {
                return Err(twice("high"));
            }
            (
                int_arg(OP, "low", &a[0])?,
                int_arg(OP, "high", &a[1])?,
                s.clone(),
            )
        }
        // `randint(low, high=h, size=s)` or `randint(high, size=s)`.
        (1, Some(s)) => match high {
            Some(h) => {
                if low.is_some() {
                    return Err(twice("low"));
                }
                (int_arg(OP, "low", &a[0])?, h, s.clone())
            }
            None => (low.unwrap_or(0), int_arg(OP, "high", &a[0])?, s.clone()),
        },
        (0, Some(s)) => {
            let h = high
                .ok_or_else(|| PyTypeError::new_err("randint: missing the upper bound `high`"))?;
            (low.unwrap_or(0), h, s.clone())
        }
        _ => {
            return Err(PyTypeError::new_err(
                "randint: expected randint(high, size) or randint(low, high, size)",
            ))
        }
    };
    let s = size_arg(OP, &sz)?;
    let d = parse_dtype_opt(dtype)?.unwrap_or(DType::I64);
    let dev = parse_device(device)?;
    let g = gen_arc(&generator);
    run_heavy(py, numel(&s), || {
        rnd::randint(lo, hi, &s, d, dev, g.as_ref())
    })
    .map(PyTensor::new)
}

/// Normal samples. With numbers `mean`, `std` a `size` is required; with
/// tensors the result has their broadcast shape (one draw per element).
#[pyfunction]
#[pyo3(signature = (mean=None, std=None, size=None, *, generator=None, dtype=None, device=None, requires_grad=false))]
#[allow(clippy::too_many_arguments)]
fn normal(
    py: Python<'_>,
    mean: Option<&Bound<'_, PyAny>>,
    std: Option<&Bound<'_, PyAny>>,
    size: Option<&Bound<'_, PyAny>>,
    generator: Gen<'_>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let operand = |o: Option<&Bound<'_, PyAny>>, default: f64| -> PyResult<Operand> {
        match o {
            None => Ok(Operand::S(crate::tensor::Scalar::Float(default))),
            Some(v) if v.is_none() => Ok(Operand::S(crate::tensor::Scalar::Float(default))),
            Some(v) => as_operand(v),
        }
    };
    let m = operand(mean, 0.0)?;
    let sd = operand(std, 1.0)?;
    let sz = match size {
        Some(s) if !s.is_none() => Some(size_arg("normal", s)?),
        _ => None,
    };
    let d = parse_dtype_opt(dtype)?;
    let dev = parse_device(device)?;
    let g = gen_arc(&generator);
    let work = sz.as_deref().map(numel).unwrap_or(0);
    run_heavy(py, work, || {
        rnd::normal(&m, &sd, sz.as_deref(), d, dev, g.as_ref())
    })
    .and_then(|t| leaf(t, requires_grad))
}

/// A random permutation of `0..n` (int64 unless `dtype` is given).
#[pyfunction]
#[pyo3(signature = (n, *, generator=None, dtype=None, device=None))]
fn randperm(
    py: Python<'_>,
    n: &Bound<'_, PyAny>,
    generator: Gen<'_>,
    dtype: Option<&Bound<'_, PyAny>>,
    device: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyTensor> {
    let n = int_arg("randperm", "n", n)?;
    let n = usize::try_from(n)
        .map_err(|_| PyValueError::new_err(format!("randperm: n must be non-negative, got {n}")))?;
    let d = parse_dtype_opt(dtype)?.unwrap_or(DType::I64);
    let dev = parse_device(device)?;
    let g = gen_arc(&generator);
    run_heavy(py, n, || rnd::randperm(n, d, dev, g.as_ref())).map(PyTensor::new)
}

/// Uniform samples in [0, 1) shaped like `input` (its dtype unless given).
#[pyfunction]
#[pyo3(signature = (input, *, dtype=None, generator=None, requires_grad=false))]
fn rand_like(
    py: Python<'_>,
    input: &PyTensor,
    dtype: Option<&Bound<'_, PyAny>>,
    generator: Gen<'_>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let d = parse_dtype_opt(dtype)?;
    let g = gen_arc(&generator);
    let x = &input.t;
    run_heavy(py, x.numel(), || rnd::rand_like(x, d, g.as_ref()))
        .and_then(|t| leaf(t, requires_grad))
}

/// Standard normal samples shaped like `input` (its dtype unless given).
#[pyfunction]
#[pyo3(signature = (input, *, dtype=None, generator=None, requires_grad=false))]
fn randn_like(
    py: Python<'_>,
    input: &PyTensor,
    dtype: Option<&Bound<'_, PyAny>>,
    generator: Gen<'_>,
    requires_grad: bool,
) -> PyResult<PyTensor> {
    let d = parse_dtype_opt(dtype)?;
    let g = gen_arc(&generator);
    let x = &input.t;
    run_heavy(py, x.numel(), || rnd::randn_like(x, d, g.as_ref()))
        .and_then(|t| leaf(t, requires_grad))
}

/// Integers in `[low, high)` shaped like `input`: `randint_like(x, high)` or
/// `randint_like(x, low, high)`; `input`'s dtype unless given.
#[pyfunction]
#[pyo3(signature = (input, low_or_high, high=None, *, dtype=None, generator=None))]
fn randint_like(
    py: Python<'_>,
    input: &PyTensor,
    low_or_high: i64,
    high: Option<i64>,
    dtype: Option<&Bound<'_, PyAny>>,
    generator: Gen<'_>,
) -> PyResult<PyTensor> {
    let (lo, hi) = match high {
        Some(h) => (low_or_high, h),
        None => (0, low_or_high),
    };
    let d = parse_dtype_opt(dtype)?;
    let g = gen_arc(&generator);
    let x = &input.t;
    run_heavy(py, x.numel(), || {
        rnd::randint_like(x, lo, hi, d, g.as_ref())
    })
    .map(PyTensor::new)
}

/// 0/1 samples: `bernoulli(probs)` draws each element with its own
/// probability; `bernoulli(x, p)` uses probability `p` with `x`'s shape.
#[pyfunction]
#[pyo3(signature = (input, p=None, *, generator=None))]
fn bernoulli(
    py: Python<'_>,
    input: &PyTensor,
    p: Option<f64>,
    generator: Gen<'_>,
) -> PyResult<PyTensor> {
    input.bernoulli(py, p, generator)
}

/// Category indices drawn from the rows of `input` (see `Tensor.multinomial`).
#[pyfunction]
#[pyo3(signature = (input, num_samples, replacement=false, *, generator=None))]
fn multinomial(
    py: Python<'_>,
    input: &PyTensor,
    num_samples: usize,
    replacement: bool,
    generator: Gen<'_>,
) -> PyResult<PyTensor> {
    input.multinomial(py, num_samples, replacement, generator)
}

/// Dropout: during training zero each element with probability `p` and scale
/// the others by `1 / (1 - p)` (one fused kernel). Returns `input` itself when
/// `training` is false or `p == 0`; `inplace=True` writes into `input`.
#[pyfunction]
#[pyo3(signature = (input, p=0.5, training=true, inplace=false, *, generator=None))]
fn dropout<'py>(
    input: &Bound<'py, PyTensor>,
    p: f64,
    training: bool,
    inplace: bool,
    generator: Gen<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = input.py();
    let x_ref = input.borrow();
    let x = &x_ref.t;
    let g = gen_arc(&generator);
    if inplace {
        run_heavy(py, x.numel(), || rnd::dropout_(x, p, training, g.as_ref()))?;
        return Ok(input.clone().into_any());
    }
    match run_heavy(py, x.numel(), || rnd::dropout(x, p, training, g.as_ref()))? {
        None => Ok(input.clone().into_any()),
        Some(t) => Ok(Bound::new(py, PyTensor::new(t))?.into_any()),
    }
}

#[pymethods]
impl PyTensor {
    /// Fill in place with values uniform in `[a, b)`; returns `self`.
    #[pyo3(signature = (a=0.0, b=1.0, *, generator=None))]
    fn uniform_<'py>(
        slf: &Bound<'py, Self>,
        a: f64,
        b: f64,
        generator: Gen<'py>,
    ) -> PyResult<Bound<'py, Self>> {
        let x_ref = slf.borrow();
        let x = &x_ref.t;
        let g = gen_arc(&generator);
        run_heavy(slf.py(), x.numel(), || rnd::uniform_(x, a, b, g.as_ref()))?;
        Ok(slf.clone())
    }

    /// Fill in place with normal samples of the given mean and std; returns `self`.
    #[pyo3(signature = (mean=0.0, std=1.0, *, generator=None))]
    fn normal_<'py>(
        slf: &Bound<'py, Self>,
        mean: f64,
        std: f64,
        generator: Gen<'py>,
    ) -> PyResult<Bound<'py, Self>> {
        let x_ref = slf.borrow();
        let x = &x_ref.t;
        let g = gen_arc(&generator);
        run_heavy(slf.py(), x.numel(), || {
            rnd::normal_(x, mean, std, g.as_ref())
        })?;
        Ok(slf.clone())
    }

    /// Fill in place with 0/1 draws of probability `p` (a number or a floating
    /// tensor broadcast to `self`); returns `self`.
    #[pyo3(signature = (p=None, *, generator=None))]
    fn bernoulli_<'py>(
        slf: &Bound<'py, Self>,
        p: Option<&Bound<'py, PyAny>>,
        generator: Gen<'py>,
    ) -> PyResult<Bound<'py, Self>> {
        let x_ref = slf.borrow();
        let x = &x_ref.t;
        let p = match p {
            None => Operand::S(crate::tensor::Scalar::Float(0.5)),
            Some(v) if v.is_none() => Operand::S(crate::tensor::Scalar::Float(0.5)),
            Some(v) => match as_scalar(v) {
                Some(s) => Operand::S(s),
                None => as_operand(v)?,
            },
        };
        let g = gen_arc(&generator);
        run_heavy(slf.py(), x.numel(), || rnd::bernoulli_(x, &p, g.as_ref()))?;
        Ok(slf.clone())
    }

    /// 0/1 draws: with `p`, each element is 1 with probability `p`; without,
    /// `self` holds the per-element probabilities. Floating dtypes.
    #[pyo3(signature = (p=None, *, generator=None))]
    fn bernoulli(&self, py: Python<'_>, p: Option<f64>, generator: Gen<'_>) -> PyResult<PyTensor> {
        let x = &self.t;
        let g = gen_arc(&generator);
        run_heavy(py, x.numel(), || match p {
            Some(p) => rnd::bernoulli_p(x, p, g.as_ref()),
            None => rnd::bernoulli(x, g.as_ref()),
        })
        .map(PyTensor::new)
    }

    /// Draw `num_samples` category indices (int64) from each row of the
    /// non-negative weights `self` (1-D or 2-D, rows need not sum to 1).
    /// Without replacement no category repeats within a row.
    #[pyo3(signature = (num_samples, replacement=false, *, generator=None))]
    fn multinomial(
        &self,
        py: Python<'_>,
        num_samples: usize,
        replacement: bool,
        generator: Gen<'_>,
    ) -> PyResult<PyTensor> {
        let x = &self.t;
        let g = gen_arc(&generator);
        let work = x.numel().max(num_samples);
        run_heavy(py, work, || {
            rnd::multinomial(x, num_samples, replacement, g.as_ref())
        })
        .map(PyTensor::new)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyGenerator>()?;
    m.add(
        "default_generator",
        PyGenerator {
            g: rnd::default_generator().clone(),
        },
    )?;
    m.add_function(wrap_pyfunction!(manual_seed, m)?)?;
    m.add_function(wrap_pyfunction!(seed, m)?)?;
    m.add_function(wrap_pyfunction!(initial_seed, m)?)?;
    m.add_function(wrap_pyfunction!(get_rng_state, m)?)?;
    m.add_function(wrap_pyfunction!(set_rng_state, m)?)?;
    m.add_function(wrap_pyfunction!(rand, m)?)?;
    m.add_function(wrap_pyfunction!(randn, m)?)?;
    m.add_function(wrap_pyfunction!(randint, m)?)?;
    m.add_function(wrap_pyfunction!(normal, m)?)?;
    m.add_function(wrap_pyfunction!(randperm, m)?)?;
    m.add_function(wrap_pyfunction!(rand_like, m)?)?;
    m.add_function(wrap_pyfunction!(randn_like, m)?)?;
    m.add_function(wrap_pyfunction!(randint_like, m)?)?;
    m.add_function(wrap_pyfunction!(bernoulli, m)?)?;
    m.add_function(wrap_pyfunction!(multinomial, m)?)?;
    m.add_function(wrap_pyfunction!(dropout, m)?)?;
    Ok(())
}
