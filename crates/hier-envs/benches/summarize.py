#!/usr/bin/env python3
"""Summarises side_by_side.sh output: median rate per (framework, mode) and hier/python ratios."""
import json
import statistics
import sys
from collections import defaultdict

runs = defaultdict(list)
for line in sys.stdin:
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        runs[(r["fw"], r["mode"])].append(r["per_s"])
med = {k: statistics.median(v) for k, v in runs.items()}
for (fw, mode), v in sorted(runs.items()):
    print(json.dumps({"fw": fw, "mode": mode, "runs": len(v), "median_per_s": med[(fw, mode)],
                      "min": min(v), "max": max(v)}))
pairs = [("textcraft-reset-fresh", "textcraft-reset-fresh"), ("textcraft-reset", "textcraft-reset-fresh"), ("textcraft-step", "textcraft-step"),
         ("scienceworld-step", "scienceworld-step"), ("scienceworld-step-only", "scienceworld-step"),
         ("alfworld-load-reset", "alfworld-load-reset"), ("alfworld-step", "alfworld-step")]
for ours, theirs in pairs:
    if ("hier", ours) in med and ("python", theirs) in med:
        print(json.dumps({"ratio": f"hier {ours} / python {theirs}",
                          "value": round(med[("hier", ours)] / med[("python", theirs)], 2)}))
