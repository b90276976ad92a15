#!/usr/bin/env bash
# bench/verify-oracle.sh: the verifier-only oracle (AFN-019 Gate E) on the
# bench models (bench/run-model.sh: "small" by default, HB_BENCH_MODELS to
# add "real"), bf16 experts.  hb-run decodes HB_BENCH_DECODE tokens greedily
# after a fixed prompt (the record), then hb-run --verify-oracle verifies
# that record B = 1..HB_BENCH_BLOCKS inputs a chunk.  Per B it prints
# tau(B), U_B, the break-even 10 x tau(B) and whether U_B is below it,
# routed bytes per committed token against B = 1, PLE pages per block,
# verify and plain-decode milliseconds per token and their ratio (both
# measured in the same hb-run invocation), and whether the oracle equalled
# plain decode bit for bit (it must: exit 1 otherwise).  Synthetic weights
# (contract control): the routes are not Qwen4Exp's, so U_B says nothing
# about the real model's locality; the script measures the machinery.
# Prints; asserts nothing about time.
#
# Environment: HB_BENCH_DIR (cache, default /tmp/hb-bench), HB_BUILD
# (default build), HB_BENCH_PROMPT (default 64), HB_BENCH_DECODE (default
# 40), HB_BENCH_BLOCKS (default 5), HB_BENCH_THREADS (default: all CPUs),
# HB_BENCH_MODELS (default "small").
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
conv=$build/bin/hb-convert
runner=$build/bin/hb-run
bench=${HB_BENCH_DIR:-/tmp/hb-bench}
np=${HB_BENCH_PROMPT:-64}
nd=${HB_BENCH_DECODE:-40}
blocks=${HB_BENCH_BLOCKS:-5}
threads=${HB_BENCH_THREADS:-$(nproc)}
models=${HB_BENCH_MODELS:-small}

source "$root/bench/run-model.sh"

die() { echo "bench/verify-oracle.sh: $*" >&2; exit 2; }
for b in "$conv" "$runner"; do
	[[ -x $b ]] || die "missing $b: run 'make all' first"
done
command -v python3 >/dev/null || die "python3 is missing"
mkdir -p "$bench"
work=$bench/verify-oracle-$$
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"

python3 - "$np" >"$work/prompt.txt" <<'PY'
import sys
n = int(sys.argv[1])
print(",".join(str((i * 2654435761) % 8000 + 1) for i in range(n)))
PY

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for model in $models; do
	run_model "$model"
	art=$work/$tag-bf16.gguf
	"$conv" -q --force --expert-codec bf16 "$ck" "$art"
	"$runner" -q --threads "$threads" -m "$art" --tokens-file "$work/prompt.txt" -n "$nd" >"$work/rec.txt"
	echo "model $model ($tag), bf16 experts, prompt $np, record $(tr ',' '\n' <"$work/rec.txt" | wc -l) tokens, $threads threads"
	printf '%3s %6s %7s %9s %5s %9s %8s %9s %9s %7s %5s\n' B tau U_B 10xtau below bytes/B1 PLEpg/blk verify_ms plain_ms ratio exact
	for ((B = 1; B <= blocks; B++)); do
		st=0
		"$runner" -q --json --threads "$threads" -m "$art" --tokens-file "$work/prompt.txt" \
			--verify-oracle "$work/rec.txt" --block "$B" >"$work/o.json" || st=$?
		python3 - "$work/o.json" "$B" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print("%3s %6.3f %7.2f %9.2f %5s %9.3f %8.2f %9.3f %9.3f %7.3f %5s" % (
    sys.argv[2], r["tau"], r["u_b"], r["break_even_u_b"], "yes" if r["break_even"] else "no",
    r["routed_bytes_ratio"], r["ple_pages_per_block"], r["verify_ms_per_token"], r["plain_ms_per_token"],
    r["verify_ms_per_token"] / r["plain_ms_per_token"], "yes" if r["exact"] else "NO"))
PY
		[[ $st -eq 0 ]] || { echo "bench/verify-oracle.sh: block $B is not exact (status $st)" >&2; exit 1; }
	done
	rm -f "$art"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
