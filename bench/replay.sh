#!/usr/bin/env bash
# bench/replay.sh: what replay buys.  On bench/run.sh's synthetic models
# (bench/run-model.sh: "small", the bench model, and "real", the released
# checkpoint's widths on 4 layers), in one run, HB_BENCH_REPS rounds
# (default 3) of, back to back:
#   limits  the FMA peak and the stream read on the same threads
#           (build/bench/kernels --limits);
#   decode  hb-run decodes a prompt greedily one token at a time (decode
#           tokens/s and a route trace);
#   prefill hb-run prefills the whole decoded sequence as its prompt, the
#           positions replay labels (prefill tokens/s at the same length);
#   replay  hb-replay labels the same sequence as chunked prefill (tokens/s,
#           positions x layers per second), then checks parity against the
#           decode trace.
# Prints, per model, the median (min) over the rounds of each rate, replay
# tokens/s as a fraction of prefill tokens/s (the goal: at least 1) and of
# decode tokens/s, and replay's matrix-product FLOP/s (bench/run.sh's count)
# as a fraction of the FMA peak of its own round; the kernel path and the
# load average.  (The stream read of --limits is measured, not printed:
# replay reads each weight once per chunk, so it is compute-bound.)  Prints; asserts nothing about time (parity must pass, or
# the numbers mean nothing).
#
# The checkpoints (scripts/make-synthetic-checkpoint.py, contract-control
# weights, not upstream captures) are bench/run.sh's, cached under
# $HB_BENCH_DIR (default /tmp/hb-bench); the artifacts are converted with
# hb-convert (bf16 experts) and deleted at the end.
#
# Environment: HB_BENCH_DIR (cache), HB_BUILD (default build),
# HB_BENCH_PROMPT (prompt tokens, default 32), HB_BENCH_DECODE (tokens
# generated, default 96), HB_BENCH_CHUNK (replay chunk, default 256),
# HB_BENCH_THREADS (default: all CPUs), HB_BENCH_MODELS (default
# "small real"), HB_BENCH_REPS (default 3), HB_BENCH_PAUSE (seconds before
# each timed run, default 3: bench/README.md says why).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
conv=$build/bin/hb-convert
admit=$build/bin/hb-admit
runner=$build/bin/hb-run
replay=$build/bin/hb-replay
limits=$build/bench/kernels
bench=${HB_BENCH_DIR:-/tmp/hb-bench}
np=${HB_BENCH_PROMPT:-32}
nd=${HB_BENCH_DECODE:-96}
chunk=${HB_BENCH_CHUNK:-256}
threads=${HB_BENCH_THREADS:-$(nproc)}
models=${HB_BENCH_MODELS:-small real}
reps=${HB_BENCH_REPS:-3}
pause=${HB_BENCH_PAUSE:-3}

# the synthetic models run.sh and replay.sh share
source "$root/bench/run-model.sh"

die() { echo "bench/replay.sh: $*" >&2; exit 2; }
for b in "$conv" "$admit" "$runner" "$replay" "$limits"; do
	[[ -x $b ]] || die "missing $b: run 'make all $build/bench/kernels' (or make bench-replay) first"
done
command -v python3 >/dev/null || die "python3 is missing"
mkdir -p "$bench"

work=$bench/replay-$$
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"

# a fixed prompt (ids 1.. of a seeded LCG, below the vocabulary)
prompt=$(python3 -c "
s = 12345
ids = []
for _ in range($np):
    s = (s * 1103515245 + 12345) % 2**31
    ids.append(2 + s % 8000)
print(','.join(map(str, ids)))")

echo "load before: $(uptime)"
for model in $models; do
	run_model "$model"
	art=$work/model.gguf
	"$conv" -q --force "$ck" "$art"
	"$admit" -q --json "$art" >"$work/admit.json"
	# the whole artifact into the page cache (bench/run.sh says why), then
	# one untimed run
	cat "$art" >/dev/null
	"$runner" -q -m "$art" --threads "$threads" --tokens "$prompt" -n 2 >/dev/null
	for ((r = 0; r < reps; r++)); do
		HB_BENCH_THREADS=$threads "$limits" --limits | tr '\n' ' ' >"$work/limits-$r.txt"
		sleep "$pause"
		"$runner" -q -m "$art" --threads "$threads" --tokens "$prompt" -n "$nd" --json \
			--dump-routes "$work/decode.trace" >"$work/run-$r.json"
		python3 - "$work/run-$r.json" "$prompt" "$work/t.jsonl" "$work/seq.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ids = [int(x) for x in sys.argv[2].split(",")] + r["ids"]
with open(sys.argv[3], "w") as f:
    print(json.dumps({"owner": 0, "thread": 0, "turn": 0, "sequence": 0, "tokens": ids}), file=f)
with open(sys.argv[4], "w") as f:
    print(",".join(map(str, ids)), file=f)
PY
		sleep "$pause"
		"$runner" -q -m "$art" --threads "$threads" --tokens-file "$work/seq.txt" -n 1 --json \
			>"$work/pre-$r.json"
		rm -rf "$work/labels"
		sleep "$pause"
		"$replay" label -m "$art" --threads "$threads" --chunk "$chunk" -o "$work/labels" --json "$work/t.jsonl" \
			>"$work/label-$r.json"
		"$replay" parity "$work/labels" "$work/decode.trace" >"$work/parity.txt" ||
			die "parity failed: the replay numbers below would not be labels of this decode"
	done
	python3 - "$work" "$ck/config.json" "$model" "$threads" "$chunk" "$reps" <<'PY'
import json, statistics, sys
work, cfg, model, threads, chunk, reps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
t = json.load(open(cfg))["text_config"]
L, K, H, I = t["num_hidden_layers"], t["num_experts_per_tok"], t["hidden_size"], t["moe_intermediate_size"]
# bench/run.sh's count: 2 x every dense matrix element but the embedding
# (bf16: 2 bytes an element) + the routed experts' 3 x H x I each; attention,
# the delta rule and the norms are not counted; nor is the vocabulary
# projection, which replay (taking no logits) does not compute
own = json.load(open(work + "/admit.json"))["owners"]
dense = sum(o["length"] for o in own if o["owner"] == "dense-tensor" and o["name"] not in
            ("embed_tokens.weight", "lm_head.weight"))
flop_tok = 2.0 * (dense / 2 + K * L * 3 * H * I)

def mm(xs):
    return statistics.median(xs), min(xs)

dec, pre, rep, rpl, r_pre, r_dec, r_pk, pks = [], [], [], [], [], [], [], []
for r in range(reps):
    f = open("%s/limits-%d.txt" % (work, r)).read().split()
    lim = dict(zip(f[0::2], f[1::2]))
    run = json.load(open("%s/run-%d.json" % (work, r)))
    pf = json.load(open("%s/pre-%d.json" % (work, r)))
    lab = json.load(open("%s/label-%d.json" % (work, r)))
    d, p, x = run["decode_tokens_per_second"], pf["prefill_tokens_per_second"], lab["positions_per_second"]
    dec.append(d), pre.append(p), rep.append(x), rpl.append(lab["records_per_second"])
    r_pre.append(x / p), r_dec.append(x / d), r_pk.append(x * flop_tok / float(lim["peak"]))
    pks.append(float(lim["peak"]))
print("model %s (%s): %s threads, replay chunk %s, %d rounds; median (min) over the rounds"
      % (model, run.get("backend", "?"), threads, chunk, reps))
print("  decode (hb-run):     %d prompt + %d generated tokens, %.1f (%.1f) decode tokens/s"
      % ((run["prompt_tokens"], run["generated_tokens"]) + mm(dec)))
print("  prefill (hb-run):    the same %d positions as one prompt, %.1f (%.1f) tokens/s"
      % ((pf["prompt_tokens"],) + mm(pre)))
print("  replay (hb-replay):  %d positions, %d records: %.1f (%.1f) tokens/s, %.0f (%.0f) positions x layers/s"
      % ((lab["positions"], lab["records"]) + mm(rep) + mm(rpl)))
print("  replay / prefill tokens per second: %.2f (%.2f)   replay / decode: %.2f (%.2f)" % (mm(r_pre) + mm(r_dec)))
print("  replay's matrix products: %.1f GFLOP/s = %.3f (%.3f) of the FMA peak (%.1f GFLOP/s)"
      % ((statistics.median(rep) * flop_tok / 1e9,) + mm(r_pk) + (statistics.median(pks) / 1e9,)))
print("  " + open(work + "/parity.txt").read().strip())
PY
	rm -f "$art"
done
echo "load after: $(uptime)"
