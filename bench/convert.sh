#!/usr/bin/env bash
# bench/convert.sh: hb-convert throughput and peak memory on a synthetic
# checkpoint of more than 4 GiB, against `cat` of the same shards measured in
# the same run, interleaved.  See bench/README.md.
#
# The checkpoint (scripts/make-synthetic-checkpoint.py, contract-control
# weights) is generated once and cached under $HB_BENCH_DIR (default
# /tmp/hb-bench); the artifacts are deleted after each run.  Each round runs
# cat of the shards, a write of the bf16 artifact's size alone (O_DIRECT,
# then fsync: the converter's write path) and both conversions, the order
# reversed every other round so that a drift in the machine's load falls on
# all of them alike; every ratio pairs a run with the cat of its round and is
# printed as median and min over the rounds, with the bound the converter's
# --json timing names, and the load average before and after.  Asserts only
# a memory property: every conversion's peak RSS stays under 256 MiB (the
# converter must not grow with the checkpoint).  Times are printed, never
# asserted.
#
# Environment: HB_BENCH_DIR (cache), HB_BUILD (default build), HB_BENCH_RSS_MIB
# (the bound, default 256), HB_BENCH_ROUNDS (default 2), HB_BENCH_IO (the --io
# modes to convert with, default: the converter's default only),
# HB_BENCH_BASELINE (another hb-convert binary converted in the same rounds,
# with its default --io: old against new), HB_BENCH_CODECS (default
# "bf16 affine4-g64").
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
conv=$build/bin/hb-convert shabench=$build/bench/sha256
bench=${HB_BENCH_DIR:-/tmp/hb-bench}
rss_bound_mib=${HB_BENCH_RSS_MIB:-256}
rounds=${HB_BENCH_ROUNDS:-2}
io_modes=(${HB_BENCH_IO:-})
codecs=(${HB_BENCH_CODECS:-bf16 affine4-g64})
baseline=${HB_BENCH_BASELINE:-}

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

[[ -x $conv ]] || die "missing $conv: run 'make all' first"
[[ -z $baseline || -x $baseline ]] || die "HB_BENCH_BASELINE: $baseline is not executable"
[[ -x /usr/bin/time ]] || die "/usr/bin/time is missing: apt-get install time"
command -v python3 >/dev/null || die "python3 is missing"
((rounds >= 1)) || die "HB_BENCH_ROUNDS must be >= 1"
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
printf 'load        %s (before); %d CPUs\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$(nproc)"

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

tmp=$(mktemp -d "$bench/run-XXXXXX")
out=$tmp/out.gguf
trap 'rm -rf "$tmp"' EXIT
fail=0
labels=("cat (all shards)" "write alone (O_DIRECT + fsync)")
codec_of=("" "") io_of=("" "") bin_of=("" "")
for codec in "${codecs[@]}"; do
	for io in "${io_modes[@]:-}"; do
		labels+=("hb-convert $codec${io:+ --io $io}") codec_of+=("$codec") io_of+=("$io") bin_of+=("$conv")
	done
	if [[ -n $baseline ]]; then
		labels+=("baseline $codec") codec_of+=("$codec") io_of+=("") bin_of+=("$baseline")
	fi
done

run_one() { # index -> appends "seconds rss_kib bound artifact_bytes" to $tmp/<index>
	local i=$1 t0 t1 rss=0 bound=- art=0 s
	((cold)) && drop
	case $i in
	0)
		t0=$(date +%s.%N)
		cat "${shards[@]}" >/dev/null
		t1=$(date +%s.%N)
		s=$(calc "$t1 - $t0")
		;;
	1)
		# the bf16 artifact's size, as the converter writes it
		t0=$(date +%s.%N)
		dd if=/dev/zero of="$tmp/w.bin" bs=8M count=$(((src_bytes + (8 << 20) - 1) / (8 << 20))) \
			oflag=direct conv=fsync status=none
		t1=$(date +%s.%N)
		rm -f "$tmp/w.bin"
		s=$(calc "$t1 - $t0")
		;;
	*)
		if ! /usr/bin/time -v -o "$tmp/time" "${bin_of[i]}" -q --json --force --expert-codec "${codec_of[i]}" \
			${io_of[i]:+--io "${io_of[i]}"} "$ck" "$out" >"$tmp/report.json"; then
			echo "${labels[i]} failed" >&2
			exit 1
		fi
		rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/time")
		s=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$tmp/time" |
			awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; print s }')
		art=$(stat -c %s "$out")
		python3 - "$tmp/report.json" "$tmp/stages.$i" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["timing"]
p = t["expert_pipeline"]
with open(sys.argv[2], "a") as f:
    f.write(" ".join(str(x) for x in (p["bound"], p["producers"], p["io"], p["wall_s"], p["cpu_s"], p["read_s"],
            p["encode_s"], p["record_digest_s"], p["payload_digest_s"], p["write_s"], p["read_back_s"],
            p["source_bytes"], t["commit_s"], p["payload_bytes"])) + "\n")
PY
		bound=$(tail -1 "$tmp/stages.$i" | cut -d' ' -f1)
		rm -f "$out"
		if ((rss > rss_bound_mib * 1024)); then
			echo "FAIL: peak RSS $((rss / 1024)) MiB exceeds $rss_bound_mib MiB" >&2
			fail=1
		fi
		;;
	esac
	echo "$s $rss $bound $art" >>"$tmp/$i"
}

for ((r = 0; r < rounds; r++)); do
	order=()
	for ((i = 0; i < ${#labels[@]}; i++)); do
		if ((r % 2 == 0)); then order+=("$i"); else order=("$i" "${order[@]}"); fi
	done
	for i in "${order[@]}"; do run_one "$i"; done
done

hash_r=
if [[ -x $shabench ]]; then
	hash_r=$("$shabench" --bytes 268435456 --repeat 2 2>/dev/null |
		awk '$1 == "dispatch" { path = $2 } $1 == path { print $4 }' || true)
fi
printf 'load        %s (after)\n' "$(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$tmp" "$src_bytes" "$rounds" "${hash_r:-0}" "${labels[@]}" <<'PY'
import statistics, sys
tmp, nbytes, rounds, hash_r = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
labels = sys.argv[5:]
conv = range(2, len(labels))
runs = [[l.split() for l in open(f"{tmp}/{i}")] for i in range(len(labels))]
cat = [float(r[0]) for r in runs[0]]
rate = lambda s: nbytes / s / 1e6
print(f"{'':32s} {'median s':>9s} {'min s':>7s} {'MB/s med':>9s}  {'x cat med':>9s} {'x cat min':>9s}  {'RSS MiB':>7s}  bound (per round)")
for i, lab in enumerate(labels):
    secs = [float(r[0]) for r in runs[i]]
    med = statistics.median(secs)
    line = f"{lab:32s} {med:9.2f} {min(secs):7.2f} {rate(med):9.1f}"
    if i:
        ratios = [c / s for c, s in zip(cat, secs)]
        line += f"  {statistics.median(ratios):9.2f} {min(ratios):9.2f}"
    if i in conv:
        rss = max(int(r[1]) for r in runs[i]) // 1024
        line += f"  {rss:7d}  " + ",".join(r[2] for r in runs[i])
    print(line)
print(f"rounds {rounds}, order reversed every other round; MB/s = source bytes / wall time;"
      f" 'x cat' = cat time / run time of the same round")
# the stages alone, from the conversions' own --json timing (median round)
for i in conv:
    rows = [l.split() for l in open(f"{tmp}/stages.{i}")]
    row = sorted(rows, key=lambda r: float(r[3]))[len(rows) // 2]
    bound, prod, io = row[0], int(row[1]), row[2]
    wall, cpu, rd, enc, dig, pay, wr, rb, sb, commit, pb = map(float, row[3:])
    per = lambda busy, n=1, b=sb: (b / (busy / n) / 1e6) if busy > 0 else float("inf")
    print(f"{labels[i]}: expert pipeline {wall:.2f} s ({io}, {prod} producers), CPU {cpu:.2f} s, commit {commit:.2f} s; "
          f"stage rates on their own threads: source read {per(rd, prod):.0f} MB/s per producer, "
          f"{'quantise' if 'affine4' in labels[i] else 'NaN scan'} {per(enc, prod):.0f} MB/s per producer, "
          f"record digests {per(dig, b=pb):.0f} MB/s, payload digest {per(pay, b=pb):.0f} MB/s, "
          f"write {per(wr, b=pb):.0f} MB/s, read-back {per(rb, b=pb):.0f} MB/s "
          f"(source MB/s for read and {'quantise' if 'affine4' in labels[i] else 'scan'}, artifact MB/s after); bound: {bound}")
w = statistics.median(float(r[0]) for r in runs[1])
print(f"stages alone: read (cat) {rate(statistics.median(cat)):.1f} MB/s; write {rate(w):.1f} MB/s"
      + (f"; one core's SHA-256 {hash_r:.1f} MB/s (the payload digest is one stream)" if hash_r else ""))
PY
echo "the cached checkpoint stays: remove it with  rm -rf '$ck' '$bench/ck-$tag.summary.json'"
exit "$fail"
