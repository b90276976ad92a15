#!/usr/bin/env bash
# bench/sha256.sh: SHA-256 throughput of hb_sha256's two paths (libsodium and
# the SHA-NI block function) on a 1 GiB in-memory buffer, and of sha256sum on
# the same bytes as a page-cached file, all in one run.  Prints MB/s
# (10^6 bytes per second, best of HB_BENCH_REPEAT runs, default 2) and the
# ratios ni/sodium and ni/sha256sum; then the same bytes as 2, 3 and 4
# independent digests side by side (hb_sha256_update_lanes) and their rate
# over one ni digest's.  Single-threaded throughout.
#
# Checks only that all three digests agree; times are printed, never
# asserted.  The file is written under $HB_BENCH_DIR (default /tmp/hb-bench)
# and removed at the end.
#
# Environment: HB_BUILD (default build), HB_BENCH_DIR, HB_BENCH_BYTES
# (default 1073741824), HB_BENCH_REPEAT.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
prog=$build/bench/sha256
dir=${HB_BENCH_DIR:-/tmp/hb-bench}
bytes=${HB_BENCH_BYTES:-1073741824}
repeat=${HB_BENCH_REPEAT:-2}

die() { echo "bench/sha256.sh: $*" >&2; exit 2; }
calc() { awk "BEGIN { printf \"%.2f\", $1 }"; }

[[ -x $prog ]] || die "missing $prog: run 'make bench-sha256'"
command -v sha256sum >/dev/null || die "sha256sum is missing"
mkdir -p "$dir"
avail=$(df --output=avail -B1 "$dir" | tail -1)
((avail > bytes + 256 * 1024 ** 2)) || die "$dir has $((avail / 1024 ** 2)) MiB free; need $((bytes / 1024 ** 2 + 256)) MiB"
file=$dir/sha256-$$.bin
trap 'rm -f "$file"' EXIT

out=$("$prog" --bytes "$bytes" --repeat "$repeat" --write "$file") || {
	printf '%s\n' "$out"
	die "the paths disagree, or the program failed"
}
printf '%s\n' "$out" | grep '^dispatch '
read -r _ _ sodium_s sodium_rate sodium_hex < <(grep '^sodium ' <<<"$out")
ni_line=$(grep '^ni ' <<<"$out")
ni_rate=
if [[ $ni_line == "ni unsupported" ]]; then
	echo "ni: this processor lacks the SHA extensions"
else
	read -r _ _ ni_s ni_rate ni_hex <<<"$ni_line"
fi

# sha256sum of the same bytes, page-cached (cat first), best of $repeat.
cat "$file" >/dev/null
sum_s=
for ((r = 0; r < repeat; r++)); do
	t0=$(date +%s.%N)
	sum_hex=$(sha256sum "$file" | cut -d' ' -f1)
	t1=$(date +%s.%N)
	t=$(awk "BEGIN { printf \"%.6f\", $t1 - $t0 }")
	if [[ -z $sum_s ]] || awk "BEGIN { exit !($t < $sum_s) }"; then
		sum_s=$t
	fi
done
sum_rate=$(awk "BEGIN { printf \"%.1f\", $bytes / $sum_s / 1000000 }")
[[ $sum_hex == "$sodium_hex" ]] || die "sha256sum says $sum_hex, libsodium says $sodium_hex"
[[ -z $ni_rate || $ni_hex == "$sodium_hex" ]] || die "ni says $ni_hex, libsodium says $sodium_hex"

printf 'bytes %d (%s GiB), best of %d, one thread; digest %s\n' "$bytes" \
	"$(calc "$bytes / 1024^3")" "$repeat" "$sodium_hex"
printf '%-28s %8.3f s %9s MB/s\n' "hb_sha256 sodium (memory)" "$sodium_s" "$sodium_rate"
[[ -z $ni_rate ]] || printf '%-28s %8.3f s %9s MB/s\n' "hb_sha256 ni (memory)" "$ni_s" "$ni_rate"
printf '%-28s %8.3f s %9s MB/s\n' "sha256sum (page-cached file)" "$sum_s" "$sum_rate"
if [[ -n $ni_rate ]]; then
	printf 'ni/sodium %s   ni/sha256sum %s\n' "$(calc "$ni_rate / $sodium_rate")" \
		"$(calc "$ni_rate / $sum_rate")"
fi
while read -r _ l _ ls lrate lratio; do
	printf '%-28s %8.3f s %9s MB/s   x%s of one ni digest\n' "hb_sha256 ni, $l lanes" "$ls" "$lrate" "$lratio"
done < <(grep '^lanes ' <<<"$out")
