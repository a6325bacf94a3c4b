//! Optimizer update kernels as the backends provide them: the hyperparameters
//! of each fused update ([`SgdHyper`], [`AdamHyper`], [`RmspropHyper`]), the
//! [`OptimKernels`] interface every device implements, and [`kernels`], which
//! picks a device's implementation. The op layer (`ops::optim`) validates
//! every list before calling a kernel.

use crate::error::{Error, Result};
use crate::tensor::{Device, Tensor};

/// SGD hyperparameters. Per element, with `g` the gradient and `b` the momentum buffer:
///
/// ```text
/// g = maximize ? -g : g
/// g = g + weight_decay * p                      (when weight_decay != 0)
/// b = first step ? g : momentum * b + (1 - dampening) * g   (when momentum != 0)
/// g = nesterov ? g + momentum * b : b           (when momentum != 0)
/// p = p - lr * g
/// ```
#[derive(Copy, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SgdHyper {
    pub lr: f64,
    pub momentum: f64,
    pub dampening: f64,
    pub nesterov: bool,
    pub weight_decay: f64,
    pub maximize: bool,
}

/// Adam / AdamW hyperparameters. Per element, at step `t` (1-based):
///
/// ```text
/// g = maximize ? -g : g
/// p = p * (1 - lr * weight_decay)                (AdamW: decoupled, weight_decay != 0)
/// g = g + weight_decay * p                       (Adam: weight_decay != 0)
/// m = lerp(m, g, 1 - beta1)
/// v = beta2 * v + (1 - beta2) * g * g
/// vmax = max(vmax, v); v' = amsgrad ? vmax : v
/// p = p - lr / (1 - beta1^t) * m / (sqrt(v') / sqrt(1 - beta2^t) + eps)
/// ```
#[derive(Copy, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdamHyper {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub amsgrad: bool,
    pub maximize: bool,
    /// AdamW: decay the parameter directly instead of adding to the gradient.
    pub decoupled: bool,
}

/// RMSprop hyperparameters. Per element, with `s` the square average, `a`
/// the gradient average (centered) and `b` the momentum buffer:
///
/// ```text
/// g = maximize ? -g : g
/// g = g + weight_decay * p                      (when weight_decay != 0)
/// s = alpha * s + (1 - alpha) * g * g
/// a = lerp(a, g, 1 - alpha); d = sqrt(s - a * a) + eps    (centered)
/// d = sqrt(s) + eps                                       (otherwise)
/// b = momentum * b + g / d; p = p - lr * b      (when momentum > 0)
/// p = p - lr * g / d                            (otherwise)
/// ```
#[derive(Copy, Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RmspropHyper {
    pub lr: f64,
    pub alpha: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub momentum: f64,
    pub centered: bool,
    pub maximize: bool,
}

/// What the update kernels of one device provide. Every tensor passed here
/// has been validated by the op layer: same shape and dtype per parameter,
/// float dtypes, the device's own memory, no overlap between written
/// tensors. Each method writes parameters and state only.
pub trait OptimKernels: Sync {
    /// The device's name for error messages.
    fn name(&self) -> String;

    /// SGD over `params[i]`, `grads[i]` and (when `momentum != 0`) `bufs[i]`;
    /// `first[i]` marks a buffer that starts from the gradient.
    fn sgd(
        &self,
        _params: &[Tensor],
        _grads: &[Tensor],
        _bufs: &[Tensor],
        _first: &[bool],
        _h: &SgdHyper,
    ) -> Result<()> {
        Err(unsupported(self.name(), "sgd_step"))
    }

    /// Adam/AdamW; `steps[i]` is the step number (>= 1) of parameter `i`
    /// after this update; `max_sqs` is empty unless `h.amsgrad`.
    #[allow(clippy::too_many_arguments)]
    fn adam(
        &self,
        _params: &[Tensor],
        _grads: &[Tensor],
        _exp_avgs: &[Tensor],
        _exp_avg_sqs: &[Tensor],
        _max_sqs: &[Tensor],
        _steps: &[u64],
        _h: &AdamHyper,
    ) -> Result<()> {
        Err(unsupported(self.name(), "adam_step"))
    }

    /// RMSprop; `bufs` is empty unless `h.momentum > 0`, `grad_avgs` empty unless `h.centered`.
    fn rmsprop(
        &self,
        _params: &[Tensor],
        _grads: &[Tensor],
        _square_avgs: &[Tensor],
        _bufs: &[Tensor],
        _grad_avgs: &[Tensor],
        _h: &RmspropHyper,
    ) -> Result<()> {
        Err(unsupported(self.name(), "rmsprop_step"))
    }
}

fn unsupported(device: String, op: &'static str) -> Error {
    Error::runtime(op, format!("not supported on the {device} device"))
}

/// Stand-in for builds without the GPU device.
#[cfg(not(feature = "gpu"))]
struct NoKernels;

#[cfg(not(feature = "gpu"))]
impl OptimKernels for NoKernels {
    fn name(&self) -> String {
        "gpu".into()
    }
}

/// The `Meta` device's updates: nothing to write (graph capture only needs the checks).
struct MetaKernels;

impl OptimKernels for MetaKernels {
    fn name(&self) -> String {
        "meta".into()
    }
    fn sgd(
        &self,
        _: &[Tensor],
        _: &[Tensor],
        _: &[Tensor],
        _: &[bool],
        _: &SgdHyper,
    ) -> Result<()> {
        Ok(())
    }
    fn adam(
        &self,
        _: &[Tensor],
        _: &[Tensor],
        _: &[Tensor],
        _: &[Tensor],
        _: &[Tensor],
        _: &[u64],
        _: &AdamHyper,
    ) -> Result<()> {
        Ok(())
    }
    fn rmsprop(
        &self,
        _: &[Tensor],
        _: &[Tensor],
        _: &[Tensor],
        _: &[Tensor],
        _: &[Tensor],
        _: &RmspropHyper,
    ) -> Result<()> {
        Ok(())
    }
}

static CPU_KERNELS: crate::backend::cpu::optim::CpuOptim = crate::backend::cpu::optim::CpuOptim;
#[cfg(not(feature = "gpu"))]
static NO_KERNELS: NoKernels = NoKernels;
#[cfg(feature = "gpu")]
static GPU_KERNELS: crate::backend::wgpu::WgpuOptim = crate::backend::wgpu::WgpuOptim;
static META_KERNELS: MetaKernels = MetaKernels;

/// The optimizer kernels of `device`.
pub fn kernels(device: Device) -> &'static dyn OptimKernels {
    match device {
        Device::Cpu => &CPU_KERNELS,
        #[cfg(feature = "gpu")]
        Device::Gpu(_) => &GPU_KERNELS,
        #[cfg(not(feature = "gpu"))]
        Device::Gpu(_) => &NO_KERNELS,
        Device::Meta => &META_KERNELS,
    }
}
