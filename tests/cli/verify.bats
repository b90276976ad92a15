#!/usr/bin/env bats
# hb-verify-pages from the command line: exit statuses, finding lines with
# locations and digests, and corruption that admission sees first.

bats_require_minimum_version 1.5.0

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	verify=$build/bin/hb-verify-pages
	cd "$BATS_TEST_TMPDIR"
	"$build/bin/hb-convert" -q --json "$root/tests/fixtures/upstream/realshape/checkpoint" r.gguf >report.json
}

# offset of the first owner range of kind $1 (from the converter's report)
owner_at() {
	python3 -c "
import json,sys
for o in json.load(open('report.json'))['owners']:
    if o['owner'] == sys.argv[1]:
        print(o['offset']); break" "$1"
}

flip() { # file offset: xor one byte with 0xff
	python3 -c "
import sys
with open('r.gguf','r+b') as f:
    f.seek(int(sys.argv[1])); b=f.read(1); f.seek(int(sys.argv[1])); f.write(bytes([b[0]^0xff]))" "$1"
}

@test "verify: a clean artifact verifies (summary line, exit 0)" {
	run --separate-stderr "$verify" r.gguf
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	[ "$output" = "verified r.gguf: 66 PLE pages and payload, 256 expert records and payload, 13123584 bytes hashed" ]
}

@test "verify: a page header field names the page" {
	pages=$(owner_at ple-pages)
	flip $((pages + 4096 * 3 + 8))
	run --separate-stderr "$verify" r.gguf
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[ "$(grep -c . <<<"$stderr")" -eq 2 ]
	[[ "${stderr%%$'\n'*}" == "hb-verify-pages: ple-page-header: ple.page[3].header."* ]]
	[[ "$stderr" == *"hb-verify-pages: ple-payload-digest: ple.manifest.payload_sha256: the whole-payload digest does not match at byte $pages (expected "*", found "*")"* ]]
}

@test "verify: a record byte names layer and expert with both digests, and --json says so" {
	rec=$(owner_at expert-records)
	flip $((rec + 24576 * 33 + 5))
	run --separate-stderr "$verify" --json r.gguf
	[ "$status" -eq 1 ]
	[[ "$stderr" == "hb-verify-pages: verify-record-digest: expert_store.layer[1].expert[1]: the record does not match its digest at byte $((rec + 24576 * 33)) (expected "*", found "*")"* ]]
	printf '%s\n' "$output" >v.json
	python3 - v.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["verified"] is False
f = r["findings"]
assert [x["kind"] for x in f] == ["record", "payload"], f
assert f[0]["layer"] == 1 and f[0]["expert"] == 1 and f[0]["expected"] != f[0]["found"]
assert r["experts"]["bad_records"] == 1 and r["experts"]["payload_ok"] is False
assert r["ple"]["payload_ok"] is True and r["ple"]["bad_pages"] == 0
PY
}

@test "verify: corruption admission can see is reported by admission (descriptor, digest table, manifest, trailing bytes)" {
	cp r.gguf clean.gguf
	flip $(( $(owner_at expert-store-descriptors) + 4 ))
	run --separate-stderr "$verify" r.gguf
	[ "$status" -eq 1 ]
	[[ "$stderr" == "hb-verify-pages: em-"* ]]
	cp clean.gguf r.gguf
	flip $(owner_at ple-page-digests)
	run --separate-stderr "$verify" r.gguf
	[ "$status" -eq 1 ]
	[[ "$stderr" == "hb-verify-pages: ple-manifest-digest: "* ]]
	cp clean.gguf r.gguf
	flip $(( $(owner_at ple-manifest) + 40 ))
	run --separate-stderr "$verify" r.gguf
	[ "$status" -eq 1 ]
	[[ "$stderr" == "hb-verify-pages: ple-"* ]]
	cp clean.gguf r.gguf
	printf 'tail' >>r.gguf
	run --separate-stderr "$verify" r.gguf
	[ "$status" -eq 1 ]
	[[ "$stderr" == "hb-verify-pages: adm-trailing-bytes: "* ]]
}

@test "verify: selections, usage and unreadable files" {
	run "$verify" --pages 0-3 -q r.gguf
	[ "$status" -eq 0 ]
	run --separate-stderr "$verify" --pages 60-70 r.gguf
	[ "$status" -eq 0 ]
	[ "$output" = "verified r.gguf: 6 PLE pages, 0 expert records, 24576 bytes hashed" ]
	run --separate-stderr "$verify" --pages 70-80 r.gguf
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-verify-pages: verify-range: pages: pages 70-80 outside 0-65" ]
	run --separate-stderr "$verify" --sample 3 --seed 9 --json r.gguf
	[ "$status" -eq 0 ]
	[[ "$output" == *'"records_checked":	3'* ]]
	run --separate-stderr "$verify" --seed 9 r.gguf
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-verify-pages: --seed goes with --sample
try 'hb-verify-pages --help'" ]
	run --separate-stderr "$verify" --pages 5-2 r.gguf
	[ "$status" -eq 2 ]
	run --separate-stderr "$verify" nothere.gguf
	[ "$status" -eq 3 ]
	[ "$stderr" = "hb-verify-pages: cannot open 'nothere.gguf': No such file or directory" ]
}

@test "verify: --io direct verifies the same, and --json names the read mode and the bound" {
	for io in buffered direct; do
		run --separate-stderr "$verify" --io "$io" --threads 3 --json r.gguf
		[ "$status" -eq 0 ]
		printf '%s\n' "$output" >"v-$io.json"
	done
	python3 - v-buffered.json v-direct.json <<'PY'
import json, sys
b, d = (json.load(open(p)) for p in sys.argv[1:])
for r in (b, d):
    assert r["verified"] is True and r["findings"] == []
    p = r["pipeline"]
    assert p["bound"] in ("read", "payload-digest", "unit-digests"), p
    assert p["unit_threads"] == 2 and p["wall_s"] > 0 and p["read_s"] >= 0, p
assert b["pipeline"]["io"] == "buffered"
assert d["pipeline"]["io"] in ("direct", "buffered")  # buffered where the file system refuses O_DIRECT
for k in ("bytes_read", "bytes_hashed", "ple", "experts"):
    assert b[k] == d[k], k
PY
	# selected mode runs no pipeline
	run --separate-stderr "$verify" --sample 2 --json r.gguf
	[ "$status" -eq 0 ]
	[[ "$output" != *'"pipeline"'* ]]
	run --separate-stderr "$verify" --io mmap r.gguf
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-verify-pages: --io takes buffered or direct, not 'mmap'
try 'hb-verify-pages --help'" ]
}
