"""Counts the first word of every TextCraft action in committed evaluation traces, and how
many the game accepted (its observation does not start with "Could not").

Usage (from docs/results/table1-smollm): python3 probes/textcraft_first_words.py
Prints one line per agent: episodes (trials), actions, `get` lines, accepted `get` lines,
`craft` lines, accepted actions.
"""
import collections
import json
import os

STAGES = {
    "react": ["eval-react-textcraft-1a69b37a4d41", "eval-react-textcraft-6aec25c70beb",
              "eval-react-textcraft-f7e613da365d"],
    # Seed 0 alone is the row of the 2026-12-07 (third) table; both seeds are the whole cell.
    "reflexion seed 0": ["eval-reflexion-textcraft-05014ee6ac13"],
    "reflexion seeds 0 and 1": ["eval-reflexion-textcraft-05014ee6ac13",
                                "eval-reflexion-textcraft-8c2a7747c10d"],
    "adapt": ["eval-adapt-textcraft-03a9a96eb568", "eval-adapt-textcraft-51ae0db937d3",
              "eval-adapt-textcraft-f0b4f8006c8e"],
    "flat sft": ["eval-flat-sft-textcraft-323a0ed948c2", "eval-flat-sft-textcraft-57eeffa13422",
                 "eval-flat-sft-textcraft-b2ad5d641b8a"],
}

for agent, stages in STAGES.items():
    words, accepted, episodes, actions = collections.Counter(), collections.Counter(), 0, 0
    for stage in stages:
        with open(os.path.join("stages", stage, "traces.jsonl")) as f:
            for line in f:
                episode = json.loads(line)["episode"]
                episodes += 1
                # observations[0] is the task; observations[i + 1] answers actions[i].
                for action, obs in zip(episode["actions"], episode["observations"][1:]):
                    word = action.split(" ")[0].lower()
                    words[word] += 1
                    accepted[word] += not obs.startswith("Could not")
                    actions += 1
    print(f"{agent}: episodes {episodes}, actions {actions}, get {words['get']} "
          f"(accepted {accepted['get']}), craft {words['craft']}, "
          f"accepted {sum(accepted.values())}")
