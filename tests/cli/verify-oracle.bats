#!/usr/bin/env bats
# hb-run --verify-oracle FILE --block B (AFN-019 Gate E) on the realshape
# upstream fixture: a recorded greedy decode verified B = 1..5 inputs a
# chunk equals plain decode (exact yes, exit 0) with perfect acceptance:
# tau(B) = tokens / ceil(tokens / B), nothing rolled back, U_1 = top-k;
# the report's keys, text and JSON, agree; a record that is not the
# target's greedy decode is still exact, with rejections; usage errors exit 2.

bats_require_minimum_version 1.5.0

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	run_bin=$build/bin/hb-run
	cd "$BATS_TEST_TMPDIR"
	"$build/bin/hb-convert" -q "$root/tests/fixtures/upstream/realshape/checkpoint" r.gguf
	"$run_bin" -m r.gguf --tokens 1,2,3,4,5 -n 13 -q >rec.txt
}

# value KEY: the report line's value from out.txt
value() {
	sed -n "s/^$1 //p" out.txt
}

@test "verify-oracle: B = 1..5 equal plain decode with perfect acceptance, and the report says so" {
	[ "$(tr ',' '\n' <rec.txt | wc -l)" -eq 13 ]
	local B
	for B in 1 2 3 4 5; do
		run --separate-stderr "$run_bin" -m r.gguf --tokens 1,2,3,4,5 -q --verify-oracle rec.txt --block "$B"
		[ "$status" -eq 0 ]
		[ "$stderr" = "" ]
		printf '%s\n' "$output" >out.txt
		cat out.txt
		[ "$(value block)" = "$B" ]
		[ "$(value tokens)" = 13 ]
		[ "$(value chunks)" = $(((13 + B - 1) / B)) ]
		[ "$(value accepted)" = $((13 - (13 + B - 1) / B)) ]
		[ "$(value rolled_back)" = 0 ]
		[ "$(value exact)" = yes ]
		[ "$(value record_is_greedy)" = yes ]
	done
	# B = 1 is the baseline: U_1 = top-k, the ratio 1, never below break-even
	run --separate-stderr "$run_bin" -m r.gguf --tokens 1,2,3,4,5 -q --verify-oracle rec.txt --block 1
	printf '%s\n' "$output" >out.txt
	[ "$(value u_b)" = 10 ]
	[ "$(value routed_bytes_ratio)" = 1 ]
	[ "$(value break_even)" = no ]
	[ "$(sed 's/ .*//' out.txt | tr '\n' ' ')" = "block tokens chunks proposed accepted rolled_back tau u_b break_even_u_b break_even routed_bytes_per_token routed_bytes_per_token_b1 routed_bytes_ratio ple_pages_per_block ple_pages_per_token_b1 verify_ms_per_token plain_ms_per_token record_is_greedy exact " ]
}

@test "verify-oracle: --json carries the same figures, consistent with their definitions" {
	run --separate-stderr "$run_bin" -m r.gguf --tokens 1,2,3,4,5 -q --verify-oracle rec.txt --block 4 --json
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >r.json
	python3 - r.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["exact"] is True and r["record_is_greedy"] is True, r
assert r["block"] == 4 and r["tokens"] == 13 and r["chunks"] == 4, r
assert abs(r["tau"] - 13 / 4) < 1e-12, r
assert abs(r["break_even_u_b"] - 10 * r["tau"]) < 1e-9, r
assert r["break_even"] == (r["u_b"] < r["break_even_u_b"]), r
assert 10 <= r["u_b"] <= 40, r
assert abs(r["routed_bytes_ratio"] - r["routed_bytes_per_token"] / r["routed_bytes_per_token_b1"]) < 1e-9, r
assert r["ple_pages_per_block"] >= r["ple_pages_per_token_b1"] > 0, r
PY
}

@test "verify-oracle: a record that is not the target's greedy decode is verified exactly, with rejections" {
	python3 - rec.txt <<'PY'
import sys
ids = [int(x) for x in open(sys.argv[1]).read().split(",")]
for i in range(2, len(ids), 3):
    ids[i] = (ids[i] + 1) % 1000
open("bad.txt", "w").write(",".join(map(str, ids)) + "\n")
PY
	run --separate-stderr "$run_bin" -m r.gguf --tokens 1,2,3,4,5 -q --verify-oracle bad.txt --block 3
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >out.txt
	[ "$(value exact)" = yes ]
	[ "$(value record_is_greedy)" = no ]
	[ "$(value rolled_back)" -gt 0 ]
	[ "$(value tokens)" = 13 ]
}

@test "verify-oracle: usage errors exit 2 before the model runs" {
	run --separate-stderr "$run_bin" -m r.gguf --tokens 1,2 --block 3
	[ "$status" -eq 2 ]
	[ "${stderr%%$'\n'*}" = "hb-run: --verify-oracle and --block go together" ]
	run --separate-stderr "$run_bin" -m r.gguf --tokens 1,2 --verify-oracle rec.txt --block 17
	[ "$status" -eq 2 ]
	[ "${stderr%%$'\n'*}" = "hb-run: --block takes 1..16, not '17'" ]
	run --separate-stderr "$run_bin" -m r.gguf --tokens 1,2 --verify-oracle rec.txt --block 2 --temp 0.5
	[ "$status" -eq 2 ]
	[[ "$stderr" == "hb-run: --verify-oracle verifies greedy decoding: it excludes sampling, "* ]]
	: >empty.txt
	run --separate-stderr "$run_bin" -m r.gguf --tokens 1,2 -q --verify-oracle empty.txt --block 2
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-run: run-tokens: empty.txt: expected token ids separated by commas or white space at byte 0" ]
}
