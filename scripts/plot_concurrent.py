#!/usr/bin/env python3
"""Plots of an `inpage bench concurrent --json` file, as SVG (standard library only).

For every (write ratio, Zipf theta, statements per transaction) of the grid, one SVG with
three panels against the number of threads: throughput (tx/s, median of the rounds),
aborts per write transaction (mean) and p99 latency (us), one line per contender.

    scripts/plot_concurrent.py docs/bench/concurrent-group-grid.json [out-prefix]

writes `<out-prefix>-wr<W>-z<theta>-s<stmts>.svg` (default prefix: the JSON's path
without `.json`) and prints each file name.
"""

import json
import sys
from collections import defaultdict
from html import escape

W, H = 360, 260  # one panel
PAD_L, PAD_R, PAD_T, PAD_B = 62, 12, 28, 40
COLORS = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
    "#8c564b", "#e377c2", "#7f7f7f", "#17becf", "#bcbd22",
]
PANELS = [
    ("tx/s", lambda r: r["tx_per_s_median"]),
    ("aborts per write txn", lambda r: r["aborts_per_txn_mean"]),
    ("p99 latency (us)", lambda r: r["latency_percentiles_us"]["p99"]),
]


def nice_max(v):
    if v <= 0:
        return 1.0
    mag = 10 ** len(str(int(v))) / 10 if v >= 1 else 1.0
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * mag:
            return m * mag
    return 10 * mag


def panel(x0, title, series, threads):
    ymax = nice_max(max((y for pts in series.values() for _, y in pts), default=1.0))
    iw, ih = W - PAD_L - PAD_R, H - PAD_T - PAD_B
    xs = {t: PAD_L + (iw * i / max(len(threads) - 1, 1)) for i, t in enumerate(threads)}
    out = [f'<g transform="translate({x0},0)">']
    out.append(f'<text x="{W / 2}" y="16" text-anchor="middle" font-size="13">{escape(title)}</text>')
    out.append(f'<rect x="{PAD_L}" y="{PAD_T}" width="{iw}" height="{ih}" fill="none" stroke="#999"/>')
    for i in range(5):
        v = ymax * i / 4
        y = PAD_T + ih - ih * i / 4
        out.append(f'<line x1="{PAD_L}" y1="{y}" x2="{PAD_L + iw}" y2="{y}" stroke="#eee"/>')
        label = f"{v:,.0f}" if ymax >= 10 else f"{v:.2f}"
        out.append(f'<text x="{PAD_L - 4}" y="{y + 4}" text-anchor="end" font-size="10">{label}</text>')
    for t, x in xs.items():
        out.append(f'<text x="{x}" y="{PAD_T + ih + 14}" text-anchor="middle" font-size="10">{t}</text>')
    out.append(f'<text x="{PAD_L + iw / 2}" y="{H - 8}" text-anchor="middle" font-size="11">threads</text>')
    for (name, pts), color in zip(series.items(), COLORS):
        coords = [(xs[t], PAD_T + ih - ih * y / ymax) for t, y in pts]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
        out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="1.8"/>')
        for x, y in coords:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}"/>')
    out.append("</g>")
    return out


def plot(rows, title):
    threads = sorted({r["threads"] for r in rows})
    names = list(dict.fromkeys(r["contender"] for r in rows))
    legend_h = 18 * ((len(names) + 3) // 4) + 8
    total_w, total_h = W * len(PANELS), H + legend_h + 24
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w}" height="{total_h}" '
        f'font-family="sans-serif">',
        f'<rect width="{total_w}" height="{total_h}" fill="white"/>',
        f'<text x="8" y="{H + 18}" font-size="12">{escape(title)}</text>',
    ]
    for i, (label, get) in enumerate(PANELS):
        series = {
            n: sorted((r["threads"], get(r)) for r in rows if r["contender"] == n)
            for n in names
        }
        out += panel(i * W, label, series, threads)
    for i, (n, color) in enumerate(zip(names, COLORS)):
        x, y = 8 + (i % 4) * 240, H + 36 + (i // 4) * 18
        out.append(f'<rect x="{x}" y="{y - 9}" width="14" height="4" fill="{color}"/>')
        out.append(f'<text x="{x + 20}" y="{y - 4}" font-size="11">{escape(n)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    src = sys.argv[1]
    prefix = sys.argv[2] if len(sys.argv) == 3 else src.removesuffix(".json")
    with open(src) as f:
        doc = json.load(f)
    groups = defaultdict(list)
    for r in doc["results"]:
        groups[(r["write_ratio"], r["zipf_theta"], r["ops_per_txn"])].append(r)
    if not groups:
        sys.exit(f"{src}: no results")
    for (wr, z, s), rows in sorted(groups.items()):
        name = f"{prefix}-wr{wr}-z{z:g}-s{s}.svg"
        title = (f"inpage bench concurrent, lab {doc.get('lab')}: {wr} % writes, "
                 f"Zipf {z:g}, {s} statement(s) per txn, median of {doc.get('rounds')} rounds")
        with open(name, "w") as f:
            f.write(plot(rows, title))
        print(name)


if __name__ == "__main__":
    main()
