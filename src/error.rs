//! The core's error type. Every variant names the op; the Python layer maps
//! variants to `ValueError`, `TypeError`, `IndexError`, `MemoryError` and
//! `RuntimeError`.

use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// Incompatible shapes (→ ValueError).
    Shape { op: &'static str, msg: String },
    /// Unsupported or mismatched dtypes (→ TypeError).
    DType { op: &'static str, msg: String },
    /// Index out of range (→ IndexError).
    Index { op: &'static str, msg: String },
    /// Bad argument value (→ ValueError).
    Value { op: &'static str, msg: String },
    /// Allocation failed or the size overflows (→ MemoryError).
    Memory { op: &'static str, bytes: usize },
    /// Anything else (→ RuntimeError).
    Runtime { op: &'static str, msg: String },
    /// A value needed in Python while a graph is being captured (→
    /// `ferrograd.TraceError`, a RuntimeError).
    Symbolic { op: &'static str, msg: String },
    /// The work was stopped by an interrupt (Ctrl-C) before it finished (→
    /// KeyboardInterrupt); its outputs are discarded.
    Interrupted { op: &'static str },
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn shape(op: &'static str, msg: impl Into<String>) -> Error {
        Error::Shape {
            op,
            msg: msg.into(),
        }
    }
    pub fn dtype(op: &'static str, msg: impl Into<String>) -> Error {
        Error::DType {
            op,
            msg: msg.into(),
        }
    }
    pub fn index(op: &'static str, msg: impl Into<String>) -> Error {
        Error::Index {
            op,
            msg: msg.into(),
        }
    }
    pub fn value(op: &'static str, msg: impl Into<String>) -> Error {
        Error::Value {
            op,
            msg: msg.into(),
        }
    }
    pub fn runtime(op: &'static str, msg: impl Into<String>) -> Error {
        Error::Runtime {
            op,
            msg: msg.into(),
        }
    }
    pub fn symbolic(op: &'static str, msg: impl Into<String>) -> Error {
        Error::Symbolic {
            op,
            msg: msg.into(),
        }
    }

    /// A memory error renamed to `op` (the op whose result could not be
    /// allocated); other errors unchanged.
    pub fn for_op(self, op: &'static str) -> Error {
        match self {
            Error::Memory { bytes, .. } => Error::Memory { op, bytes },
            e => e,
        }
    }

    /// The same error with `note` appended to its message (e.g. where a graph
    /// node was captured).
    pub fn with_note(self, note: &str) -> Error {
        match self {
            Error::Shape { op, msg } => Error::Shape {
                op,
                msg: format!("{msg}{note}"),
            },
            Error::DType { op, msg } => Error::DType {
                op,
                msg: format!("{msg}{note}"),
            },
            Error::Index { op, msg } => Error::Index {
                op,
                msg: format!("{msg}{note}"),
            },
            Error::Value { op, msg } => Error::Value {
                op,
                msg: format!("{msg}{note}"),
            },
            Error::Runtime { op, msg } => Error::Runtime {
                op,
                msg: format!("{msg}{note}"),
            },
            Error::Symbolic { op, msg } => Error::Symbolic {
                op,
                msg: format!("{msg}{note}"),
            },
            // Keeps its class (MemoryError); the size says what failed.
            Error::Memory { .. } | Error::Interrupted { .. } => self,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Shape { op, msg }
            | Error::DType { op, msg }
            | Error::Index { op, msg }
            | Error::Value { op, msg }
            | Error::Runtime { op, msg }
            | Error::Symbolic { op, msg } => write!(f, "{op}: {msg}"),
            Error::Memory { op, bytes } => {
                if *bytes == usize::MAX {
                    write!(f, "{op}: the requested size overflows")
                } else {
                    write!(f, "{op}: cannot allocate {bytes} bytes")
                }
            }
            Error::Interrupted { op } => write!(f, "{op}: interrupted"),
        }
    }
}

impl std::error::Error for Error {}
