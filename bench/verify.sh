#!/usr/bin/env bash
# bench/verify.sh: hb-verify-pages throughput on an artifact of more than
# 2 GiB, as ratios against `sha256sum` and a plain sequential read (`cat`)
# of the same file measured in the same invocation.  See bench/README.md.
#
# The artifact is converted once from a synthetic checkpoint (contract-control
# weights, scripts/make-synthetic-checkpoint.py) and cached under
# $HB_BENCH_DIR (default /tmp/hb-bench).  The physical limit is the lower of
# the plain read rate and the summed hashing rate of all cores; the script
# prints both and the fraction of it reached.  Nothing is asserted about time.
#
# Environment: HB_BENCH_DIR (cache), HB_BUILD (default build).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
bench=${HB_BENCH_DIR:-/tmp/hb-bench}
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
command -v sha256sum >/dev/null || die "sha256sum is missing"
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

cold=0
drop() { sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; }
if drop; then cold=1; echo "page cache: dropped before every measurement (cold)"
else echo "page cache: cannot drop (not root?): every figure is WARM-cache"; cat "$art" >/dev/null; fi

timed() { # command... -> seconds on stdout
	local t0 t1
	((cold)) && drop
	t0=$(now)
	"$@" >/dev/null
	t1=$(now)
	calc "$t1 - $t0"
}

cat_s=$(timed cat "$art")
sum_s=$(timed sha256sum "$art")
v1_s=$(timed "$verify" -q --threads 1 "$art")
vn_s=$(timed "$verify" -q --threads "$threads" "$art")
cat_r=$(mbps "$bytes" "$cat_s") sum_r=$(mbps "$bytes" "$sum_s")
v1_r=$(mbps "$bytes" "$v1_s") vn_r=$(mbps "$bytes" "$vn_s")

# one core's hashing rate, in memory (no disk), times the cores: the CPU side
# of the physical limit
hash_r=
if [[ -x $shabench ]]; then
	# the rate of the path this process dispatches to
	hash_r=$("$shabench" --bytes 268435456 --repeat 1 2>/dev/null |
		awk '$1 == "dispatch" { path = $2 } $1 == path { print $4 }' || true)
fi

printf '%-36s %8.2f s %9s MB/s\n' "cat" "$cat_s" "$cat_r"
printf '%-36s %8.2f s %9s MB/s  %5.2f x cat\n' "sha256sum" "$sum_s" "$sum_r" "$(calc "$sum_r / $cat_r")"
for row in "1:$v1_s:$v1_r" "$threads:$vn_s:$vn_r"; do
	IFS=: read -r t s r <<<"$row"
	printf '%-36s %8.2f s %9s MB/s  %5.2f x cat  %5.2f x sha256sum\n' \
		"hb-verify-pages --threads $t" "$s" "$r" "$(calc "$r / $cat_r")" "$(calc "$r / $sum_r")"
done
if [[ -n $hash_r ]]; then
	limit=$(awk "BEGIN { h = $hash_r * $threads; c = $cat_r; print (h < c ? h : c) }")
	printf 'physical limit: min(cat %s, %d x %s MB/s hashing) = %s MB/s; reached %.2f of it\n' \
		"$cat_r" "$threads" "$hash_r" "$limit" "$(calc "$vn_r / $limit")"
fi
