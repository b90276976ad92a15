#!/bin/bash
# bench/gpu-session.sh: everything a lent GPU machine has to run for the
# CUDA backend, in three calls that each should fit the device tool's ten
# minutes (bench/README.md).  Build here, carry the binaries, run there:
#
#   make gpu-carry                          # DEVELOPER=1 build, binaries into build-gpu/,
#                                           # packed as build-pack/build-gpu.txz (carry build-pack,
#                                           # then tar xJf build-pack/build-gpu.txz there)
#   (device) bench/gpu-session.sh tests       carry: build-gpu
#   (device) bench/gpu-session.sh upstream    carry: build-gpu
#   (device) bench/gpu-session.sh ours        carry: build-gpu (same warm machine)
#   (device) bench/gpu-session.sh profile     carry: build-gpu
#
# tests: the device tests (test_cuda_ops, _chunk, _parity with the device
#   graph and batches, _mma), then gpu-graph --gpu-check; every one's
#   output in $OUT (or ./gpu-out) and a summary line each.
# upstream: bench/gpu-upstream.py alone (gpu-replay.sh with OURS_TOKENS=
#   empty), its figures kept in HB_BENCH_DIR (default /tmp/hb-gpu-bench,
#   which lives as long as the machine stays warm; copied into $OUT too).
# ours: cuda-mma (tensor-core against float32 products at the model's
#   shapes), then gpu-replay.sh without re-running upstream (TOKENS=): the
#   tensor-core products, again with HB_CUDA_MMA=0, then batched (BATCH=1).
# profile: gpu-graph at T = 4,096 and 16,384 with HB_CUDA_PROFILE=1, the
#   time of each stage and product of the device graph; again at 4,096
#   with the kernels they replaced (HB_CUDA_ATTEND=head, HB_CUDA_GDN=serial).
# cli: bench/gpu-cli.sh, hb-run and hb-replay label --backend cuda against
#   --backend cpu on the upstream fixtures (ids, logits, parity).
# ab: the T = 4,096 chunk with this tree's kernels and with the ones they
#   replaced, interleaved A B B A; then with the skinny products (opt-in).
# gdn: bench/cuda-gdn (the delta rule's forms alone), then the chunked
#   form against the recurrent scan in the graph, A B B A at T = 4,096,
#   then each profiled.
# state: a sequence's last chunk final (its state left on the device)
#   against --keep-state, A B B A at T = 4,096.
# record: the tests, the wgmma A/B at T = 4,096, upstream and ours, 48
#   layers, a variant build's gpu-graph against this one's (HB_VARIANT),
#   the profile, cli and the kernel table, in one call, most needed first.
# kernels: every kernel's time in a T = 4,096 run (LD_PRELOAD of
#   build-gpu/bench/libhb-kernels.so, bench/cuda-kernels.c).
# wgmma: the graph with the split products on wgmma (the default on
#   sm_90) and on mma.sync (HB_CUDA_WGMMA=0), A B B A, both expert codecs.
# tiles: cuda-mma at T = 1,024, 4,096 and 16,384 with each block height
#   forced beside the chosen one (the rates of pick_wt_rated).
# HB_BUILD (default build-gpu) names where the binaries are.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${HB_BUILD:-build-gpu}
[[ $build == /* ]] || build=$root/$build
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
export HB_BUILD=$build
# libsodium and cJSON, which the GPU machine lacks, travel in build-gpu/lib (make gpu-carry)
export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

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

# every kernel's time at T = 4,096 (bench/cuda-kernels.c, where it was built),
# the table printed whole
kernels() {
	[[ -e $build/bench/libhb-kernels.so ]] || return 0
	step kernels env HB_KERNELS_TOP=40 LD_PRELOAD="$build/bench/libhb-kernels.so" "$build/bench/gpu-graph" --tokens 4096
	grep -v '^# ours' "$out/kernels.txt" | cut -c1-170
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$out/gpu.txt"
case ${1:-} in
tests)
	for t in ${GPU_TESTS:-test_cuda_ops test_cuda_chunk test_cuda_parity test_cuda_mma}; do
		step "$t" "$root/scripts/run-tests" "$build/tests/unit/$t"
	done
	step gpu-graph-check "$build/bench/gpu-graph" --gpu-check
	;;
profile)
	step profile env HB_CUDA_PROFILE=1 "$build/bench/gpu-graph" --tokens 4096,16384
	step profile-before env HB_CUDA_PROFILE=1 HB_CUDA_ATTEND=head HB_CUDA_GDN=serial "$build/bench/gpu-graph" --tokens 4096
	;;
upstream)
	step upstream env OURS_TOKENS= "$root/bench/gpu-replay.sh"
	cp "${HB_BENCH_DIR:-/tmp/hb-gpu-bench}/upstream.txt" "$out/" 2>/dev/null
	;;
ours)
	step cuda-mma "$build/bench/cuda-mma"
	step replay-mma env TOKENS= OURS_TOKENS=1024,4096,16384 "$root/bench/gpu-replay.sh"
	step replay-f32 env TOKENS= OURS_TOKENS=1024,4096 HB_CUDA_MMA=0 "$root/bench/gpu-replay.sh"
	step replay-batch env TOKENS= OURS_TOKENS=4096 BATCH=1 SEQS=4 "$root/bench/gpu-replay.sh"
	;;
cli)
	step cli env HB_BUILD="$build" "$root/bench/gpu-cli.sh"
	;;
ab)
	# the device graph's T = 4,096 chunk with this tree's kernels (A) and
	# with those they replaced (B: per-head attention, the plain delta
	# rule), interleaved A B B A
	before=(HB_CUDA_ATTEND=head HB_CUDA_GDN=serial)
	step ab-1-now "$build/bench/gpu-graph" --tokens 4096
	step ab-2-before env "${before[@]}" "$build/bench/gpu-graph" --tokens 4096
	step ab-3-before env "${before[@]}" "$build/bench/gpu-graph" --tokens 4096
	step ab-4-now "$build/bench/gpu-graph" --tokens 4096
	step ab-5-skinny env HB_CUDA_SKINNY=1 "$build/bench/gpu-graph" --tokens 4096
	;;
gdn)
	# the delta rule's forms alone at the model's shape (bench/cuda-gdn),
	# then in the graph: the chunked form (A, the default for one
	# sequence from a span of 64 tokens) against the recurrent scan (B,
	# HB_CUDA_GDN=recurrent) at T = 4,096, interleaved A B B A, then both
	# profiled
	step cuda-gdn "$build/bench/cuda-gdn" 1024 4096 16384
	step gdn-1-chunked "$build/bench/gpu-graph" --tokens 4096
	step gdn-2-recurrent env HB_CUDA_GDN=recurrent "$build/bench/gpu-graph" --tokens 4096
	step gdn-3-recurrent env HB_CUDA_GDN=recurrent "$build/bench/gpu-graph" --tokens 4096
	step gdn-4-chunked "$build/bench/gpu-graph" --tokens 4096
	step gdn-profile-chunked env HB_CUDA_PROFILE=1 "$build/bench/gpu-graph" --tokens 4096
	step gdn-profile-recurrent env HB_CUDA_PROFILE=1 HB_CUDA_GDN=recurrent "$build/bench/gpu-graph" --tokens 4096
	;;
record)
	# everything a stop's record needs, in one call, most needed first
	# (the device tool's starts are scarce): the device tests, the wgmma
	# A B B A at T = 4,096, upstream and ours (both expert codecs) at
	# T = 1,024, 4,096 and 16,384, the 48-layer geometry, the profile,
	# the command-line parity
	for t in test_cuda_ops test_cuda_chunk test_cuda_parity test_cuda_mma; do
		step "$t" "$root/scripts/run-tests" "$build/tests/unit/$t"
	done
	step gpu-graph-check "$build/bench/gpu-graph" --gpu-check
	for e in affine4 bf16; do
		step "wg-$e-4096-1-wgmma" "$build/bench/gpu-graph" --experts $e --tokens 4096
		step "wg-$e-4096-2-sync" env HB_CUDA_WGMMA=0 "$build/bench/gpu-graph" --experts $e --tokens 4096
		step "wg-$e-4096-3-sync" env HB_CUDA_WGMMA=0 "$build/bench/gpu-graph" --experts $e --tokens 4096
		step "wg-$e-4096-4-wgmma" "$build/bench/gpu-graph" --experts $e --tokens 4096
	done
	step replay "$root/bench/gpu-replay.sh"
	step replay-bf16 env EXPERTS=bf16 TOKENS= "$root/bench/gpu-replay.sh"
	step layers48 "$build/bench/gpu-graph" --layers 48 --tokens 4096
	# a variant build's gpu-graph, if carried (HB_VARIANT: its path), A B B A
	if [[ -n ${HB_VARIANT:-} ]]; then
		step variant-1-now "$build/bench/gpu-graph" --tokens 4096
		step variant-2 "$HB_VARIANT" --tokens 4096
		step variant-3 "$HB_VARIANT" --tokens 4096
		step variant-4-now "$build/bench/gpu-graph" --tokens 4096
	fi
	step profile env HB_CUDA_PROFILE=1 "$build/bench/gpu-graph" --tokens 4096
	step cli env HB_BUILD="$build" "$root/bench/gpu-cli.sh"
	kernels
	;;
kernels)
	kernels
	;;
wgmma)
	# the split products on wgmma (the default on sm_90) against mma.sync
	# (HB_CUDA_WGMMA=0), the graph at T = 1,024, 4,096 and 16,384 with
	# each expert codec, interleaved A B B A
	for e in affine4 bf16; do
		for T in 1024 4096 16384; do
			step "wg-$e-$T-1-wgmma" "$build/bench/gpu-graph" --experts $e --tokens $T
			step "wg-$e-$T-2-sync" env HB_CUDA_WGMMA=0 "$build/bench/gpu-graph" --experts $e --tokens $T
			step "wg-$e-$T-3-sync" env HB_CUDA_WGMMA=0 "$build/bench/gpu-graph" --experts $e --tokens $T
			step "wg-$e-$T-4-wgmma" "$build/bench/gpu-graph" --experts $e --tokens $T
		done
	done
	;;
tiles)
	# the products' block heights: bench/cuda-mma at T = 1,024, 4,096 and
	# 16,384 (each shape from a split x at the chosen height and at 64, 96
	# and 128 tokens a block; the rates pick_wt_rated weighs)
	step cuda-mma-tiles "$build/bench/cuda-mma" 1024 4096 16384
	;;
state)
	# a sequence's last chunk final, its state left on the device (A, as
	# hb-replay label runs it) against every chunk's state copied back (B,
	# --keep-state) at T = 4,096, interleaved A B B A
	step state-1-final "$build/bench/gpu-graph" --tokens 4096
	step state-2-kept "$build/bench/gpu-graph" --tokens 4096 --keep-state
	step state-3-kept "$build/bench/gpu-graph" --tokens 4096 --keep-state
	step state-4-final "$build/bench/gpu-graph" --tokens 4096
	;;
*)
	echo "usage: bench/gpu-session.sh tests|upstream|ours|profile|cli|ab|gdn|state|tiles|wgmma|record" >&2
	exit 2
	;;
esac
