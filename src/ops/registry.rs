//! The op registry: one entry per op, shared by every front end.
//!
//! Each op family (`elementwise`, `reduce`, `linalg`, ...) declares a
//! `pub const OPS: &[OpInfo]` next to its implementation; [`all`] joins them.
//! An entry says what the op is (primitive with kernels, or a decomposition
//! into primitives, or a fused kernel with a decomposition as reference),
//! which input it views or mutates, whether its output shape depends on data,
//! and which dtypes it supports on which device. The Python op-table test
//! walks this list and fails when an op has no table entry.

use crate::tensor::{DType, Device};

/// How an op is implemented.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// Carries kernels on every backend.
    Primitive,
    /// Defined in Rust as a composition of other registry ops.
    Composite,
    /// A fused kernel for a composition (the composition is its reference).
    Fused,
    /// A view: metadata only, shares the input's storage.
    View,
    /// Creation / random: no tensor inputs.
    Factory,
}

impl OpKind {
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Primitive => "primitive",
            OpKind::Composite => "composite",
            OpKind::Fused => "fused",
            OpKind::View => "view",
            OpKind::Factory => "factory",
        }
    }
}

/// A set of dtypes as a bit mask over `DType as u8`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct DTypes(pub u16);

impl DTypes {
    pub const ALL: DTypes = DTypes(0x3ff);
    pub const FLOAT: DTypes = DTypes(
        (1 << DType::F16 as u8)
            | (1 << DType::BF16 as u8)
            | (1 << DType::F32 as u8)
            | (1 << DType::F64 as u8),
    );
    pub const INT: DTypes = DTypes(
        (1 << DType::U8 as u8)
            | (1 << DType::I8 as u8)
            | (1 << DType::I16 as u8)
            | (1 << DType::I32 as u8)
            | (1 << DType::I64 as u8),
    );
    /// int32 and int64 alone (what the gpu device stores).
    pub const INT_WIDE: DTypes = DTypes((1 << DType::I32 as u8) | (1 << DType::I64 as u8));
    pub const NUMERIC: DTypes = DTypes(DTypes::FLOAT.0 | DTypes::INT.0);
    pub const INT_BOOL: DTypes = DTypes(DTypes::INT.0 | 1);
    pub const BOOL: DTypes = DTypes(1);
    pub const NONE: DTypes = DTypes(0);
    /// The dtypes the gpu device stores (float16 and bfloat16 as float32
    /// rounded to their type, int64 in 32 bits, bool as u32).
    pub const GPU: DTypes = DTypes(
        (1 << DType::F32 as u8)
            | (1 << DType::F16 as u8)
            | (1 << DType::BF16 as u8)
            | DTypes::INT_WIDE.0
            | 1,
    );
    /// float32 alone.
    pub const F32: DTypes = DTypes(1 << DType::F32 as u8);

    pub const fn contains(self, d: DType) -> bool {
        self.0 & (1 << d as u8) != 0
    }
    pub fn list(self) -> Vec<DType> {
        DType::ALL
            .into_iter()
            .filter(|&d| self.contains(d))
            .collect()
    }
}

/// Everything the engine knows about one op.
#[derive(Copy, Clone, Debug)]
pub struct OpInfo {
    /// The public name (`fg.<name>` / `Tensor.<name>` where such exist).
    pub name: &'static str,
    /// The family file it is defined in.
    pub family: &'static str,
    pub kind: OpKind,
    /// Input dtypes accepted (after promotion) on the CPU.
    pub dtypes: DTypes,
    /// Index of the input whose storage the output views.
    pub views: Option<u8>,
    /// Index of the input written in place.
    pub mutates: Option<u8>,
    /// Output shape depends on input values (boolean masks, nonzero).
    pub data_dependent: bool,
    /// Has a vector-Jacobian product (from the autograd issue on).
    pub differentiable: bool,
    /// Dtypes with kernels on the gpu device, where that is not every dtype
    /// of `dtypes` the device stores ([`DTypes::GPU`]).
    pub gpu: Option<DTypes>,
}

impl OpInfo {
    /// A primitive elementwise-style op over `dtypes`.
    pub const fn prim(name: &'static str, family: &'static str, dtypes: DTypes) -> OpInfo {
        OpInfo {
            name,
            family,
            kind: OpKind::Primitive,
            dtypes,
            views: None,
            mutates: None,
            data_dependent: false,
            differentiable: false,
            gpu: None,
        }
    }
    pub const fn kind(mut self, k: OpKind) -> OpInfo {
        self.kind = k;
        self
    }
    pub const fn views(mut self, i: u8) -> OpInfo {
        self.views = Some(i);
        self.kind = OpKind::View;
        self
    }
    pub const fn mutates(mut self, i: u8) -> OpInfo {
        self.mutates = Some(i);
        self
    }
    /// The op records a vector-Jacobian product for float inputs.
    pub const fn grad(mut self) -> OpInfo {
        self.differentiable = true;
        self
    }
    pub const fn data_dependent(mut self) -> OpInfo {
        self.data_dependent = true;
        self
    }
    /// Only `d` (of the dtypes the device stores) has gpu kernels.
    pub const fn gpu(mut self, d: DTypes) -> OpInfo {
        self.gpu = Some(d);
        self
    }
    /// No gpu kernel: the op raises "not supported on the gpu device" there.
    pub const fn no_gpu(self) -> OpInfo {
        self.gpu(DTypes::NONE)
    }

    /// The dtypes this op runs in on the gpu device (none in a build without it).
    pub fn gpu_dtypes(&self) -> DTypes {
        if !cfg!(feature = "gpu") {
            return DTypes::NONE;
        }
        let want = self.gpu.unwrap_or(self.dtypes);
        DTypes(want.0 & self.dtypes.0 & DTypes::GPU.0)
    }

    /// Whether `(self, dtype, device)` can run.
    pub fn supports(&self, dtype: DType, device: Device) -> bool {
        match device {
            Device::Cpu => self.dtypes.contains(dtype),
            Device::Gpu(_) => self.gpu_dtypes().contains(dtype),
            // Capture runs an op's rules wherever the op can run.
            Device::Meta => self.dtypes.contains(dtype),
        }
    }
}

/// Every registered op.
pub fn all() -> Vec<&'static OpInfo> {
    let families: &[&'static [OpInfo]] = &[
        super::elementwise::UNARY_OPS,
        super::elementwise::OPS,
        super::shape::OPS,
        super::index::OPS,
        super::scatter_reduce::OPS,
        super::join::OPS,
        super::creation::OPS,
        super::linalg::OPS,
        super::conv::OPS,
        super::reduce::OPS,
        super::sort::OPS,
        super::norm::OPS,
        super::loss::OPS,
        super::random::OPS,
        super::optim::OPS,
    ];
    families.iter().flat_map(|f| f.iter()).collect()
}

/// Look an op up by name.
pub fn find(name: &str) -> Option<&'static OpInfo> {
    all().into_iter().find(|o| o.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = all().iter().map(|o| o.name).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(n, names.len(), "duplicate op names in the registry");
    }
}

/// The `&'static str` op names some calls carry, as strings; reading maps a
/// name back to the registry's (an unknown name reads as `"op"`: the field
/// only labels messages and listings).
pub mod static_name {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &&'static str, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
        let s = String::deserialize(d)?;
        Ok(intern(&s))
    }

    /// The registry's (or an internal op's) name equal to `s`, else `"op"`.
    pub fn intern(s: &str) -> &'static str {
        use std::sync::OnceLock;
        static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
        let names = NAMES.get_or_init(|| {
            let mut v: Vec<&'static str> = super::all().iter().map(|o| o.name).collect();
            // Names used by indexing writes that are not registry entries.
            v.extend([
                "getitem",
                "setitem",
                "index_put",
                "index_put_",
                "index_select",
            ]);
            v
        });
        names.iter().copied().find(|n| *n == s).unwrap_or("op")
    }
}

/// A list of [`static_name`]s.
pub mod static_names {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &[&'static str], s: S) -> Result<S::Ok, S::Error> {
        v.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<&'static str>, D::Error> {
        let v = Vec::<String>::deserialize(d)?;
        Ok(v.iter().map(|s| super::static_name::intern(s)).collect())
    }
}
