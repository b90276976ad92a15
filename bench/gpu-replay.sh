#!/bin/bash
# bench/gpu-replay.sh: our device graph against upstream transformers on the
# same GPU and the same layer geometry (GPU machine only; bench/README.md).
# In one invocation:
#   1. upstream: bench/gpu-upstream.py, LAYERS layers of the real geometry,
#      random bf16 weights made on the GPU, one causal chunk per forward
#   2. ours: bench/gpu-graph, a synthetic model of the same geometry built
#      in memory (affine4-g64 experts, no PLE) whose weights exist only on
#      the GPU (random, made there: no checkpoint, conversion or upload),
#      SEQS sequences of T tokens, one chunk of T each, every chunk whole
#      on the device graph (the observer takes routes only)
# and prints tokens/s for both and their ratio per T.  Ours times the
# chunks alone; gpu-graph prints the model's build and fill time apart.
#
#   HB_BUILD=build bench/gpu-replay.sh     (make builds $HB_BUILD/bench/gpu-graph where nvcc is)
#
# Variables: LAYERS (8), SPARSE_EVERY (4: every 4th layer QSA, the rest
# GDN, both sides), TOKENS (1024,4096,16384: upstream's chunks),
# OURS_TOKENS (1024,4096,16384: ours; 1024,4096 with ARTIFACT=1), SEQS
# (2), BATCH (set: the SEQS sequences' chunks as one pass each,
# hb_session_forward_batch), EXPERTS (affine4, or bf16: ours' expert codec), GRAPH (the
# gpu-graph to time, default $HB_BUILD/bench/gpu-graph), HB_BENCH_DIR
# (default /tmp/hb-gpu-bench: upstream.txt, ours.txt).  TOKENS= (empty) keeps the last upstream run's
# figures.  Ours' MFU counts upstream's FLOPs a token (gpu-upstream.py) at
# our rate: upstream's MFU times the ratio.
#
# ARTIFACT=1 times the old path instead: a synthetic checkpoint
# (scripts/make-synthetic-checkpoint.py: fp8 experts, no PLE, about 23 GB
# in HB_BENCH_DIR), converted with affine4-g64 experts, then hb-replay label
# --backend cuda --json over SEQS random transcripts of T tokens, --chunk T
# (REPLAY: the hb-replay to time), counting the whole label run (the
# model's load and upload included); OURS_TOKENS= (empty) only builds the
# artifact.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
dir=${HB_BENCH_DIR:-/tmp/hb-gpu-bench}
layers=${LAYERS:-8}
every=${SPARSE_EVERY:-4}
tokens=${TOKENS-1024,4096,16384}
if [ "${ARTIFACT:-0}" = 1 ]; then
	ours_tokens=${OURS_TOKENS-1024,4096}
else
	ours_tokens=${OURS_TOKENS-1024,4096,16384}
fi
seqs=${SEQS:-2}
mkdir -p "$dir"

echo "# $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"
# TOKENS= (empty) keeps the last upstream run's figures (a second invocation
# that measures only ours)
if [ -n "$tokens" ]; then
	PYTHONUNBUFFERED=1 python3 "$root/bench/gpu-upstream.py" --layers "$layers" --sparse-every "$every" --tokens "$tokens" | tee "$dir/upstream.txt"
fi
touch "$dir/upstream.txt"

if [ "${ARTIFACT:-0}" != 1 ]; then
	graph=${GRAPH:-$build/bench/gpu-graph}
	if [ ! -x "$graph" ]; then
		echo "gpu-replay: $graph is not built (make BUILD=${HB_BUILD:-build} ${HB_BUILD:-build}/bench/gpu-graph, where nvcc is)" >&2
		exit 1
	fi
	[ -n "$ours_tokens" ] || exit 0
	"$graph" --layers "$layers" --sparse-every "$every" --tokens "$ours_tokens" --seqs "$seqs" \
		--experts "${EXPERTS:-affine4}" ${BATCH:+--batch} | tee "$dir/ours.txt"
	rc=${PIPESTATUS[0]}
	python3 - "$dir/ours.txt" "$dir/upstream.txt" <<'PY'
import re, sys
up = {}
for line in open(sys.argv[2]):
    m = re.match(r"upstream T=(\d+) layers=\S+: \S+ s/chunk, (\S+) tokens/s, \S+ TFLOP/s, MFU (\S+)", line)
    if m:
        up[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
for line in open(sys.argv[1]):
    m = re.match(r"ours T=(\d+) layers=(\S+) tokens/s (\S+)", line)
    if not m:
        continue
    T, layers, ours = int(m.group(1)), m.group(2), float(m.group(3))
    if "FAILED" in line:
        print("ratio T=%d layers=%s: none, ours FAILED" % (T, layers))
    elif T in up:
        u, mfu = up[T]
        print("ratio T=%d layers=%s: ours %.1f tokens/s, upstream %.1f tokens/s: %.4fx upstream, MFU %.5f" % (
            T, layers, ours, u, ours / u, mfu * ours / u))
    else:
        print("ratio T=%d layers=%s: ours %.1f tokens/s, no upstream figure" % (T, layers, ours))
PY
	exit "$rc"
fi

ck=$dir/ck-real-l$layers-s$every art=$dir/real-l$layers-s$every-a4.gguf
if [ ! -f "$art" ]; then
	t0=$(date +%s.%N)
	python3 "$root/scripts/make-synthetic-checkpoint.py" --out "$ck" --force --summary "$dir/ck.json" \
		--layers "$layers" --hidden 2560 --vocab 151936 --experts 512 --top-k 10 \
		--moe-intermediate 640 --shared-intermediate 640 --heads 32 --kv-heads 2 --head-dim 256 \
		--hc-count 4 --hc-lowrank 320 --linear-key-heads 16 --linear-value-heads 48 \
		--linear-key-head-dim 128 --linear-value-head-dim 128 --indexer-heads 16 \
		--indexer-head-dim 128 --indexer-budget 2048 --indexer-compress-ratio 4 --sparse-every "$every" \
		--ple-layers '' --expert-dtype fp8 --shards 8 || exit 1
	t1=$(date +%s.%N)
	"$build/bin/hb-convert" -q --expert-codec affine4-g64 "$ck" "$art" || exit 1
	t2=$(date +%s.%N)
	rm -rf "$ck"
	echo "# checkpoint written in $(python3 -c "print('%.1f' % ($t1 - $t0))") s, converted in $(python3 -c "print('%.1f' % ($t2 - $t1))") s: $(du -h "$art" | cut -f1)"
fi

for T in ${ours_tokens//,/ }; do
	python3 -c "
import json, random
random.seed($T)
for s in range($seqs):
    print(json.dumps({'owner': 0, 'thread': s, 'turn': 0, 'sequence': s,
                      'tokens': [random.randrange(100, 150000) for _ in range($T)]}))" >"$dir/t$T.jsonl"
	rm -rf "$dir/L$T"
	out=$("${REPLAY:-$build/bin/hb-replay}" label -q -m "$art" --backend cuda --chunk "$T" -o "$dir/L$T" --json "$dir/t$T.jsonl" 2>&1)
	rc=$?
	if [ $rc -ne 0 ]; then
		echo "ours T=$T layers=$layers: hb-replay failed (exit $rc): $out"
		continue
	fi
	python3 - "$T" "$layers" "$dir/upstream.txt" <<PY
import json, re, sys
T, layers = int(sys.argv[1]), sys.argv[2]
r = json.loads('''$out''')
ours = r["positions_per_second"]
up = mfu = None
for line in open(sys.argv[3]):
    m = re.match(r"upstream T=%d layers=\S+: \S+ s/chunk, (\S+) tokens/s, \S+ TFLOP/s, MFU (\S+)" % T, line)
    if m:
        up, mfu = float(m.group(1)), float(m.group(2))
print("ours T=%d layers=%s: %d positions in %.2f s, %.1f tokens/s%s" % (
    T, layers, r["positions"], r["seconds"], ours,
    ", %.4fx upstream (%.1f tokens/s), MFU %.5f" % (ours / up, up, mfu * ours / up) if up else ""))
PY
done
