#!/usr/bin/env bash
# bench/replay.sh: what replay buys.  On one synthetic model, in one run:
# hb-run decodes a sequence greedily one token at a time (its decode
# tokens per second and a route trace), then hb-replay labels the same
# token sequence as chunked prefill (label throughput in positions x layers
# per second), checks parity against the decode trace, and prints the ratio
# of replay tokens per second to decode tokens per second.  Prints; asserts
# nothing about time (parity must pass, or the numbers mean nothing).
#
# The checkpoint (scripts/make-synthetic-checkpoint.py, contract-control
# weights, not an upstream capture) is the one bench/run.sh uses, cached
# under $HB_BENCH_DIR (default /tmp/hb-bench); the artifact is converted
# with hb-convert and deleted at the end.
#
# Environment: HB_BENCH_DIR (cache), HB_BUILD (default build),
# HB_BENCH_PROMPT (prompt tokens, default 32), HB_BENCH_DECODE (tokens
# generated, default 96), HB_BENCH_CHUNK (replay chunk, default 256),
# HB_BENCH_THREADS (default: all CPUs).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
conv=$build/bin/hb-convert
runner=$build/bin/hb-run
replay=$build/bin/hb-replay
bench=${HB_BENCH_DIR:-/tmp/hb-bench}
np=${HB_BENCH_PROMPT:-32}
nd=${HB_BENCH_DECODE:-96}
chunk=${HB_BENCH_CHUNK:-256}
threads=${HB_BENCH_THREADS:-$(nproc)}

# the synthetic model run.sh and replay.sh share
source "$root/bench/run-model.sh"

die() { echo "bench/replay.sh: $*" >&2; exit 2; }
for b in "$conv" "$runner" "$replay"; do
	[[ -x $b ]] || die "missing $b: run 'make all' first"
done
command -v python3 >/dev/null || die "python3 is missing"
mkdir -p "$bench"
run_model_checkpoint

work=$bench/replay-$$
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
art=$work/model.gguf
"$conv" -q --force "$ck" "$art"

# a fixed prompt (ids 1.. of a seeded LCG, below the vocabulary)
prompt=$(python3 -c "
s = 12345
ids = []
for _ in range($np):
    s = (s * 1103515245 + 12345) % 2**31
    ids.append(2 + s % 8000)
print(','.join(map(str, ids)))")

"$runner" -q -m "$art" --threads "$threads" --tokens "$prompt" -n "$nd" --json \
	--dump-routes "$work/decode.trace" >"$work/run.json"
python3 - "$work/run.json" "$prompt" >"$work/t.jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ids = [int(x) for x in sys.argv[2].split(",")] + r["ids"]
print(json.dumps({"owner": 0, "thread": 0, "turn": 0, "sequence": 0, "tokens": ids}))
PY
"$replay" label -m "$art" --threads "$threads" --chunk "$chunk" -o "$work/labels" --json "$work/t.jsonl" \
	>"$work/label.json"
"$replay" parity "$work/labels" "$work/decode.trace" >"$work/parity.txt" ||
	die "parity failed: the replay numbers below would not be labels of this decode"

python3 - "$work/run.json" "$work/label.json" "$work/parity.txt" "$threads" "$chunk" <<'PY'
import json, sys
run, lab = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
parity = open(sys.argv[3]).read().strip()
dec = run["decode_tokens_per_second"]
rep = lab["positions_per_second"]
print("synthetic model h512-e128-l8-k10, %s threads, replay chunk %s" % (sys.argv[4], sys.argv[5]))
print("decode (hb-run):       %d prompt + %d generated tokens, %.1f decode tokens/s, prefill %.1f tokens/s"
      % (run["prompt_tokens"], run["generated_tokens"], dec, run["prefill_tokens_per_second"]))
print("replay (hb-replay):    %d positions, %d records in %.3f s: %.1f tokens/s, %.0f positions x layers/s"
      % (lab["positions"], lab["records"], lab["seconds"], rep, lab["records_per_second"]))
print("replay / decode tokens per second: %.2f" % (rep / dec))
print(parity)
PY
