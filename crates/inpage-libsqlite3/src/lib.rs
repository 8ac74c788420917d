//! The exported `sqlite3_*` C API of inpage's SQL front end, as `libsqlite3.so`: generated
//! forwarders (inpage-sql's build.rs `parse_api`) from each public name to its C
//! definition, which inpage-sql compiles renamed `inpage_c_*`.
//!
//! Why a crate of its own: a cdylib exports only `#[no_mangle]` items, so the C objects'
//! symbols need forwarders; and those forwarders must not be in inpage-sql's rlib, or a
//! binary linking both it and stock SQLite (the CLI, the bench) would define every
//! `sqlite3_*` symbol twice. Invariant: each forwarder has exactly the C signature of the
//! function it calls (types mapped by size and class; an unknown type fails the build),
//! or, for the variadic and `va_list` functions, is a naked function made of a single
//! tail jump, so the caller's registers and stack reach the C definition unchanged.
#![allow(clippy::missing_safety_doc, clippy::too_many_arguments)]

use std::ffi::{c_int, c_void};

// Link inpage-sql (the renamed C objects and the `ipg_*` glue they call).
extern crate inpage_sql;

include!(concat!(env!("OUT_DIR"), "/api.rs"));
