#!/usr/bin/env bash
# Side-by-side benchmark on the real model: `cargo xtask bench` against transformers (+ peft)
# (peers/hf_smollm.py) on the same SmolLM2-135M-Instruct weights — hier reads the GGUF, the peer
# the HF copy `cargo xtask convert` writes from it — alternating so that machine drift hits
# both alike. Prints one JSON line per run; summarise with summarize_smollm.py.
#
# usage: benches/side_by_side_smollm.sh PYTHON [ROUNDS] [STEPS]
#   PYTHON: an interpreter with torch, transformers and peft
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
py="${1:?usage: side_by_side_smollm.sh PYTHON [ROUNDS] [STEPS]}"
rounds="${2:-3}"
steps="${3:-3}"
cd "$root"
cargo build --release -q -p xtask
xtask="$root/target/release/xtask"
gguf="$root/data/assets/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$gguf" ] || "$xtask" setup >&2
hf="${HF_COPY:-$root/target/smollm2-hf}"
[ -f "$hf/model.safetensors" ] || "$xtask" convert --gguf "$gguf" --out "$hf" >&2
for r in $(seq 1 "$rounds"); do
  for w in train-lora forward generate kl; do
    "$xtask" bench "$w" --model "$gguf" --steps "$steps"
    "$py" "$here/peers/hf_smollm.py" "$w" --model "$hf" --steps "$steps"
  done
done
