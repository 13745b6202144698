#!/usr/bin/env python3
"""The peer a user would pick, on a real model: Hugging Face transformers (+ peft) on the HF
copy of SmolLM2-135M-Instruct that `cargo xtask convert` writes (the same weights hier loads
from the GGUF), fp32, CPU, 2 threads, SDPA defaults. The workloads and shapes are those of
`cargo xtask bench` (xtask/src/bench_cmd.rs); it prints one JSON line of the same shape.

usage: python hf_smollm.py WORKLOAD --model HF_DIR [--batch B] [--seq T] [--new-tokens N]
                           [--steps S] [--warmup W]
  WORKLOAD: train-lora | forward | generate | kl
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
from transformers import AutoModelForCausalLM, AutoConfig

torch.set_num_threads(2)
torch.set_num_interop_threads(1)

DEFAULT_SHAPE = {"train-lora": (4, 256), "forward": (4, 256), "generate": (8, 64), "kl": (8, 256)}


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cpu_seconds():
    t = os.times()
    return t.user + t.system


def time_steps(warmup, steps, step):
    for _ in range(warmup):
        step()
    wall, cpu = time.perf_counter(), cpu_seconds()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    cores = (cpu_seconds() - cpu) / (time.perf_counter() - wall)
    return statistics.median(times), cores


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=sorted(DEFAULT_SHAPE))
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--seq", type=int)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    a = ap.parse_args()
    b, t = DEFAULT_SHAPE[a.workload]
    b, t = a.batch or b, a.seq or t
    g = torch.Generator().manual_seed(1234)
    torch.manual_seed(0)
    vocab = AutoConfig.from_pretrained(a.model).vocab_size

    if a.workload == "kl":
        on = torch.randn(b, t, vocab, generator=g)
        off = torch.randn(b, t, vocab, generator=g)
        mask = torch.ones(b, t)

        def step():
            with torch.no_grad():
                lp, lq = F.log_softmax(on, -1), F.log_softmax(off, -1)
                kl = (lp.exp() * (lp - lq)).sum(-1)
                (kl * mask).sum().div(mask.sum()).item()

        tokens = b * t
    else:
        m = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
        if a.workload == "train-lora":
            from peft import LoraConfig, get_peft_model
            m = get_peft_model(m, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                                             "gate_proj", "up_proj", "down_proj"]))
            opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-4,
                                    weight_decay=0.01)
            windows = [torch.randint(0, vocab, (b, t + 1), generator=g) for _ in range(4)]
            m.train()
            k = [0]

            def step():
                w = windows[k[0] % len(windows)]
                k[0] += 1
                logits = m(input_ids=w[:, :-1]).logits
                loss = F.cross_entropy(logits.reshape(-1, vocab), w[:, 1:].reshape(-1))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                loss.item()

            tokens = b * t
        elif a.workload == "forward":
            m.eval()
            ids = torch.randint(0, vocab, (b, t), generator=g)

            def step():
                with torch.inference_mode():
                    m(input_ids=ids).logits.sum().item()

            tokens = b * t
        else:
            m.eval()
            prompt = torch.randint(0, vocab, (b, t), generator=g)
            n = a.new_tokens

            def step():
                with torch.inference_mode():
                    out = m.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt),
                                     max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                     use_cache=True, pad_token_id=0, eos_token_id=None)
                assert out.shape[1] == t + n, out.shape

            tokens = b * n
    med, cores = time_steps(a.warmup, a.steps, step)
    print(json.dumps(dict(fw="transformers", version=__import__("transformers").__version__,
                          torch=torch.__version__, workload=a.workload, model=a.model, batch=b, seq=t,
                          new_tokens=a.new_tokens if a.workload == "generate" else None,
                          steps=a.steps, median_s=round(med, 5), tokens_per_s=round(tokens / med, 1),
                          cores_busy=round(cores, 2), peak_rss_mb=round(peak_rss_mb(), 1))))


if __name__ == "__main__":
    main()
