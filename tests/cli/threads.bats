#!/usr/bin/env bats
# --threads changes nothing but speed (hb-run(1): "Results do not depend on
# it"), shown with explicit counts 1, 2, 3 and 7 rather than "all CPUs vs
# 1", which is no comparison at all on a 1-CPU machine.  The pool takes the
# count as given whatever the machine has.  Compared byte for byte: hb-run's
# printed ids, its logits dump (every prefill and decode row) and its route
# dump (ids and weights of every position and layer), greedy and sampled;
# hb-replay's label shards with the hidden-state sidecars of every layer.
# tests/unit/test_threads.c does the same at library level with state
# digests and every observation.
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

# run hb-run with each of 1 2 3 7 threads and the given options (outputs
# named by the count); every output must equal the 1-thread one
same_over_counts() { # set prompt-ids args...
	local set_=$1 ids=$2
	shift 2
	for n in 1 2 3 7; do
		run --separate-stderr "$run_" -q -m "$art/$set_.gguf" --tokens "$ids" "$@" --threads "$n" \
			--dump-logits "l$n.bin" --dump-routes "r$n.trace"
		[ "$status" -eq 0 ]
		[ "$stderr" = "" ]
		echo "$output" >"ids$n.txt"
	done
	for n in 2 3 7; do
		cmp ids1.txt "ids$n.txt"
		cmp l1.bin "l$n.bin"
		cmp r1.trace "r$n.trace"
	done
}

@test "threads: hb-run's ids, logits dump and route dump are byte-identical with 1, 2, 3 and 7 threads (greedy)" {
	for sp in realshape:p2 general:p1; do
		set_=${sp%:*} p=${sp#*:}
		ids=$(prompt "$set_" "$p")
		same_over_counts "$set_" "$ids" -n 13
		# not vacuous: 13 ids, T + 12 logits rows, (T + 12) x layers route records
		python3 - "$set_" "$ids" <<'PY'
import os, sys
s, ids = sys.argv[1], sys.argv[2].split(",")
V, L = {"realshape": (1024, 8), "general": (768, 6)}[s]
T = len(ids)
assert len(open("ids1.txt").read().strip().split(",")) == 13
assert os.path.getsize("l1.bin") == (T + 12) * V * 4
# hebrus-trace(5): 128-byte header; each chunk a 24-byte header and records of 40 + 8 x 10 bytes
assert os.path.getsize("r1.trace") > 128 + (T + 12) * L * 120
PY
	done
}

@test "threads: a sampled hb-run is byte-identical with 1, 2, 3 and 7 threads" {
	ids=$(prompt general p1)
	same_over_counts general "$ids" -n 20 --temp 1.5 --top-p 0.9 --seed 11
	# another seed gives another run: the comparison can tell them apart
	run --separate-stderr "$run_" -q -m "$art/general.gguf" --tokens "$ids" -n 20 --temp 1.5 --top-p 0.9 --seed 12 --threads 7
	[ "$status" -eq 0 ]
	[ "$output" != "$(cat ids1.txt)" ]
}

@test "threads: hb-replay labels and hidden-state sidecars are byte-identical with 1, 2, 3 and 7 threads" {
	for set_ in realshape general; do
		: >t.jsonl
		for p in 0 1 2; do
			printf '{"owner": 0, "thread": %d, "turn": 0, "sequence": %d, "tokens": [%s]}\n' \
				"$p" "$p" "$(prompt "$set_" "p$p")" >>t.jsonl
		done
		layers=$([ "$set_" = realshape ] && echo 0,1,2,3,4,5,6,7 || echo 0,1,2,3,4,5)
		for n in 1 2 3 7; do
			rm -rf "L$n"
			run --separate-stderr "$rp" label -m "$art/$set_.gguf" -o "L$n" --chunk 9 --threads "$n" \
				--capture-hidden "$layers" --capture-positions 64 t.jsonl
			[ "$status" -eq 0 ]
			[ "$stderr" = "" ]
			[[ $output == "labelled 3 sequences, "* ]]
		done
		[ "$(ls L1)" = $'labels-0000-of-0001-000000.hbhidden\nlabels-0000-of-0001-000000.hbtrace\nlabels-0000-of-0001-000000.json' ]
		for n in 2 3 7; do
			for f in L1/*; do
				cmp "$f" "L$n/${f#L1/}"
			done
		done
	done
}
