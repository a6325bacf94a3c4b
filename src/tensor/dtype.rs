//! Element types and the type-promotion lattice.
//!
//! Promotion follows PyTorch (which for tensor–tensor operations agrees with
//! NumPy except that `float16 ∘ bfloat16 → float32`):
//!
//! * categories are ordered `bool < integer < floating`;
//! * inside a category the wider type wins;
//! * a Python scalar is *weak*: it only lifts the category
//!   (`int32_tensor + 2.5 → float32`, `float16_tensor + 2.5 → float16`,
//!   `int32_tensor + 7 → int32`).
//!
//! See `docs/architecture.md` for the full table.

use half::{bf16, f16};
use std::sync::atomic::{AtomicU8, Ordering};

/// The element types a tensor can hold.
#[derive(
    Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[repr(u8)]
pub enum DType {
    Bool = 0,
    I32 = 1,
    I64 = 2,
    F16 = 3,
    BF16 = 4,
    F32 = 5,
    F64 = 6,
    U8 = 7,
    I8 = 8,
    I16 = 9,
}

/// Category of a dtype, used by promotion with weak scalars.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    Bool,
    Int,
    Float,
}

/// The default floating dtype, as an index into [`DType::ALL`] (float32 unless
/// `set_default_float` changed it): what float tensors are made in when no dtype is
/// given, and what Python floats and integer inputs of float functions become.
static DEFAULT_FLOAT: AtomicU8 = AtomicU8::new(8);

impl DType {
    /// The default floating dtype (process-wide, as PyTorch's `get_default_dtype`).
    #[inline]
    pub fn default_float() -> DType {
        DType::ALL[DEFAULT_FLOAT.load(Ordering::Relaxed) as usize]
    }

    /// Make `d` the default floating dtype; returns the previous one. `d` must be a
    /// floating dtype (the caller checks; others are ignored and leave it unchanged).
    pub fn set_default_float(d: DType) -> DType {
        let prev = DType::default_float();
        if d.is_floating_point() {
            let i = DType::ALL.iter().position(|&x| x == d).unwrap_or(8);
            DEFAULT_FLOAT.store(i as u8, Ordering::Relaxed);
        }
        prev
    }

    /// Every dtype, in a stable order.
    pub const ALL: [DType; 10] = [
        DType::Bool,
        DType::U8,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];
    /// The floating dtypes.
    pub const FLOATS: [DType; 4] = [DType::F16, DType::BF16, DType::F32, DType::F64];

    /// Size of one element in bytes.
    pub const fn itemsize(self) -> usize {
        match self {
            DType::Bool | DType::U8 | DType::I8 => 1,
            DType::I16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::F32 => 4,
            DType::I64 | DType::F64 => 8,
        }
    }

    /// The user-facing name (`"float32"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// Parse a name, accepting the usual aliases (`float`, `double`, `half`, `long`, `int`).
    pub fn from_name(s: &str) -> Option<DType> {
        Some(match s {
            "bool" => DType::Bool,
            "uint8" => DType::U8,
            "int8" => DType::I8,
            "int16" | "short" => DType::I16,
            "int32" | "int" => DType::I32,
            "int64" | "long" => DType::I64,
            "float16" | "half" => DType::F16,
            "bfloat16" => DType::BF16,
            "float32" | "float" => DType::F32,
            "float64" | "double" => DType::F64,
            _ => return None,
        })
    }

    pub const fn category(self) -> Category {
        match self {
            DType::Bool => Category::Bool,
            DType::U8 | DType::I8 | DType::I16 | DType::I32 | DType::I64 => Category::Int,
            _ => Category::Float,
        }
    }

    pub const fn is_floating_point(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    pub const fn is_integer(self) -> bool {
        matches!(
            self,
            DType::U8 | DType::I8 | DType::I16 | DType::I32 | DType::I64
        )
    }

    /// Whether the dtype is one of the 8/16-bit integers (`uint8`, `int8`, `int16`).
    pub const fn is_small_int(self) -> bool {
        matches!(self, DType::U8 | DType::I8 | DType::I16)
    }

    /// The values an integer dtype holds, `(min, max)`; `None` for bool and floats.
    pub const fn int_range(self) -> Option<(i64, i64)> {
        match self {
            DType::U8 => Some((0, u8::MAX as i64)),
            DType::I8 => Some((i8::MIN as i64, i8::MAX as i64)),
            DType::I16 => Some((i16::MIN as i64, i16::MAX as i64)),
            DType::I32 => Some((i32::MIN as i64, i32::MAX as i64)),
            DType::I64 => Some((i64::MIN, i64::MAX)),
            _ => None,
        }
    }

    /// The dtype integer sums and products accumulate into: every integer
    /// and bool gives int64 (as PyTorch), floats keep their dtype.
    pub const fn sum_dtype(self) -> DType {
        match self.category() {
            Category::Float => self,
            _ => DType::I64,
        }
    }

    /// Promotion of two tensor dtypes.
    pub fn promote(a: DType, b: DType) -> DType {
        if a == b {
            return a;
        }
        match (a.category(), b.category()) {
            (Category::Bool, _) => b,
            (_, Category::Bool) => a,
            (Category::Int, Category::Int) => promote_ints(a, b),
            (Category::Float, Category::Int) => a,
            (Category::Int, Category::Float) => b,
            (Category::Float, Category::Float) => {
                // f16 with bf16 has no common 16-bit type.
                if matches!(
                    (a, b),
                    (DType::F16, DType::BF16) | (DType::BF16, DType::F16)
                ) {
                    DType::F32
                } else if a.itemsize() >= b.itemsize() {
                    a
                } else {
                    b
                }
            }
        }
    }

    /// Promotion of a tensor dtype with a weak Python scalar of category `c`.
    pub fn promote_scalar(t: DType, c: Category) -> DType {
        if c <= t.category() {
            t
        } else {
            match c {
                Category::Float => DType::default_float(),
                Category::Int => DType::I64,
                Category::Bool => t,
            }
        }
    }

    /// The dtype unary float functions (exp, sin, ...) compute in: ints and bool go to
    /// the default floating dtype (float32 unless changed).
    pub fn to_float(self) -> DType {
        if self.is_floating_point() {
            self
        } else {
            DType::default_float()
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Promotion of two distinct integer dtypes: the narrowest signed type
/// holding both ranges (`uint8 ∘ int8 → int16`), as PyTorch and NumPy.
fn promote_ints(a: DType, b: DType) -> DType {
    let signed_bits = |d: DType| -> u32 {
        match d {
            DType::U8 => 16, // needs a wider signed type to hold 0..=255
            DType::I8 => 8,
            DType::I16 => 16,
            DType::I32 => 32,
            _ => 64,
        }
    };
    if a == DType::U8 && b == DType::U8 {
        return DType::U8;
    }
    match signed_bits(a).max(signed_bits(b)) {
        8 => DType::I8,
        16 => DType::I16,
        32 => DType::I32,
        _ => DType::I64,
    }
}

/// A Rust type that can be stored in a tensor.
///
/// `bool` is stored as `u8` holding 0 or 1.
pub trait Element: Copy + Send + Sync + PartialOrd + Default + 'static {
    const DTYPE: DType;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    fn to_i64(self) -> i64;
    fn from_i64(v: i64) -> Self;
    fn zero() -> Self;
    fn one() -> Self;
}

macro_rules! impl_float_element {
    ($t:ty, $dt:expr) => {
        impl Element for $t {
            const DTYPE: DType = $dt;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn zero() -> Self {
                0 as $t
            }
            #[inline(always)]
            fn one() -> Self {
                1 as $t
            }
        }
    };
}
impl_float_element!(f32, DType::F32);
impl_float_element!(f64, DType::F64);
impl_float_element!(i32, DType::I32);

macro_rules! impl_small_int_element {
    ($t:ty, $dt:expr) => {
        impl Element for $t {
            const DTYPE: DType = $dt;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            /// Truncation toward zero through i32, keeping the low bits
            /// (see [`f64_to_u8`]).
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                f64_to_i32_x86(v) as $t
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn zero() -> Self {
                0
            }
            #[inline(always)]
            fn one() -> Self {
                1
            }
        }
    };
}
impl_small_int_element!(i8, DType::I8);
impl_small_int_element!(i16, DType::I16);

/// The element of a `uint8` tensor. A distinct type from the `u8` that
/// stores `bool` (0 or 1), so that generic code converts it as an integer.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
#[repr(transparent)]
pub struct U8(pub u8);

impl Element for U8 {
    const DTYPE: DType = DType::U8;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self.0 as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        U8(f64_to_u8(v))
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self.0 as i64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        U8(v as u8)
    }
    #[inline(always)]
    fn zero() -> Self {
        U8(0)
    }
    #[inline(always)]
    fn one() -> Self {
        U8(1)
    }
}

/// float → uint8 as PyTorch's CPU casts on x86: truncate toward zero to a
/// 32-bit integer and keep the low byte, so `-1.5 → 255` and `300.7 → 44`.
/// Values outside the i32 range, ±inf and NaN give the x86 "integer
/// indefinite" `i32::MIN`, whose low byte is 0.
#[inline(always)]
pub fn f64_to_u8(v: f64) -> u8 {
    f64_to_i32_x86(v) as u8
}

/// Truncation toward zero to i32 with x86's `cvttsd2si` result for values it
/// cannot represent (NaN, ±inf, out of range → `i32::MIN`).
#[inline(always)]
pub fn f64_to_i32_x86(v: f64) -> i32 {
    if v > -2147483649.0 && v < 2147483648.0 {
        v as i32
    } else {
        i32::MIN
    }
}
impl_float_element!(i64, DType::I64);

impl Element for u8 {
    const DTYPE: DType = DType::Bool;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        (self != 0) as u8 as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        (v != 0.0) as u8
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        (self != 0) as i64
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        (v != 0) as u8
    }
    #[inline(always)]
    fn zero() -> Self {
        0
    }
    #[inline(always)]
    fn one() -> Self {
        1
    }
}

macro_rules! impl_half_element {
    ($t:ty, $dt:expr) => {
        impl Element for $t {
            const DTYPE: DType = $dt;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self.to_f64()
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                <$t>::from_f64(v)
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self.to_f32() as i64
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                <$t>::from_f64(v as f64)
            }
            #[inline(always)]
            fn zero() -> Self {
                <$t>::ZERO
            }
            #[inline(always)]
            fn one() -> Self {
                <$t>::ONE
            }
        }
    };
}
impl_half_element!(f16, DType::F16);
impl_half_element!(bf16, DType::BF16);

/// Run `$body` with `$T` bound to the Rust element type of `$dt`.
#[macro_export]
macro_rules! with_dtype {
    ($dt:expr, $T:ident => $body:expr) => {
        match $dt {
            $crate::tensor::DType::Bool => {
                type $T = u8;
                $body
            }
            $crate::tensor::DType::U8 => {
                type $T = $crate::tensor::dtype::U8;
                $body
            }
            $crate::tensor::DType::I8 => {
                type $T = i8;
                $body
            }
            $crate::tensor::DType::I16 => {
                type $T = i16;
                $body
            }
            $crate::tensor::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::tensor::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::tensor::DType::F16 => {
                type $T = half::f16;
                $body
            }
            $crate::tensor::DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            $crate::tensor::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::tensor::DType::F64 => {
                type $T = f64;
                $body
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_table() {
        use DType::*;
        assert_eq!(DType::promote(Bool, I32), I32);
        assert_eq!(DType::promote(I32, I64), I64);
        assert_eq!(DType::promote(I64, F16), F16);
        assert_eq!(DType::promote(F16, BF16), F32);
        assert_eq!(DType::promote(F32, F64), F64);
        assert_eq!(DType::promote(BF16, F32), F32);
        for a in DType::ALL {
            for b in DType::ALL {
                assert_eq!(DType::promote(a, b), DType::promote(b, a));
            }
        }
        assert_eq!(DType::promote_scalar(I32, Category::Float), F32);
        assert_eq!(DType::promote_scalar(F16, Category::Float), F16);
        assert_eq!(DType::promote_scalar(I32, Category::Int), I32);
        assert_eq!(DType::promote_scalar(Bool, Category::Int), I64);
        assert_eq!(DType::promote(U8, I8), I16);
        assert_eq!(DType::promote(U8, I16), I16);
        assert_eq!(DType::promote(U8, U8), U8);
        assert_eq!(DType::promote(I8, I16), I16);
        assert_eq!(DType::promote(U8, I32), I32);
        assert_eq!(DType::promote(I16, I64), I64);
        assert_eq!(DType::promote(U8, F16), F16);
        assert_eq!(DType::promote(Bool, U8), U8);
        assert_eq!(DType::promote_scalar(U8, Category::Int), U8);
        assert_eq!(<super::U8 as Element>::from_f64(-1.0), super::U8(255));
        assert_eq!(<i8 as Element>::from_f64(-1.9), -1);
    }
}
