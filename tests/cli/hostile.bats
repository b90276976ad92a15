#!/usr/bin/env bats
# Hostile sizes: inputs that declare huge counts or lengths are refused
# before anything of that size is allocated, with their diagnostic, under a
# memory cgroup of 256 MiB (page cache included; the cgroup-v1 memory
# controller, as root).  Without root or the controller, the same runs go
# under `ulimit -v` of 256 MiB instead (said in the output), except in the
# AddressSanitizer build, whose shadow mappings need more address space.
#
# Label manifests (hb-replay merge) are written by label and then edited.
# Every input is written here by the test (contract controls); a run that
# passes its limit is killed (exit 137) and fails the case.

bats_require_minimum_version 1.5.0

setup_file() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	cd "$BATS_FILE_TMPDIR"
	python3 "$root/scripts/make-synthetic-checkpoint.py" --out base >/dev/null
	python3 - <<'PY'
import json, os, shutil, struct, zlib

def s(x):
    b = x.encode()
    return struct.pack('<Q', len(b)) + b

def gguf(nt, nkv, rest=b''):
    open_ = b'GGUF' + struct.pack('<IQQ', 3, nt, nkv) + rest + b'\0' * 64
    return open_

g = {
    'tensor-count': gguf(1 << 40, 0),
    'kv-count': gguf(0, 1 << 40),
    'key-length': gguf(0, 1, struct.pack('<Q', 1 << 40) + b'abc'),
    'string-length': gguf(0, 1, s('general.architecture') + struct.pack('<IQ', 8, 1 << 40)),
    'array-length': gguf(0, 1, s('tokenizer.ggml.tokens') + struct.pack('<IIQ', 9, 8, 1 << 40)),
    'array-at-limit': gguf(0, 1, s('x.y') + struct.pack('<IIQ', 9, 10, 1 << 24)),
    'tensor-elements': gguf(1, 1, s('general.architecture') + struct.pack('<I', 8) + s('qwen4exp') + s('t')
                            + struct.pack('<IQQIQ', 2, 1 << 20, 1 << 20, 0, 0)),
}
for k, v in g.items():
    open(k + '.gguf', 'wb').write(v)

def header():
    h = (b'HBTRACE1' + struct.pack('<IIIIII', 1, 128, 10, 4, 64, 120) + b'\x11' * 32 + b'\0' * 32
         + struct.pack('<QI', 7, 0) + b'\0' * 16)
    return h + struct.pack('<I', zlib.crc32(h))

def chunk(records, payload):
    return b'HBCHUNK1' + struct.pack('<IIQ', records, 0, payload)

open('records.hbtrace', 'wb').write(header() + chunk(0xffffffff, 0xffffffff * 120))
open('payload.hbtrace', 'wb').write(header() + chunk(65536, 1 << 40))
open('chunk-at-limit.hbtrace', 'wb').write(header() + chunk(65536, 65536 * 120))

def ck(name, cfg=None, st=None):
    d = 'ck-' + name
    shutil.copytree('base', d)
    if cfg:
        c = json.load(open(d + '/config.json'))
        cfg(c.get('text_config', c))
        json.dump(c, open(d + '/config.json', 'w'))
    if st is not None:
        for f in os.listdir(d):
            if f.endswith('.safetensors'):
                os.remove(d + '/' + f)
        open(d + '/model.safetensors', 'wb').write(st)

ck('header-length', st=struct.pack('<Q', 1 << 40) + b'{}')
hj = json.dumps({'model.embed_tokens.weight': {'dtype': 'BF16', 'shape': [1 << 20, 1 << 20],
                                                'data_offsets': [0, 1 << 41]}}).encode()
ck('tensor-shape', st=struct.pack('<Q', len(hj)) + hj)
ck('experts', cfg=lambda c: c.update(num_experts=1 << 40))
ck('vocab', cfg=lambda c: c.update(vocab_size=1 << 40))
PY
}

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	cd "$BATS_FILE_TMPDIR"
}

# Run a command under 256 MiB: sets status, stderr (as Bats' run does) and
# peak (the cgroup's peak usage in KiB, or "n/a").
limited() {
	local cg=/sys/fs/cgroup/memory/hb-hostile-$$-$BATS_TEST_NUMBER limit=$((256 << 20))
	peak=n/a
	if [[ $(id -u) == 0 && -d /sys/fs/cgroup/memory ]] && mkdir "$cg" 2>/dev/null; then
		echo "$limit" >"$cg/memory.limit_in_bytes"
		echo 0 >"$cg/memory.swappiness" 2>/dev/null || true
		run --separate-stderr sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" "$@"
		peak=$(($(cat "$cg/memory.max_usage_in_bytes") / 1024))
		rmdir "$cg"
		how=cgroup
	elif ldd "$1" 2>/dev/null | grep -q libasan; then
		run --separate-stderr "$@"
		how="no limit (AddressSanitizer, not root)"
	else
		run --separate-stderr sh -c 'ulimit -v 262144 && exec "$@"' sh "$@"
		how="ulimit -v"
	fi
}

@test "hostile: the 256 MiB limit bites (a control that writes 384 MiB does not survive it)" {
	limited python3 -c 'b = b"x" * (384 << 20); print(len(b))'
	echo "# control: exit $status under $how" >&3
	[ "$status" -ne 0 ]
	[ "$output" != "$((384 << 20))" ]
}

@test "hostile: GGUF counts and lengths past any file (2^40 tensors, kvs, key, string, array; a 2^40-element tensor) are refused under 256 MiB" {
	declare -A want=(
		[tensor-count]="gguf-limit: gguf.tensor_count: tensor count 1099511627776 exceeds"
		[kv-count]="gguf-limit: gguf.kv_count: kv count 1099511627776 exceeds"
		[key-length]="gguf-string-length: gguf.kv[0].key: string length 1099511627776 exceeds"
		[string-length]="gguf-string-length: gguf.kv[general.architecture].value: string length 1099511627776 exceeds"
		[array-length]="gguf-limit: gguf.kv[tokenizer.ggml.tokens].value: array of 1099511627776 elements exceeds"
		[array-at-limit]="gguf-truncated: gguf.kv[x.y].value: array of 16777216 elements needs 134217728 bytes, the file has"
		[tensor-elements]="gguf-tensor-out-of-file: gguf.tensors[t].offset: extent of 4398046511104 bytes"
	)
	for c in "${!want[@]}"; do
		for tool in hb-admit hb-verify-pages; do
			limited "$build/bin/$tool" "$c.gguf"
			[ "$status" -ne 137 ]
			[ "$status" -eq 1 ] || { echo "$tool $c: exit $status: $stderr" >&2; return 1; }
			[[ $stderr == "$tool: ${want[$c]}"* ]] || { echo "$tool $c: $stderr" >&2; return 1; }
			echo "# $tool $c: refused, peak ${peak} KiB ($how)" >&3
		done
	done
}

@test "hostile: trace chunks claiming 2^32 records or a 2^40-byte payload are refused under 256 MiB" {
	declare -A want=(
		[records]="trace-chunk: records.hbtrace: chunk 0 has a malformed header"
		[payload]="trace-chunk: payload.hbtrace: chunk 0 has a malformed header"
		[chunk-at-limit]="trace-truncated: chunk-at-limit.hbtrace: the shard ends inside chunk 0"
	)
	for c in "${!want[@]}"; do
		for sub in cat stats; do
			limited "$build/bin/hb-trace" "$sub" "$c.hbtrace"
			[ "$status" -eq 1 ] || { echo "hb-trace $sub $c: exit $status: $stderr" >&2; return 1; }
			[[ $stderr == "hb-trace: ${want[$c]}"* ]] || { echo "hb-trace $sub $c: $stderr" >&2; return 1; }
			echo "# hb-trace $sub $c: refused, peak ${peak} KiB ($how)" >&3
		done
	done
}

@test "hostile: checkpoints declaring a 2^40-byte safetensors header, a 2^40-element tensor, 2^40 experts or vocabulary rows are refused under 256 MiB" {
	declare -A want=(
		[header-length]="st-header-size-limit: model.safetensors:header_length: header length 1099511627776 exceeds"
		[tensor-shape]="st-buffer-short: model.safetensors: tensors need 2199023255552 data bytes"
		[experts]="inv-shape: "
		[vocab]="inv-shape: "
	)
	for c in "${!want[@]}"; do
		limited "$build/bin/hb-convert" -q --threads 2 "ck-$c" "out-$c.gguf"
		[ "$status" -eq 1 ] || { echo "hb-convert $c: exit $status: $stderr" >&2; return 1; }
		[[ $stderr == "hb-convert: ${want[$c]}"* ]] || { echo "hb-convert $c: $stderr" >&2; return 1; }
		if [[ $c == experts || $c == vocab ]]; then
			[[ $stderr == *1099511627776* ]]
		fi
		[ ! -e "out-$c.gguf" ]
		echo "# hb-convert $c: refused, peak ${peak} KiB ($how)" >&3
	done
}

@test "hostile: label manifests claiming a billion workers, shard 2^40, 2^40 records, bytes or positions are refused by merge under 256 MiB" {
	"$build/bin/hb-convert" -q base art.gguf
	python3 -c '
import json
for i in range(4):
    print(json.dumps({"owner": i, "thread": i, "turn": 0, "tokens": [3 + i, 5, 7, 11, 13, 17]}))' >t.jsonl
	"$build/bin/hb-replay" label -m art.gguf -o L --shard 0/2 t.jsonl >/dev/null
	m=labels-0000-of-0002-000000.json
	[ -f "L/$m" ]
	# what the unedited manifest holds, and what 2^40 positions of its first range would need
	read -r recs need < <(python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
print(j["records"], ((1 << 40) - j["ranges"][0]["first"]) * j["layers"])' "L/$m")
	declare -A edit=(
		[workers]='j["worker"] = [0, 10**9]'
		[shard]='j["shard"] = 1 << 40'
		[records]='j["records"] = 1 << 40'
		[bytes]='j["bytes"] = 1 << 40'
		[positions]='j["ranges"][0].update(end=1 << 40, length=1 << 40)'
	)
	declare -A want=(
		[workers]="L-workers/$m: its worker [0, 1000000000] and shard 0 are not the ones its name says"
		[shard]="L-shard/$m: its worker [0, 2] and shard 1099511627776 are not the ones its name says"
		[records]="L-records/${m%.json}.hbtrace: holds $recs records, its manifest's ranges need $recs (it says 1099511627776)"
		[bytes]="L-bytes/${m%.json}.hbtrace: "
		[positions]="L-positions/${m%.json}.hbtrace: holds $recs records, its manifest's ranges need $need (it says $recs)"
	)
	for c in "${!edit[@]}"; do
		cp -r L "L-$c"
		python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
${edit[$c]}
json.dump(j, open(sys.argv[1], 'w'))" "L-$c/$m"
		limited "$build/bin/hb-replay" merge "L-$c"
		[ "$status" -eq 1 ] || { echo "merge $c: exit $status: $stderr" >&2; return 1; }
		[[ $stderr == "hb-replay: replay-coverage: ${want[$c]}"* ]] || { echo "merge $c: $stderr" >&2; return 1; }
		echo "# hb-replay merge $c: refused, peak ${peak} KiB ($how)" >&3
	done
	# the control: the unedited labels are whole
	limited "$build/bin/hb-replay" merge L
	[ "$status" -eq 0 ]
}
