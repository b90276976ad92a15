#!/bin/bash
# bench/gpu-replay.sh: hb-replay label --backend cuda against upstream
# transformers on the same GPU and the same layer geometry (GPU machine only;
# bench/README.md).  In one invocation:
#   1. upstream: bench/gpu-upstream.py, LAYERS layers of the real geometry,
#      random bf16 weights made on the GPU, one causal chunk per forward
#   2. ours: a synthetic checkpoint of the same geometry
#      (scripts/make-synthetic-checkpoint.py: fp8 experts, no PLE), converted
#      with affine4-g64 experts, then hb-replay label --backend cuda --json
#      over SEQS random transcripts of T tokens, --chunk T
# and prints tokens/s for both and their ratio.  Ours counts the whole
# label run (the model's load and the weights' upload to the device
# included), as a replay job sees it.
#
#   HB_BUILD=build bench/gpu-replay.sh
#
# Variables: HB_BENCH_DIR (default /tmp/hb-gpu-bench: the checkpoint and
# artifact, about 23 GB; /dev/shm/... keeps them in memory), LAYERS (8),
# SPARSE_EVERY (4: every 4th layer QSA, the rest GDN, both sides), REPLAY
# (the hb-replay to time, default $HB_BUILD/bin/hb-replay),
# TOKENS (1024,4096,16384: the upstream chunks), OURS_TOKENS (1024,4096:
# ours), SEQS (2).  TOKENS= and OURS_TOKENS= (both empty) only build the
# artifact.  Ours' MFU counts upstream's FLOPs a token (gpu-upstream.py) at
# our rate: upstream's MFU times the ratio.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
dir=${HB_BENCH_DIR:-/tmp/hb-gpu-bench}
layers=${LAYERS:-8}
every=${SPARSE_EVERY:-4}
tokens=${TOKENS-1024,4096,16384}
ours_tokens=${OURS_TOKENS-1024,4096}
seqs=${SEQS:-2}
mkdir -p "$dir"

echo "# $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)"
# TOKENS= (empty) keeps the last upstream run's figures (a second invocation
# that measures only ours)
if [ -n "$tokens" ]; then
	PYTHONUNBUFFERED=1 python3 "$root/bench/gpu-upstream.py" --layers "$layers" --sparse-every "$every" --tokens "$tokens" | tee "$dir/upstream.txt"
fi
touch "$dir/upstream.txt"

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
