#!/usr/bin/env bash
# bench/stream.sh: hb-run with its routed experts streamed from storage
# (--expert-cache, AFN-019) against the mapped path, on a synthetic model of
# the released checkpoint's widths whose experts are larger than the memory
# the run may use.  One invocation, cold page cache, one memory limit:
#
#   model     hidden 2560, HB_BENCH_STREAM_EXPERTS routed experts (default
#             128; the released model has 512) of width 640 per layer,
#             top-10, shared expert 640, 4 layers (3 GDN + 1 QSA), vocab
#             8192; contract-control weights from
#             scripts/make-synthetic-checkpoint.py, generated once and
#             cached with both artifacts (bf16: 9.4 MiB records, 5.0 GB of
#             experts at 128; affine4-g64: 2.6 MiB records, 1.4 GB).  The
#             default of 128 experts keeps checkpoint + artifacts at about
#             12 GB: the 512 of the issue need about 46 GB, more than a
#             shared bench disk should hold (the script checks df first).
#   cache     HB_BENCH_STREAM_CACHE percent of the expert store (default 25,
#             so the experts are 4x the budget).
#   limit     a cgroup-v1 memory group (page cache included) of budget +
#             dense bytes (the artifact less its expert store) +
#             HB_BENCH_STREAM_WS_MIB (default 384) for the session and
#             binaries; every run of a codec, mapped or streamed, under it.
#   cold      echo 3 > /proc/sys/vm/drop_caches before every run.
#
# Per codec it prints:
#   * the O_DIRECT read bandwidth of the artifact at the record size
#     (random record-sized, 4096-aligned spans) at depth 1 and at the
#     engine's depth 8 (its 8 I/O threads; edepth below);
#   * the compute time per token: the mapped path, warm and without the
#     limit (every byte in memory);
#   * per configuration (mapped; streamed x predictor none, previous,
#     router-ahead, router-ahead:5 (its 5 most probable experts, not the
#     router's 10: fewer wasted bytes) x eviction lru, score): decode
#     tokens/s after an
#     HB_BENCH_PROMPT-token prompt (default 128, HB_BENCH_DECODE = 32 new
#     tokens) and HB_BENCH_PREFILL-token prefill tokens/s (default 512),
#     the ratio to the mapped path under the same limit, the roofline
#     max(compute, exact miss bytes / engine-depth bandwidth) per token and
#     measured/roofline (exact miss bytes: the decode steps' wants that
#     were not hits, x the slot bytes); the CPU floor (compute x threads +
#     every read byte / one core's SHA-256 rate, over the cores: the check
#     each record takes before use runs on the cores the compute needs),
#     measured over the larger of the two and which bound that is (io,
#     compute or cpu), and the serial time compute + exact miss bytes /
#     bandwidth (no read overlapping the compute: what the exact reads cost
#     without prediction); the cgroup's peak memory, and the
#     decode steps' counters (hb-run --json's expert_cache_decode);
#   * per streamed configuration, hb-trace prefetch-sim's exposed wait per
#     decode token for the same run (its route dump and stream trace,
#     hb-run --dump-routes --stream-trace) and the storage model measured
#     above (bandwidth: the O_DIRECT figure at the engine's depth; latency: what a
#     depth-1 read takes beyond its transfer at that bandwidth, slot/bw1 -
#     slot/bwd), beside the measured exposed wait, with the ratio
#     simulated/measured; the simulator replays none as none, and the
#     other predictors as engine (the predicted reads the run itself
#     issued, from its stream trace, each at the point of the layer step
#     it was issued in: router-ahead reads hidden states, which no trace
#     holds), always with an LRU cache of the run's slots and the engine
#     discipline (a drive serving the readers' reads together, as the
#     stream traces show, a started read never preempted, one slot kept
#     for exact reads); once as the storage alone, once with each read's
#     SHA-256 check (the engine's readers hash each 512 KiB as it arrives:
#     the last chunk's check follows the transfer) at the throughput
#     bench/sha256 measures here (--verify-bandwidth), and once with the
#     storage the run's own decode reads delivered (bytes over the time any
#     read was in service, checks and CPU contention included: the
#     scheduling model alone against the same run).
#   * H5, prefill extent streaming (HB_BENCH_EXTENT_ROUNDS, default 2; 0
#     skips it): the HB_BENCH_PREFILL-token prefill with --prefill-extent
#     off and auto (predictor router-ahead, eviction score), interleaved
#     off/auto/auto/off per round, cold, under the same limit: prefill
#     tokens/s median and min, auto/off, the roofline above and
#     measured/roofline, the decisions per layer route and why, the extent
#     windows read (bytes, gap bytes), byte amplification, and the two
#     per-read rates the decision used (record-sized and window reads).
# Rounds (HB_BENCH_ROUNDS, default 1) alternate the configuration order
# (A..Z, Z..A); tokens/s is printed as median and min over rounds.
# Prints the load average before and after.  Asserts nothing about time.
#
# Needs root (drop_caches, the cgroup); without it the figures are warm and
# unlimited, and it says so.  Environment: HB_BENCH_DIR (cache, default
# /tmp/hb-bench), HB_BUILD, HB_BENCH_THREADS (hb-run --threads, default all
# CPUs), HB_BENCH_CODECS (default "bf16 affine4-g64"), HB_BENCH_PREDICTORS,
# HB_BENCH_EVICT, HB_BENCH_PREFILL (0 skips the prefill runs), CC.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
conv=$build/bin/hb-convert
runner=$build/bin/hb-run
bench=${HB_BENCH_DIR:-/tmp/hb-bench}
experts=${HB_BENCH_STREAM_EXPERTS:-128}
pct=${HB_BENCH_STREAM_CACHE:-25}
ws_mib=${HB_BENCH_STREAM_WS_MIB:-384}
np=${HB_BENCH_PROMPT:-128}
npre=${HB_BENCH_PREFILL:-512}
nd=${HB_BENCH_DECODE:-32}
threads=${HB_BENCH_THREADS:-$(nproc)}
codecs=${HB_BENCH_CODECS:-bf16 affine4-g64}
preds=${HB_BENCH_PREDICTORS:-none previous router-ahead router-ahead:5}
evicts=${HB_BENCH_EVICT:-lru score}
rounds=${HB_BENCH_ROUNDS:-1}
xrounds=${HB_BENCH_EXTENT_ROUNDS:-2}
layers=4
edepth=8 # hb-run's streaming readers and depth (hb_xs_config_default)

die() { echo "bench/stream.sh: $*" >&2; exit 2; }
for b in "$conv" "$runner" "$build/bin/hb-trace" "$build/bench/sha256"; do
	[[ -x $b ]] || die "missing $b: run 'make all' (or make bench-stream) first"
done
command -v python3 >/dev/null || die "python3 is missing"
cc=${CC:-cc}
command -v "$cc" >/dev/null || die "no C compiler ($cc) for the bandwidth probe"
mkdir -p "$bench"

tag=h2560-e$experts-l$layers-k10-v1
ck=$bench/ck-stream-$tag
art() { echo "$bench/stream-$tag-$1.gguf"; }

# ------------------------------------------------- disk space, first
rec_bf16=$((3 * 640 * 2560 * 2))
rec_aff4=2764800
need=0 missing=0
for c in $codecs; do
	[[ -e $(art "$c") ]] && continue
	missing=1
	if [[ $c == bf16 ]]; then need=$((need + experts * layers * rec_bf16 + (400 << 20)))
	else need=$((need + experts * layers * rec_aff4 + (400 << 20))); fi
done
# the checkpoint only while an artifact is missing (it may be removed after)
((missing)) && [[ ! -e $ck/.complete ]] && need=$((need + experts * layers * rec_bf16 + (400 << 20)))
avail=$(df --output=avail -B1 "$bench" | tail -1)
echo "disk: $((need >> 20)) MiB to write for $experts experts x $layers layers, $((avail >> 20)) MiB free under $bench"
((need + (2 << 30) < avail)) || die "not enough disk: lower HB_BENCH_STREAM_EXPERTS (now $experts) or free space"

# ------------------------------------------------- the model, once
if ((missing)) && [[ ! -e $ck/.complete ]]; then
	rm -rf "$ck"
	echo "generating $ck (once; cached) ..."
	python3 "$root/scripts/make-synthetic-checkpoint.py" --out "$ck" --summary "$ck.summary.json" \
		--layers $layers --hidden 2560 --experts "$experts" --top-k 10 --moe-intermediate 640 \
		--shared-intermediate 640 --vocab 8192 --heads 16 --kv-heads 2 --head-dim 256 \
		--indexer-heads 16 --indexer-head-dim 128 --indexer-budget 64 --indexer-compress-ratio 4 \
		--linear-key-heads 16 --linear-value-heads 48 --linear-key-head-dim 128 \
		--linear-value-head-dim 128 --hc-lowrank 32 --ple-layers 2 --heads-per-ngram 4 \
		--ple-embed-dim 256 --ngram-base 5000 --shards 8 --seed 11
	touch "$ck/.complete"
fi
for c in $codecs; do
	a=$(art "$c")
	[[ -e $a ]] && continue
	echo "converting $a (once; cached) ..."
	"$conv" -q --expert-codec "$c" "$ck" "$a.tmp"
	mv "$a.tmp" "$a"
done

work=$bench/stream-$$
cg=
cleanup() {
	[[ -n $cg && -d $cg ]] && rmdir "$cg" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work"

root_ok=0
if [[ $(id -u) -eq 0 && -w /proc/sys/vm/drop_caches && -d /sys/fs/cgroup/memory ]]; then
	root_ok=1
else
	echo "NOTE: not root (or no cgroup-v1 memory controller): every figure below is warm-cache and unlimited"
fi
drop() { ((root_ok)) && { sync; echo 3 >/proc/sys/vm/drop_caches; } || true; }

# ------------------------------------------------- O_DIRECT bandwidth probe
# D threads, each pread()ing random 4096-aligned spans of SPAN bytes of FILE
# with O_DIRECT, READS in all: bytes / wall time.
cat >"$work/bw.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
static int fd;
static size_t span;
static long reads, depth;
static off_t size;
static void *reader(void *arg)
{
	uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)((intptr_t)arg + 1);
	void *buf;
	if (posix_memalign(&buf, 4096, span))
		return NULL;
	for (long i = (intptr_t)arg; i < reads; i += depth) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		off_t off = (off_t)(x % (uint64_t)(size - (off_t)span)) & ~(off_t)4095;
		size_t got = 0;
		while (got < span) {
			ssize_t n = pread(fd, (char *)buf + got, span - got, off + (off_t)got);
			if (n <= 0)
				exit(1);
			got += (size_t)n;
		}
	}
	free(buf);
	return NULL;
}
int main(int argc, char **argv)
{
	struct stat st;
	struct timespec a, b;
	pthread_t t[64];
	if (argc != 5)
		return 2;
	span = (size_t)atol(argv[2]), depth = atol(argv[3]), reads = atol(argv[4]);
	fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0 || fstat(fd, &st) || depth < 1 || depth > 64)
		return 1;
	size = st.st_size;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < depth; i++)
		pthread_create(&t[i], NULL, reader, (void *)(intptr_t)i);
	for (long i = 0; i < depth; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.0f\n", (double)span * (double)reads / ((double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9));
	return 0;
}
C
"$cc" -O2 -pthread -o "$work/bw" "$work/bw.c"

# io_uring (Debian liburing-dev): the same reads kept DEPTH deep through one
# ring, one thread submitting and reaping, against the thread pool above
cat >"$work/uring.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
/* uring FILE SPAN DEPTH READS: random 4096-aligned SPAN-byte O_DIRECT reads
 * kept DEPTH deep through one io_uring (one thread submits and reaps);
 * prints bytes / wall time, or exits 3 when io_uring is refused. */
int main(int argc, char **argv)
{
	struct io_uring ring;
	struct stat st;
	struct timespec a, b;
	size_t span;
	long depth, reads, issued = 0, done = 0;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	void **buf;
	int fd;
	if (argc != 5)
		return 2;
	span = (size_t)atol(argv[2]), depth = atol(argv[3]), reads = atol(argv[4]);
	fd = open(argv[1], O_RDONLY | O_DIRECT);
	if (fd < 0 || fstat(fd, &st) || depth < 1 || depth > 64)
		return 1;
	if (io_uring_queue_init((unsigned)depth, &ring, 0))
		return 3;
	buf = calloc((size_t)depth, sizeof(*buf));
	for (long i = 0; i < depth; i++)
		if (posix_memalign(&buf[i], 4096, span))
			return 1;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (; issued < depth && issued < reads; issued++) {
		struct io_uring_sqe *q = io_uring_get_sqe(&ring);
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		off_t off = (off_t)(x % (uint64_t)(st.st_size - (off_t)span)) & ~(off_t)4095;
		io_uring_prep_read(q, fd, buf[issued], (unsigned)span, (uint64_t)off);
		io_uring_sqe_set_data(q, buf[issued]);
	}
	io_uring_submit(&ring);
	while (done < reads) {
		struct io_uring_cqe *c;
		void *p;
		if (io_uring_wait_cqe(&ring, &c))
			return 1;
		if (c->res != (int)span) /* a short O_DIRECT read of a whole span does not happen on these files */
			return 1;
		p = io_uring_cqe_get_data(c);
		io_uring_cqe_seen(&ring, c);
		done++;
		if (issued < reads) {
			struct io_uring_sqe *q = io_uring_get_sqe(&ring);
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			off_t off = (off_t)(x % (uint64_t)(st.st_size - (off_t)span)) & ~(off_t)4095;
			io_uring_prep_read(q, fd, p, (unsigned)span, (uint64_t)off);
			io_uring_sqe_set_data(q, p);
			io_uring_submit(&ring);
			issued++;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.0f\n", (double)span * (double)reads / ((double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9));
	io_uring_queue_exit(&ring);
	return 0;
}
C
have_uring=0
"$cc" -O2 -o "$work/uring" "$work/uring.c" -luring 2>/dev/null && have_uring=1

ids() { python3 -c "import sys; print(','.join(str((i * 7919 + 13) % 8000 + 100) for i in range(int(sys.argv[1]))))" "$1"; }
prompt=$(ids "$np")
prompt_pre=$(ids "$npre")

# run NAME LIMIT ARGS...: one hb-run --json under the limit (0: none), cold;
# the JSON to $work/NAME.json, the cgroup's peak to $work/NAME.peak
run() {
	local name=$1 limit=$2
	shift 2
	drop
	if ((root_ok)) && [[ $limit != 0 ]]; then
		cg=/sys/fs/cgroup/memory/hb-bench-stream-$$
		mkdir -p "$cg"
		echo "$limit" >"$cg/memory.limit_in_bytes"
		echo 0 >"$cg/memory.max_usage_in_bytes" 2>/dev/null || true
		bash -c 'echo $$ >"$1/cgroup.procs"; shift; exec "$@"' _ "$cg" \
			"$runner" -q --threads "$threads" --json "$@" >"$work/$name.json"
		cat "$cg/memory.max_usage_in_bytes" >"$work/$name.peak"
		rmdir "$cg" 2>/dev/null || true
	else
		"$runner" -q --threads "$threads" --json "$@" >"$work/$name.json"
		echo 0 >"$work/$name.peak"
	fi
}

echo "load before: $(uptime)"
for c in $codecs; do
	a=$(art "$c")
	meta=$("$runner" -q -m "$a" --tokens 1 -n 1 --expert-cache 100% --expert-predict none --json |
		python3 -c 'import json, sys; x = json.load(sys.stdin)["expert_cache"]; print(x["slot_bytes"], x["slots"])')
	slot=${meta% *} records=${meta#* }
	store=$((slot * records))
	budget=$((store * pct / 100 / slot * slot))
	dense=$(($(stat -c %s "$a") - store))
	limit=$((budget + dense + (ws_mib << 20)))
	echo
	echo "== $c: $records records of $slot bytes = $((store >> 20)) MiB of experts; cache $pct% = $((budget >> 20)) MiB" \
		"($((store / budget))x smaller); dense $((dense >> 20)) MiB; memory limit $((limit >> 20)) MiB" \
		"($(python3 -c "print('%.2f' % ($store / $limit))")x below the experts)"
	((limit < store)) || echo "   NOTE: the limit holds every expert: raise HB_BENCH_STREAM_EXPERTS for a model larger than memory"
	nreads=$(((1 << 30) / slot + 8))
	drop
	bw1=$("$work/bw" "$a" "$slot" 1 "$nreads")
	drop
	bwd=$("$work/bw" "$a" "$slot" "$edepth" "$nreads") # at the engine's depth
	echo "   O_DIRECT reads of $slot bytes: depth 1 $((bw1 / 1000000)) MB/s, depth $edepth $((bwd / 1000000)) MB/s"
	# io_uring against the thread pool at the record size and the engine's depth: A/B/B/A, cold each
	if ((have_uring)); then
		ur=() tp=()
		for o in pool uring uring pool; do
			drop
			if [[ $o == pool ]]; then tp+=("$("$work/bw" "$a" "$slot" "$edepth" "$nreads")")
			elif v=$("$work/uring" "$a" "$slot" "$edepth" "$nreads"); then ur+=("$v")
			else ur=(); break; fi
		done
		if ((${#ur[@]})); then
			python3 - "$edepth" "${tp[@]}" "${ur[@]}" <<'PY'
import statistics, sys
tp, ur = [float(x) for x in sys.argv[2:4]], [float(x) for x in sys.argv[4:6]]
print("   depth " + sys.argv[1] + ", A/B/B/A: thread pool median %.0f MB/s (min %.0f), io_uring median %.0f MB/s (min %.0f): "
      "io_uring/pool %.3f" % (statistics.median(tp) / 1e6, min(tp) / 1e6, statistics.median(ur) / 1e6,
                              min(ur) / 1e6, statistics.median(ur) / statistics.median(tp)))
PY
		else
			echo "   io_uring: refused here (io_uring_queue_init failed): the thread pool is the path"
		fi
	else
		echo "   io_uring: liburing-dev is not installed (scripts/bootstrap installs it): not measured"
	fi
	# compute: mapped, warm (a first run fills the page cache), no limit.
	# --weights map throughout: the CPU default, read, copies the whole
	# artifact into the process's own memory, which no limit below the
	# experts' size holds (the mapped path is the page cache's)
	"$runner" -q --threads "$threads" --weights map -m "$a" --tokens "$prompt" -n 2 >/dev/null
	"$runner" -q --threads "$threads" --weights map --json -m "$a" --tokens "$prompt" -n "$nd" >"$work/$c-warm.json"
	if ((npre)); then
		"$runner" -q --threads "$threads" --weights map --json -m "$a" --tokens "$prompt_pre" -n 1 >"$work/$c-warm-pre.json"
	else
		cp "$work/$c-warm.json" "$work/$c-warm-pre.json"
	fi
	configs=(mapped)
	for p in $preds; do
		for e in $evicts; do configs+=("$p:$e"); done
	done
	for r in $(seq "$rounds"); do
		order=("${configs[@]}")
		if ((r % 2 == 0)); then
			order=()
			for ((i = ${#configs[@]} - 1; i >= 0; i--)); do order+=("${configs[i]}"); done
		fi
		for cf in "${order[@]}"; do
			opts=(--weights map)
			tr=()
			if [[ $cf != mapped ]]; then
				opts=(--expert-cache "$budget" --expert-predict "${cf%:*}" --expert-evict "${cf##*:}")
				tr=(--dump-routes "$work/$c-$cf-d$r.routes" --stream-trace "$work/$c-$cf-d$r.xst")
			fi
			run "$c-$cf-d$r" "$limit" -m "$a" --tokens "$prompt" -n "$nd" "${opts[@]}" "${tr[@]}"
			if ((npre)); then
				run "$c-$cf-p$r" "$limit" -m "$a" --tokens "$prompt_pre" -n 1 "${opts[@]}"
			else
				cp "$work/$c-$cf-d$r.json" "$work/$c-$cf-p$r.json"
				cp "$work/$c-$cf-d$r.peak" "$work/$c-$cf-p$r.peak"
			fi
		done
	done
	# the engine's digest path (hb_sha256_buf dispatches to the line "dispatch" names):
	# the CPU floor below and prefetch-sim's check both use it
	shabw=$("$build/bench/sha256" --bytes $((256 << 20)) --repeat 1 |
		awk '$1 == "dispatch" { p = $2 } $1 == p && NF >= 4 { printf "%.0f", $4 * 1e6 }')
	python3 - "$work" "$c" "$rounds" "$bwd" "$slot" "$limit" "$shabw" "$threads" "$(nproc)" "${configs[@]}" <<'PY'
import json, statistics, sys
work, codec, rounds, bw, slot, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
shabw, threads, cores = float(sys.argv[7]), int(sys.argv[8]), int(sys.argv[9])
configs = sys.argv[10:]
ld = lambda n: json.load(open("%s/%s.json" % (work, n)))
peak = lambda n: int(open("%s/%s.peak" % (work, n)).read())
warm, warm_pre = ld(codec + "-warm"), ld(codec + "-warm-pre")
comp_d = 1.0 / warm["decode_tokens_per_second"]
comp_p = 1.0 / warm_pre["prefill_tokens_per_second"]
print("   compute (mapped, warm, no limit): decode %.2f tok/s (%.1f ms/token), prefill %.1f tok/s"
      % (warm["decode_tokens_per_second"], comp_d * 1e3, warm_pre["prefill_tokens_per_second"]))
rows, base = [], None
for cf in configs:
    d = [ld("%s-%s-d%d" % (codec, cf, r)) for r in range(1, rounds + 1)]
    p = [ld("%s-%s-p%d" % (codec, cf, r)) for r in range(1, rounds + 1)]
    dt = [x["decode_tokens_per_second"] for x in d]
    pt = [x["prefill_tokens_per_second"] for x in p]
    pk = max(max(peak("%s-%s-d%d" % (codec, cf, r)), peak("%s-%s-p%d" % (codec, cf, r))) for r in range(1, rounds + 1))
    rows.append((cf, dt, pt, d[-1], p[-1], pk))
    if cf == "mapped":
        base = (statistics.median(dt), statistics.median(pt))
# The roofline max(compute, exact miss bytes / the engine-depth bandwidth) a
# token leaves out the SHA-256 check every read
# record takes before use (fail closed, AFN-019), which runs on the same
# cores as the compute: the CPU floor is (compute x threads + every read
# byte / one core's SHA-256 rate) / cores, and the bound that holds is the
# larger of the two ("bound": io, compute or cpu).  Both assume the reads
# overlap the compute, which takes reads issued before the router decides
# (prediction): with none, a layer's exact reads start only after its
# router, so "serial ms" = compute + exact miss bytes / bandwidth is what no
# overlap at all costs.
print("   %-22s %9s %9s %7s %9s %7s %9s %8s %8s %8s %8s %9s %8s" % ("config", "dec tok/s", "(min)", "x mapd", "pre tok/s",
      "x mapd", "roof ms", "meas/rf", "cpu ms", "meas/fl", "bound", "serial ms", "pre m/rf") + " peak MiB")
for cf, dt, pt, d, p, pk in rows:
    md, mp = statistics.median(dt), statistics.median(pt)
    roof = rf_p = ""
    if cf != "mapped":
        x, y = d["expert_cache_decode"], p["expert_cache"]
        ntok = max(x["tokens"], 1)
        miss = (x["wants"] - x["hits"]) * slot / ntok
        r_d = max(comp_d, miss / bw)
        cpu = (comp_d * threads + x["bytes_physical"] / ntok / shabw) / cores
        fl = max(r_d, cpu)
        bound = "cpu" if cpu > r_d else ("io" if miss / bw > comp_d else "compute")
        roof = "%9.1f %8.2f %8.1f %8.2f %8s %9.1f" % (r_d * 1e3, (1.0 / md) / r_d, cpu * 1e3, (1.0 / md) / fl, bound,
                                                      (comp_d + miss / bw) * 1e3)
        r_p = max(comp_p, (y["wants"] - y["hits"]) * slot / bw / max(p["prompt_tokens"], 1))
        rf_p = "%8.2f" % ((1.0 / mp) / r_p)
    else:
        roof = "%9s %8s %8s %8s %8s %9s" % ("-", "-", "-", "-", "-", "-")
        rf_p = "%8s" % "-"
    print("   %-22s %9.2f %9.2f %7.2f %9.1f %7.2f %s %s %8d" % (cf, md, min(dt), md / base[0], mp, mp / base[1],
          roof, rf_p, pk >> 20))
print("   decode steps' counters (expert_cache_decode, last round):")
print("   %-22s %6s %6s %6s %7s %7s %7s %7s %8s %8s %8s %7s %7s %7s" % ("config", "hits", "joined", "misses", "recall",
      "useful", "amplif", "hidden", "exp ms/t", "exact MB", "pred MB", "p50 ms", "p95 ms", "p99 ms"))
f = lambda v: "%7.3f" % v if v is not None else "%7s" % "-"
for cf, dt, pt, d, p, pk in rows:
    if cf == "mapped":
        continue
    x = d["expert_cache_decode"]
    print("   %-22s %6d %6d %6d %s %s %s %s %8.1f %8.1f %8.1f %7.2f %7.2f %7.2f" % (cf, x["hits"], x["joined"],
          x["misses"], f(x["timely_recall"]), f(x["useful_prefetch_ratio"]), f(x["byte_amplification"]),
          f(x["hidden_fraction"]), (x["exposed_per_token_ns"] or 0) / 1e6, x["bytes_exact"] / 1e6,
          x["bytes_predicted"] / 1e6, x["ready_p50_ns"] / 1e6, x["ready_p95_ns"] / 1e6, x["ready_p99_ns"] / 1e6))
PY
	# H5: the prefill with --prefill-extent off and auto, interleaved A/B/B/A
	if ((npre && xrounds)); then
		xo=(--expert-cache "$budget" --expert-predict router-ahead --expert-evict score)
		for r in $(seq "$xrounds"); do
			for m in off auto auto off; do
				i=$(ls "$work" | grep -c "^$c-x$m-.*json$" || true)
				run "$c-x$m-$i" "$limit" -m "$a" --tokens "$prompt_pre" -n 1 "${xo[@]}" --prefill-extent "$m"
			done
		done
		python3 - "$work" "$c" "$bwd" "$slot" "$(ls "$work"/"$c"-warm-pre.json)" <<'PY'
import glob, json, statistics, sys
work, codec, bw, slot, warm = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
comp_p = 1.0 / json.load(open(warm))["prefill_tokens_per_second"]
runs = {m: [json.load(open(f)) for f in sorted(glob.glob("%s/%s-x%s-*.json" % (work, codec, m)))] for m in ("off", "auto")}
print("   H5 prefill extent (%d-token prefill, router-ahead, score; interleaved off/auto/auto/off, cold):" %
      runs["off"][0]["prompt_tokens"])
print("   %-5s %4s %9s %9s %7s %9s %8s %6s %8s %8s %8s %7s %9s %9s  %s" % ("mode", "runs", "pre tok/s", "(min)",
      "x off", "roof ms", "meas/rf", "win", "win MB", "gap MB", "exact MB", "amplif", "rec MB/s", "win MB/s",
      "decisions"))
base = statistics.median(x["prefill_tokens_per_second"] for x in runs["off"])
for m in ("off", "auto"):
    xs = runs[m]
    pt = [x["prefill_tokens_per_second"] for x in xs]
    y = xs[-1]["expert_cache"]
    e = y["prefill_extent"]
    toks = max(xs[-1]["prompt_tokens"], 1)
    r_p = max(comp_p, (y["wants"] - y["hits"]) * slot / bw / toks)
    dec = ", ".join("%s %d" % (k, v) for k, v in e["decisions"].items() if v)
    g = lambda v: "%9.0f" % (v / 1e6) if v is not None else "%9s" % "-"
    print("   %-5s %4d %9.1f %9.1f %7.3f %9.2f %8.2f %6d %8.1f %8.1f %8.1f %7.3f %s %s  %s" % (m, len(xs),
          statistics.median(pt), min(pt), statistics.median(pt) / base, r_p * 1e3 * toks,
          (toks / statistics.median(pt)) / (r_p * toks), e["reads"], e["bytes"] / 1e6, e["gap_bytes"] / 1e6,
          y["bytes_exact"] / 1e6, y["byte_amplification"] or 0, g(e["record_bps"]), g(e["extent_bps"]), dec))
print("   (roof ms: the prefill's roofline max(compute, exact miss bytes / engine-depth bandwidth), whole prompt; "
      "ring %.1f MiB of the budget under auto)" % (runs["auto"][-1]["expert_cache"]["prefill_extent"]["ring_bytes"] / 2**20))
PY
	fi
	# the simulator against the measured exposed wait, same runs, storage measured above
	lat=$(python3 -c "print('%.9f' % max(0.0, $slot / $bw1 - $slot / $bwd))")
	echo "   prefetch-sim vs measured (storage: bandwidth $((bwd / 1000000)) MB/s, latency ${lat} s, depth $edepth;" \
		"SHA-256 $((shabw / 1000000)) MB/s; last round; wait per decode token, router's decision to the last exact record):"
	printf '   %-22s %-9s %12s %12s %12s %12s %9s %9s %9s\n' config sim "sim ms/tok" "+sha ms/tok" "run ms/tok" \
		"meas ms/tok" "sim/meas" "+sha/meas" "run/meas"
	for cf in "${configs[@]}"; do
		[[ $cf == mapped ]] && continue
		# the run's own predicted reads (its stream trace), replayed: the
		# simulated and measured waits then differ by the model alone
		case ${cf%:*} in none) sp=none ;; *) sp=engine ;; esac
		for v in 0 1 2; do
			vopt=(--latency "$lat" --bandwidth "$bwd" --depth "$edepth")
			((v == 1)) && vopt+=(--verify-bandwidth "$shabw")
			((v == 2)) && vopt=() # the storage as the run's own decode reads delivered it
			# hb-run's pool: started reads run to their end and share the drive
			vopt+=(--discipline engine)
			"$build/bin/hb-trace" prefetch-sim --json --record-bytes "$slot" --predictor "$sp" "${vopt[@]}" \
				--stream-trace "$work/$c-$cf-d$rounds.xst" "$work/$c-$cf-d$rounds.routes" >"$work/$c-$cf.sim$v.json"
		done
		python3 - "$work/$c-$cf.sim0.json" "$work/$c-$cf.sim1.json" "$work/$c-$cf.sim2.json" "$cf" "$sp" <<'PY'
import json, sys
r0, r1, r2 = (json.load(open(p))["results"][0] for p in sys.argv[1:4])
f = lambda v: "%12.3f" % (v * 1e3) if v is not None else "%12s" % "-"
g = lambda v: "%9.3f" % v if v is not None else "%9s" % "-"
print("   %-22s %-9s %s %s %s %s %s %s %s" % (sys.argv[4], sys.argv[5], f(r0["window_exposed_wait_per_token_s"]),
      f(r1["window_exposed_wait_per_token_s"]), f(r2["window_exposed_wait_per_token_s"]),
      f(r0["measured_wall_wait_per_token_s"]), g(r0["simulated_over_measured"]), g(r1["simulated_over_measured"]),
      g(r2["simulated_over_measured"])))
PY
		"$build/bin/hb-trace" stats --json "$work/$c-$cf-d$rounds.xst" | python3 -c '
import json, sys
s = json.load(sys.stdin)
print("   %-22s decode reads delivered %.0f MB/s (bytes over the time any was in service), %.1f ms mean service" % (
      "", s["decode_delivered_bandwidth"] / 1e6, s["decode_read_service_mean_s"] * 1e3))'
	done
done
echo
echo "load after: $(uptime)"
echo "cached: $bench/stream-$tag-*.gguf (the checkpoint $ck is needed only to convert again; remove all with: rm -rf $ck $ck.summary.json $bench/stream-$tag-*.gguf)"
