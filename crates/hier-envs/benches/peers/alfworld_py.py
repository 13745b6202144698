#!/usr/bin/env python3
"""Peer side of the ALFWorld benchmark: the real engine (TextWorld 1.7.0 PddlEnv + alfworld
0.4.2's domain and grammar, with alfworld's AlfredDemangler names, as alfworld's evaluation
loads games) on the same generated games as `env_bench --only alfworld`
(`tests/fixtures/alfworld/golden_generated.jsonl.gz`).

Modes (JSON lines shaped like env_bench's):
  alfworld-load-reset   write game.tw-pddl, env.load(...) and env.reset() per game
  alfworld-step         random walk over the admissible commands (TextWorld computes them
                        on every step), --walk steps per game

usage: alfworld_py.py [--walk N]   (python with alfworld==0.4.2 installed)
"""
import argparse
import gzip
import json
import os
import random
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
fixtures = os.path.join(here, "..", "..", "tests", "fixtures", "alfworld")
sys.path.insert(0, fixtures)
from make_golden import make_env  # noqa: E402


def emit(mode, count, seconds):
    print(json.dumps({"fw": "python", "mode": mode, "count": count, "seconds": round(seconds, 4),
                      "per_s": round(count / seconds, 2)}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--walk", type=int, default=40)
    args = ap.parse_args()
    with gzip.open(os.path.join(fixtures, "golden_generated.jsonl.gz"), "rt") as f:
        games = [l for l in map(json.loads, f) if l.get("kind") == "game"]
    params = lambda s: {"object_target": s["object_target"], "parent_target": s["parent_target"],
                        "toggle_target": s["toggle_target"], "mrecep_target": "",
                        "object_sliced": False}
    envs = []
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        for i, g in enumerate(games):
            sub = os.path.join(d, str(i))
            os.makedirs(sub)
            env, _ = make_env(g["problem"], g["task"], sub, params(g["spec"]), g["spec"]["task_type"])
            env.reset()
            envs.append(env)
        emit("alfworld-load-reset", len(games), time.perf_counter() - t)
        rng = random.Random(0)
        steps, t = 0, time.perf_counter()
        for env in envs:
            st = env.reset()
            for _ in range(args.walk):
                st, _, _ = env.step(rng.choice(st["admissible_commands"]))
                steps += 1
        emit("alfworld-step", steps, time.perf_counter() - t)


if __name__ == "__main__":
    main()
