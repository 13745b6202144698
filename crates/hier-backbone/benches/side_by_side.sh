#!/usr/bin/env bash
# Side-by-side benchmark on the bench config: hier against plain PyTorch (the shared
# torch_ref.py) and Hugging Face transformers + peft (peers/hf_peft.py), alternating so that
# machine drift hits all of them alike. Prints one JSON line per run; summarise with
# summarize.py.
#
# usage: benches/side_by_side.sh PYTHON [ROUNDS]   (PYTHON: an interpreter with torch, transformers, peft)
#   TORCH_REF=path/to/torch_ref.py overrides the plain-PyTorch peer (default ../shared/bench/torch_ref.py)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
py="${1:?usage: side_by_side.sh PYTHON [ROUNDS]}"
rounds="${2:-3}"
torch_ref="${TORCH_REF:-$root/../shared/bench/torch_ref.py}"
cargo build --release -q -p hier-backbone --example bench
bin="$root/target/release/examples/bench"
for r in $(seq 1 "$rounds"); do
  "$bin" train-lora --steps 10
  "$py" "$here/peers/hf_peft.py" train-lora --steps 10
  "$bin" train-full --steps 10
  "$py" "$torch_ref" train --steps 10
  "$py" "$here/peers/hf_peft.py" train-full --steps 10
  "$bin" gen-kv --runs 3
  "$py" "$torch_ref" gen-kv --runs 3
  "$py" "$here/peers/hf_peft.py" gen-kv --runs 3
done
