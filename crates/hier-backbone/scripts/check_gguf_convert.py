#!/usr/bin/env python3
"""Checks that an HF directory written by `cargo xtask convert --gguf F --out D` loads in
transformers and computes what transformers' own GGUF loader computes from F: the logits of a
rendered chat prompt (relative L2 error, argmax at every position) and the token ids of a few
strings. Prints one JSON line; exits non-zero when they disagree.

    python check_gguf_convert.py <file.gguf> <converted dir>
"""
import json
import os
import sys

import torch
import transformers

STRINGS = ["What is the capital of France?", "12345 apples, 3.14 and 1,000", "héllo 世界 🤖\n\n  x",
           "<|im_start|>user\nhi<|im_end|>\n"]


def main():
    gguf, converted = os.path.abspath(sys.argv[1]), sys.argv[2]
    d, f = os.path.split(gguf)
    ref_tok = transformers.AutoTokenizer.from_pretrained(d, gguf_file=f)
    ref = transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32).eval()
    tok = transformers.AutoTokenizer.from_pretrained(converted)
    model = transformers.AutoModelForCausalLM.from_pretrained(converted, dtype=torch.float32).eval()
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    chat = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    ids = tok(chat, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        a = model(torch.tensor([ids])).logits[0]
        b = ref(torch.tensor([ids])).logits[0]
    rel = float((a - b).norm() / b.norm())
    out = {
        "chat_equal": chat == ref_tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True),
        "ids_equal": all(tok(s, add_special_tokens=False)["input_ids"] == ref_tok(s, add_special_tokens=False)["input_ids"]
                         for s in STRINGS + [chat]),
        "logits_rel_l2": rel,
        "argmax_equal": bool((a.argmax(-1) == b.argmax(-1)).all()),
        "positions": len(ids),
    }
    print(json.dumps(out))
    sys.exit(0 if out["chat_equal"] and out["ids_equal"] and out["argmax_equal"] and rel < 1e-5 else 1)


if __name__ == "__main__":
    main()
