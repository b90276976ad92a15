#!/usr/bin/env bash
# bench/convert.sh: hb-convert throughput and peak memory on a synthetic
# checkpoint of more than 4 GiB, against `cat` of the same shards measured in
# the same run.  See bench/README.md.
#
# The checkpoint (scripts/make-synthetic-checkpoint.py, contract-control
# weights) is generated once and cached under $HB_BENCH_DIR (default
# /tmp/hb-bench); the artifacts are deleted after each run.  Asserts only a
# memory property: every conversion's peak RSS stays under 256 MiB (the
# converter must not grow with the checkpoint).  Times are printed, never
# asserted.
#
# Environment: HB_BENCH_DIR (cache), HB_BUILD (default build), HB_BENCH_RSS_MIB
# (the bound, default 256).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
conv=$build/bin/hb-convert
bench=${HB_BENCH_DIR:-/tmp/hb-bench}
rss_bound_mib=${HB_BENCH_RSS_MIB:-256}

# 8 layers (3 linear : 1 sparse), hidden 1024, 176 experts of width 512 per
# layer (top-8): 4224 per-expert tensors of 1 MiB, 4.125 GiB of experts,
# plus ~60 MiB dense and a 20 MiB PLE table, in 9 shards + index.
geometry=(--layers 8 --hidden 1024 --experts 176 --top-k 8 --moe-intermediate 512
	--shared-intermediate 512 --vocab 8192 --heads 8 --kv-heads 2 --head-dim 128
	--indexer-heads 4 --indexer-head-dim 64 --linear-key-heads 4
	--linear-value-heads 8 --linear-key-head-dim 128 --linear-value-head-dim 128
	--hc-lowrank 64 --ple-layers 2 --heads-per-ngram 8 --ple-embed-dim 512
	--ngram-base 20000 --shards 9 --seed 7)
tag=h1024-e176-l8-s9-v1
ck=$bench/ck-$tag

die() { echo "bench/convert.sh: $*" >&2; exit 2; }
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
mbps() { awk "BEGIN { printf \"%.1f\", $1 / $2 / 1000000 }"; }

[[ -x $conv ]] || die "missing $conv: run 'make all' first"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is missing: apt-get install time"
command -v python3 >/dev/null || die "python3 is missing"
mkdir -p "$bench"

# ------------------------------------------------------------ the checkpoint
if [[ ! -e $ck/.complete ]]; then
	rm -rf "$ck"
	avail=$(df --output=avail -B1 "$bench" | tail -1)
	((avail > 10 * 1024 ** 3)) || die "$bench has $((avail / 1024 ** 2)) MiB free; need 10 GiB (checkpoint + one artifact)"
	echo "generating $ck (once; cached) ..."
	/usr/bin/time -f '%e %M' -o "$bench/gen.time" \
		python3 "$root/scripts/make-synthetic-checkpoint.py" --out "$ck" \
		--summary "$bench/ck-$tag.summary.json" "${geometry[@]}"
	read -r gen_s gen_kib <"$bench/gen.time"
	echo "$gen_s $gen_kib" >"$ck/.complete"
	rm -f "$bench/gen.time"
fi
read -r gen_s gen_kib <"$ck/.complete"
shards=("$ck"/*.safetensors)
src_bytes=$(cat "${shards[@]}" | wc -c)
printf 'checkpoint  %s\n' "$ck"
printf '            %d shards, %d bytes (%.2f GiB); generated in %s s, peak RSS %d MiB (cached run: figures of the first)\n' \
	"${#shards[@]}" "$src_bytes" "$(calc "$src_bytes / 1024^3")" "$gen_s" "$((gen_kib / 1024))"

# ----------------------------------------------------------- cache handling
cold=0
drop() { sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; }
if drop; then
	cold=1
	echo "page cache: dropped before every measurement (cold)"
else
	echo "page cache: cannot drop (not root?): every figure is WARM-cache"
	cat "${shards[@]}" >/dev/null # warm both cat and the converter alike
fi


# cat of every shard
measure_cat() {
	local t0 t1
	t0=$(date +%s.%N)
	cat "${shards[@]}" >/dev/null
	t1=$(date +%s.%N)
	calc "$t1 - $t0"
}
((cold)) && drop
cat_s=$(measure_cat)
cat_rate=$(mbps "$src_bytes" "$cat_s")
printf '%-34s %8.2f s %9s MB/s\n' "cat (all shards)$( ((cold)) && echo ', cold')" "$cat_s" "$cat_rate"
warm_s=$(measure_cat)
printf '%-34s %8.2f s %9s MB/s\n' "cat (all shards), warm" "$warm_s" "$(mbps "$src_bytes" "$warm_s")"
((cold)) || cat_rate=$(mbps "$src_bytes" "$warm_s")

# ------------------------------------------------------------ conversions
out=$bench/out-$$.gguf
trap 'rm -f "$out" "$bench"/.out-$$.gguf.* "$bench/run-$$.time" "$bench/run-$$.json"' EXIT
fail=0
run() { # label, options...
	local label=$1 wall rss_kib art
	shift
	((cold)) && drop
	if ! /usr/bin/time -v -o "$bench/run-$$.time" "$conv" -q --json --force "$@" "$ck" "$out" >"$bench/run-$$.json"; then
		echo "hb-convert $* failed" >&2
		exit 1
	fi
	rss_kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$bench/run-$$.time")
	wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$bench/run-$$.time" |
		awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
	art=$(stat -c %s "$out")
	rate=$(mbps "$src_bytes" "$wall")
	printf '%-34s %8.2f s %9s MB/s  %5.2f x cat  peak RSS %4d MiB  artifact %.2f GiB\n' \
		"$label" "$wall" "$rate" "$(calc "$rate / $cat_rate")" "$((rss_kib / 1024))" \
		"$(calc "$art / 1024^3")"
	if ((rss_kib > rss_bound_mib * 1024)); then
		echo "FAIL: peak RSS $((rss_kib / 1024)) MiB exceeds $rss_bound_mib MiB" >&2
		fail=1
	fi
	rm -f "$out"
}
threads=$(nproc)
run "hb-convert bf16, threads $threads" --expert-codec bf16
run "hb-convert bf16, --threads 1" --expert-codec bf16 --threads 1
run "hb-convert affine4-g64, threads $threads" --expert-codec affine4-g64
run "hb-convert affine4-g64, --threads 1" --expert-codec affine4-g64 --threads 1
echo "MB/s = source bytes / wall time; 'x cat' = that rate / the cat rate of this run"
echo "the cached checkpoint stays: remove it with  rm -rf '$ck' '$bench/ck-$tag.summary.json'"
exit "$fail"
