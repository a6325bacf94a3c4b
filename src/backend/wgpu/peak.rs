//! The adapter's float32 arithmetic rate, measured: a kernel whose threads
//! each run independent chains of fused multiply-adds in registers (no
//! memory traffic beyond one store per thread), timed from submission to
//! completion. It is the GPU's counterpart of the CPU FMA stand-in the
//! benches judge matrix products against: a practical peak, not a
//! datasheet figure.

use std::time::Instant;

use super::context::get;
use super::shaders::WG;
use crate::error::{Error, Result};

/// Independent multiply-add chains per thread (enough to cover the ALUs' latency).
const CHAINS: usize = 8;
/// Chain steps per loop trip (unrolled in the shader text).
const UNROLL: usize = 4;

/// The kernel: `md = [iterations, bits of the multiplier, bits of the addend]`.
pub fn source() -> String {
    let mut init = String::new();
    let mut step = String::new();
    let mut sum = String::from("0.0");
    for c in 0..CHAINS {
        init += &format!("    var a{c} = f32(i & 1023u) * 1e-4 + {}.0;\n", c + 1);
        sum += &format!(" + a{c}");
    }
    for _ in 0..UNROLL {
        for c in 0..CHAINS {
            step += &format!("        a{c} = fma(a{c}, m, c);\n");
        }
    }
    format!(
        "@group(0) @binding(0) var<storage, read> md: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size({WG})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {{
    let i = (wid.y * nwg.x + wid.x) * {WG}u + lid;
    let m = bitcast<f32>(md[1]);
    let c = bitcast<f32>(md[2]);
{init}    for (var k = 0u; k < md[0]; k = k + 1u) {{
{step}    }}
    out[i] = {sum};
}}
"
    )
}

/// Seconds one run of `groups` workgroups × `iters` loop trips takes,
/// from submission to completion (work queued before is finished first).
fn time_once(groups: u64, iters: u32) -> Result<f64> {
    let gpu = get()?;
    gpu.synchronize()?;
    let out = gpu.alloc("fma_peak", groups * WG as u64 * 4)?;
    // x·m + c with m just under 1 and c small keeps every chain finite.
    let meta = [iters, 0.999_9f32.to_bits(), 1e-3f32.to_bits()];
    let t = Instant::now();
    gpu.dispatch("fma_peak", &source(), &[&out], &meta, groups)?;
    gpu.synchronize()?;
    Ok(t.elapsed().as_secs_f64())
}

/// Float32 GFLOP/s (a multiply-add counts 2) of the best of `repeats` runs
/// of the FMA kernel, sized so that a run lasts at least `min_seconds`.
pub fn fma_gflops(min_seconds: f64, repeats: usize) -> Result<f64> {
    if !(min_seconds > 0.0 && min_seconds <= 10.0) || repeats == 0 {
        return Err(Error::value(
            "fma_peak",
            format!(
                "needs 0 < seconds <= 10 and at least one repeat, got {min_seconds} and {repeats}"
            ),
        ));
    }
    // Enough threads to fill a large GPU; then more loop trips until a run
    // is long enough to time (the first, small run also builds the pipeline).
    let groups: u64 = 1024;
    let mut iters: u32 = 16;
    let mut secs = time_once(groups, iters)?;
    while secs < min_seconds && iters < (1 << 24) {
        let grow = (min_seconds / secs.max(1e-6) * 1.2).clamp(2.0, 64.0);
        iters = ((iters as f64 * grow) as u32).min(1 << 24);
        secs = time_once(groups, iters)?;
    }
    for _ in 1..repeats {
        secs = secs.min(time_once(groups, iters)?);
    }
    let flops = 2.0 * (CHAINS * UNROLL) as f64 * iters as f64 * (groups * WG as u64) as f64;
    Ok(flops / secs / 1e9)
}

#[cfg(test)]
mod tests {
    #[test]
    fn kernel_validates() {
        let src = super::source();
        let module = naga::front::wgsl::parse_str(&src).expect("parses");
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::empty(),
        )
        .validate(&module)
        .expect("validates");
        assert_eq!(src.matches("fma(").count(), super::CHAINS * super::UNROLL);
    }
}
