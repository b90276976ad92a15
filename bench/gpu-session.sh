#!/bin/bash
# bench/gpu-session.sh: everything a lent GPU machine has to run for the
# CUDA backend, in two calls that each fit the device tool's ten minutes
# (bench/README.md).  Build here, carry the binaries, run there:
#
#   make gpu-carry                     # DEVELOPER=1 build, binaries into build-gpu/
#   (device) bench/gpu-session.sh tests   carry: build-gpu
#   (device) bench/gpu-session.sh bench   carry: build-gpu
#
# tests: the device tests (test_cuda_ops, _chunk, _parity with the device
#   graph and batches, _mma), then gpu-graph --gpu-check; every one's
#   output in $OUT (or ./gpu-out) and a summary line each.
# bench: cuda-mma (tensor-core against float32 products at the model's
#   shapes), then bench/gpu-replay.sh twice (upstream and ours with the
#   tensor-core products; ours again with HB_CUDA_MMA=0 and TOKENS= so
#   upstream is not re-run), then once more batched (BATCH=1).
# HB_BUILD (default build-gpu) names where the binaries are.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build-gpu}
[[ $build == /* ]] || build=$root/$build
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
export HB_BUILD=$build

step() { # name command...: run, keep its output, print one line
	local name=$1 t0 rc
	shift
	t0=$(date +%s.%N)
	"$@" >"$out/$name.txt" 2>&1
	rc=$?
	printf "%-28s rc=%d %6.1f s\n" "$name" "$rc" "$(awk -v a="$t0" -v b="$(date +%s.%N)" "BEGIN { print b - a }")"
	tail -4 "$out/$name.txt" | sed 's/^/    /'
	return $rc
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$out/gpu.txt"
case ${1:-} in
tests)
	for t in test_cuda_ops test_cuda_chunk test_cuda_parity test_cuda_mma; do
		step "$t" "$root/scripts/run-tests" "$build/tests/unit/$t"
	done
	step gpu-graph-check "$build/bench/gpu-graph" --gpu-check
	;;
bench)
	step cuda-mma "$build/bench/cuda-mma"
	step replay-mma env HB_BENCH_DIR="$out/bench" OURS_TOKENS=1024,4096,16384 "$root/bench/gpu-replay.sh"
	step replay-f32 env HB_BENCH_DIR="$out/bench" TOKENS= OURS_TOKENS=1024,4096 HB_CUDA_MMA=0 "$root/bench/gpu-replay.sh"
	step replay-batch env HB_BENCH_DIR="$out/bench" TOKENS= OURS_TOKENS=4096 BATCH=1 SEQS=4 "$root/bench/gpu-replay.sh"
	;;
*)
	echo "usage: bench/gpu-session.sh tests|bench" >&2
	exit 2
	;;
esac
