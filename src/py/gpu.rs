//! `ferrograd.gpu`: availability, adapter information and statistics of the WebGPU device.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::run;

/// True when a WebGPU adapter exists (the device is created on first use).
#[pyfunction]
fn _gpu_is_available() -> bool {
    #[cfg(feature = "gpu")]
    return crate::backend::wgpu::context::is_available();
    #[cfg(not(feature = "gpu"))]
    false
}

/// Why the device is unavailable (`None` when it is available).
#[pyfunction]
fn _gpu_unavailable_reason() -> Option<String> {
    #[cfg(feature = "gpu")]
    return crate::backend::wgpu::context::get()
        .err()
        .map(|e| e.to_string());
    #[cfg(not(feature = "gpu"))]
    Some("ferrograd was built without the `gpu` feature".into())
}

/// Adapter name, backend, device type, driver, limits and features.
#[pyfunction]
fn _gpu_info(py: Python<'_>) -> PyResult<Py<PyAny>> {
    #[cfg(feature = "gpu")]
    {
        let g = run(crate::backend::wgpu::context::get)?;
        let d = PyDict::new(py);
        d.set_item("name", &g.info.name)?;
        d.set_item("backend", g.info.backend.to_str())?;
        d.set_item("device_type", format!("{:?}", g.info.device_type))?;
        d.set_item("driver", &g.info.driver)?;
        d.set_item("driver_info", &g.info.driver_info)?;
        d.set_item("loop_limit", g.loop_limit)?;
        d.set_item("vendor", g.info.vendor)?;
        let l = &g.limits;
        let lim = PyDict::new(py);
        lim.set_item("max_buffer_size", l.max_buffer_size)?;
        lim.set_item(
            "max_storage_buffer_binding_size",
            l.max_storage_buffer_binding_size,
        )?;
        lim.set_item(
            "max_storage_buffers_per_shader_stage",
            l.max_storage_buffers_per_shader_stage,
        )?;
        lim.set_item(
            "max_compute_workgroups_per_dimension",
            l.max_compute_workgroups_per_dimension,
        )?;
        lim.set_item(
            "max_compute_invocations_per_workgroup",
            l.max_compute_invocations_per_workgroup,
        )?;
        lim.set_item(
            "max_compute_workgroup_storage_size",
            l.max_compute_workgroup_storage_size,
        )?;
        lim.set_item(
            "min_storage_buffer_offset_alignment",
            l.min_storage_buffer_offset_alignment,
        )?;
        d.set_item("limits", lim)?;
        let feats: Vec<String> = g
            .features
            .iter_names()
            .map(|(n, _)| n.to_lowercase())
            .collect();
        d.set_item("features", feats)?;
        let dev: Vec<String> = g
            .device_features
            .iter_names()
            .map(|(n, _)| n.to_lowercase())
            .collect();
        d.set_item("device_features", dev)?;
        d.set_item(
            "float16_storage",
            if g.half_native() { "f16" } else { "f32" },
        )?;
        Ok(d.into_any().unbind())
    }
    #[cfg(not(feature = "gpu"))]
    {
        let _ = py;
        run(|| {
            crate::backend::transfer(
                &crate::tensor::Tensor::zeros(
                    &[],
                    crate::tensor::DType::F32,
                    crate::tensor::Device::Cpu,
                )?,
                crate::tensor::Device::Gpu(0),
            )
        })?;
        unreachable!()
    }
}

/// Counters of the device: uploads, downloads, submits, waits, dispatches,
/// compiled pipelines and the buffer pool (in use / cached).
#[pyfunction]
fn _gpu_stats(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let d = PyDict::new(py);
    #[cfg(feature = "gpu")]
    {
        let s = run(crate::backend::wgpu::context::get)?.stats();
        d.set_item("uploads", s.uploads)?;
        d.set_item("downloads", s.downloads)?;
        d.set_item("submits", s.submits)?;
        d.set_item("waits", s.waits)?;
        d.set_item("dispatches", s.dispatches)?;
        d.set_item("pending_dispatches", s.pending_dispatches)?;
        d.set_item("pipelines", s.pipelines)?;
        d.set_item("buffers_created", s.buffers_created)?;
        d.set_item("buffers_in_use", s.buffers_in_use)?;
        d.set_item("bytes_in_use", s.bytes_in_use)?;
        d.set_item("buffers_cached", s.buffers_cached)?;
        d.set_item("bytes_cached", s.bytes_cached)?;
    }
    Ok(d.into_any().unbind())
}

/// Submit all queued GPU work and wait for it to finish.
#[pyfunction]
fn _gpu_synchronize(py: Python<'_>) -> PyResult<()> {
    #[cfg(feature = "gpu")]
    super::detach(py, || {
        run(|| crate::backend::wgpu::context::get()?.synchronize())
    })?;
    #[cfg(not(feature = "gpu"))]
    let _ = py;
    Ok(())
}

/// Release the GPU buffers the pool keeps for reuse.
#[pyfunction]
fn _gpu_empty_cache() -> PyResult<()> {
    #[cfg(feature = "gpu")]
    if let Ok(g) = crate::backend::wgpu::context::get() {
        g.empty_cache();
    }
    Ok(())
}

/// The adapter's measured float32 multiply-add rate in GFLOP/s (see
/// `backend::wgpu::peak`): best of `repeats` runs of at least `seconds`.
#[pyfunction]
#[pyo3(signature = (seconds=0.05, repeats=3))]
fn _gpu_fma_peak(py: Python<'_>, seconds: f64, repeats: usize) -> PyResult<f64> {
    #[cfg(feature = "gpu")]
    return super::detach(py, || {
        run(|| crate::backend::wgpu::peak::fma_gflops(seconds, repeats))
    });
    #[cfg(not(feature = "gpu"))]
    {
        let _ = (py, seconds, repeats);
        Err(pyo3::exceptions::PyRuntimeError::new_err(
            "fma_peak: ferrograd was built without the `gpu` feature",
        ))
    }
}

/// The ops queued on the GPU since the last submit, as `(op, "file:line" or
/// None)`: what a device error at the next sync would name.
#[pyfunction]
fn _gpu_pending_ops() -> PyResult<Vec<(String, Option<String>)>> {
    #[cfg(feature = "gpu")]
    {
        let g = run(crate::backend::wgpu::context::get)?;
        Ok(g.pending_ops()
            .into_iter()
            .map(|(o, at)| (o.to_string(), at.map(|a| a.to_string())))
            .collect())
    }
    #[cfg(not(feature = "gpu"))]
    Ok(Vec::new())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_gpu_pending_ops, m)?)?;
    m.add_function(wrap_pyfunction!(_gpu_fma_peak, m)?)?;
    m.add_function(wrap_pyfunction!(_gpu_is_available, m)?)?;
    m.add_function(wrap_pyfunction!(_gpu_unavailable_reason, m)?)?;
    m.add_function(wrap_pyfunction!(_gpu_info, m)?)?;
    m.add_function(wrap_pyfunction!(_gpu_stats, m)?)?;
    m.add_function(wrap_pyfunction!(_gpu_synchronize, m)?)?;
    m.add_function(wrap_pyfunction!(_gpu_empty_cache, m)?)?;
    Ok(())
}
