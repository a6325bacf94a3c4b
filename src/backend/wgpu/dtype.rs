//! How dtypes live on the device: the element type each dtype is stored and computed as, and the
//! bytes one element takes.

use super::context;
use super::shaders::GTy;
use crate::error::{Error, Result};
use crate::tensor::{DType, Tensor};

/// The element type a dtype has on the device, or a `TypeError` naming the op.
pub fn gty(op: &'static str, d: DType) -> Result<GTy> {
    match d {
        // float16 and bfloat16 are computed as float32. bfloat16 (and
        // float16 on a device without `shader-f16`) is also stored so,
        // rounded to its type after every write (see
        // `GpuBuffer::set_narrow`); native float16 storage is marked per
        // binding instead (see `Bindings::half`).
        DType::F32 | DType::F16 | DType::BF16 => Ok(GTy::F32),
        DType::I32 | DType::I64 => Ok(GTy::I32),
        DType::Bool => Ok(GTy::U32),
        DType::U8 | DType::I8 | DType::I16 => Err(Error::dtype(
            op,
            format!(
                "{d} is not supported on the gpu device (WGSL has no 8- or 16-bit integers); \
                 convert with .int() or .float() first"
            ),
        )),
        DType::F64 => Err(Error::dtype(
            op,
            "float64 is not supported on the gpu device (WGSL has no 64-bit floats); convert with .float() first",
        )),
    }
}

/// float32, or a narrower float the device computes in float32.
pub(super) fn gpu_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16 | DType::BF16)
}

/// Whether `d` is stored as native float16 (`f16`, 2 bytes) on the device
/// (float16 where the device was created with `shader-f16`).
pub(crate) fn is_half(d: DType) -> bool {
    d == DType::F16 && context::started().is_some_and(|g| g.half_native())
}

/// The bytes one element of `d` takes on the device: 2 for native float16,
/// else 4 (int64 and bool widen or narrow to 32-bit words).
pub(crate) fn elem_bytes(d: DType) -> usize {
    if is_half(d) {
        2
    } else {
        4
    }
}

/// Refuse anything but float32 for `op`, naming the dtype.
pub(super) fn f32_only(op: &'static str, ts: &[&Tensor]) -> Result<()> {
    for t in ts {
        if !gpu_float(t.dtype()) {
            gty(op, t.dtype())?;
            return Err(Error::runtime(
                op,
                format!("not supported on the gpu device for dtype {}", t.dtype()),
            ));
        }
    }
    Ok(())
}
