#!/usr/bin/env bash
# Tests of scripts/lint-tests: on the samples in tests/runner/lint-samples
# it flags exactly the lines marked "expect: <rule>" (every bad form found,
# no good form flagged), exits 1 on them and 0 on clean input, and keeps
# its pending list honest.  Prints TAP (counted by scripts/run-tests).
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
lint=$root/scripts/lint-tests
samples=$root/tests/runner/lint-samples
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-lint-tests.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0
planned=7
echo "1..$planned"

report() { # $1: description, $2: ok (0) or not; stdin: diagnostics on failure
	n=$((n + 1))
	if (($2 == 0)); then
		echo "ok $n - $1"
		cat >/dev/null
	else
		echo "not ok $n - $1"
		sed 's/^/#   /'
	fi
}

# the flagged "line rule" pairs of a lint output, sorted
flagged() { sed -n 's/^# [^ ]*:\([0-9]*\): \([a-z-]*\): .*/\1 \2/p' | sort -u; }
# the "line rule" pairs a sample marks
expected() { grep -n 'expect: [a-z]' "$1" | sed 's/^\([0-9]*\):.*expect: \([a-z-]*\).*/\1 \2/' | sort -u; }

for s in sample.bats sample.c; do
	out=$("$lint" --pending /dev/null "$samples/$s" 2>&1)
	rc=$?
	want=$(expected "$samples/$s")
	got=$(flagged <<<"$out")
	ok=1
	[[ $rc == 1 && -n $want && $got == "$want" ]] && ok=0
	report "$s: exactly the marked lines are flagged, and the lint fails" $ok <<EOF
exit status $rc (want 1)
marked:
$want
flagged:
$got
EOF
done

# clean input passes
cat >"$tmp/clean.bats" <<'EOF'
@test "clean" {
	run ! false
	[ 1 -eq 1 ]
	[ 2 -eq 2 ]
}
EOF
printf 'static double m;\nstatic void f(double e) { m = hb_test_max_nan(m, e); }\n' >"$tmp/clean.c"
out=$("$lint" --pending /dev/null "$tmp/clean.bats" "$tmp/clean.c" 2>&1)
rc=$?
ok=1
[[ $rc == 0 && -z $(flagged <<<"$out") && $(grep -c '^ok ' <<<"$out") == 6 ]] && ok=0
report "clean input: every rule ok, exit 0" $ok <<<"exit status $rc; output:
$out"

# a pending entry turns its hit into "pending", not a failure
printf 'set -e\n@test "t" {\n\t! true\n}\n' >"$tmp/one.bats"
rel=$(python3 -c 'import os,sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$tmp/one.bats" "$root")
printf '# comment\n%s\tbats-negation\t! true\n' "$rel" >"$tmp/pending"
out=$("$lint" --pending "$tmp/pending" "$tmp/one.bats" 2>&1)
rc=$?
ok=1
[[ $rc == 0 ]] && grep -q "^# pending: $rel:3: bats-negation" <<<"$out" && ok=0
report "a pending entry reports its hit as pending and does not fail" $ok <<<"exit status $rc; output:
$out"

# without the entry the same file fails
out=$("$lint" --pending /dev/null "$tmp/one.bats" 2>&1)
rc=$?
ok=1
[[ $rc == 1 ]] && grep -q "^not ok 1 " <<<"$out" && ok=0
report "the same hit without a pending entry fails" $ok <<<"exit status $rc; output:
$out"

# an entry that matches no hit (fixed, or mistyped) fails
printf '%s\tbats-negation\t! false\n' "$rel" >"$tmp/stale"
out=$("$lint" --pending "$tmp/stale" "$tmp/one.bats" 2>&1)
rc=$?
ok=1
[[ $rc == 1 ]] && grep -q "entry matches no hit" <<<"$out" && grep -q "^not ok 6 " <<<"$out" && ok=0
report "a pending entry that matches no hit fails" $ok <<<"exit status $rc; output:
$out"

# a malformed pending list is an error, not an empty list
printf 'no tabs here\n' >"$tmp/bad"
"$lint" --pending "$tmp/bad" "$tmp/clean.bats" >/dev/null 2>&1
rc=$?
ok=1
[[ $rc == 2 ]] && ok=0
report "a malformed pending list is refused (exit 2)" $ok <<<"exit status $rc"

((n == planned)) || echo "# planned $planned cases, ran $n"
