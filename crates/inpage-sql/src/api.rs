//! The exported `sqlite3_*` C API: generated forwarders (build.rs `parse_api`) from each
//! public name to its C definition, renamed `inpage_c_*` at compile time.
//!
//! Why: a cdylib exports only the crate's own `#[no_mangle]` items, so the C objects'
//! symbols would be hidden. Invariant: each forwarder has exactly the C signature of the
//! function it calls (types mapped by size and class; an unknown type fails the build),
//! or, for the variadic and `va_list` functions, is a naked function made of a single
//! tail jump, so the caller's registers and stack reach the C definition unchanged.
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use std::ffi::{c_int, c_void};

include!(concat!(env!("OUT_DIR"), "/api.rs"));
