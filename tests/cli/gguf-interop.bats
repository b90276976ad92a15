#!/usr/bin/env bats
# GGUF interop: the sample artifact written by our writer
# (tests/tools/gguf-sample) is read by our reader (tests/tools/gguf-dump) and
# by the independent @huggingface/gguf parser (tests/tools/gguf-dump.mjs);
# both print the same canonical JSON, so any disagreement about a type, a
# value, a dimension order or an offset shows as a diff.  Corrupted variants
# must be refused with the exact diagnostic id, field and byte offset.
#
# Binaries come from "${HB_BUILD:-build}/tests/tools" under the repository
# root.  Node.js and npm are required (not optional): without them the
# interop case fails and says so.

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	tools=$build/tests/tools
	for t in gguf-sample gguf-dump; do
		if [[ ! -x $tools/$t ]]; then
			echo "missing $tools/$t: build the test tools first" >&2
			return 1
		fi
	done
	cd "$BATS_TEST_TMPDIR"
	"$tools/gguf-sample" sample.gguf
}

# Copy the sample to $1 and overwrite bytes at offset $2 with printf $3.
corrupt() {
	cp sample.gguf "$1"
	printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

@test "gguf interop: our reader and @huggingface/gguf print the same view" {
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		echo "node and npm are required for the GGUF interop test (Debian packages nodejs, npm)" >&2
		return 1
	fi
	run "$root/scripts/npm-deps"
	[ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
	run "$tools/gguf-dump" sample.gguf
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >ours.json
	run env HB_NPM_DIR="${HB_NPM_DIR:-$root/build/npm}" node "$root/tests/tools/gguf-dump.mjs" sample.gguf
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >theirs.json
	diff -u ours.json theirs.json
	# the comparison covers what matters: spot-check our side
	grep -q '"sample.u64": {' ours.json
	grep -q '"value": "18446744073709551615"' ours.json
	grep -q '"offset": "4096"' ours.json
	[ "$(grep -c '"name": ' ours.json)" -eq 7 ]
}

@test "gguf sample: layout, offsets and byte ownership are exact" {
	run "$tools/gguf-dump" --layout sample.gguf
	[ "$status" -eq 0 ]
	[ "$output" = "alignment 64
kv_start 24
tensor_info_start 1504
tensor_info_end 1849
data_start 1856
file_size 9216
bytes_read 9216
tensor t.f32.r1 F32 offset 1856 nbytes 20
tensor t.f16.r2 F16 offset 1920 nbytes 24
tensor t.bf16.r3 BF16 offset 1984 nbytes 60
tensor t.i8.r4 I8 offset 2048 nbytes 42
tensor t.empty F32 offset 2112 nbytes 0
tensor ds4.expert_major.v2 I8 offset 4096 nbytes 5000
tensor t.after F32 offset 9152 nbytes 12
range 0 24 header
range 24 1480 kv
range 1504 345 tensor-info
range 1849 7 padding
range 1856 20 tensor t.f32.r1
range 1876 44 padding
range 1920 24 tensor t.f16.r2
range 1944 40 padding
range 1984 60 tensor t.bf16.r3
range 2044 4 padding
range 2048 42 tensor t.i8.r4
range 2090 2006 padding
range 4096 5000 tensor ds4.expert_major.v2
range 9096 56 padding
range 9152 12 tensor t.after
range 9164 52 padding" ]
	# the padding the writer owns is zero on disk
	[ "$(od -An -v -tx1 -j 2090 -N 2006 sample.gguf | tr -d ' \n' | tr -d 0)" = "" ]
	[ "$(od -An -v -tx1 -j 9164 -N 52 sample.gguf | tr -d ' \n' | tr -d 0)" = "" ]
}

@test "gguf sample: the writer is deterministic (matches the committed fixture)" {
	cmp sample.gguf "$root/tests/fixtures/gguf/sample.gguf"
}

@test "gguf reader refuses a bad magic" {
	corrupt bad.gguf 0 'X'
	run "$tools/gguf-dump" bad.gguf
	[ "$status" -eq 1 ]
	[ "$output" = 'gguf-dump: bad.gguf: gguf-magic: gguf.magic: magic is not "GGUF" at byte 0' ]
}

@test "gguf reader refuses version 2" {
	corrupt bad.gguf 4 '\x02'
	run "$tools/gguf-dump" bad.gguf
	[ "$status" -eq 1 ]
	[ "$output" = 'gguf-dump: bad.gguf: gguf-version: gguf.version: version 2 is not 3 at byte 4' ]
}

@test "gguf reader refuses a header cut short" {
	head -c 1000 sample.gguf >bad.gguf
	run "$tools/gguf-dump" bad.gguf
	[ "$status" -eq 1 ]
	[ "$output" = 'gguf-dump: bad.gguf: gguf-truncated: gguf.kv[sample.arr_u32].value: array of 3 elements needs 12 bytes, the file has 7 at byte 993' ]
}

@test "gguf reader refuses a tensor count of 2^64-1 by limit" {
	corrupt bad.gguf 8 '\xff\xff\xff\xff\xff\xff\xff\xff'
	run "$tools/gguf-dump" bad.gguf
	[ "$status" -eq 1 ]
	[ "$output" = 'gguf-dump: bad.gguf: gguf-limit: gguf.tensor_count: tensor count 18446744073709551615 exceeds 1048576 at byte 8' ]
}

@test "gguf reader refuses an unknown value type" {
	corrupt bad.gguf 52 '\x63'
	run "$tools/gguf-dump" bad.gguf
	[ "$status" -eq 1 ]
	[ "$output" = 'gguf-dump: bad.gguf: gguf-kv-type: gguf.kv[general.architecture].type: value type 99 is unknown at byte 52' ]
}

@test "gguf reader refuses non-zero header padding" {
	corrupt bad.gguf 1850 '\x01'
	run "$tools/gguf-dump" bad.gguf
	[ "$status" -eq 1 ]
	[ "$output" = 'gguf-dump: bad.gguf: gguf-padding: gguf.padding: padding byte is 0x01, not zero at byte 1850' ]
}

@test "gguf reader refuses a misaligned tensor offset" {
	corrupt bad.gguf 1536 '\x01'
	run "$tools/gguf-dump" bad.gguf
	[ "$status" -eq 1 ]
	[ "$output" = 'gguf-dump: bad.gguf: gguf-tensor-offset-misaligned: gguf.tensors[t.f32.r1].offset: offset 1 is not a multiple of 64 at byte 1536' ]
}

@test "gguf reader refuses overlapping tensors" {
	corrupt bad.gguf 1584 '\x00'
	run "$tools/gguf-dump" bad.gguf
	[ "$status" -eq 1 ]
	[ "$output" = 'gguf-dump: bad.gguf: gguf-tensor-overlap: gguf.tensors[t.f16.r2].offset: extent [1856, 1880) overlaps an earlier tensor ending at 1876 at byte 1584' ]
}

@test "gguf reader refuses a duplicate tensor name" {
	corrupt bad.gguf 1552 't.f32.r1'
	run "$tools/gguf-dump" bad.gguf
	[ "$status" -eq 1 ]
	[ "$output" = 'gguf-dump: bad.gguf: gguf-duplicate-tensor: gguf.tensors[t.f32.r1].name: tensor name repeats tensor 0 at byte 1544' ]
}

@test "gguf reader refuses a file cut inside tensor data" {
	head -c 5000 sample.gguf >bad.gguf
	run "$tools/gguf-dump" bad.gguf
	[ "$status" -eq 1 ]
	[ "$output" = 'gguf-dump: bad.gguf: gguf-tensor-out-of-file: gguf.tensors[ds4.expert_major.v2].offset: extent of 5000 bytes at data+2240 does not fit in a 5000-byte file at byte 1802' ]
}
