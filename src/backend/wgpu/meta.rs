//! The words kernels read from their metadata: elementwise metadata (sizes, offsets, strides) and
//! scalar parameters as 32-bit words.

use super::limits::check_items;
use super::shaders;
use super::shaders::GTy;
use crate::error::{Error, Result};
use crate::tensor::{DType, Layout, Scalar, Tensor};

fn words_of_strides(s: &[isize]) -> impl Iterator<Item = u32> + '_ {
    s.iter().map(|&v| v as i32 as u32)
}

/// Elementwise metadata for `ts` (all of `shape`), with up to eight parameter words.
pub(super) fn ew_meta(
    op: &'static str,
    shape: &[usize],
    ts: &[&Tensor],
    params: [u32; 8],
) -> Result<Vec<u32>> {
    let n: usize = shape.iter().product();
    if n > u32::MAX as usize {
        return Err(Error::runtime(
            op,
            format!("{n} elements exceed the gpu kernels' 32-bit indexing"),
        ));
    }
    let strides: Vec<&[isize]> = ts.iter().map(|t| t.strides()).collect();
    let (cs, cst) = Layout::coalesce(shape, &strides);
    let mut m = Vec::with_capacity(shaders::EW_SHAPE + cs.len() * (1 + ts.len()) + ts.len());
    m.push(n as u32);
    m.push(cs.len() as u32);
    m.extend_from_slice(&params);
    m.extend(cs.iter().map(|&d| d as u32));
    for (t, s) in ts.iter().zip(&cst) {
        m.push(t.offset() as u32);
        m.extend(words_of_strides(s));
    }
    Ok(m)
}

/// The 32-bit word of `s` written into a `dtype` tensor on the device
/// (`ty` its device type). The device keeps int64 (and int32) in 32 bits,
/// so an integer outside that range is refused rather than wrapped.
pub(super) fn scalar_bits(op: &'static str, s: Scalar, dtype: DType, ty: GTy) -> Result<u32> {
    Ok(match ty {
        GTy::F32 => (s.to_f64() as f32).to_bits(),
        GTy::I32 => int_word(op, s.to_i64(), dtype)?,
        GTy::U32 => (s.to_f64() != 0.0) as u32,
    })
}

/// `v` as a 32-bit integer word, saturated to the 32-bit range.
pub(super) fn sat_word(v: f64) -> u32 {
    (v as i64).clamp(i32::MIN as i64, i32::MAX as i64) as i32 as u32
}

/// `v` as the 32-bit integer word the device stores a `dtype` value in, or
/// an error naming `op` when it does not fit.
fn int_word(op: &'static str, v: i64, dtype: DType) -> Result<u32> {
    i32::try_from(v).map(|w| w as u32).map_err(|_| {
        Error::value(
            op,
            format!(
                "the value {v} does not fit the 32-bit integers the gpu device stores {dtype} in ({} to {}); use the cpu device for it",
                i32::MIN,
                i32::MAX
            ),
        )
    })
}

/// Elementwise metadata from explicit (offset, strides) per operand.
pub(super) fn raw_meta(
    op: &'static str,
    shape: &[usize],
    ops: &[(usize, Vec<isize>)],
    params: [u32; 8],
) -> Result<Vec<u32>> {
    let n: usize = shape.iter().product();
    check_items(op, n)?;
    let strides: Vec<&[isize]> = ops.iter().map(|(_, s)| s.as_slice()).collect();
    let (cs, cst) = Layout::coalesce(shape, &strides);
    let mut m = vec![n as u32, cs.len() as u32];
    m.extend_from_slice(&params);
    m.extend(cs.iter().map(|&d| d as u32));
    for ((o, _), s) in ops.iter().zip(&cst) {
        m.push(*o as u32);
        m.extend(words_of_strides(s));
    }
    Ok(m)
}
