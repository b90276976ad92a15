#!/usr/bin/env bats
# hb-admit from the command line: exit statuses, the one-line diagnostic,
# the JSON report, and two build properties: no GPU symbol is reachable and
# the payload is never read.

bats_require_minimum_version 1.5.0

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	admit=$build/bin/hb-admit
	convert=$build/bin/hb-convert
	cd "$BATS_TEST_TMPDIR"
	"$convert" -q "$root/tests/fixtures/upstream/realshape/checkpoint" r.gguf
}

# Overwrite bytes of $1 at offset $2 with printf-escaped $3.
patch() {
	printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

@test "admit: a converted fixture is admitted with the exact summary line" {
	run --separate-stderr "$admit" r.gguf
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	[[ "$output" =~ ^"admitted r.gguf: profile dev, status correctness-fixture, runtime_supported false, "[0-9]+" of "[0-9]+" bytes read"$ ]]
	run "$admit" -q r.gguf
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
}

@test "admit: --json is the ownership table and says the artifact is not runnable" {
	run --separate-stderr "$admit" --json --report saved.json r.gguf
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	printf '%s\n' "$output" >report.json
	cmp report.json saved.json
	python3 - report.json r.gguf <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1]))
size = os.path.getsize(sys.argv[2])
assert r["admitted"] is True and r["runtime_supported"] is False, r
assert r["status"] == "correctness-fixture" and r["profile"] == "dev"
assert r["codecs"] == {"experts": "bf16", "experts_label": "exact-reference", "ple": "bf16"}, r["codecs"]
pos = 0
kinds = set()
for o in r["owners"]:
    assert o["offset"] == pos and o["length"] > 0, o
    pos += o["length"]
    kinds.add(o["owner"])
assert pos == size == r["file_bytes"]
assert {"header", "kv", "tensor-info", "dense-tensor", "expert-store-header",
        "expert-store-descriptors", "expert-records", "ple-manifest",
        "ple-table-directory", "ple-page-digests", "ple-pages", "padding"} <= kinds, kinds
assert r["bytes_read"] < size / 10, (r["bytes_read"], size)
PY
}

@test "admit: a rejection is one stderr line, exit 1, and a JSON diagnostic with its step" {
	patch r.gguf 0 'XXXX'
	run --separate-stderr "$admit" --json r.gguf
	[ "$status" -eq 1 ]
	[ "$stderr" = 'hb-admit: gguf-magic: gguf.magic: magic is not "GGUF" at byte 0' ]
	printf '%s\n' "$output" >report.json
	python3 - report.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
d = r["diagnostic"]
assert r["admitted"] is False and d["id"] == "gguf-magic" and d["step"] == 1 and d["step_name"] == "gguf", r
assert "owners" not in r
PY
}

@test "admit: a demanded profile that is not the artifact's is refused at step 2" {
	run --separate-stderr "$admit" --profile qwen4exp-flash-next r.gguf
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-admit: adm-profile-demanded: hebrus.profile: the artifact is 'dev', 'qwen4exp-flash-next' was demanded" ]
	run "$admit" --profile dev -q r.gguf
	[ "$status" -eq 0 ]
}

@test "admit: unreadable file exits 3, usage errors exit 2" {
	run --separate-stderr "$admit" missing.gguf
	[ "$status" -eq 3 ]
	[ "$stderr" = "hb-admit: cannot open 'missing.gguf': No such file or directory" ]
	run --separate-stderr "$admit"
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-admit: expected one ARTIFACT
try 'hb-admit --help'" ]
	run --separate-stderr "$admit" --profile nope r.gguf
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-admit: unknown profile 'nope'
try 'hb-admit --help'" ]
}

@test "admit: the payload is never read (garbage in every record and page still admits)" {
	"$admit" --json r.gguf >before.json
	python3 - before.json r.gguf <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
with open(sys.argv[2], "r+b") as f:
    for o in r["owners"]:
        if o["owner"] in ("expert-records", "ple-pages"):
            f.seek(o["offset"])
            f.write(bytes([0xA5]) * o["length"])
PY
	run "$admit" -q r.gguf
	[ "$status" -eq 0 ]
}

# Fails (status 1) when binary $1 references a GPU entry point (Metal, CUDA,
# Vulkan, OpenCL, OpenGL/EGL) or links a GPU library.
gpu_free() {
	local syms libs
	syms=$(nm -u "$1") || return 2
	[ -n "$syms" ] || return 2
	if grep -Eiq 'metal|mtl|cuda|cublas|vulkan|opencl|egl' <<<"$syms" ||
	   grep -Eq ' U (vk|cl|gl)[A-Z]' <<<"$syms"; then
		grep -Ei 'metal|mtl|cuda|cublas|vulkan|opencl|egl| U (vk|cl|gl)[A-Z]' <<<"$syms" >&2
		return 1
	fi
	libs=$(ldd "$1") || return 2
	! grep -Eiq 'cuda|vulkan|libGL|libEGL|OpenCL|metal' <<<"$libs"
}

@test "admit and convert link no GPU symbol" {
	gpu_free "$admit"
	gpu_free "$convert"
	gpu_free "$build/bin/hb-verify-pages"
	gpu_free "$build/bin/hb-trace"
}

# The CUDA backend (cuda/, static cudart) is inside hb-run and hb-replay
# when the build found nvcc, and never inside the other binaries.
@test "only hb-run and hb-replay contain the CUDA backend" {
	for b in hb-admit hb-convert hb-verify-pages hb-trace; do
		! nm "$build/bin/$b" | grep -Eiq 'hb_cuda_|cudaMalloc|cudaLaunch' || { echo "$b has CUDA code" >&2; return 1; }
	done
	for b in hb-run hb-replay; do
		if nm "$build/bin/$b" | grep -q ' T hb_cuda_start$'; then
			nm "$build/bin/$b" | grep -q ' [Tt] cudaMalloc$'
		else
			if nm "$build/bin/$b" | grep -Eiq 'cudaMalloc|cudaLaunch'; then false; fi
		fi
	done
}

@test "the GPU-symbol check itself catches a Vulkan reference" {
	printf 'void vkCreateInstance(void){}\n' >stub.c
	printf 'extern void vkCreateInstance(void);\nint main(void){vkCreateInstance();return 0;}\n' >gpu.c
	cc -shared -fPIC -o libgpustub.so stub.c
	cc -o gpu gpu.c -L. -lgpustub
	run gpu_free ./gpu
	[ "$status" -eq 1 ]
}
