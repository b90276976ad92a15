#!/usr/bin/env bats
# --expert-cache (hb-run(1), hb-replay(1)): routed experts streamed from the
# artifact under a fixed budget change nothing but where the bytes come
# from.  Compared byte for byte with the resident run (--expert-cache all,
# the default): hb-run's printed ids, its logits dump and its route dump;
# hb-replay label's shards.  Budgets: one slot (the smallest legal one), a
# few slots, 25%, 100%; every predictor; both eviction policies.  Then the
# --json counters, and the refusals with their diagnostics.
# tests/unit/test_stream_graph.c does the same at library level with state
# digests, forced completion orders and injected faults.
#
# Needs python3 (standard library).

bats_require_minimum_version 1.5.0

setup_file() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	fx=$root/tests/fixtures/upstream
	for s in realshape general; do
		"$build/bin/hb-convert" -q "$fx/$s/checkpoint" "$BATS_FILE_TMPDIR/$s.gguf"
	done
}

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	run_=$build/bin/hb-run
	rp=$build/bin/hb-replay
	fx=$root/tests/fixtures/upstream
	art=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
}

# the ids of an oracle prompt, comma-separated
prompt() {
	python3 - "$fx/$1/oracle" "$2" <<'PY'
import json, struct, sys
m = json.load(open(sys.argv[1] + "/manifest.json"))
a = next(x for x in m["arrays"] if x["name"] == "pre/%s/ids" % sys.argv[2])
raw = open(sys.argv[1] + "/" + a["file"], "rb").read()
print(",".join(map(str, struct.unpack("<%dq" % (len(raw) // 8), raw))))
PY
}

# one slot's bytes for an artifact, from --json
slot_bytes() {
	"$run_" -q -m "$1" --tokens 1 -n 1 --expert-cache 100% --json |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["expert_cache"]["slot_bytes"])'
}

@test "stream: hb-run's ids, logits and route dumps are byte-identical to resident for every budget, predictor and policy" {
	for sp in general:p1 realshape:p2; do
		set_=${sp%:*} p=${sp#*:}
		ids=$(prompt "$set_" "$p")
		slot=$(slot_bytes "$art/$set_.gguf")
		[ "$slot" -ge 4096 ]
		run --separate-stderr "$run_" -q -m "$art/$set_.gguf" --tokens "$ids" -n 9 --threads 2 \
			--dump-logits ref.bin --dump-routes ref.trace
		[ "$status" -eq 0 ]
		[ "$stderr" = "" ]
		echo "$output" >ref.txt
		n=0
		for size in "$slot" "$((3 * slot))" 25% 100%; do
			for pred in none previous router-ahead; do
				for ev in lru score; do
					run --separate-stderr "$run_" -q -m "$art/$set_.gguf" --tokens "$ids" -n 9 --threads 2 \
						--expert-cache "$size" --expert-predict "$pred" --expert-evict "$ev" \
						--dump-logits got.bin --dump-routes got.trace
					[ "$status" -eq 0 ]
					[ "$stderr" = "" ]
					[ "$output" = "$(cat ref.txt)" ]
					cmp ref.bin got.bin
					cmp ref.trace got.trace
					n=$((n + 1))
				done
			done
		done
		[ "$n" -eq 24 ]
	done
	# not vacuous: the dumps hold every row
	[ "$(stat -c %s ref.bin)" -gt 0 ]
}

@test "stream: hb-run --json reports the cache's counters and AFN-019 metrics; all reports mode all" {
	ids=$(prompt general p1)
	run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens "$ids" -n 6 --expert-cache 25% \
		--expert-predict router-ahead --json
	[ "$status" -eq 0 ]
	echo "$output" >s.json
	python3 - <<'PY'
import json, math
x = json.load(open("s.json"))["expert_cache"]
assert x["mode"] == "stream" and x["predictor"] == "router-ahead" and x["policy"] == "score", x
for k in ("bytes_exact", "bytes_predicted", "bytes_rejected", "bytes_useful", "hits", "joined", "misses",
          "ready_p50_ns", "ready_p95_ns", "ready_p99_ns", "slack_min_ns", "slack_mean_ns", "exposed_ns",
          "exposed_per_token_ns", "timely_recall", "useful_prefetch_ratio", "byte_amplification",
          "hidden_fraction", "tokens"):
    assert k in x, k
assert x["wants"] == x["hits"] + x["joined"] + x["misses"] > 0, x
assert x["tokens"] == 6, x  # the prefill, then 5 decode steps
assert x["slots"] * x["slot_bytes"] == x["budget_bytes"], x
assert x["bytes_physical"] == x["bytes_exact"] + x["bytes_predicted"], x
assert x["tickets_p1"] > 0 and x["tickets_p2"] == 0, x
# cJSON prints a double with 15 significant digits: compare within that
assert 0 <= x["timely_recall"] <= 1 and abs(x["timely_recall"] - x["hits"] / x["wants"]) <= 1e-14, x
assert x["ready_p50_ns"] <= x["ready_p95_ns"] <= x["ready_p99_ns"], x
d = json.load(open("s.json"))["expert_cache_decode"]
assert d["tokens"] == 5 and 0 < d["wants"] < x["wants"], d  # the decode steps alone
assert d["wants"] == d["hits"] + d["joined"] + d["misses"], d
assert d["bytes_exact"] <= x["bytes_exact"] and d["slots"] == x["slots"], d
PY
	# router-ahead:W hints the W most probable of the next layer's router: the same output bytes,
	# fewer predicted reads than all ten, the width reported
	run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens "$ids" -n 6 --expert-cache 25% \
		--expert-predict router-ahead:2 --json --dump-logits w2.bin
	[ "$status" -eq 0 ]
	echo "$output" >w2.json
	run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens "$ids" -n 6 --dump-logits ref.bin
	[ "$status" -eq 0 ]
	cmp ref.bin w2.bin
	python3 - "$ids" <<'PY'
import json, sys
positions = len(sys.argv[1].split(",")) + 5  # the prompt's, then 5 decode steps
full, w2 = (json.load(open(p)) for p in ("s.json", "w2.json"))
assert full["ids"] == w2["ids"], (full["ids"], w2["ids"])
a, b = full["expert_cache"], w2["expert_cache"]
assert a["predictor_width"] == 10 and b["predictor"] == "router-ahead" and b["predictor_width"] == 2, (a, b)
# at most 2 hints a position and layer (5 layers have a next one), and fewer than with 10
assert 0 < b["tickets_p1"] <= 2 * positions * 5 and b["tickets_p1"] < a["tickets_p1"], (a["tickets_p1"], b["tickets_p1"], positions)
PY
	run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens "$ids" -n 2 --expert-cache 8K \
		--expert-predict previous --expert-evict lru --json
	[ "$status" -eq 0 ]
	echo "$output" >p.json
	python3 - <<'PY'
import json
x = json.load(open("p.json"))["expert_cache"]
assert x["slots"] == 1 and x["predictor"] == "previous" and x["policy"] == "lru", x
assert x["tickets_p1"] == 0, x
PY
	run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens "$ids" -n 2 --json
	[ "$status" -eq 0 ]
	echo "$output" >a.json
	python3 -c 'import json; j = json.load(open("a.json")); assert j["expert_cache"] == {"mode": "all"} and "expert_cache_decode" not in j'
	# the statement on stderr names the cache
	run --separate-stderr "$run_" -m "$art/general.gguf" --tokens "$ids" -n 1 --expert-cache 8K --expert-predict none
	[ "$status" -eq 0 ]
	[[ $stderr == *"hb-run: routed experts streamed: a cache of 1 slots of 8192 bytes, "*", predictor none, eviction score"* ]]
}

@test "stream: hb-replay label's shards are byte-identical to resident under --expert-cache" {
	: >t.jsonl
	for p in 0 1 2; do
		printf '{"owner": 0, "thread": %d, "turn": 0, "sequence": %d, "tokens": [%s]}\n' \
			"$p" "$p" "$(prompt general "p$p")" >>t.jsonl
	done
	run --separate-stderr "$rp" label -m "$art/general.gguf" -o R --chunk 9 --threads 2 \
		--capture-hidden 0,3,5 --capture-positions 16 t.jsonl
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	[[ $output == "labelled 3 sequences, "* ]]
	for opt in "8K none lru" "24K previous score" "25% router-ahead lru" "100% router-ahead score"; do
		read -r size pred ev <<<"$opt"
		rm -rf S
		run --separate-stderr "$rp" label -m "$art/general.gguf" -o S --chunk 9 --threads 2 \
			--capture-hidden 0,3,5 --capture-positions 16 --expert-cache "$size" --expert-predict "$pred" \
			--expert-evict "$ev" t.jsonl
		[ "$status" -eq 0 ]
		[ "$stderr" = "" ]
		[ "$(ls R)" = "$(ls S)" ]
		for f in R/*; do
			cmp "$f" "S/${f#R/}"
		done
	done
	run --separate-stderr "$rp" label -m "$art/general.gguf" -o J --expert-cache 25% --json t.jsonl
	[ "$status" -eq 0 ]
	echo "$output" >j.json
	python3 -c 'import json; x = json.load(open("j.json"))["expert_cache"]; assert x["mode"] == "stream" and x["wants"] > 0, x'
}

@test "stream: --prefill-extent off, auto and always leave logits and routes byte-identical; --json counts the windows" {
	for sp in general:p1 realshape:p2; do
		set_=${sp%:*} p=${sp#*:}
		ids=$(prompt "$set_" "$p")
		slot=$(slot_bytes "$art/$set_.gguf")
		run --separate-stderr "$run_" -q -m "$art/$set_.gguf" --tokens "$ids" -n 5 --threads 2 \
			--dump-logits ref.bin --dump-routes ref.trace
		[ "$status" -eq 0 ]
		n=0
		for size in "$((8 * slot))" "$((16 * slot))" 25% 100%; do
			for mode in off auto always; do
				run --separate-stderr "$run_" -q -m "$art/$set_.gguf" --tokens "$ids" -n 5 --threads 2 \
					--expert-cache "$size" --prefill-extent "$mode" --dump-logits got.bin --dump-routes got.trace \
					--json
				[ "$status" -eq 0 ]
				[ "$stderr" = "" ]
				echo "$output" >got.json
				cmp ref.bin got.bin
				cmp ref.trace got.trace
				python3 - "$mode" <<'PY'
import json, sys
mode = sys.argv[1]
x = json.load(open("got.json"))["expert_cache"]
e = x["prefill_extent"]
assert e["mode"] == mode, e
assert x["slots"] * x["slot_bytes"] + e["ring_bytes"] <= x["budget_bytes"], x
assert sum(e["decisions"].values()) > 0, e
if mode == "off":
    assert e["ring_bytes"] == 0 and e["reads"] == 0 and e["decisions"]["off"] == sum(e["decisions"].values()), e
if mode == "always" and e["ring_bytes"]:
    assert e["reads"] > 0 and e["records"] >= 2 and e["decisions"]["always"] > 0, e
    assert e["decisions"]["not_prefill"] > 0, e  # the decode steps read records
if mode == "auto" and e["ring_bytes"]:
    assert e["probe_record_bytes"] > 0 and e["probe_extent_bytes"] > 0, e
    assert e["record_bps"] > 0 and e["extent_bps"] > 0, e
assert e["bytes"] >= e["gap_bytes"], e
PY
				n=$((n + 1))
			done
		done
		[ "$n" -eq 12 ]
	done
	[ "$(stat -c %s ref.bin)" -gt 0 ]
	# the values, and only with streaming
	run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens 1 --expert-cache 25% --prefill-extent sometimes
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-run: --prefill-extent takes off, auto or always, not 'sometimes'"* ]]
	run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens 1 --prefill-extent auto
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-run: --prefill-extent needs --expert-cache SIZE other than all"* ]]
}

@test "stream: bad --expert-cache, --expert-predict and --expert-evict values are refused naming the option" {
	for v in 0 5X 101% 0% -1 '' 12Q; do
		run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens 1 --expert-cache "$v"
		[ "$status" -eq 2 ]
		[ "$output" = "" ]
		[[ $stderr == "hb-run: --expert-cache takes bytes (K, M, G suffixes), N% of the expert store, or all, not '$v'"* ]]
	done
	# less than one slot: refused once the store is known, naming the slot
	run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens 1 --expert-cache 4K
	[ "$status" -eq 2 ]
	[ "$output" = "" ]
	[ "$stderr" = "hb-run: --expert-cache: '4K' holds no record: one slot is 8192 bytes" ]
	run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens 1 --expert-cache 8K --expert-predict oracle
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-run: --expert-predict takes none, previous or router-ahead, not 'oracle'"* ]]
	for w in 0 x -3 ''; do
		run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens 1 --expert-cache 8K \
			--expert-predict "router-ahead:$w"
		[ "$status" -eq 2 ]
		[[ $stderr == "hb-run: --expert-predict router-ahead:W takes a width W of 1 or more, not '$w'"* ]]
	done
	# wider than the router's top-k (10 here): refused once the model is known
	run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens 1 --expert-cache 8K --expert-predict router-ahead:11
	[ "$status" -eq 2 ]
	[ "$output" = "" ]
	[ "$stderr" = "hb-run: --expert-predict: router-ahead:11 hints more experts than the 10 the router takes" ]
	run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens 1 --expert-cache 8K --expert-evict fifo
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-run: --expert-evict takes lru or score, not 'fifo'"* ]]
	# a predictor or policy without streaming would do nothing
	run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens 1 --expert-predict none
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-run: --expert-predict needs --expert-cache SIZE other than all"* ]]
	run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens 1 --expert-cache all --expert-evict lru
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-run: --expert-evict needs --expert-cache SIZE other than all"* ]]
	# hb-replay: the same forms, and only for label
	echo '{"owner": 0, "thread": 0, "turn": 0, "sequence": 0, "tokens": [1, 2]}' >t.jsonl
	run --separate-stderr "$rp" label -m "$art/general.gguf" -o L --expert-cache 5X t.jsonl
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-replay: --expert-cache takes bytes"* ]]
	run --separate-stderr "$rp" label -m "$art/general.gguf" -o L --expert-cache 4K t.jsonl
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-replay: --expert-cache: '4K' holds no record: one slot is 8192 bytes" ]
	[ ! -e L ]
	run --separate-stderr "$rp" split -o D --expert-cache 25% t.jsonl
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-replay: --expert-cache, --expert-predict and --expert-evict are for label"* ]]
}
