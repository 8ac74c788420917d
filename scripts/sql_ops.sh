#!/usr/bin/env bash
# The SQL operations bench (issue 38): stock SQLite and the inpage drop-in side by side,
# interleaved round by round, through the same Python program (scripts/sql_ops.py):
#   stock-3.53     stock SQLite 3.53.2 built from the vendored amalgamation (the SQL front
#                  end the drop-in carries, so both run the same query plans), fdatasync,
#                  WAL with the apps' settings: the reference of every ratio
#   stock-system   Python's sqlite3 on the system's libsqlite3, WAL, apps' settings
#   inpage-default the drop-in in its default mode; inpage-wal: the drop-in in `wal`
# Prints medians and ratios to stock-3.53; leaves every round's JSON in DIR/results.jsonl.
#
# usage: scripts/sql_ops.sh [--rows N] [--rounds R] [--dir DIR]
#   defaults: 100000 rows, 3 rounds, /tmp/inpage-sql-ops (an ext4 directory here)
#   INPAGE_LIB=PATH  use this libsqlite3.so instead of building the release one
set -euo pipefail
cd "$(dirname "$0")/.."
rows=100000
rounds=3
dir=/tmp/inpage-sql-ops
while [ $# -gt 0 ]; do
  case "$1" in
    --rows) rows=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    *) echo "usage: $0 [--rows N] [--rounds R] [--dir DIR]" >&2; exit 2 ;;
  esac
done
if [ -z "${INPAGE_LIB:-}" ]; then
  cargo build --release --locked -p inpage-libsqlite3
  INPAGE_LIB=$PWD/target/release/libsqlite3.so
fi
# Stock 3.53.2 from the vendored amalgamation, built once (fdatasync, as phones build it).
stock=target/sql-ops/stock-3.53/libsqlite3.so.0
amalgamation=crates/inpage-sql/sqlite/sqlite3.c
if [ ! -e "$stock" ] || [ "$amalgamation" -nt "$stock" ]; then
  mkdir -p "$(dirname "$stock")"
  cc -O2 -fPIC -shared -DHAVE_FDATASYNC=1 -DHAVE_USLEEP=1 -DSQLITE_THREADSAFE=1 \
    -o "$stock" "$amalgamation" -lpthread -ldl -lm
fi
rm -rf "$dir"
mkdir -p "$dir/lib"
ln -s "$INPAGE_LIB" "$dir/lib/libsqlite3.so.0"
: > "$dir/results.jsonl"
for round in $(seq 1 "$rounds"); do
  for who in stock-3.53 stock-system inpage-default inpage-wal; do
    case $who in
      stock-3.53) env=(LD_LIBRARY_PATH="$PWD/$(dirname "$stock")"); mode=(--journal-mode wal) ;;
      stock-system) env=(); mode=(--journal-mode wal) ;;
      inpage-default) env=(LD_LIBRARY_PATH="$dir/lib"); mode=() ;;
      inpage-wal) env=(LD_LIBRARY_PATH="$dir/lib"); mode=(--journal-mode wal) ;;
    esac
    out=$(env "${env[@]}" python3 scripts/sql_ops.py "$dir/run" --rows "$rows" "${mode[@]}")
    echo "{\"contender\": \"$who\", \"round\": $round, \"result\": $out}" >> "$dir/results.jsonl"
    echo "round $round $who done" >&2
  done
done
rm -rf "$dir/run"
python3 - "$dir/results.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
who = ["stock-3.53", "stock-system", "inpage-default", "inpage-wal"]
med = {w: {} for w in who}
for w in who:
    rs = [r["result"] for r in runs if r["contender"] == w]
    for k in rs[0]:
        if isinstance(rs[0][k], (int, float)) and k != "rows":
            med[w][k] = statistics.median(r[k] for r in rs)
ver = {w: next(r["result"]["sqlite_version"] for r in runs if r["contender"] == w) for w in who}
print(f"rows {runs[0]['result']['rows']}, {len(runs) // len(who)} interleaved rounds, medians; "
      f"every ratio is to stock-3.53 (SQLite {ver['stock-3.53']}, WAL, apps' settings); "
      f"stock-system is SQLite {ver['stock-system']}")
print("| operation | stock-3.53 | stock-system | inpage default | ÷ stock | inpage wal | ÷ stock |")
print("|---|---|---|---|---|---|---|")
for k in med["stock-3.53"]:
    s = med["stock-3.53"][k]
    fmt = (lambda v: f"{v / 1024:,.0f} KiB") if k.endswith("bytes") else (lambda v: f"{v:.3f} s")
    row = [k, fmt(s), fmt(med["stock-system"][k])]
    for w in who[2:]:
        v = med[w][k]
        row += [fmt(v), f"{v / s:.2f}×" if s else "-"]
    print("| " + " | ".join(row) + " |")
PY
