//! The op layer: one definition per op (shape/dtype rule, decomposition or
//! backend primitive), shared by every front end. See [`registry`].

pub mod autocast;
pub mod call;
pub mod capture;
pub mod conv;
pub mod creation;
pub mod defer;
pub mod elementwise;
pub mod elementwise_grad;
pub mod general;
pub mod index;
pub mod join;
pub mod linalg;
pub mod loss;
pub mod norm;
pub mod optim;
pub use crate::kernel::philox;
pub mod random;
pub mod reduce;
pub mod registry;
pub mod scatter_reduce;
pub mod shape;
pub mod sort;
