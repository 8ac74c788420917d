#!/usr/bin/env bash
# The main job: set-up, release build, and the quick benchmark comparison — every
# contender (the engine's journal modes, real SQLite in its journal modes, redb, LMDB and
# the device floor) on an ext4 lab when run as root with loop devices, else on a plain
# directory (the report says which). Leaves table.txt, results.json and plots/ in
# results/ (or the directory given as $1).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
out="${1:-results}"
cargo build --release --locked -p inpage-cli
./target/release/inpage bench all --txns 300 --rounds 3 --out "$out"
echo "results in $out/: table.txt results.json plots/"
