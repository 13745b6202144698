#!/usr/bin/env python3
"""Loads an adapter trained by hier in Python PEFT and compares its logits with hier's.

    cargo xtask logits --model M --adapter A --ids 1,2,3 > ours.json
    python peft_check.py --model M --adapter A --ids 1,2,3 --ours ours.json

Prints the largest absolute and relative (to the largest reference logit) difference and exits
non-zero when the relative difference exceeds --tol (1e-4).
"""
import argparse
import json
import sys

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapter")
    ap.add_argument("--ids", required=True)
    ap.add_argument("--ours", required=True)
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    if a.adapter:
        model = PeftModel.from_pretrained(model, a.adapter)
    model.eval()
    ids = torch.tensor([[int(x) for x in a.ids.split(",")]])
    with torch.no_grad():
        theirs = model(input_ids=ids).logits[0].float()
    with open(a.ours) as f:
        ours = torch.tensor(json.load(f)["logits"], dtype=torch.float32)
    diff = (ours - theirs).abs().max().item()
    rel = diff / theirs.abs().max().item()
    print(json.dumps({"max_abs_diff": diff, "max_rel_diff": rel, "positions": ids.shape[1], "vocab": theirs.shape[1]}))
    sys.exit(0 if rel <= a.tol else 1)


if __name__ == "__main__":
    main()
