#!/usr/bin/env bash
# The whole test suite: formatting, lints, and every test of the workspace — unit,
# property, recovery, bad-input, CLI, fork and multi-database crash tests, the torture and
# mutation tests, CPython's test_sqlite3 on the drop-in, and the main job in its short
# form (crates/inpage-cli/tests/main_job.rs runs scripts/main.sh). This is what CI runs
# (.ci/run). Prints how long each part took.
set -euo pipefail
cd "$(dirname "$0")/.."
step() {
  local name=$1
  shift
  local t0=$SECONDS
  "$@"
  echo "test.sh: $name took $((SECONDS - t0)) s" >&2
}
step "set-up" source scripts/setup.sh
step "cargo fmt --check" cargo fmt --all -- --check
step "cargo clippy" cargo clippy --workspace --all-targets --locked -- -D warnings
step "cargo test (build and run)" cargo test --workspace --locked
# docs/ADDING-A-MODE.md's walk-through: the registry matrices again with the `toy` mode
# registered (its own file plus one registry line), which they must pick up by themselves.
step "new-mode walk-through (toy-mode)" cargo test --locked -p inpage --features toy-mode \
  --test toy_mode --test model --test format_doc --test bad_input --test read_only --test api
echo "test.sh: all green in $SECONDS s" >&2
