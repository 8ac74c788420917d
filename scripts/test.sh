#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit, property, recovery, bad-input and CLI
# tests. This is what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
