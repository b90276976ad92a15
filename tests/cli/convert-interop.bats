#!/usr/bin/env bats
# The artifacts hb-convert writes from the upstream fixtures are read by an
# independent GGUF parser (@huggingface/gguf) exactly as by ours: same tensor
# names, types, shapes, offsets and metadata.  Node.js and npm are required.

bats_require_minimum_version 1.5.0

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	convert=$build/bin/hb-convert
	dump=$build/tests/tools/gguf-dump
	cd "$BATS_TEST_TMPDIR"
}

both_views_agree() { # $1: artifact
	run "$root/scripts/npm-deps"
	[ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
	run "$dump" "$1"
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >ours.json
	run env HB_NPM_DIR="${HB_NPM_DIR:-$root/build/npm}" node "$root/tests/tools/gguf-dump.mjs" "$1"
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >theirs.json
	diff -u ours.json theirs.json
}

@test "convert interop: realshape artifact reads the same in @huggingface/gguf" {
	run "$convert" -q "$root/tests/fixtures/upstream/realshape/checkpoint" r.gguf
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	both_views_agree r.gguf
	grep -q '"general.architecture": {' ours.json
	grep -q '"value": "qwen4exp"' ours.json
	grep -q '"name": "ds4.expert_major.v2"' ours.json
	grep -q '"name": "ds4.ple_rows.v1"' ours.json
	grep -q '"name": "layers.3.self_attn.indexer.index_qk_proj.weight"' ours.json
}

@test "convert interop: general artifact (two PLE tables, affine4 impossible) reads the same" {
	run "$convert" -q "$root/tests/fixtures/upstream/general/checkpoint" g.gguf
	[ "$status" -eq 0 ]
	both_views_agree g.gguf
	grep -q '"qwen4exp.ple.layer_ids": {' ours.json
}

@test "convert interop: affine4 artifact reads the same" {
	run "$convert" -q --expert-codec affine4-g64 "$root/tests/fixtures/upstream/realshape/checkpoint" q.gguf
	[ "$status" -eq 0 ]
	both_views_agree q.gguf
	grep -q '"value": "mlx-affine4-g64"' ours.json
	grep -q '"value": "phase2-structural-not-release-qualified"' ours.json
}

@test "convert: a codec that does not tile is refused with the exact diagnostic and nothing published" {
	run "$convert" -q --expert-codec affine4-g64 "$root/tests/fixtures/upstream/general/checkpoint" g.gguf
	[ "$status" -eq 1 ]
	[ "$output" = "hb-convert: em-codec-tiling: expert_store.component[gate].dim0: gate input width 48 is not a multiple of the mlx-affine4-g64 block of 64 (never padded)" ]
	[ ! -e g.gguf ]
	[ "$(ls -A)" = "" ]
}

@test "convert: --json prints the report on stdout only, and it accounts for every byte" {
	run --separate-stderr "$convert" -q --json "$root/tests/fixtures/upstream/realshape/checkpoint" r.gguf
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	printf '%s\n' "$output" >report.json
	python3 - report.json r.gguf <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1]))
size = os.path.getsize(sys.argv[2])
assert r["artifact_bytes"] == size, (r["artifact_bytes"], size)
pos = 0
for o in r["owners"]:
    assert o["offset"] == pos and o["length"] > 0, o
    pos += o["length"]
assert pos == size
assert r["runtime_supported"] is False and r["status"] == "correctness-fixture"
classes = {}
for t in r["tensors"]:
    classes[t["class"]] = classes.get(t["class"], 0) + 1
    assert ("rule" in t) == (t["destination"] == "excluded"), t
assert classes == {"base": 181, "expert": 768, "ple": 13, "vision": 21}, classes
PY
}

@test "convert: --io direct and buffered write the same bytes as the default; --json timing names the read mode, the window and the bound; a bad --io is usage" {
	src=$root/tests/fixtures/upstream/realshape/checkpoint
	run --separate-stderr "$convert" -q --json --threads 3 "$src" auto.gguf
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >auto.json
	run --separate-stderr "$convert" -q --json --io buffered --threads 1 "$src" buffered.gguf
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >buffered.json
	run --separate-stderr "$convert" -q --json --io direct --threads 2 "$src" direct.gguf
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >direct.json
	cmp auto.gguf buffered.gguf
	cmp auto.gguf direct.gguf
	python3 - auto.json buffered.json direct.json <<'PY'
import json, sys
a, b, d = (json.load(open(p))["timing"] for p in sys.argv[1:])
for t, producers in ((a, 3), (b, 1), (d, 2)):
    p = t["expert_pipeline"]
    assert p["producers"] == producers, p
    assert p["bound"] in ("source-read", "cpu", "payload-digest", "write", "read-back"), p
    assert p["payload_bytes"] == 8 * 32 * 24576 and p["wall_s"] > 0, p
    assert all(t[k] >= 0 for k in ("dense_s", "experts_s", "ple_s", "header_s", "commit_s")), t
# the default is buffered: 32 MiB windows, or what two fit in the ring
for t in (a, b):
    p = t["expert_pipeline"]
    assert p["io"] == "buffered", p
    assert p["window_bytes"] % 24576 == 0 and 0 < p["window_bytes"] <= 32 << 20, p
    assert 2 * p["window_bytes"] // 24576 <= p["records_in_flight"], p
p = d["expert_pipeline"]
assert p["io"] in ("direct", "buffered"), p  # buffered where the file system refuses O_DIRECT
assert (p["window_bytes"] == 0) == (p["io"] == "direct"), p
PY
	run --separate-stderr "$convert" -q --io mmap "$src" x.gguf
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-convert: --io takes auto, buffered or direct, not 'mmap'
try 'hb-convert --help'" ]
	[ ! -e x.gguf ]
}
