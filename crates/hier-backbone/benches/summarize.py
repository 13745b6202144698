#!/usr/bin/env python3
"""Summarises side_by_side.sh output: median tokens/s and peak RSS per (framework, mode)."""
import json
import statistics
import sys
from collections import defaultdict

runs = defaultdict(list)
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    mode = {"train": "train-full"}.get(r["mode"], r["mode"])
    runs[(r["fw"], mode)].append(r)
for (fw, mode), rs in sorted(runs.items()):
    tps = statistics.median(r["tokens_per_s"] for r in rs)
    rss = statistics.median(r["peak_rss_mb"] for r in rs)
    print(json.dumps({"fw": fw, "mode": mode, "runs": len(rs), "median_tokens_per_s": round(tps, 1),
                      "min": round(min(r["tokens_per_s"] for r in rs), 1), "max": round(max(r["tokens_per_s"] for r in rs), 1),
                      "median_peak_rss_mb": round(rss, 1)}))
