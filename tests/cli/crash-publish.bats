#!/usr/bin/env bats
# Crash consistency of the atomic publications that no other front-level
# test kills: hb-replay split (four split files and split.json), hb-replay
# eval (eval.json, eval.svg), hb-trace plot (its SVGs), hb-run --dump-routes
# and --dump-logits, and hb-admit --report.  Each command runs over the
# outputs of an older run with other arguments (so every output has an old
# and a new content) and is killed by the crash seam (HB_TEST_KILL_AT, see
# tests/cli/crash.bats) at HB_CRASH_PUBLISH_POINTS of its I/O steps (8: the
# last 4 and others drawn from HB_CRASH_SEED).  After each kill every output
# is whole, old or new (a file never published stays absent); the next run
# publishes the new outputs and leaves no temporary file.
#
# Binaries come from "${HB_BUILD:-build}" under the repository root.

bats_require_minimum_version 1.5.0

setup_file() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	cd "$BATS_FILE_TMPDIR"
	"$build/bin/hb-convert" -q "$root/tests/fixtures/upstream/realshape/checkpoint" rs.gguf
	"$build/bin/hb-convert" -q --expert-codec affine4-g64 "$root/tests/fixtures/upstream/realshape/checkpoint" rs4.gguf
	python3 -c 'import json
for i in range(8):
    print(json.dumps({"owner": i % 4, "thread": i, "turn": 0, "sequence": i, "time": i,
                      "tokens": [(i * 7 + j * 3) % 60 + 1 for j in range(12)]}))' >t.jsonl
	"$build/bin/hb-replay" label -m rs.gguf -o L --threads 2 t.jsonl >/dev/null
	"$build/bin/hb-run" -q -m rs.gguf --tokens 1,2,3,4 -n 4 --dump-routes run.trace >/dev/null
}

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	bin=$build/bin
	cd "$BATS_TEST_TMPDIR"
	art=$BATS_FILE_TMPDIR
	seed=${HB_CRASH_SEED:-20261201}
	npoints=${HB_CRASH_PUBLISH_POINTS:-8}
	load crash_lib
}

# Kill "$@" at the chosen points over the old outputs (reset_old puts them
# in place; $old/ and $new/ hold both versions of each file of $outs, in
# directory $dir); check old-or-new after each kill and new after a rerun.
crash_publish() {
	local steps n rc f olds=0 news=0 killed=0
	steps=$(count_steps reset_old "$@")
	[ "$steps" -ge 4 ]
	read -r -a at < <(crash_points "$steps" "$seed" "$npoints")
	for n in "${at[@]}"; do
		reset_old
		rc=0
		HB_TEST_KILL_AT=$n "$@" >/dev/null 2>&1 || rc=$?
		if ((rc != 0)); then
			[ "$rc" -eq 137 ]
			killed=$((killed + 1))
		fi
		for f in "${outs[@]}"; do
			if cmp -s "$dir/$f" "old/$f"; then
				olds=$((olds + 1))
			elif cmp -s "$dir/$f" "new/$f"; then
				news=$((news + 1))
			elif [[ ! -e $dir/$f && ! -e old/$f ]]; then
				:
			else
				echo "point $n: $dir/$f is neither the old nor the new output" >&2
				return 1
			fi
		done
		"$@" >/dev/null 2>&1
		for f in "${outs[@]}"; do
			cmp "$dir/$f" "new/$f"
		done
		[ -z "$(ls -A "$dir" | grep hbtmp || true)" ]
	done
	[ "$killed" -ge $((${#at[@]} / 2)) ]
	[ "$olds" -gt 0 ]
	echo "# ${1##*/} ${2:-}: $steps I/O steps, ${#at[@]} points (first ${at[0]}, last ${at[-1]}): $killed killed; outputs old $olds times, new $news times; every rerun published the new ones" >&3
}

@test "crash: hb-replay split over an older split, killed at seeded I/O steps: each split file and split.json old or new" {
	outs=(train.jsonl validation.jsonl temporal.jsonl runtime.jsonl split.json)
	dir=S
	"$bin/hb-replay" split --seed 1 -o old "$art/t.jsonl" >/dev/null
	"$bin/hb-replay" split --seed 2 --validation 0.5 --temporal 0.25 -o new "$art/t.jsonl" >/dev/null
	reset_old() { rm -rf S; cp -r old S; }
	crash_publish "$bin/hb-replay" split --seed 2 --validation 0.5 --temporal 0.25 -o S "$art/t.jsonl"
	if cmp -s old/train.jsonl new/train.jsonl; then
		echo "the two splits do not differ" >&2
		return 1
	fi
}

@test "crash: hb-replay eval over an older report, killed at seeded I/O steps: eval.json and eval.svg old or new" {
	outs=(eval.json eval.svg)
	dir=E
	"$bin/hb-replay" eval --train "$art/L" --k 1,2 --seed 1 -o old "$art/L" >/dev/null
	"$bin/hb-replay" eval --train "$art/L" --k 1,2,4 --seed 2 -o new "$art/L" >/dev/null
	reset_old() { rm -rf E; cp -r old E; }
	crash_publish "$bin/hb-replay" eval --train "$art/L" --k 1,2,4 --seed 2 -o E "$art/L"
}

@test "crash: hb-trace plot over older plots, killed at seeded I/O steps: each SVG old or new" {
	mkdir old new
	"$bin/hb-trace" plot --out old --artifact "$art/rs.gguf" --layer-time 0.002 --latency 0.0002 --bandwidth 1e9 --depth 2 --cache 20 "$art/run.trace" >/dev/null
	"$bin/hb-trace" plot --out new --artifact "$art/rs.gguf" --layer-time 0.001 --latency 0.0001 --bandwidth 1e9 --depth 4 --cache 40 "$art/run.trace" >/dev/null
	read -r -a outs < <(cd new && echo *)
	[ "${#outs[@]}" -ge 1 ]
	dir=P
	reset_old() { rm -rf P; cp -r old P; }
	crash_publish "$bin/hb-trace" plot --out P --artifact "$art/rs.gguf" --layer-time 0.001 --latency 0.0001 --bandwidth 1e9 --depth 4 --cache 40 "$art/run.trace"
}

@test "crash: hb-run --dump-routes and --dump-logits over older dumps, killed at seeded I/O steps: each dump old or new" {
	outs=(r.trace l.bin)
	dir=R
	mkdir old new
	"$bin/hb-run" -q -m "$art/rs.gguf" --tokens 1,2,3 -n 2 --dump-routes old/r.trace --dump-logits old/l.bin >/dev/null
	"$bin/hb-run" -q -m "$art/rs.gguf" --tokens 1,2,3 -n 4 --dump-routes new/r.trace --dump-logits new/l.bin >/dev/null
	reset_old() { rm -rf R; cp -r old R; }
	crash_publish "$bin/hb-run" -q -m "$art/rs.gguf" --tokens 1,2,3 -n 4 --dump-routes R/r.trace --dump-logits R/l.bin
}

@test "crash: hb-admit --report over an older report, killed at seeded I/O steps: the report old or new" {
	outs=(report.json)
	dir=A
	mkdir old new
	"$bin/hb-admit" --json --report old/report.json "$art/rs4.gguf" >/dev/null
	"$bin/hb-admit" --json --report new/report.json "$art/rs.gguf" >/dev/null
	reset_old() { rm -rf A; cp -r old A; }
	crash_publish "$bin/hb-admit" --json --report A/report.json "$art/rs.gguf"
}
