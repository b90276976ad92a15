#!/usr/bin/env bash
# bench/verify.sh: hb-verify-pages throughput on an artifact of more than
# 2 GiB, as a ratio against a plain sequential read (`cat`) of the same file
# measured in the same invocation, interleaved.  See bench/README.md.
#
# The artifact is converted once from a synthetic checkpoint (contract-control
# weights, scripts/make-synthetic-checkpoint.py) and cached under
# $HB_BENCH_DIR (default /tmp/hb-bench).  Each round runs cat and every
# verifier variant, the order reversed every other round (A B C, C B A, ...)
# so that a drift in the machine's load falls on all of them alike; each
# verifier run is paired with the cat run of its round, and the ratios are
# printed as median and min over the rounds, with the stage that bounded
# each run (the verifier's --json "pipeline" record) and the load average
# before and after.  Nothing is asserted about time.
#
# Environment: HB_BENCH_DIR (cache), HB_BUILD (default build),
# HB_BENCH_ROUNDS (default 4).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
bench=${HB_BENCH_DIR:-/tmp/hb-bench}
rounds=${HB_BENCH_ROUNDS:-4}
conv=$build/bin/hb-convert verify=$build/bin/hb-verify-pages shabench=$build/bench/sha256

# 6 layers, hidden 1024, 128 experts of width 512 (per-expert 1 MiB): about
# 2.3 GiB of artifact with a PLE store.
geometry=(--layers 6 --hidden 1024 --experts 128 --top-k 8 --moe-intermediate 512
	--shared-intermediate 512 --vocab 8192 --heads 8 --kv-heads 2 --head-dim 128
	--indexer-heads 4 --indexer-head-dim 64 --linear-key-heads 4
	--linear-value-heads 8 --linear-key-head-dim 128 --linear-value-head-dim 128
	--hc-lowrank 64 --ple-layers 2 --heads-per-ngram 8 --ple-embed-dim 512
	--ngram-base 20000 --shards 4 --seed 11)
tag=verify-h1024-e128-l6-v1
ck=$bench/ck-$tag art=$bench/$tag.gguf

die() { echo "bench/verify.sh: $*" >&2; exit 2; }
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }
mbps() { awk "BEGIN { printf \"%.1f\", $1 / $2 / 1000000 }"; }
now() { date +%s.%N; }

for x in "$conv" "$verify"; do [[ -x $x ]] || die "missing $x: run 'make all' first"; done
command -v python3 >/dev/null || die "python3 is needed to read the JSON report"
((rounds >= 1)) || die "HB_BENCH_ROUNDS must be >= 1"
mkdir -p "$bench"

if [[ ! -e $art ]]; then
	avail=$(df --output=avail -B1 "$bench" | tail -1)
	((avail > 6 * 1024 ** 3)) || die "$bench has $((avail / 1024 ** 2)) MiB free; need 6 GiB"
	echo "generating $art (once; cached) ..."
	rm -rf "$ck"
	python3 "$root/scripts/make-synthetic-checkpoint.py" --out "$ck" "${geometry[@]}" >/dev/null
	"$conv" -q "$ck" "$art.part" && mv "$art.part" "$art"
	rm -rf "$ck" # the artifact is all the bench needs
fi
bytes=$(stat -c %s "$art")
threads=$(nproc)
printf 'artifact    %s: %d bytes (%.2f GiB); %d CPUs; SHA-256 path: %s\n' "$art" "$bytes" \
	"$(calc "$bytes / 1024^3")" "$threads" "${HB_SHA256_IMPL:-automatic}"
printf 'load        %s (before)\n' "$(cut -d' ' -f1-3 /proc/loadavg)"

cold=0
drop() { sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; }
if drop; then cold=1; echo "page cache: dropped before every measurement (cold)"
else echo "page cache: cannot drop (not root?): every figure is WARM-cache"; cat "$art" >/dev/null; fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the variants: a label and the verifier's options ("cat" is the read alone)
labels=("cat" "verify --threads $threads (O_DIRECT)" "verify --threads $threads --io buffered" "verify --threads 1 (O_DIRECT)")
opts=("" "--threads $threads" "--threads $threads --io buffered" "--threads 1")

run_one() { # index -> appends "seconds bound" to $tmp/<index>
	local i=$1 t0 t1 bound=-
	((cold)) && drop
	t0=$(now)
	if ((i == 0)); then
		cat "$art" >/dev/null
	else
		# shellcheck disable=SC2086
		"$verify" --json ${opts[i]} "$art" >"$tmp/report.json"
	fi
	t1=$(now)
	((i == 0)) || bound=$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["pipeline"]; print(p["bound"])' "$tmp/report.json")
	echo "$(calc "$t1 - $t0") $bound" >>"$tmp/$i"
}

for ((r = 0; r < rounds; r++)); do
	if ((r % 2 == 0)); then order=(0 1 2 3); else order=(3 2 1 0); fi
	for i in "${order[@]}"; do run_one "$i"; done
done

# stage costs alone, same invocation: the read is the cat rows; one core's
# SHA-256 in memory on the path this process dispatches to
hash_r=
if [[ -x $shabench ]]; then
	hash_r=$("$shabench" --bytes 268435456 --repeat 2 2>/dev/null |
		awk '$1 == "dispatch" { path = $2 } $1 == path { print $4 }' || true)
fi
printf 'load        %s (after)\n' "$(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$tmp" "$bytes" "$rounds" "${hash_r:-0}" "${labels[@]}" <<'PY'
import statistics, sys
tmp, nbytes, rounds, hash_r = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
labels = sys.argv[5:]
runs = []
for i in range(len(labels)):
    rows = [l.split() for l in open(f"{tmp}/{i}")]
    runs.append([(float(s), b) for s, b in rows])
cat = [s for s, _ in runs[0]]
rate = lambda s: nbytes / s / 1e6
print(f"{'':40s} {'median s':>9s} {'min s':>7s} {'MB/s med':>9s}  {'x cat med':>9s} {'x cat min':>9s}  bound (per round)")
for i, lab in enumerate(labels):
    secs = [s for s, _ in runs[i]]
    med = statistics.median(secs)
    line = f"{lab:40s} {med:9.2f} {min(secs):7.2f} {rate(med):9.1f}"
    if i:
        ratios = [c / s for c, s in zip(cat, secs)]
        bounds = ",".join(b for _, b in runs[i])
        line += f"  {statistics.median(ratios):9.2f} {min(ratios):9.2f}  {bounds}"
    print(line)
print(f"rounds {rounds}, order reversed every other round; 'x cat' = cat time / run time of the same round")
if hash_r:
    lim = min(rate(statistics.median(cat)), hash_r)
    print(f"stages alone: read (cat) {rate(statistics.median(cat)):.1f} MB/s; one core's SHA-256 {hash_r:.1f} MB/s "
          f"(the whole-payload digest is one sequential stream, so it cannot beat this); "
          f"limit min(read, one core) = {lim:.1f} MB/s")
PY
