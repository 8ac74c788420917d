//! inpage — an embedded transactional database engine for flash storage.

#![forbid(unsafe_op_in_unsafe_fn)]
#![allow(dead_code)] // TEMP during bring-up

pub mod error;
pub mod journal;
pub mod page;
pub mod tree;
pub mod vfs;

pub use error::{Error, Pgno, Result};
