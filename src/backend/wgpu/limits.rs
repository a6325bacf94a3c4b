//! Guards for the adapter's limits: 32-bit item counts, and the loop limit a software driver puts
//! on one invocation (refuse, or cut the work into slices).

use super::context::get;
use super::shaders;
use crate::error::{Error, Result};

/// Refuse a kernel whose invocations would run about `trips` loop
/// iterations where the adapter stops loops sooner (see
/// [`context::Gpu::loop_limit`]): there its results would be silently
/// truncated. `what` names the work; `hint` says how to split it.
pub(super) fn check_loop_trips(
    op: &'static str,
    trips: u64,
    what: &dyn Fn() -> String,
    hint: &str,
) -> Result<()> {
    let g = get()?;
    match g.loop_limit {
        Some(limit) if trips >= limit => Err(Error::runtime(
            op,
            format!(
                "{} needs about {trips} loop iterations in one shader invocation, but this adapter ({}) stops an invocation's loops after {limit} iterations in all (a software driver's guard against endless loops), so the result would be wrong; {hint}",
                what(),
                g.info.name
            ),
        )),
        _ => Ok(()),
    }
}

/// [`check_loop_trips`] for a row kernel making `passes` walks over rows of `len`.
pub(super) fn check_row_trips(op: &'static str, passes: u64, len: usize) -> Result<()> {
    check_loop_trips(
        op,
        row_trips(passes, len, 1),
        &|| format!("a {op} over rows of {len}"),
        "work on shorter rows (e.g. split the dim and combine the parts)",
    )
}

/// Whether about `trips` loop iterations per invocation pass the adapter's
/// loop limit (see [`check_loop_trips`]): the caller then takes a path that
/// splits the work.
pub(super) fn over_loop_limit(trips: u64) -> Result<bool> {
    Ok(get()?.loop_limit.is_some_and(|limit| trips >= limit))
}

/// The length of the slices a dim of `n` is cut into when walking it whole
/// would take about `trips` loop iterations per invocation, past the
/// adapter's loop limit: at least two slices, each about a quarter of the
/// limit's worth.
pub(super) fn slice_len(n: usize, trips: u64) -> Result<usize> {
    let limit = get()?.loop_limit.unwrap_or(u64::MAX);
    let slices = (trips.div_ceil((limit / 4).max(1)) as usize).clamp(2, n.max(2));
    Ok(n.div_ceil(slices).max(1))
}

/// Loop trips of a row kernel (one workgroup of `RED_WG` threads per row):
/// `passes` strided walks over `len` elements, each element's offset found
/// by a loop over `dims` dims, and the workgroup's tree steps.
pub(super) fn row_trips(passes: u64, len: usize, dims: usize) -> u64 {
    passes * (len as u64).div_ceil(shaders::RED_WG as u64) * (2 + dims as u64) + 64
}

/// Refuse more than 2^31 items for the 32-bit kernels.
pub(super) fn check_items(op: &'static str, n: usize) -> Result<()> {
    if n > i32::MAX as usize {
        return Err(Error::runtime(
            op,
            format!("{n} elements exceed the gpu kernels' 32-bit indexing"),
        ));
    }
    Ok(())
}
