#!/usr/bin/env python3
"""Summarises side_by_side.sh / side_by_side_smollm.sh output: per (framework, workload) the
median tokens/s (range), median peak RSS and cores busy; then hier's ratio to each peer, from the
medians and per round (runs paired in the order they ran)."""
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
    work = r.get("workload") or {"train": "train-full"}.get(r["mode"], r["mode"])
    runs[(r["fw"], work)].append(r)
med = {}
for (fw, work), rs in sorted(runs.items()):
    tps = statistics.median(r["tokens_per_s"] for r in rs)
    med[(fw, work)] = tps
    out = {"fw": fw, "workload": work, "runs": len(rs), "median_tokens_per_s": round(tps, 1),
           "min": round(min(r["tokens_per_s"] for r in rs), 1),
           "max": round(max(r["tokens_per_s"] for r in rs), 1),
           "median_peak_rss_mb": round(statistics.median(r["peak_rss_mb"] for r in rs), 1)}
    if all("cores_busy" in r for r in rs):
        out["median_cores_busy"] = round(statistics.median(r["cores_busy"] for r in rs), 2)
    print(json.dumps(out))
for (fw, work), tps in sorted(med.items()):
    if fw == "hier":
        continue
    if ("hier", work) not in med:
        continue
    pairs = [h["tokens_per_s"] / p["tokens_per_s"] for h, p in zip(runs[("hier", work)], runs[(fw, work)])]
    print(json.dumps({"ratio": f"hier / {fw}", "workload": work,
                      "of_medians": round(med[("hier", work)] / tps, 2),
                      "per_round": [round(x, 2) for x in pairs]}))
