#!/usr/bin/env bash
# bench/trace.sh: hb-trace throughput on a large synthetic trace.
#
# Generates once (cached under $HB_BENCH_DIR, default /tmp/hb-bench) a
# contract-control trace of Qwen4Exp geometry: 48 layers, 512 experts,
# top-10, TOKENS tokens (default 40000: 1.92 M observations), routes drawn
# with a skewed, slowly drifting popularity (not a model capture).  Then
# times `hb-trace stats` and `hb-trace cache-sim` (one policy and budget at
# a time, and the full policy x budget matrix) and prints observations
# (token x layer records) processed per second per core.  Measures; never
# fails on time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
trace_bin=${HB_TRACE:-$build/bin/hb-trace}
dir=${HB_BENCH_DIR:-/tmp/hb-bench}
tokens=${TOKENS:-40000}
mkdir -p "$dir"
shard=$dir/synthetic-l48-e512-k10-t$tokens.trace

if [[ ! -s $shard ]]; then
	echo "generating $shard ($tokens tokens x 48 layers)" >&2
	python3 - "$shard" "$tokens" <<'PY'
import random, struct, sys, zlib
path, T = sys.argv[1], int(sys.argv[2])
k, L, E = 10, 48, 512
rb = 40 + 8 * k
h = bytearray(128)
h[0:8] = b"HBTRACE1"
struct.pack_into("<IIIIII", h, 8, 1, 128, k, L, E, rb)
h[32:64] = b"\x5a" * 32
struct.pack_into("<I", h, 124, zlib.crc32(bytes(h[:124])))
rng = random.Random(7)
weights = struct.pack("<%df" % k, *[0.1] * k)
hot = [[rng.randrange(E) for _ in range(24)] for _ in range(L)]
with open(path, "wb") as f:
    f.write(h)
    recs = []
    def flush():
        payload = b"".join(recs)
        f.write(b"HBCHUNK1" + struct.pack("<IIQ", len(recs), zlib.crc32(payload), len(payload)) + payload)
        recs.clear()
    for t in range(T):
        if t % 64 == 0:  # popularity drifts
            for l in range(L):
                hot[l][rng.randrange(24)] = rng.randrange(E)
        for l in range(L):
            ids = []
            while len(ids) < k:
                e = rng.choice(hot[l]) if rng.random() < 0.6 else rng.randrange(E)
                if e not in ids:
                    ids.append(e)
            recs.append(struct.pack("<QQIIQii", 0, t, l, 0, 0, -1, -1) + struct.pack("<%dI" % k, *ids) + weights)
            if len(recs) == 4096:
                flush()
    if recs:
        flush()
PY
fi

obs=$((tokens * 48))
echo "trace: $shard ($(stat -c %s "$shard") bytes, $obs observations)"
measure() { # label, cores, command...
	local label=$1 cores=$2 t0 t1 s
	shift 2
	t0=$(date +%s.%N)
	"$@" >/dev/null
	t1=$(date +%s.%N)
	s=$(python3 -c "print($t1 - $t0)")
	python3 -c "
s, obs, cores = $s, $obs, $cores
print('%-46s %8.3f s %14.0f obs/s/core' % ('$label', s, obs / s / cores))"
}
cat "$shard" >/dev/null # warm the page cache: this measures compute
measure "stats" 1 "$trace_bin" stats --json "$shard"
measure "cat (JSON lines)" 1 "$trace_bin" cat "$shard"
for p in lru lfu lfu-decay score belady; do
	measure "cache-sim $p, budget 2400 (global)" 1 "$trace_bin" cache-sim --policy $p --budget 2400 "$shard"
done
measure "cache-sim lru, budget 2400 (per layer)" 1 "$trace_bin" cache-sim --per-layer --policy lru --budget 2400 "$shard"
threads=$(nproc)
budgets=480,960,2400,4800,9600,24576
echo "full matrix: 5 policies x 6 budgets = 30 simulations; figure = observations x 30 / s / core"
t0=$(date +%s.%N)
"$trace_bin" cache-sim --threads "$threads" --budget $budgets "$shard" >/dev/null
t1=$(date +%s.%N)
python3 -c "
s = $t1 - $t0
print('%-46s %8.3f s %14.0f obs-sims/s/core (%d threads)' % ('cache-sim all policies x 6 budgets', s, $obs * 30 / s / $threads, $threads))"
