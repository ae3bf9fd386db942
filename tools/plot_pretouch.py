#!/usr/bin/env python3
"""Plot pretouch throughput against chunk size and worker count as an SVG.

Usage: python3 tools/plot_pretouch.py target/bench/pretouch.csv BENCHMARKS-pretouch.svg

Input: the CSV written by `cargo bench -p rtvm --bench heap` (columns pages, threads, chunk,
gbps, limit_gbps, ratio). One line per (pages, workers) series over the chunk sizes, and the
series' limit (the raw primitive measured in the same run) as a dashed line. No plotting
library needed: the SVG is written by hand.
"""

import csv
import sys
from collections import OrderedDict

W, H = 760, 440
LEFT, RIGHT, TOP, BOTTOM = 70, 220, 40, 60
COLORS = {("4K", "1"): "#1f77b4", ("4K", "2"): "#2ca02c", ("THP", "1"): "#d62728", ("THP", "2"): "#9467bd"}


def main(src, dst):
    rows = list(csv.DictReader(open(src)))
    if not rows:
        raise SystemExit(f"{src}: no rows")
    chunks = list(OrderedDict.fromkeys(r["chunk"] for r in rows))
    series = OrderedDict()
    for r in rows:
        series.setdefault((r["pages"], r["threads"]), []).append(r)
    ymax = max(max(float(r["gbps"]), float(r["limit_gbps"])) for r in rows) * 1.1
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(i):
        return LEFT + (pw * i / (len(chunks) - 1) if len(chunks) > 1 else pw / 2)

    def y(v):
        return TOP + ph - ph * v / ymax

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{LEFT}" y="22" font-size="15">rtvm pretouch of a 4 GiB heap: throughput by chunk size and workers</text>',
    ]
    step = 2 if ymax <= 20 else 5
    v = 0
    while v <= ymax:
        out.append(f'<line x1="{LEFT}" y1="{y(v):.1f}" x2="{LEFT + pw}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 8}" y="{y(v) + 4:.1f}" text-anchor="end">{v}</text>')
        v += step
    for i, c in enumerate(chunks):
        out.append(f'<text x="{x(i):.1f}" y="{TOP + ph + 20}" text-anchor="middle">{c}</text>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{H - 15}" text-anchor="middle">PreTouchParallelChunkSize</text>')
    out.append(f'<text x="18" y="{TOP + ph / 2}" transform="rotate(-90 18 {TOP + ph / 2})" text-anchor="middle">GB/s</text>')
    out.append(f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + ph}" stroke="black"/>')
    out.append(f'<line x1="{LEFT}" y1="{TOP + ph}" x2="{LEFT + pw}" y2="{TOP + ph}" stroke="black"/>')
    for n, (key, rs) in enumerate(series.items()):
        color = COLORS.get(key, "#333")
        by_chunk = {r["chunk"]: r for r in rs}
        pts = [(x(i), y(float(by_chunk[c]["gbps"]))) for i, c in enumerate(chunks) if c in by_chunk]
        out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (color, " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)))
        for a, b in pts:
            out.append(f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3.5" fill="{color}"/>')
        limit = float(rs[0]["limit_gbps"])
        out.append(f'<line x1="{LEFT}" y1="{y(limit):.1f}" x2="{LEFT + pw}" y2="{y(limit):.1f}" stroke="{color}" stroke-dasharray="5,4"/>')
        ly = TOP + 20 + n * 36
        out.append(f'<line x1="{LEFT + pw + 15}" y1="{ly}" x2="{LEFT + pw + 40}" y2="{ly}" stroke="{color}" stroke-width="2"/>')
        out.append(f'<text x="{LEFT + pw + 46}" y="{ly + 4}">{key[0]} pages, {key[1]} worker{"s" if key[1] != "1" else ""}</text>')
        out.append(f'<line x1="{LEFT + pw + 15}" y1="{ly + 14}" x2="{LEFT + pw + 40}" y2="{ly + 14}" stroke="{color}" stroke-dasharray="5,4"/>')
        out.append(f'<text x="{LEFT + pw + 46}" y="{ly + 18}">limit ({limit:.2f} GB/s)</text>')
    out.append("</svg>")
    open(dst, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
