#!/usr/bin/env bats
# hb-trace from the command line: the hand-built traces of
# tests/fixtures/traces (answers worked out in its README), every defect
# with its diagnostic line and exit status, traces from hb-run on the
# upstream fixture through every subcommand (and through a pipe), and the
# SVG plots rendered by headless Chromium.  The render test needs the
# Debian package chromium; without it the test is skipped unless
# HB_REQUIRE_CHROMIUM=1 (make test-render) makes that a failure.

bats_require_minimum_version 1.5.0

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	trace=$build/bin/hb-trace
	fx=$root/tests/fixtures/traces
	cd "$BATS_TEST_TMPDIR"
	cp "$fx"/*.trace .
}

# the upstream fixture, converted, and a trace of 4 prompt + 12 generated tokens
hb_run_trace() {
	"$build/bin/hb-convert" -q "$root/tests/fixtures/upstream/realshape/checkpoint" r.gguf
	"$build/bin/hb-run" -q -m r.gguf --tokens 1,2,3,4 -n 12 --dump-routes run.trace >ids.txt
	"$build/bin/hb-run" -q -m r.gguf --tokens 1,2,3,4 -n 12 --json >run.json
}

@test "trace: stats of tiny.trace are the hand-worked answers" {
	run --separate-stderr "$trace" stats --tau 2=1.5,3=2.5 tiny.trace
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	[ "$output" = "6 records, 3 tokens, 1 sequences; top-2 of 4 experts, 2 layers
layer    records      prev  adjacent      U1      U2      U3      U4      U5   H/Hmax   top1%  top10%
0              3     1.000         -    2.00    3.00    4.00       -       -   0.9591  0.3333  0.3333
1              3     1.000     1.333    2.00    3.00    4.00       -       -   0.9591  0.3333  0.3333
all            6     1.000     1.333    2.00    3.00    4.00       -       -   0.9728  0.1667  0.1667
previous-token overlap (overlap:pairs): 0:1 1:2 2:1
adjacent-layer overlap (overlap:pairs): 0:0 1:2 2:1
popularity over 8 layer-expert pairs: entropy 2.9183 bits (0.9728 of max); the top 1 (1%) hold 0.1667 of selections, the top 1 (10%) hold 0.1667
break-even B=2 tau=1.5: U_B 3.000 >= k*tau 3.000: no saving (ratio 1.0000)
break-even B=3 tau=2.5: U_B 4.000 < k*tau 5.000: fewer routed bytes per token (ratio 0.8000)" ]
}

@test "trace: layer-major order and standard input give the same stats" {
	"$trace" stats --json tiny.trace >a.json
	"$trace" stats --json - <tiny-layer-major.trace >b.json
	cmp a.json b.json
	python3 -c "
import json; d = json.load(open('a.json'))
o = d['overall']
assert o['prev_overlap_hist'] == [1, 2, 1] and o['adjacent_overlap_hist'] == [0, 2, 1], o
assert o['unique_per_block'] == {'1': 2, '2': 3, '3': 4, '4': None, '5': None}, o
assert (d['tokens'], d['sequences']) == (3, 1)"
}

@test "trace: previous-token pairs stay within a sequence" {
	"$trace" stats --json two-sequences.trace >s.json
	python3 -c "
import json; d = json.load(open('s.json'))
assert (d['tokens'], d['sequences']) == (3, 2), d
assert d['overall']['prev_pairs'] == 2 and d['overall']['prev_overlap_mean'] == 1.5, d['overall']"
}

@test "trace: cache-sim of tiny.trace: LRU and Belady hit counts by hand" {
	run --separate-stderr "$trace" cache-sim --budget 4,2 --policy lru,belady --record-bytes 1000 tiny.trace
	[ "$status" -eq 0 ]
	[ "$output" = "6 records, 3 tokens, 12 accesses; global caches, 1000 bytes per record
policy         budget  per-cache      hit  reads/token      bytes/token
lru                 2          2   0.0000        4.000             4000
lru                 4          4   0.3333        2.667             2667
belady              2          2   0.2500        3.000             3000
belady              4          4   0.3333        2.667             2667" ]
	"$trace" cache-sim --json --per-layer --budget 4 --policy lru tiny.trace >p.json
	python3 -c "
import json; r = json.load(open('p.json'))['results'][0]
assert (r['records_per_cache'], r['hits'], r['misses']) == (2, 4, 8), r
assert r['bytes_per_token'] is None"
}

@test "trace: cat prints one JSON line per record" {
	run --separate-stderr "$trace" cat tiny.trace
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 6 ]
	[ "${lines[0]}" = '{"shard":"tiny.trace","record":0,"sequence":0,"token":0,"layer":0,"experts":[0,1],"weights":[0.5,0.25],"lineage":null}' ]
	[ "${lines[5]}" = '{"shard":"tiny.trace","record":5,"sequence":0,"token":2,"layer":1,"experts":[0,3],"weights":[0.5,0.25],"lineage":null}' ]
}

@test "trace: every defect fails with its diagnostic, exit 1" {
	run --separate-stderr "$trace" stats truncated.trace
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-trace: trace-truncated: truncated.trace: the shard ends inside chunk 1 (102 of 112 bytes); last good record 3 at byte 502" ]
	run --separate-stderr "$trace" cat crc.trace
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[ "$stderr" = "hb-trace: trace-crc: crc.trace: chunk 0 fails its CRC-32; no good record at byte 128" ]
	run --separate-stderr "$trace" stats tiny.trace other-experts.trace
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-trace: trace-mismatch: other-experts.trace: experts 5 differs from 4 in 'tiny.trace'" ]
	run --separate-stderr "$trace" stats duplicate-expert.trace
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-trace: trace-duplicate: duplicate-expert.trace: record 0 (sequence 0, token 0, layer 0) names expert 3 twice" ]
	run --separate-stderr "$trace" stats backwards.trace
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-trace: trace-order: backwards.trace: record 1: sequence 0 layer 0 token 0 after token 1" ]
	run --separate-stderr "$trace" stats - - <tiny.trace
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-trace: trace-stdin: -: standard input is named 2 times; it can be read once" ]
}

@test "trace: usage errors exit 2" {
	run --separate-stderr "$trace" cache-sim tiny.trace
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-trace: cache-sim needs --budget
try 'hb-trace --help'" ]
	run --separate-stderr "$trace" stats --budget 4 tiny.trace
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-trace: this option does not apply to stats
try 'hb-trace --help'" ]
	run --separate-stderr "$trace" frobnicate tiny.trace
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-trace: unknown subcommand 'frobnicate'
try 'hb-trace --help'" ]
	run --separate-stderr "$trace" cache-sim --budget 1GiB tiny.trace
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-trace: --budget: '1GiB' is in bytes: give --artifact or --record-bytes" ]
}

@test "trace: hb-run traces go through every subcommand" {
	hb_run_trace
	"$trace" cat run.trace >cat.jsonl
	[ "$(wc -l <cat.jsonl)" -eq 120 ] # (4 prompt + 11 decoded) tokens x 8 layers
	"$build/bin/hb-run" -q -m r.gguf --tokens 1,2,3,4 -n 12 --dump-routes - 2>/dev/null | "$trace" stats --json - >pipe.json
	"$trace" stats --json run.trace >file.json
	cmp pipe.json file.json
	python3 -c "
import json; d = json.load(open('file.json'))
assert (d['records'], d['tokens'], d['layers'], d['top_k']) == (120, 15, 8, 10), d
assert d['overall']['prev_pairs'] == 14 * 8 and d['overall']['adjacent_pairs'] == 15 * 7"
	"$trace" cache-sim --json --artifact r.gguf --budget 10%,64,1MiB run.trace >cache.json
	python3 -c "
import json; d = json.load(open('cache.json'))
assert d['record_bytes'] == 24576 and len(d['results']) == 15, d
by = {(r['policy'], r['budget_records']): r for r in d['results']}
for b in (25, 42, 64):
    assert all(by[(p, b)]['hits'] <= by[('belady', b)]['hits'] for p in ('lru', 'lfu', 'lfu-decay', 'score'))"
	"$trace" prefetch-sim --json --artifact r.gguf --timings run.json --latency 0.0001 --bandwidth 2e9 --depth 4 run.trace >pf.json
	python3 -c "
import json; d = json.load(open('pf.json'))
r = {x['predictor']: x for x in d['results']}
assert set(r) == {'none', 'prev', 'adjacent', 'oracle'}
assert r['none']['hidden_fraction'] == 0 and r['none']['predicted_reads'] == 0
assert r['oracle']['useful_prefetch_ratio'] == 1
assert d['model']['storage_source'] == 'given' and d['model']['layer_time_s'] > 0"
	mkdir plots
	run --separate-stderr "$trace" plot --out plots --artifact r.gguf --layer-time 0.001 --latency 0.0001 --bandwidth 1e9 --depth 4 --cache 40 run.trace
	[ "$status" -eq 0 ]
	[ "$output" = "wrote plots/overlap.svg
wrote plots/cache.svg
wrote plots/timeline.svg" ]
	python3 -c "
import xml.etree.ElementTree as E
for f in ('overlap', 'cache', 'timeline'):
    t = E.parse('plots/%s.svg' % f).getroot()
    assert t.tag == '{http://www.w3.org/2000/svg}svg' and t.get('version') == '1.1'
    assert not t.findall('.//{http://www.w3.org/2000/svg}script')"
	grep -q 'belady (optimal)' plots/cache.svg
	"$trace" probe --json --file r.gguf --read-bytes 24576 >probe.json
	python3 -c "
import json; d = json.load(open('probe.json'))
assert d['latency_s'] > 0 and d['bandwidth'] > 0 and d['depth'] in (1, 2, 4, 8, 16) and d['read_bytes'] == 24576"
	run --separate-stderr "$trace" cache-sim --budget 4 --artifact r.gguf tiny.trace
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-trace: trace-artifact: r.gguf: artifact has 8 layers x 32 experts (top 10), the trace 2 x 4 (top 2)" ]
}

# non-white pixels of a PNG (8-bit RGB or RGBA, no interlace), standard library only
png_ink() {
	python3 "$root/tests/tools/png_ink.py" "$1"
}

@test "trace: the plots render in headless Chromium" {
	if ! command -v chromium >/dev/null; then
		[ "${HB_REQUIRE_CHROMIUM:-0}" != 1 ] || { echo "chromium is required (Debian package chromium)" >&2; return 1; }
		skip "chromium not installed (scripts/bootstrap installs it)"
	fi
	hb_run_trace
	mkdir plots
	"$trace" plot --out plots --artifact r.gguf --layer-time 0.001 --latency 0.0001 --bandwidth 1e9 --depth 4 --cache 40 run.trace >/dev/null
	for f in overlap cache timeline; do
		timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars --window-size=880,520 \
			--screenshot="$PWD/$f.png" "file://$PWD/plots/$f.svg" >/dev/null 2>&1
		read -r w h ink < <(png_ink "$f.png")
		echo "$f: ${w}x$h, $ink non-white pixels" >&3
		[ "$w" -eq 880 ]
		[ "$h" -eq 520 ]
		# axes, lines and text: thousands of pixels; a blank or failed page has none
		[ "$ink" -gt 5000 ]
		[ "$ink" -lt $((880 * 520 / 2)) ]
	done
	# the check fails on a page that draws nothing
	printf '<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="880" height="520"/>\n' >blank.svg
	timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars --window-size=880,520 \
		--screenshot="$PWD/blank.png" "file://$PWD/blank.svg" >/dev/null 2>&1
	read -r w h ink < <(png_ink blank.png)
	[ "$ink" -lt 5000 ]
}
