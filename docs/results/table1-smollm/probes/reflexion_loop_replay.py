"""Replays Reflexion's loop heuristic (`reflexion_loop_cycles`, Shinn et al. 2023 §4.1) on the
committed ReAct traces of this profile: how many episodes it would have ended early, and how many
of their turns (model calls) and environment actions that saves.

A turn is a thought (observation `OK.`) or an action with the observation it got; an episode ends
once more than CYCLES of its last turns in a row are one line with one observation — the rule of
`hier_multi2::react::trailing_repeats`. Run from the repository root:

    python3 docs/results/table1-smollm/probes/reflexion_loop_replay.py
"""

import glob
import json
import os

CYCLES = 3
STAGES = os.path.join(os.path.dirname(__file__), "..", "stages")


def turns_of(trace):
    """The episode's turns in order: thoughts (notes `think: …` before action `at`) and actions."""
    ep = trace["episode"]
    actions, observations = ep["actions"], ep["observations"][1:]
    thoughts = [(at, n) for at, n in trace.get("notes", []) if n.startswith("think: ")]
    turns, k = [], 0
    for i in range(len(actions) + 1):
        while k < len(thoughts) and thoughts[k][0] == i:
            turns.append((thoughts[k][1], "OK.", False))
            k += 1
        if i < len(actions):
            turns.append((actions[i], observations[i], True))
    return turns


def end_of(turns):
    """Turns played under the rule (all of them when it never fires)."""
    for t in range(CYCLES, len(turns)):
        if len({(line, obs) for line, obs, _ in turns[t - CYCLES : t + 1]}) == 1:
            return t + 1
    return len(turns)


for env in ["textcraft", "alfworld", "scienceworld"]:
    episodes = cut = turns_all = turns_saved = actions_all = actions_saved = 0
    for path in sorted(glob.glob(os.path.join(STAGES, f"eval-react-{env}-*", "traces.jsonl"))):
        for line in open(path):
            turns = turns_of(json.loads(line))
            end = end_of(turns)
            episodes += 1
            cut += end < len(turns)
            turns_all += len(turns)
            turns_saved += len(turns) - end
            actions_all += sum(is_action for _, _, is_action in turns)
            actions_saved += sum(is_action for _, _, is_action in turns[end:])
    print(
        f"{env}: {episodes} ReAct episodes, {100 * cut / episodes:.0f} % ended early; "
        f"{100 * turns_saved / turns_all:.0f} % of {turns_all} turns and "
        f"{100 * actions_saved / actions_all:.0f} % of {actions_all} actions saved"
    )
