#!/usr/bin/env python3
"""The peer a user would pick: Hugging Face transformers (+ peft), on the bench config of
docs/PERFORMANCE.md (Llama-style, vocab 2048, d 256, 4 layers, 4 heads, SwiGLU 688), CPU, 2 threads.

usage: python hf_peft.py MODE [--steps N] [--runs N]
  MODE: train-lora | train-full | gen-kv
Prints one JSON line with the same fields as hier's `bench` example.
"""
import argparse
import json
import os
import resource
import statistics
import time

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

torch.set_num_threads(2)
torch.set_num_interop_threads(1)

B, T, P = 8, 128, 16


def model():
    cfg = LlamaConfig(vocab_size=2048, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
                      attn_implementation="sdpa")
    return LlamaForCausalLM(cfg)


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    torch.manual_seed(42)
    g = torch.Generator().manual_seed(1234)
    m = model()
    tag = dict(fw="transformers", version=__import__("transformers").__version__, torch=torch.__version__)
    if a.mode.startswith("train"):
        if a.mode == "train-lora":
            from peft import LoraConfig, get_peft_model
            m = get_peft_model(m, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
        params = [p for p in m.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, eps=1e-5)
        data = [torch.randint(0, 2048, (B, T + 1), generator=g) for _ in range(4)]
        m.train()
        times = []
        for s in range(3 + a.steps):
            t0 = time.perf_counter()
            batch = data[s % 4]
            logits = m(input_ids=batch[:, :-1]).logits
            loss = F.cross_entropy(logits.reshape(-1, 2048), batch[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss.item()
            if s >= 3:
                times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        print(json.dumps(dict(**tag, mode=a.mode, median_s=round(med, 5), tokens_per_s=round(B * T / med, 1),
                              peak_rss_mb=round(peak_rss_mb(), 1))))
    elif a.mode == "gen-kv":
        m.eval()
        prompt = torch.randint(0, 2048, (B, P), generator=g)
        n_new = T - P
        times = []
        with torch.inference_mode():
            for r in range(a.runs + 1):
                t0 = time.perf_counter()
                out = m.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=n_new,
                                 min_new_tokens=n_new, do_sample=False, use_cache=True, pad_token_id=0)
                dt = time.perf_counter() - t0
                assert out.shape[1] == T
                if r > 0:
                    times.append(dt)
        med = statistics.median(times)
        print(json.dumps(dict(**tag, mode=a.mode, median_s=round(med, 5), tokens_per_s=round(B * n_new / med, 1),
                              peak_rss_mb=round(peak_rss_mb(), 1))))
    else:
        raise SystemExit(f"unknown mode {a.mode}")


if __name__ == "__main__":
    main()
