//! Temporary: replaced by the reductions family.
use crate::error::Result;
use crate::tensor::layout::norm_dim;
use crate::tensor::{DType, Tensor};

pub const OPS: &[crate::ops::registry::OpInfo] = &[];

pub fn sum(
    x: &Tensor,
    dims: Option<&[isize]>,
    keepdim: bool,
    _dtype: Option<DType>,
) -> Result<Tensor> {
    let nd = x.ndim();
    let mut red = vec![dims.is_none(); nd];
    if let Some(ds) = dims {
        for &d in ds {
            red[norm_dim("sum", d, nd)?] = true;
        }
    }
    let oshape: Vec<usize> = (0..nd)
        .map(|i| if red[i] { 1 } else { x.shape()[i] })
        .collect();
    let ostr = crate::tensor::layout::contiguous_strides(&oshape);
    let n: usize = oshape.iter().product();
    let mut acc = vec![0f64; n];
    let vals = x.to_f64_vec();
    let mut idx = vec![0usize; nd];
    for v in vals {
        let mut o = 0isize;
        for i in 0..nd {
            if !red[i] {
                o += idx[i] as isize * ostr[i];
            }
        }
        acc[o as usize] += v;
        for k in (0..nd).rev() {
            idx[k] += 1;
            if idx[k] < x.shape()[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    let t = Tensor::from_vec(acc, &oshape)?;
    let t = crate::ops::elementwise::to_dtype(&t, x.dtype())?;
    if keepdim {
        Ok(t)
    } else {
        let s: Vec<isize> = (0..nd)
            .filter(|&i| !red[i])
            .map(|i| x.shape()[i] as isize)
            .collect();
        crate::ops::shape::reshape(&t, &s)
    }
}
