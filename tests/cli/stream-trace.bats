#!/usr/bin/env bats
# hb-run --stream-trace (hb-run(1); STREAM TRACE in hebrus-trace(5)): the
# streaming engine's per-chunk, per-layer-step and per-read records.  The
# run with it is byte-identical to the resident run (ids, logits, route
# dump); the records agree with the run's own --json counters (another
# path through the engine: one snapshot at the end, not a difference per
# chunk); hb-trace cat, stats and plot read it; a damaged one is refused
# naming the field; the measured and simulated timelines render in
# headless Chromium; prefetch-sim --stream-trace puts the prediction beside
# the measured exposed wait, and replays the run's own predicted reads
# (--predictor engine).
#
# Needs python3 (standard library); the render test needs chromium.

bats_require_minimum_version 1.5.0

setup_file() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	"$build/bin/hb-convert" -q "$root/tests/fixtures/upstream/general/checkpoint" "$BATS_FILE_TMPDIR/general.gguf"
}

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	run_=$build/bin/hb-run
	tr_=$build/bin/hb-trace
	art=$BATS_FILE_TMPDIR/general.gguf
	ids=$(python3 -c 'print(",".join(str(i * 37 % 250 + 3) for i in range(12)))')
	cd "$BATS_TEST_TMPDIR"
}

@test "stream-trace: the run is byte-identical to resident, and the records agree with --json" {
	run --separate-stderr "$run_" -q -m "$art" --tokens "$ids" -n 7 --threads 2 --dump-logits ref.bin \
		--dump-routes ref.trace
	[ "$status" -eq 0 ]
	echo "$output" >ref.txt
	for pred in none previous router-ahead; do
		run --separate-stderr "$run_" -q -m "$art" --tokens "$ids" -n 7 --threads 2 --expert-cache 25% \
			--expert-predict "$pred" --dump-logits got.bin --dump-routes got.trace --stream-trace st.bin
		[ "$status" -eq 0 ]
		[ "$stderr" = "" ]
		[ "$output" = "$(cat ref.txt)" ]
		cmp ref.bin got.bin
		cmp ref.trace got.trace
		run --separate-stderr "$run_" -q -m "$art" --tokens "$ids" -n 7 --threads 2 --expert-cache 25% \
			--expert-predict "$pred" --stream-trace st2.bin --json
		[ "$status" -eq 0 ]
		echo "$output" >run.json
		"$tr_" cat st2.bin >cat.jsonl
		python3 - "$pred" <<'PY'
import json, sys
pred = sys.argv[1]
recs = [json.loads(l) for l in open("cat.jsonl")]
x = json.load(open("run.json"))["expert_cache"]
tok = [r for r in recs if r["kind"] == "token"]
lay = [r for r in recs if r["kind"] == "layer"]
rd = [r for r in recs if r["kind"] == "read"]
# the prompt as one chunk of 12 tokens, then 6 decode steps (the 7th id is never fed back)
assert [(r["token"], r["tokens"], r["phase"]) for r in tok] == [(0, 12, 0)] + [(12 + i, 1, 1) for i in range(6)], tok
assert len(lay) == 7 * 6 and sorted({r["layer"] for r in lay}) == list(range(6)), len(lay)
for k in ("hits", "joined", "misses", "bytes_exact", "exposed_ns", "deadlines", "late"):
    assert sum(r[k] for r in tok) == x[k], (k, sum(r[k] for r in tok), x[k])
for k in ("hits", "joined", "misses", "exposed_ns"):
    assert sum(r[k] for r in lay) == x[k], (k, sum(r[k] for r in lay), x[k])
assert x["wants"] > 0 and len(rd) > 0
# every read the tokens count as issued exact is a P0 read record
assert sum(1 for r in rd if r["class"] == 0) <= x["tickets_p0"] and len(rd) <= x["completed"] + x["cancelled_inflight"] + x["failed_io"] + x["failed_short"] + x["failed_digest"] + x["stale_discards"], (len(rd), x)
if pred == "none":
    assert all(r["class"] == 0 and r["flags"] == 1 for r in rd), rd[:3]
    assert all(r["bytes_predicted"] == 0 for r in tok)
if pred == "router-ahead":
    assert any(r["class"] == 1 for r in rd)
for r in lay:
    assert r["start_ns"] <= r["moe_ns"] <= r["routed_ns"] <= r["ready_ns"] <= r["end_ns"], r
    if r["misses"] + r["joined"] == 0:
        assert r["ready_ns"] == r["routed_ns"], r  # nothing to wait for
PY
	done
	# the reader checks what cat printed: a stats summary of the same file
	run --separate-stderr "$tr_" stats --json st2.bin
	[ "$status" -eq 0 ]
	echo "$output" >stats.json
	python3 -c 'import json; s = json.load(open("stats.json")); assert s["decode_tokens"] == 6 and s["first_decode_token"] == 12 and s["predictor"] == "router-ahead" and s["layers"] == 6, s'
}

@test "stream-trace: refusals: without streaming, a damaged file field by field" {
	run --separate-stderr "$run_" -q -m "$art" --tokens "$ids" -n 2 --stream-trace st.bin
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-run: --stream-trace needs --expert-cache"* ]]
	run --separate-stderr "$run_" -q -m "$art" --tokens "$ids" -n 2 --expert-cache all --stream-trace st.bin
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-run: --stream-trace needs --expert-cache SIZE other than all"* ]]
	[ ! -e st.bin ]
	run --separate-stderr "$run_" -q -m "$art" --tokens "$ids" -n 3 --expert-cache 25% --stream-trace st.bin
	[ "$status" -eq 0 ]
	# a token record's phase set to 7, its CRC made good: refused naming record 0's field
	python3 - <<'PY'
import struct, zlib
b = bytearray(open("st.bin", "rb").read())
off = 128
while True:
    kind, pb = struct.unpack_from("<II", b, off)
    if kind == 1:
        break
    off += 16 + pb
struct.pack_into("<I", b, off + 16 + 12, 7)
struct.pack_into("<I", b, off + 8, zlib.crc32(bytes(b[off + 16:off + 16 + pb])))
open("bad-phase.bin", "wb").write(b)
c = bytearray(open("st.bin", "rb").read())
c[200] ^= 0x40
open("bad-crc.bin", "wb").write(c)
d = bytearray(open("st.bin", "rb").read())
struct.pack_into("<I", d, 8, 2)
open("bad-version.bin", "wb").write(d)
open("short.bin", "wb").write(open("st.bin", "rb").read()[:-5])
PY
	run --separate-stderr "$tr_" cat bad-phase.bin
	[ "$status" -eq 1 ]
	[[ $stderr == *"xstrace-record"*"bad-phase.bin: record["*"].token.phase"*"must be 0 (prefill) or 1 (decode)"* ]]
	run --separate-stderr "$tr_" cat bad-crc.bin
	[ "$status" -eq 1 ]
	[[ $stderr == *"xstrace-crc"* ]]
	run --separate-stderr "$tr_" stats bad-version.bin
	[ "$status" -eq 1 ]
	[[ $stderr == *"xstrace-version"*"version 2"* ]]
	run --separate-stderr "$tr_" cat short.bin
	[ "$status" -eq 1 ]
	[[ $stderr == *"xstrace-truncated"* ]]
}

@test "stream-trace: prefetch-sim --stream-trace prints the simulated and measured exposed wait of the decode" {
	run --separate-stderr "$run_" -q -m "$art" --tokens "$ids" -n 6 --threads 2 --expert-cache 25% \
		--expert-predict previous --dump-routes r.trace --stream-trace st.bin
	[ "$status" -eq 0 ]
	run --separate-stderr "$tr_" prefetch-sim --json --record-bytes 8192 --latency 0.0001 --bandwidth 1e9 \
		--depth 4 --predictor none,prev --stream-trace st.bin r.trace
	[ "$status" -eq 0 ]
	echo "$output" >pf.json
	"$tr_" stats --json st.bin >st.json
	python3 - <<'PY'
import json
p, s = json.load(open("pf.json")), json.load(open("st.json"))
m = p["model"]["measured"]
assert m["decode_tokens"] == s["decode_tokens"] == 5 and m["first_decode_token"] == 12, m
assert abs(m["wall_wait_per_token_s"] - s["wall_wait_per_token_s"]) <= 1e-12 * max(1, s["wall_wait_per_token_s"]), (m, s)
assert abs(m["exposed_wait_per_token_s"] - s["exposed_wait_per_token_s"]) <= 1e-12 * max(1, s["exposed_wait_per_token_s"]), (m, s)
assert p["model"]["cache_records"] == s["slots"], p["model"]
for r in p["results"]:
    assert r["window_tokens"] == 5, r
    w, me = r["window_exposed_wait_per_token_s"], r["measured_wall_wait_per_token_s"]
    assert me == m["wall_wait_per_token_s"]
    assert r["simulated_over_measured"] is None or abs(r["simulated_over_measured"] - w / me) <= 1e-9 * w / me, r
PY
	# --verify-bandwidth: each read's digest check joins its latency (8192 bytes at 1e8 B/s: 81920 ns)
	run --separate-stderr "$tr_" prefetch-sim --json --record-bytes 8192 --latency 0.0001 --bandwidth 1e9 \
		--depth 4 --predictor none --verify-bandwidth 1e8 --stream-trace st.bin r.trace
	[ "$status" -eq 0 ]
	echo "$output" >pv.json
	python3 - <<'PY'
import json
p, v = json.load(open("pf.json")), json.load(open("pv.json"))
assert v["model"]["verify_s"] == 81920e-9, v["model"]  # a record under one chunk: all of it after the transfer
assert abs(v["model"]["latency_s"] - 0.0001) < 1e-12, v["model"]
assert p["model"]["verify_s"] == 0, p["model"]
assert p["model"]["pipe"] == v["model"]["pipe"] == "shared", p["model"]
# reads take longer: the wait can only grow
assert v["results"][0]["window_exposed_wait_per_token_s"] >= p["results"][0]["window_exposed_wait_per_token_s"], (v, p)
PY
	# --verify-chunk: 4096-byte chunks leave 40960 ns after the transfer, and the wait shrinks
	run --separate-stderr "$tr_" prefetch-sim --json --record-bytes 8192 --latency 0.0001 --bandwidth 1e9 \
		--depth 4 --predictor none --verify-bandwidth 1e8 --verify-chunk 4096 --stream-trace st.bin r.trace
	[ "$status" -eq 0 ]
	echo "$output" >pc.json
	python3 - <<'PY'
import json
v, c = json.load(open("pv.json")), json.load(open("pc.json"))
assert c["model"]["verify_s"] == 40960e-9, c["model"]
assert c["results"][0]["window_exposed_wait_per_token_s"] <= v["results"][0]["window_exposed_wait_per_token_s"], (c, v)
PY
	# the pipe: fifo is the other discipline; a depth the shared pipe cannot divide exactly, an
	# unknown discipline, a chunk without a check are refused
	run --separate-stderr "$tr_" prefetch-sim --json --record-bytes 8192 --latency 0.0001 --bandwidth 1e9 \
		--depth 4 --predictor none --pipe fifo --stream-trace st.bin r.trace
	[ "$status" -eq 0 ]
	[[ $output == *'"pipe":	"fifo"'* ]]
	run --separate-stderr "$tr_" prefetch-sim --record-bytes 8192 --latency 0.0001 --bandwidth 1e9 \
		--depth 32 --predictor none --stream-trace st.bin r.trace
	[ "$status" -eq 2 ]
	[[ $stderr == *"--pipe shared takes --depth up to 16"* ]]
	run --separate-stderr "$tr_" prefetch-sim --record-bytes 8192 --latency 0.0001 --bandwidth 1e9 \
		--depth 4 --pipe lifo --stream-trace st.bin r.trace
	[ "$status" -eq 2 ]
	[[ $stderr == *"--pipe is shared or fifo"* ]]
	run --separate-stderr "$tr_" prefetch-sim --record-bytes 8192 --latency 0.0001 --bandwidth 1e9 \
		--depth 4 --verify-chunk 4096 --stream-trace st.bin r.trace
	[ "$status" -eq 2 ]
	[[ $stderr == *"--verify-chunk sizes the check of --verify-bandwidth"* ]]
	# another artifact's stream trace is refused
	run --separate-stderr "$tr_" prefetch-sim --record-bytes 8192 --latency 0.0001 --bandwidth 1e9 --depth 4 \
		--stream-trace st.bin --layer-time 0.001 r.trace
	[ "$status" -eq 2 ]
}

@test "stream-trace: prefetch-sim --predictor engine replays the run's own predicted reads" {
	run --separate-stderr "$run_" -q -m "$art" --tokens "$ids" -n 8 --threads 2 --expert-cache 25% \
		--expert-predict router-ahead --dump-routes r.trace --stream-trace st.bin
	[ "$status" -eq 0 ]
	# the run's predicted reads, by class at issue
	"$tr_" cat st.bin | python3 -c '
import json, sys
n = sum(1 for l in sys.stdin for r in [json.loads(l)] if r["kind"] == "read" and r["class"] > 0)
print(n)' >npred
	[ "$(cat npred)" -gt 0 ]
	run --separate-stderr "$tr_" prefetch-sim --json --record-bytes 8192 --latency 0.0001 --bandwidth 1e9 \
		--depth 4 --stream-trace st.bin r.trace
	[ "$status" -eq 0 ]
	echo "$output" >pf.json
	python3 - "$(cat npred)" <<'PY'
import json, sys
npred = int(sys.argv[1])
p = json.load(open("pf.json"))
r = {x["predictor"]: x for x in p["results"]}
assert set(r) == {"none", "prev", "adjacent", "oracle", "engine"}, r.keys()  # engine is in "all" with a stream trace
e = r["engine"]
# each of the run's reads is requested unless the model already holds or reads that record
assert 0 < e["predicted_reads"] <= npred, (e, npred)
assert e["predicted_consumed"] + e["predicted_wasted"] <= e["predicted_reads"], e
assert e["exact"] == r["none"]["exact"], (e, r["none"])
PY
	# the engine discipline (hb-run's pool: nothing preempted, every read shares the drive)
	run --separate-stderr "$tr_" prefetch-sim --json --record-bytes 8192 --latency 0.0001 --bandwidth 1e9 \
		--depth 4 --predictor none,engine --discipline engine --stream-trace st.bin r.trace
	[ "$status" -eq 0 ]
	echo "$output" >pe.json
	python3 - <<'PY'
import json
p, e = json.load(open("pf.json")), json.load(open("pe.json"))
assert p["model"]["discipline"] == "priority" and e["model"]["discipline"] == "engine", (p["model"], e["model"])
a, b = ({x["predictor"]: x for x in j["results"]} for j in (p, e))
# exact reads alone: the two disciplines are the same model
assert a["none"]["exposed_wait_s"] == b["none"]["exposed_wait_s"], (a["none"], b["none"])
assert b["engine"]["predicted_reads"] > 0, b["engine"]
PY
	run --separate-stderr "$tr_" prefetch-sim --record-bytes 8192 --latency 0.0001 --bandwidth 1e9 --depth 4 \
		--discipline engine --pipe fifo --stream-trace st.bin r.trace
	[ "$status" -eq 2 ]
	[[ $stderr == *"--discipline engine shares the pipe: it excludes --pipe fifo"* ]]
	run --separate-stderr "$tr_" prefetch-sim --record-bytes 8192 --latency 0.0001 --bandwidth 1e9 --depth 4 \
		--discipline fair --stream-trace st.bin r.trace
	[ "$status" -eq 2 ]
	[[ $stderr == *"--discipline is priority or engine, not 'fair'"* ]]
	# without a stream trace there is nothing to replay
	run --separate-stderr "$tr_" prefetch-sim --record-bytes 8192 --latency 0.0001 --bandwidth 1e9 --depth 4 \
		--layer-time 0.001 --predictor engine r.trace
	[ "$status" -eq 2 ]
	[[ $stderr == *"--predictor engine replays a measured run's predicted reads: it needs --stream-trace"* ]]
	# and "all" without one is the four simulated predictors
	run --separate-stderr "$tr_" prefetch-sim --json --record-bytes 8192 --latency 0.0001 --bandwidth 1e9 \
		--depth 4 --layer-time 0.001 r.trace
	[ "$status" -eq 0 ]
	[[ $output != *'"engine"'* ]]
}

@test "stream-trace: the measured and the simulated timelines render in headless Chromium" {
	run --separate-stderr "$run_" -q -m "$art" --tokens "$ids" -n 8 --threads 2 --expert-cache 25% \
		--dump-routes r.trace --stream-trace st.bin
	[ "$status" -eq 0 ]
	mkdir m s
	run --separate-stderr "$tr_" plot --out m st.bin
	[ "$status" -eq 0 ]
	[ "$output" = "wrote m/timeline.svg" ]
	[ "$(ls m)" = "timeline.svg" ]
	run --separate-stderr "$tr_" plot --out s --record-bytes 8192 --layer-time 0.0002 --latency 0.0001 \
		--bandwidth 1e9 --depth 4 --predictor prev r.trace
	[ "$status" -eq 0 ]
	# the default window: the first 4 decode tokens (12..15), labelled, nothing of the prompt
	for f in m/timeline.svg s/timeline.svg; do
		python3 - "$f" <<'PY'
import re, sys, xml.dom.minidom
t = open(sys.argv[1]).read()
xml.dom.minidom.parseString(t)  # well-formed
labels = re.findall(r'>t(\d+)</text>', t)
assert labels == ["12", "13", "14", "15"], labels
assert "from token t12" in t, sys.argv[1]
for lane in ("mixer", "experts", "P0 exact", "P1 near-term", "P2 speculative", "reads"):
    assert '>%s</text>' % lane in t, lane
PY
	done
	grep -q 'measured (hb-run --stream-trace)' m/timeline.svg
	grep -q 'simulated' s/timeline.svg
	if ! command -v chromium >/dev/null; then
		[ "${HB_REQUIRE_CHROMIUM:-0}" != 1 ] || { echo "chromium is required (Debian package chromium)" >&2; return 1; }
		skip "chromium not installed (scripts/bootstrap installs it)"
	fi
	for d in m s; do
		h=$(sed -n 's/.*<svg [^>]* height="\([0-9]*\)".*/\1/p' $d/timeline.svg | head -1)
		timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
			--window-size=1100,"$h" --screenshot="$PWD/$d.png" "file://$PWD/$d/timeline.svg" >/dev/null 2>&1
		read -r w hh ink < <(python3 "$root/tests/tools/png_ink.py" $d.png)
		echo "$d: ${w}x$hh, $ink non-white pixels" >&3
		[ "$w" -eq 1100 ]
		[ "$hh" -eq "$h" ]
		# lanes, bars and labels: many pixels; a blank page has none, a page drawn black has all
		[ "$ink" -gt 20000 ]
		[ "$ink" -lt $((1100 * h * 2 / 3)) ]
	done
}
