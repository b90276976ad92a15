#!/usr/bin/env bash
# bench/admit.sh: how long hb-admit takes on the real profile's full
# geometry, and how much of the file it reads.  Builds the sparse
# qwen4exp-flash-next artifact of the admission tests (~335 GiB apparent,
# ~45 MB of real blocks: header, expert descriptors, PLE manifest and
# digest table; every payload byte a hole) with bench/make-sparse-artifact,
# runs `hb-admit --json` on it HB_BENCH_REPEAT times (default 7), and
# prints the median, min and max wall time, the bytes admission read (from
# the JSON report), the file size and the ratio bytes_read / file_size.
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
repeat=${HB_BENCH_REPEAT:-7}

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

cold=no
if [[ $(id -u) == 0 ]] && sync && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
	cold=yes
fi
times=()
for ((i = 0; i < repeat; i++)); do
	t0=$(date +%s%N)
	rc=0
	"$admit" --json "$art" >"$art.json" || rc=$?
	t1=$(date +%s%N)
	((rc == 0)) || { cat "$art.json"; die "hb-admit refused the artifact (exit $rc)"; }
	times+=($(((t1 - t0) / 1000)))
done
bytes_read=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["bytes_read"]); assert r["admitted"] and r["file_bytes"]==int(sys.argv[2])' "$art.json" "$file_bytes")

sorted=($(printf '%s\n' "${times[@]}" | sort -n))
median=${sorted[$((repeat / 2))]}
awk -v med="$median" -v min="${sorted[0]}" -v max="${sorted[$((repeat - 1))]}" -v n="$repeat" \
	-v br="$bytes_read" -v fb="$file_bytes" -v cold="$cold" 'BEGIN {
	printf "hb-admit runs      %d (first run cold: %s)\n", n, cold
	printf "wall median        %.1f ms (min %.1f, max %.1f)\n", med / 1000, min / 1000, max / 1000
	printf "bytes read         %s (%.1f MB)\n", br, br / 1e6
	printf "file size          %s (%.1f GB)\n", fb, fb / 1e9
	printf "bytes_read/file    %.3e\n", br / fb
}'
