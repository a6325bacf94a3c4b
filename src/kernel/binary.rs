//! The binary elementwise op kinds and their dtype rules.

use crate::error::{Error, Result};
use crate::tensor::DType;

/// Binary elementwise primitives.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Remainder,
    Pow,
    Maximum,
    Minimum,
    Atan2,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    LogicalAnd,
    LogicalOr,
    LogicalXor,
    BitAnd,
    BitOr,
    BitXor,
}

impl BinaryOp {
    pub fn name(self) -> &'static str {
        use BinaryOp::*;
        match self {
            Add => "add",
            Sub => "sub",
            Mul => "mul",
            Div => "div",
            FloorDiv => "floor_divide",
            Remainder => "remainder",
            Pow => "pow",
            Maximum => "maximum",
            Minimum => "minimum",
            Atan2 => "atan2",
            Eq => "eq",
            Ne => "ne",
            Lt => "lt",
            Le => "le",
            Gt => "gt",
            Ge => "ge",
            LogicalAnd => "logical_and",
            LogicalOr => "logical_or",
            LogicalXor => "logical_xor",
            BitAnd => "bitwise_and",
            BitOr => "bitwise_or",
            BitXor => "bitwise_xor",
        }
    }

    /// True for ops whose result is boolean.
    pub fn is_predicate(self) -> bool {
        use BinaryOp::*;
        matches!(
            self,
            Eq | Ne | Lt | Le | Gt | Ge | LogicalAnd | LogicalOr | LogicalXor
        )
    }

    /// The dtype the kernel computes in, from the promoted input dtype.
    pub fn compute_dtype(self, promoted: DType) -> Result<DType> {
        use BinaryOp::*;
        match self {
            Div | Atan2 if !promoted.is_floating_point() => Ok(DType::default_float()),
            BitAnd | BitOr | BitXor if promoted.is_floating_point() => Err(Error::dtype(
                self.name(),
                format!("not supported for floating dtype {promoted}; bitwise ops take integer or bool tensors"),
            )),
            Sub if promoted == DType::Bool => Err(Error::dtype(
                "sub",
                "subtraction of two bool tensors is not supported; use logical_xor or ~ instead",
            )),
            Remainder | FloorDiv | Pow if promoted == DType::Bool => Err(Error::dtype(
                self.name(),
                "not implemented for two bool operands; convert one to an integer or float dtype first",
            )),
            // bool + bool is logical or, bool * bool logical and (as PyTorch and NumPy).
            Add | Mul | Maximum | Minimum if promoted == DType::Bool => Ok(DType::Bool),
            _ => Ok(promoted),
        }
    }

    pub fn out_dtype(self, compute: DType) -> DType {
        if self.is_predicate() {
            DType::Bool
        } else {
            compute
        }
    }
}
