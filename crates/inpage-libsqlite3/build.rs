//! Copies the C API forwarders inpage-sql's build script generated (passed through its
//! `links` metadata) into this crate's OUT_DIR, where src/lib.rs includes them.
use std::path::PathBuf;

fn main() {
    let src = std::env::var("DEP_SQLITE3_INPAGE_API_RS")
        .expect("inpage-sql's build script must export api_rs (links = \"sqlite3_inpage\")");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("api.rs");
    std::fs::copy(&src, &out).unwrap_or_else(|e| panic!("copy {src} to {out:?}: {e}"));
    println!("cargo:rerun-if-changed={src}");
}
