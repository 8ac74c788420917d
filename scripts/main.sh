#!/usr/bin/env bash
# The main job: set-up, release build, and the benchmark comparison — every contender
# (the engine's journal modes, real SQLite in its journal modes, inpage's SQL front end,
# redb, LMDB and the device floor) on an ext4 lab when run as root with loop devices, else
# on a plain directory (the report says which). Leaves table.txt, results.json, plots/,
# index.html and headline.txt in results/ (or the directory given as $1), and ends with
# the headline.
#
# The test suite runs this same script in a short form (crates/inpage-cli/tests/
# main_job.rs), so it cannot break unnoticed:
#   INPAGE_MAIN_SHORT=1   few transactions, one round (same code path and contenders)
#   INPAGE_BIN=PATH       use this inpage binary instead of building the release one
#   INPAGE_SETUP_DONE=1   skip scripts/setup.sh (the caller ran it)
#   INPAGE_MAIN_CONTENDERS=LIST  contenders (default: the default set)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${INPAGE_SETUP_DONE:-}" ]; then
  source scripts/setup.sh
fi
out="${1:-results}"
if [ -n "${INPAGE_BIN:-}" ]; then
  bin="$INPAGE_BIN"
else
  cargo build --release --locked -p inpage-cli
  bin=./target/release/inpage
fi
if [ -n "${INPAGE_MAIN_SHORT:-}" ]; then
  args=(--txns 20 --rounds 1 --warmup 120 --trace-txns 30 --trace-rows 300)
else
  args=(--txns 300 --rounds 3 --warmup 200)
fi
if [ -n "${INPAGE_MAIN_CONTENDERS:-}" ]; then
  args+=(--contenders "$INPAGE_MAIN_CONTENDERS")
fi
"$bin" bench all "${args[@]}" --out "$out"
echo "results in $out/: headline.txt table.txt results.json plots/ index.html"
