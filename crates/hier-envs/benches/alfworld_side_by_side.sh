#!/usr/bin/env bash
# Side-by-side ALFWorld throughput: the native engine against the real one (TextWorld 1.7.0 +
# alfworld 0.4.2) on the same 22 generated games, alternating rounds. Prints JSON lines;
# summarise with `summarize.py`.
#
# usage: benches/alfworld_side_by_side.sh PYTHON [ROUNDS]   (PYTHON has alfworld==0.4.2)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
py="${1:?usage: alfworld_side_by_side.sh PYTHON [ROUNDS]}"
rounds="${2:-3}"
cargo build --release -q -p hier-envs --example env_bench
bin="$root/target/release/examples/env_bench"
for r in $(seq 1 "$rounds"); do
  "$bin" --only alfworld
  "$py" "$here/peers/alfworld_py.py"
done
