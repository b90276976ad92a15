#!/usr/bin/env bats
# scripts/fuzz-campaign without clang: a stand-in for a libFuzzer binary
# (a bash script that answers the options the campaign passes: -fork runs
# print fork-mode status lines and may leave a crash, -merge=1 copies,
# -minimize_crash=1 keeps 3 bytes) drives run, install and the corpus cap,
# so the table, the TSV and JSON summaries, the crash-to-regression step and
# the installation are checked offline.  The real targets are fuzzed by
# make fuzz and make fuzz-campaign.

bats_require_minimum_version 1.5.0

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	camp=$root/scripts/fuzz-campaign
	cd "$BATS_TEST_TMPDIR"
	mkdir -p bin src/tests/fuzz/seeds/fake src/tests/fuzz/regressions/fake
	printf 'seed' >src/tests/fuzz/seeds/fake/ok-seed
	cat >bin/fuzz_fake <<'SH'
#!/usr/bin/env bash
art= exact= merge=0 min=0 dirs=()
echo "$*" >>"${FAKE_LOG:?}"
for a in "$@"; do
	case $a in
	-artifact_prefix=*) art=${a#*=} ;;
	-exact_artifact_path=*) exact=${a#*=} ;;
	-merge=1) merge=1 ;;
	-minimize_crash=1) min=1 ;;
	-*) ;;
	*) dirs+=("$a") ;;
	esac
done
if ((min)); then head -c 3 "${dirs[0]}" >"$exact"; exit 0; fi
if ((merge)); then
	for d in "${dirs[@]:1}"; do
		for f in "$d"/*; do [[ -f $f ]] && cp "$f" "${dirs[0]}/m-${f##*/}"; done
	done
	exit 0
fi
if ((${#dirs[@]})); then
	[[ -z ${FAKE_SPAN:-} ]] || { echo "start $(date +%s.%N)" >>"$FAKE_SPAN"; sleep 1; echo "end $(date +%s.%N)" >>"$FAKE_SPAN"; }
	# some CPU time, for the measured cpu_seconds column
	for ((i = 0; i < 100000; i++)); do :; done
	printf 'abcdef' >"${dirs[0]}/new-input"
	head -c 5000 /dev/zero >"${dirs[0]}/big-input"
	[[ -z ${FAKE_CRASH:-} ]] || printf 'boom!!' >"${art}crash-0123"
	echo '#1000: cov: 42 ft: 77 corp: 3 exec/s 10 oom/timeout/crash: 0/0/0 time: 1s job: 1 dft_time: 0'
	echo '#2500: cov: 45 ft: 80 corp: 4 exec/s 10 oom/timeout/crash: 0/0/1 time: 2s job: 2 dft_time: 0'
fi
SH
	chmod +x bin/fuzz_fake
	export FAKE_LOG=$PWD/calls.log
}

@test "fuzz-campaign: run spreads the CPU budget over the workers, merges over the seeds, and writes the table and summaries" {
	run --separate-stderr env FUZZ_JOBS=4 FUZZ_CPU_SECONDS=40 "$camp" run -b bin -o out -s src
	[ "$status" -eq 0 ]
	grep -qE -- '-fork=4 .*-max_total_time=10 ' calls.log
	grep -qE -- "-dict=|src/tests/fuzz/seeds/fake" calls.log
	[[ $output == *"fake                  2500 execs     45 edges      80 features"* ]]
	[ "$(sed -n 2p out/summary.tsv | cut -f1-8,10)" = "$(printf 'fake\t2500\t45\t80\t2\t5006\t0\t0\t0')" ]
	# the CPU time the fuzzer used, measured: the stand-in's loop, not the 40 asked for
	python3 -c 'import json, sys
s = json.load(open("out/summary.json"))
t = s["targets"][0]
assert s["jobs"] == 4 and s["parallel"] == 1 and s["cpu_seconds_asked_per_target"] == 40 and s["wall_seconds_per_target"] == 10, s
assert 0 < t["cpu_seconds"] < 40, t
assert (t["target"], t["executions"], t["edges"], t["features"], t["crashes"]) == ("fake", 2500, 45, 80, 0), t'
	# the merged corpus holds the new inputs, not the committed seed
	[ "$(ls out/corpus/fake | sort | tr '\n' ' ')" = "m-big-input m-new-input " ]
}

@test "fuzz-campaign: a crash becomes a minimised regression input, the exit status says so, install adds it and the corpus" {
	run --separate-stderr env FAKE_CRASH=1 FUZZ_JOBS=2 FUZZ_CPU_SECONDS=4 "$camp" run -b bin -o out -s src
	[ "$status" -eq 1 ]
	[[ $stderr == *"1 target(s) crashed"* ]]
	[ "$(cat out/regressions/fake/crash-0123)" = "boo" ]
	[ "$(cut -f7 out/summary.tsv | sed -n 2p)" = 1 ]
	run --separate-stderr "$camp" install -s src out
	[ "$status" -eq 0 ]
	[ "$(cat src/tests/fuzz/regressions/fake/crash-0123)" = "boo" ]
	[ "$(ls src/tests/fuzz/corpus/fake | sort | tr '\n' ' ')" = "m-big-input m-new-input " ]
	[[ $output == *"total"*"5006 bytes"* ]]
}

@test "fuzz-campaign: install of several outputs merges a target's corpora with its binary, without the committed seeds, and holds the cap" {
	env FUZZ_JOBS=2 FUZZ_CPU_SECONDS=4 "$camp" run -b bin -o out1 -s src >/dev/null 2>&1
	env FUZZ_JOBS=2 FUZZ_CPU_SECONDS=4 FAKE_CRASH=1 "$camp" run -b bin -o out2 -s src >/dev/null 2>&1 || true
	: >calls.log
	run --separate-stderr "$camp" install -b bin -s src out1 out2
	[ "$status" -eq 0 ]
	# one merge, over both corpora, the committed seed given as covered
	[ "$(grep -c -- '-merge=1' calls.log)" -eq 1 ]
	grep -qE -- "-merge=1 .*corpus/\.fake\.new out1/corpus/fake out2/corpus/fake\$" calls.log
	[ "$(ls src/tests/fuzz/corpus/fake | sort | tr '\n' ' ')" = "m-m-big-input m-m-new-input " ]
	[ "$(cat src/tests/fuzz/regressions/fake/crash-0123)" = "boo" ]
	[[ $output == *"fake"*"2 files"*"0 left out (from 2)"* ]]
	[ ! -e src/tests/fuzz/corpus/.fake.new ]
	# the cap applies at installation too
	run --separate-stderr env FUZZ_CORPUS_KB=1 "$camp" install -b bin -s src out1 out2
	[ "$status" -eq 0 ]
	[ "$(ls src/tests/fuzz/corpus/fake)" = "m-m-new-input" ]
	[[ $output == *"1 left out (from 2)"* ]]
	# without the binary a merge cannot be made: refused, the corpus untouched
	run --separate-stderr "$camp" install -b nowhere -s src out1 out2
	[ "$status" -eq 2 ]
	[[ $stderr == *"fake: merging 2 corpora needs"*"nowhere/fuzz_fake"* ]]
	[ "$(ls src/tests/fuzz/corpus/fake)" = "m-m-new-input" ]
	# a merge that fails leaves the corpus as it was
	printf '#!/bin/sh\nexit 3\n' >bin/fuzz_fake
	run --separate-stderr "$camp" install -b bin -s src out1 out2
	[ "$status" -eq 1 ]
	[[ $stderr == *"fake: merge failed"*"corpus left as it was"* ]]
	[ "$(ls src/tests/fuzz/corpus/fake)" = "m-m-new-input" ]
	run --separate-stderr "$camp" install -s src
	[ "$status" -eq 2 ]
}

@test "fuzz-campaign: FUZZ_CORPUS_KB caps a corpus by leaving out the largest inputs; FUZZ_WALL_SECONDS fits the run; a binary that does not start is refused" {
	run --separate-stderr env FUZZ_JOBS=2 FUZZ_CORPUS_KB=1 FUZZ_WALL_SECONDS=200 "$camp" run -b bin -o out -s src
	[ "$status" -eq 0 ]
	[ "$(ls out/corpus/fake)" = "m-new-input" ]
	[ "$(cut -f8 out/summary.tsv | sed -n 2p)" = 1 ]
	grep -qE -- '-fork=2 .*-max_total_time=170 ' calls.log
	printf '#!/bin/sh\nexit 1\n' >bin/fuzz_broken
	chmod +x bin/fuzz_broken
	run --separate-stderr "$camp" run -b bin -o out2 -s src broken
	[ "$status" -eq 2 ]
	[[ $stderr == *"fuzz_broken does not run"* ]]
}

@test "fuzz-campaign: bundle -d packs the binaries compressed, and run -b DISTDIR unpacks and runs them" {
	run --separate-stderr "$camp" bundle -b bin -d dist
	[ "$status" -eq 0 ]
	[ -f dist/fuzz_fake.gz ]
	[ ! -e dist/fuzz_fake ]
	run --separate-stderr env FUZZ_JOBS=2 FUZZ_CPU_SECONDS=4 "$camp" run -b dist -o out -s src
	[ "$status" -eq 0 ]
	cmp dist/fuzz_fake bin/fuzz_fake
	[ "$(cut -f1,2 out/summary.tsv | sed -n 2p)" = "$(printf 'fake\t2500')" ]
}

@test "fuzz-campaign: FUZZ_PARALLEL runs the targets side by side, dividing the workers, each for the whole wall budget; rows stay in target order" {
	cp bin/fuzz_fake bin/fuzz_fake2
	run --separate-stderr env FAKE_SPAN=$PWD/span.log FUZZ_PARALLEL=2 FUZZ_JOBS=4 FUZZ_WALL_SECONDS=200 "$camp" run -b bin -o out -s src
	[ "$status" -eq 0 ]
	[ "$(grep -c -- '-fork=2 .*-max_total_time=170 ' calls.log)" -eq 2 ]
	[ "$(cut -f1 out/summary.tsv | tr '\n' ' ')" = "target fake fake2 " ]
	# both started before either ended
	python3 -c 'import sys
ev = [l.split() for l in open("span.log")]
starts = [float(t) for k, t in ev if k == "start"]
ends = [float(t) for k, t in ev if k == "end"]
assert len(starts) == 2 and max(starts) < min(ends), ev'
	run --separate-stderr env FUZZ_PARALLEL=x "$camp" run -b bin -o out2 -s src
	[ "$status" -eq 2 ]
	[[ $stderr == *"FUZZ_PARALLEL=x: not a positive count"* ]]
}
