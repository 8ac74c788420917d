#!/usr/bin/env bash
# Installs what the project needs on a fresh machine (idempotent). Sourced by the
# README's two commands; safe to run on its own.
set -euo pipefail

# rustup installs into ~/.cargo/bin, which a non-login shell may not have on PATH.
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
need_apt=()
command -v cargo >/dev/null 2>&1 || { echo "setup: cargo not found; install Rust (rustup) first" >&2; exit 1; }
# The lab (inpage bench --lab ext4) needs mkfs.ext4/mke2fs and losetup.
command -v mke2fs >/dev/null 2>&1 || need_apt+=(e2fsprogs)
command -v losetup >/dev/null 2>&1 || need_apt+=(mount)
# The emulated slow device (--lab ext4-emulated) is a FUSE file system: libfuse 3's
# tools (fusermount3, /etc/fuse.conf). The bench speaks the FUSE protocol itself (the
# `fuser` crate without its libfuse feature), so no -dev package is needed to build it.
command -v fusermount3 >/dev/null 2>&1 || need_apt+=(fuse3)
# crates/inpage-sql compiles SQLite's amalgamation (a C compiler) and lists the symbols of
# the archive it built (nm, from binutils).
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
command -v nm >/dev/null 2>&1 || need_apt+=(binutils)
# Its Python test runs the drop-in libsqlite3 under Python's sqlite3 module.
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
# `inpage bench program --instructions` counts CPU under callgrind (and its test).
command -v valgrind >/dev/null 2>&1 || need_apt+=(valgrind)
# The stock sqlite3 shell: the CLI test migrates a stock database into `inpage sql` and
# back through `.dump`, as the README shows.
command -v sqlite3 >/dev/null 2>&1 || need_apt+=(sqlite3)
# CPython's own test_sqlite3 suite, run against the drop-in (crates/inpage-libsqlite3/tests/
# cpython.rs): CPython builds ship it; Debian's python3 needs libpython3.X-testsuite.
if command -v python3 >/dev/null 2>&1 \
  && ! python3 -c 'import test.test_sqlite3' >/dev/null 2>&1 \
  && ! { [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import test.test_sqlite3' >/dev/null 2>&1; }; then
  pybin=python3
  [ -x /usr/bin/python3 ] && pybin=/usr/bin/python3
  pyver=$("$pybin" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)
  [ -n "$pyver" ] && need_apt+=("libpython${pyver}-testsuite")
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
  else
    echo "setup: missing ${need_apt[*]} (not root or no apt-get): the ext4 labs may be unavailable" >&2
  fi
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true
cargo fetch --locked 2>/dev/null || cargo fetch
# The rusqlite example (its own workspace; a test builds it against inpage's libsqlite3.so).
cargo fetch --locked --manifest-path examples/rusqlite-on-inpage/Cargo.toml
