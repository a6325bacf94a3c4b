//! Factories: tensors made from a shape and a value rule.

use crate::backend::backend;
use crate::error::{Error, Result};
use crate::ops::registry::{DTypes, OpInfo, OpKind};
use crate::tensor::{DType, Device, Element, Scalar, Tensor};
use crate::with_dtype;

const fn factory(name: &'static str) -> OpInfo {
    OpInfo::prim(name, "creation", DTypes::ALL).kind(OpKind::Factory)
}

pub const OPS: &[OpInfo] = &[
    factory("empty"),
    factory("zeros"),
    factory("ones"),
    factory("full"),
    factory("arange"),
    factory("linspace"),
    factory("eye"),
    factory("tensor"),
];

/// An uninitialised tensor (`fg.empty`).
pub fn empty(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Empty {
            shape: shape.to_vec(),
            dtype,
            device
        },
        [],
        one
    );
    Tensor::empty(shape, dtype, device)
}

/// A tensor of zeros (`fg.zeros`).
pub fn zeros(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
    full(shape, Scalar::Int(0), dtype, device)
}

/// A tensor filled with `value` (`fg.full`, `fg.ones`).
pub fn full(shape: &[usize], value: Scalar, dtype: DType, device: Device) -> Result<Tensor> {
    check_fill_value("full", value, dtype)?;
    capture!(
        crate::ops::call::OpCall::Full {
            shape: shape.to_vec(),
            value,
            dtype,
            device
        },
        [],
        one
    );
    let t = Tensor::empty_for("full", shape, dtype, device)?;
    backend(device).fill(&t, value)?;
    Ok(t)
}

/// Refuse a fill value that `dtype` cannot hold, as PyTorch's `full`/`fill_` do (a
/// `RuntimeError` in Python): integers outside the dtype's range (uint8 also takes
/// -255..=-1, wrapping, as PyTorch allows), floats whose truncation falls outside it, NaN
/// and infinities for integer dtypes, and finite floats beyond float32's range for
/// float32. float16 and bfloat16 round out-of-range values to infinity, without error.
pub fn check_fill_value(op: &'static str, value: Scalar, dtype: DType) -> Result<()> {
    let Some((lo, hi)) = dtype.int_range() else {
        return match value {
            Scalar::Float(f)
                if dtype == DType::F32 && f.is_finite() && f.abs() > f32::MAX as f64 =>
            {
                Err(overflow(op, value, dtype))
            }
            _ => Ok(()),
        };
    };
    let fits = match value {
        Scalar::Bool(_) => true,
        Scalar::Int(v) => {
            // Unsigned targets take negative values down to -max (they wrap), as PyTorch's do.
            let lo = if dtype == DType::U8 { -hi } else { lo };
            (lo..=hi).contains(&v)
        }
        // Truncation toward zero must land in range: 255.7 fills uint8 with 255, -0.5 does not.
        Scalar::Float(f) => f.is_finite() && f >= lo as f64 && f < hi as f64 + 1.0,
    };
    if fits {
        Ok(())
    } else {
        Err(overflow(op, value, dtype))
    }
}

fn overflow(op: &'static str, value: Scalar, dtype: DType) -> Error {
    let v = match value {
        Scalar::Bool(b) => b.to_string(),
        Scalar::Int(i) => i.to_string(),
        Scalar::Float(f) => format!("{f:?}"),
    };
    Error::runtime(
        op,
        format!("value {v} cannot be converted to type {dtype} without overflow"),
    )
}

/// `arange(start, end, step)`: dtype is int64 when all three are integers, else float32 unless given.
pub fn arange(
    start: Scalar,
    end: Scalar,
    step: Scalar,
    dtype: Option<DType>,
    device: Device,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Arange {
            start,
            end,
            step,
            dtype,
            device
        },
        [],
        one
    );
    let all_int = [start, end, step]
        .iter()
        .all(|s| !matches!(s, Scalar::Float(_)));
    let dtype = dtype.unwrap_or(if all_int {
        DType::I64
    } else {
        DType::default_float()
    });
    let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
    if st == 0.0 || !st.is_finite() || !s.is_finite() || !e.is_finite() {
        return Err(Error::value(
            "arange",
            format!("invalid range: start={s}, end={e}, step={st}"),
        ));
    }
    if (e - s) * st < 0.0 {
        return Err(Error::value(
            "arange",
            format!("upper bound and step sign are inconsistent (start={s}, end={e}, step={st})"),
        ));
    }
    let n = if all_int {
        let (si, ei, sti) = (start.to_i64(), end.to_i64(), step.to_i64());
        // ceil((end - start) / step); the signs agree (checked above).
        let (num, den) = ((ei - si) as i128, sti as i128);
        num / den + (num % den != 0) as i128
    } else {
        ((e - s) / st).ceil() as i128
    }
    .max(0) as usize;
    if let Device::Gpu(_) = device {
        // Built on the host, then uploaded.
        let t = arange(start, end, step, Some(dtype), Device::Cpu)?;
        return crate::backend::transfer(&t, device);
    }
    let t = Tensor::empty_for("arange", &[n], dtype, device)?;
    if !device.has_data() {
        return Ok(t);
    }
    with_dtype!(dtype, T => {
        let p = t.data_ptr::<T>();
        for i in 0..n {
            let v: T = if all_int {
                T::from_i64(start.to_i64() + i as i64 * step.to_i64())
            } else {
                T::from_f64(s + i as f64 * st)
            };
            // SAFETY: fresh contiguous storage of n elements.
            unsafe { *p.add(i) = v };
        }
    });
    Ok(t)
}

pub fn linspace(
    start: f64,
    end: f64,
    steps: usize,
    dtype: DType,
    device: Device,
) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Linspace {
            start,
            end,
            steps,
            dtype,
            device
        },
        [],
        one
    );
    if let Device::Gpu(_) = device {
        let t = linspace(start, end, steps, dtype, Device::Cpu)?;
        return crate::backend::transfer(&t, device);
    }
    let t = Tensor::empty_for("linspace", &[steps], dtype, device)?;
    if !device.has_data() {
        return Ok(t);
    }
    let step = if steps > 1 {
        (end - start) / (steps - 1) as f64
    } else {
        0.0
    };
    with_dtype!(dtype, T => {
        let p = t.data_ptr::<T>();
        let half = steps / 2;
        for i in 0..steps {
            // Symmetric evaluation (from both ends) keeps the endpoints exact.
            let v = if steps == 1 {
                start
            } else if i < half {
                start + step * i as f64
            } else {
                end - step * (steps - 1 - i) as f64
            };
            // SAFETY: fresh contiguous storage.
            unsafe { *p.add(i) = T::from_f64(v) };
        }
    });
    Ok(t)
}

pub fn eye(n: usize, m: usize, dtype: DType, device: Device) -> Result<Tensor> {
    capture!(
        crate::ops::call::OpCall::Eye {
            n,
            m,
            dtype,
            device
        },
        [],
        one
    );
    if let Device::Gpu(_) = device {
        return crate::backend::transfer(&eye(n, m, dtype, Device::Cpu)?, device);
    }
    let t = Tensor::zeros(&[n, m], dtype, device)?;
    if !device.has_data() {
        return Ok(t);
    }
    with_dtype!(dtype, T => {
        let p = t.data_ptr::<T>();
        for i in 0..n.min(m) {
            // SAFETY: inside the n*m block.
            unsafe { *p.add(i * m + i) = T::one() };
        }
    });
    Ok(t)
}
