//! The op layer: one definition per op (shape/dtype rule, decomposition or
//! backend primitive), shared by every front end. See [`registry`].

pub mod creation;
pub mod elementwise;
pub mod index;
pub mod join;
pub mod registry;
pub mod shape;
