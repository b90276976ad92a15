#!/usr/bin/env bash
# bench/run.sh: hb-run prefill and decode throughput on two synthetic models
# (bench/run-model.sh: "small", today's bench model, and "real", the
# released checkpoint's widths on 4 layers), each converted with bf16 and
# with affine4-g64 experts, on 1..N threads, against limits measured in the
# same invocation for the same thread count:
#   memcpy        bytes copied per second (512 MiB, best of 5);
#   stream read   bytes read per second (bench/kernels --limits, 1 GiB);
#   FMA peak      FLOP/s of independent FMA chains in registers, widest
#                 vector the processor has, on all the threads.
# Decode: weight bytes one token reads, times tokens/s, as a fraction of
# the memcpy and of the stream-read bandwidth.  Prefill: the FLOP of its
# matrix products (2 x every dense matrix element but the embedding + 2 x
# k x layers x 3 x hidden x expert width per token, the vocabulary
# projection once a prompt, for its last row, as hb-run computes it;
# attention, the delta rule and the norms are not counted) times tokens/s,
# as a fraction of the
# FMA peak.  Prints the kernel path hb-run used, and each thread count's
# rate against the first count's (the scaling).  HB_BENCH_REPS rounds
# (default 3), each limit measured next to its run; every figure is the
# median and the min over the rounds.  See bench/README.md.
# Prints; asserts nothing about time.
#
# The checkpoints are generated once and cached under $HB_BENCH_DIR
# (default /tmp/hb-bench); the artifacts are converted with hb-convert and
# deleted at the end.
#
# Environment: HB_BENCH_DIR (cache), HB_BUILD (default build),
# HB_BENCH_PROMPT (prompt tokens, default 128), HB_BENCH_DECODE (tokens
# generated, default 48), HB_BENCH_THREADS (the largest count, default: all
# CPUs; counts 1, 2, 4, ... up to it), HB_BENCH_MODELS (default "small
# real"), HB_BENCH_CODECS (default "bf16 affine4-g64"), HB_BENCH_REPS
# (default 3), HB_BENCH_WEIGHTS (hb-run --weights modes, each run in
# every round, alternating order: default "read", the CPU default; "read
# map" compares the two), HB_BENCH_PAUSE (seconds before each timed run,
# default 3: see bench/README.md), HB_KERNEL_IMPL (passed to hb-run), CC.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
conv=$build/bin/hb-convert
admit=$build/bin/hb-admit
runner=$build/bin/hb-run
limits=$build/bench/kernels
bench=${HB_BENCH_DIR:-/tmp/hb-bench}
np=${HB_BENCH_PROMPT:-128}
nd=${HB_BENCH_DECODE:-48}
threads=${HB_BENCH_THREADS:-$(nproc)}
models=${HB_BENCH_MODELS:-small real}
codecs=${HB_BENCH_CODECS:-bf16 affine4-g64}
reps=${HB_BENCH_REPS:-3}
weights=${HB_BENCH_WEIGHTS:-read}
pause=${HB_BENCH_PAUSE:-3}

source "$root/bench/run-model.sh"

die() { echo "bench/run.sh: $*" >&2; exit 2; }
for b in "$conv" "$admit" "$runner" "$limits"; do
	[[ -x $b ]] || die "missing $b: run 'make all $build/bench/kernels' (or make bench-run) first"
done
command -v python3 >/dev/null || die "python3 is missing"
cc=${CC:-cc}
command -v "$cc" >/dev/null || die "no C compiler ($cc) for the bandwidth probe"
mkdir -p "$bench"

work=$bench/run-$$
probe=$work/membw
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"

# ------------------------------------------------- memory copy bandwidth
# A small C program: memcpy between two 512 MiB buffers (far larger than any
# cache), T threads each copying its own slice, best of 5 passes.  Reported
# as bytes copied per second (each byte is read once and written once).
cat >"$probe.c" <<'C'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define BYTES (512ul << 20)
static char *src, *dst;
static size_t slice;
static void *copy(void *arg)
{
	size_t i = (size_t)arg;
	memcpy(dst + i * slice, src + i * slice, slice);
	return NULL;
}
static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}
int main(int argc, char **argv)
{
	int t = argc > 1 ? atoi(argv[1]) : 1;
	pthread_t th[256];
	double best = 0;
	if (t < 1 || t > 256)
		return 2;
	src = malloc(BYTES), dst = malloc(BYTES);
	if (!src || !dst)
		return 3;
	memset(src, 1, BYTES), memset(dst, 2, BYTES);
	slice = BYTES / (size_t)t;
	for (int pass = 0; pass < 5; pass++) {
		double t0 = now(), rate;
		for (int i = 0; i < t; i++)
			pthread_create(&th[i], NULL, copy, (void *)(size_t)i);
		for (int i = 0; i < t; i++)
			pthread_join(th[i], NULL);
		rate = (double)slice * t / (now() - t0);
		best = rate > best ? rate : best;
	}
	printf("%.0f\n", best);
	return dst[BYTES - 1] == 1 ? 0 : 4;
}
C
"$cc" -O2 -pthread -o "$probe" "$probe.c"

counts=()
for ((n = 1; n < threads; n *= 2)); do counts+=("$n"); done
counts+=("$threads")

python3 - "$np" >"$work/prompt.txt" <<'PY'
import sys
n = int(sys.argv[1])
# a fixed, varied prompt: no stop id (none below 8192 in these checkpoints is one)
print(",".join(str((i * 2654435761) % 8000 + 1) for i in range(n)))
PY

echo "load before: $(uptime)"
for model in $models; do
	run_model "$model"
	for codec in $codecs; do
		art=$work/$model-$codec.gguf
		"$conv" -q --force --expert-codec "$codec" "$ck" "$art"
		"$admit" -q --json "$art" >"$work/admit.json"
		# the whole artifact into the page cache (hb-convert leaves most of
		# it uncached, and a short run touches only the experts it routes
		# to), then one untimed run
		cat "$art" >/dev/null
		"$runner" -q --threads "${counts[-1]}" -m "$art" --tokens-file "$work/prompt.txt" -n 2 >/dev/null
		# HB_BENCH_REPS rounds; in each, every thread count's limits and its
		# run back to back (limits first in even rounds, the run first in odd
		# ones), so a change in the machine's load falls on both alike
		: >"$work/limits.txt"
		for ((r = 0; r < reps; r++)); do
			for n in "${counts[@]}"; do
				lim() {
					echo "round $r threads $n memcpy $("$probe" "$n") $(HB_BENCH_THREADS=$n "$limits" --limits |
						tr '\n' ' ')" >>"$work/limits.txt"
				}
				((r % 2)) || lim
				# each weights mode in turn, the order reversed every other round
				ws=($weights)
				((r % 2 == 0)) || ws=($(printf '%s\n' "${ws[@]}" | tac))
				for w in "${ws[@]}"; do
					sleep "$pause"
					"$runner" -q --json --weights "$w" --threads "$n" -m "$art" --tokens-file "$work/prompt.txt" \
						-n "$nd" >"$work/run-$n-$r-$w.json"
				done
				((r % 2 == 0)) || lim
			done
		done
		HB_BENCH_WEIGHTS_LIST="$weights" python3 - "$work" "$ck/config.json" "$art" "$model" "$codec" "$reps" "${counts[@]}" <<'PY'
import json, os, statistics, struct, sys
work, cfg, art, model, codec = sys.argv[1:6]
reps = int(sys.argv[6])
counts = [int(c) for c in sys.argv[7:]]
t = json.load(open(cfg))["text_config"]
L, E, K = t["num_hidden_layers"], t["num_experts"], t["num_experts_per_tok"]
H, I, V = t["hidden_size"], t["moe_intermediate_size"], t["vocab_size"]
adm = json.load(open(work + "/admit.json"))
lim = {}
for line in open(work + "/limits.txt"):
    f = line.split()
    d = dict(zip(f[0::2], f[1::2]))
    lim[(int(d["round"]), int(d["threads"]))] = (float(d["memcpy"]), float(d["stream"]), float(d["peak"]),
                                                 int(d["width"]))

own = adm["owners"]
dense = {o["name"]: o["length"] for o in own if o["owner"] == "dense-tensor"}
experts = sum(o["length"] for o in own if o["owner"] == "expert-records")
record = experts // (L * E)
assert record * L * E == experts, (experts, L, E)
# PLE pages: every row read takes one whole page (read and hashed, AFN-003);
# the page size comes from the PLE manifest (ds4-ple-rows(5)).
m = next(o for o in own if o["owner"] == "ple-manifest")
with open(art, "rb") as f:
    f.seek(m["offset"])
    b = f.read(64)
erb, rpp, phb, align = struct.unpack_from("<4I", b, 36)
page = -(-(phb + rpp * erb) // align) * align
emb = dense.pop("embed_tokens.weight")
dense_bytes = sum(dense.values()) + emb // V  # every dense matrix, one embedding row
# FLOP per token of the matrix products: dense weights are bf16 (2 bytes an
# element; the norm vectors among them are noise), experts 3 x H x I each
flop_tok = 2.0 * (sum(dense.values()) / 2 + K * L * 3 * H * I)
# hb-run's prefill projects only the last prompt row onto the vocabulary
# (the others' logits are never read): its FLOP a prompt token leave the
# other rows' vocabulary projection out (bf16: its bytes = 2 x elements / 2)
lm_flop = 2.0 * dense.get("lm_head.weight", 0) / 2
gib = 1024 ** 3
print("model %s, experts %s: artifact %.2f GiB (dense %.1f MiB, experts %.1f MiB: %d records of %d bytes)"
      % (model, codec, os.path.getsize(art) / gib, (sum(dense.values()) + emb) / 2**20, experts / 2**20,
         L * E, record))

def mm(xs):
    """median and min of a list, as 'median (min)'"""
    return statistics.median(xs), min(xs)

first = {}
modes = os.environ["HB_BENCH_WEIGHTS_LIST"].split()
for n in counts:
  for w in modes:
    pre, dec, rpk, rcp, rst, cps, sts, pks, pfs, pmd, lds = [], [], [], [], [], [], [], [], [], [], []
    for r in range(reps):
        run = json.load(open("%s/run-%d-%d-%s.json" % (work, n, r, w)))
        cp, st, pk, width = lim[(r, n)]
        ntok = run["prompt_tokens"] + run["generated_tokens"] - 1
        ple = run["ple_rows_read"] / ntok * page
        per_tok = dense_bytes + K * L * record + ple
        p, d = run["prefill_tokens_per_second"], run.get("decode_tokens_per_second") or 0
        pre.append(p), dec.append(d)
        pre_tok = flop_tok - lm_flop + lm_flop / run["prompt_tokens"]
        rpk.append(p * pre_tok / pk), rcp.append(per_tok * d / cp), rst.append(per_tok * d / st)
        cps.append(cp), sts.append(st), pks.append(pk), pfs.append(run.get("prefault_seconds", 0))
        pmd.append(run.get("weights_pmd_mapped_bytes", 0) / os.path.getsize(art))
        lds.append(run.get("weights_read_seconds", 0))
    if w not in first:
        first[w] = (statistics.median(pre), statistics.median(dec))
    if len(first) == 1 and n == counts[0]:
        print("  per token %.1f MiB of weights read in decode (dense %.1f + %d x %d x %.2f MiB experts + PLE %.2f); "
              "%.2f GFLOP of matrix products (%.2f a prompt token); %.1f expert evaluations per position (want %d)"
              % (per_tok / 2**20, dense_bytes / 2**20, K, L, record / 2**20, ple / 2**20, flop_tok / 1e9, pre_tok / 1e9,
                 run["expert_evaluations"] / ntok, K * L))
        print("  %d rounds, each limit measured next to its run; figures are median (min) over the rounds"
              % reps)
    tag = "threads %d, %s, --weights %s" % (n, run.get("backend", "?"), w)
    print("  %s: prefill %d tokens %.2f (%.2f) tok/s = %.1f GFLOP/s = %.3f (%.3f) of the %d-bit FMA "
          "peak (%.1f GFLOP/s); x%.2f the first count's rate; weights read in %.3f s, prefaulted in %.3f s, "
          "%.2f of the artifact then mapped 2 MiB at a time"
          % ((tag, run["prompt_tokens"]) + mm(pre)
             + (statistics.median(pre) * pre_tok / 1e9,) + mm(rpk)
             + (width, statistics.median(pks) / 1e9, statistics.median(pre) / first[w][0], statistics.median(lds),
                statistics.median(pfs), statistics.median(pmd))))
    print("  %s: decode %d tokens %.2f (%.2f) tok/s = %.2f GB/s of weights = %.3f (%.3f) of memcpy "
          "(%.2f GB/s), %.3f (%.3f) of the stream read (%.2f GB/s); x%.2f the first count's rate"
          % ((tag, run["generated_tokens"] - 1) + mm(dec)
             + (per_tok * statistics.median(dec) / 1e9,) + mm(rcp) + (statistics.median(cps) / 1e9,) + mm(rst)
             + (statistics.median(sts) / 1e9, statistics.median(dec) / first[w][1] if first[w][1] else 0)))
print("  (KV/state caches and activations are not counted; weights are read once per token at best)")
PY
		rm -f "$art"
	done
done
echo "load after: $(uptime)"
