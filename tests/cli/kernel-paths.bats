#!/usr/bin/env bats
# HB_KERNEL_IMPL picks the CPU kernel path and changes nothing but speed
# (libkern/backend/simd/hb_simd.h): hb-run's ids, logits dump and route
# dump are byte-identical on every path the processor has; hb-run --json
# names the path it ran; an unknown or unrunnable HB_KERNEL_IMPL is refused
# before any work.  tests/unit/test_kernel_paths.c does the same at library
# level with state digests, observations and 1, 2, 3 threads.
#
# Needs python3 (standard library).

bats_require_minimum_version 1.5.0

setup_file() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	fx=$root/tests/fixtures/upstream
	"$build/bin/hb-convert" -q "$fx/realshape/checkpoint" "$BATS_FILE_TMPDIR/realshape.gguf"
	"$build/bin/hb-convert" -q --expert-codec affine4-g64 "$fx/realshape/checkpoint" "$BATS_FILE_TMPDIR/realshape-a4.gguf"
}

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	run_=$build/bin/hb-run
	fx=$root/tests/fixtures/upstream
	art=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
	ids=$(python3 - "$fx/realshape/oracle" <<'PY'
import json, struct, sys
m = json.load(open(sys.argv[1] + "/manifest.json"))
a = next(x for x in m["arrays"] if x["name"] == "pre/p1/ids")
raw = open(sys.argv[1] + "/" + a["file"], "rb").read()
print(",".join(map(str, struct.unpack("<%dq" % (len(raw) // 8), raw))))
PY
)
}

# the paths this processor runs, as /proc/cpuinfo lists its flags
paths_here() {
	local f
	f=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
	echo portable
	[[ $f == *" avx2 "* && $f == *" fma "* && $f == *" f16c "* ]] || return 0
	echo avx2
	[[ $f == *" avx512f "* && $f == *" avx512bw "* && $f == *" avx512vl "* ]] || return 0
	echo avx512
	[[ $f == *" avx512vbmi "* ]] && echo avx512vbmi
	return 0
}

@test "kernel paths: hb-run's ids, logits and routes are byte-identical on every path (bf16 and affine4 experts)" {
	local n=0
	for a in realshape realshape-a4; do
		for p in $(paths_here); do
			run --separate-stderr env HB_KERNEL_IMPL="$p" "$run_" -q -m "$art/$a.gguf" --tokens "$ids" -n 9 \
				--dump-logits "l-$p.bin" --dump-routes "r-$p.trace"
			[ "$status" -eq 0 ]
			[ "$stderr" = "" ]
			echo "$output" >"ids-$p.txt"
			[ -s "l-$p.bin" ]
			cmp ids-portable.txt "ids-$p.txt"
			cmp l-portable.bin "l-$p.bin"
			cmp r-portable.trace "r-$p.trace"
			n=$((n + 1))
		done
	done
	echo "# $n runs on paths: $(paths_here | tr '\n' ' ')" >&3
	[ "$n" -ge 2 ]
}

@test "kernel paths: hb-run --json names the backend path it ran (the best one by default)" {
	local best
	best=$(paths_here | tail -n 1)
	for p in $(paths_here) ""; do
		run --separate-stderr env HB_KERNEL_IMPL="$p" "$run_" -q --json -m "$art/realshape.gguf" --tokens "$ids" -n 2
		[ "$status" -eq 0 ]
		got=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["backend"])' "$output")
		[ "$got" = "cpu/${p:-$best}" ]
	done
}

@test "kernel paths: an unknown HB_KERNEL_IMPL, or a path this processor lacks, is refused naming the variable" {
	local here
	here=" $(paths_here | tr '\n' ' ') "
	for p in avx-512 avx2 avx512 avx512vbmi; do
		if [[ $here == *" $p "* ]]; then
			continue
		fi
		run --separate-stderr env HB_KERNEL_IMPL="$p" "$run_" -q -m "$art/realshape.gguf" --tokens "$ids" -n 2
		[ "$status" -ne 0 ]
		[ "$output" = "" ]
		[[ $stderr == *"env.HB_KERNEL_IMPL"* ]]
		[[ $stderr == *"$p"* ]]
	done
}
