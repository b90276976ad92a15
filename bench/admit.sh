#!/usr/bin/env bash
# bench/admit.sh: how long hb-admit takes on the real profile's full
# geometry, and how much of the file it reads.  Builds the sparse
# qwen4exp-flash-next artifact of the admission tests (~335 GiB apparent,
# ~45 MB of real blocks: header, expert descriptors, PLE manifest and
# digest table; every payload byte a hole) with bench/make-sparse-artifact,
# runs `hb-admit --json` on it HB_BENCH_REPEAT times (default 15), and
# prints the median, min and max wall time (bash's EPOCHREALTIME around the
# command: no clock process of its own in the figure), the bytes admission
# read (from the JSON report) against what the contract makes it read (the
# header region with the embedded tokenizer and the record digest table,
# the PLE manifest with its digest table), the file size, the ratio
# bytes_read / file_size, and the SHA-256 floor: the PLE manifest digest is
# one sequential stream over its digest table, at one core's rate
# (bench/sha256, when built).
#
# Times are printed, never asserted.  The first run is cold when the page
# cache can be dropped (root), otherwise every run is warm and says so.
# The artifact is written under $HB_BENCH_DIR (default /tmp/hb-bench) and
# removed at the end.
#
# Environment: HB_BUILD (default build), HB_BENCH_DIR, HB_BENCH_REPEAT.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
maker=$build/bench/make-sparse-artifact
admit=$build/bin/hb-admit
dir=${HB_BENCH_DIR:-/tmp/hb-bench}
repeat=${HB_BENCH_REPEAT:-15}
shabench=$build/bench/sha256

die() { echo "bench/admit.sh: $*" >&2; exit 2; }

[[ -x $maker ]] || die "missing $maker: run 'make bench-admit'"
[[ -x $admit ]] || die "missing $admit: run 'make all'"
command -v python3 >/dev/null || die "python3 is needed to read the JSON report"
((repeat >= 1)) || die "HB_BENCH_REPEAT must be >= 1"
mkdir -p "$dir"
avail=$(df --output=avail -B1 "$dir" | tail -1)
((avail > 256 * 1024 ** 2)) || die "$dir has $((avail / 1024 ** 2)) MiB free; need 256 MiB"
art=$dir/admit-flash-next-$$.gguf
trap 'rm -f "$art" "$art.json"' EXIT

read -r _ file_bytes _ alloc _ tensors _ pages _ header < <("$maker" "$art")
echo "artifact: $tensors tensors, $file_bytes bytes apparent, $alloc allocated," \
	"$pages PLE pages, header $header bytes"

echo "load: $(cut -d' ' -f1-3 /proc/loadavg) (before); $(nproc) CPUs"
cold=no
if [[ $(id -u) == 0 ]] && sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
	cold=yes
fi
usec() { local t=${1/./}; echo $((10#$t)); } # EPOCHREALTIME (s.us) -> us
times=()
for ((i = 0; i < repeat; i++)); do
	t0=$EPOCHREALTIME
	rc=0
	"$admit" --json "$art" >"$art.json" || rc=$?
	t1=$EPOCHREALTIME
	((rc == 0)) || { cat "$art.json"; die "hb-admit refused the artifact (exit $rc)"; }
	times+=($(($(usec "$t1") - $(usec "$t0"))))
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) (after)"
hash_r=0
if [[ -x $shabench ]]; then
	hash_r=$("$shabench" --bytes 268435456 --repeat 2 2>/dev/null |
		awk '$1 == "dispatch" { path = $2 } $1 == path { print $4 }' || echo 0)
fi
bytes_read=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["bytes_read"]); assert r["admitted"] and r["file_bytes"]==int(sys.argv[2])' "$art.json" "$file_bytes")

sorted=($(printf '%s\n' "${times[@]}" | sort -n))
median=${sorted[$((repeat / 2))]}
awk -v med="$median" -v min="${sorted[0]}" -v max="${sorted[$((repeat - 1))]}" -v n="$repeat" \
	-v br="$bytes_read" -v fb="$file_bytes" -v cold="$cold" -v hdr="$header" -v pages="$pages" \
	-v hr="$hash_r" 'BEGIN {
	table = 32 * pages
	printf "hb-admit runs      %d (first run cold: %s)\n", n, cold
	printf "wall median        %.1f ms (min %.1f, max %.1f)\n", med / 1000, min / 1000, max / 1000
	printf "bytes read         %s (%.1f MB)\n", br, br / 1e6
	printf "  of which         header region %d (%.1f MB, the embedded tokenizer and the record digest table in it),\n", hdr, hdr / 1e6
	printf "                   PLE digest table %d (%.1f MB: %d pages x 32, under the manifest digest), the rest %d\n", table, table / 1e6, pages, br - hdr - table
	printf "file size          %s (%.1f GB)\n", fb, fb / 1e9
	printf "bytes_read/file    %.3e\n", br / fb
	if (hr > 0)
		printf "SHA-256 floor      %.1f ms: the PLE digest table at one core'"'"'s %.0f MB/s (one stream)\n", table / hr / 1000, hr
}'
