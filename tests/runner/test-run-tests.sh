#!/usr/bin/env bash
# Tests of scripts/run-tests itself, with stand-in test programs in a
# temporary directory (and PATH overrides for bats): every way a runner can
# fail must make run-tests exit non-zero, a clean run must exit 0, and the
# closing line must count what happened.  Prints TAP (scripts/run-tests
# counts it in make test).  Needs bash, coreutils, bats and a C compiler
# (the real harness is linked into one stand-in); no network.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
# HB_RUN_TESTS_UNDER_TEST: another run-tests to test (to see these cases fail)
rt=${HB_RUN_TESTS_UNDER_TEST:-$root/scripts/run-tests}
build=${HB_BUILD:-build}
[[ $build == /* ]] || build=$root/$build
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test-run-tests.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0
planned=23
echo "1..$planned"

# ---------------------------------------------------------------- stand-ins
sa=$tmp/standin
mkdir -p "$sa" "$tmp/fakebats" "$tmp/nobats"
standin() { # $1: name; stdin: script body after the shebang
	{ echo '#!/usr/bin/env bash'; cat; } >"$sa/$1"
	chmod +x "$sa/$1"
}
standin pass <<'EOF'
printf '1..2\nok 1 - a\nok 2 - b\n'
EOF
standin fail_case <<'EOF'
printf '1..2\nok 1 - a\nnot ok 2 - b\n'
exit 1
EOF
standin segv_after_ok <<'EOF'
printf '1..1\nok 1 - a\n'
kill -SEGV $$
EOF
standin abort_midway <<'EOF'
printf '1..3\nok 1 - a\n'
kill -ABRT $$
EOF
standin fewer <<'EOF'
printf '1..3\nok 1 - a\nok 2 - b\n'
EOF
standin more <<'EOF'
printf '1..1\nok 1 - a\nok 2 - b\n'
EOF
standin no_plan <<'EOF'
printf 'ok 1 - a\nok 2 - b\n'
EOF
standin empty_plan <<'EOF'
printf '1..0\n'
EOF
standin exit_nonzero_all_ok <<'EOF'
printf '1..1\nok 1 - a\n'
exit 3
EOF
standin skip_no_reason <<'EOF'
printf '1..2\nok 1 - a\nok 2 - b # SKIP\n'
EOF
standin skip_reason <<'EOF'
printf '1..3\nok 1 - a\nok 2 - b # SKIP no GPU on this machine\nok 3 - c\n'
EOF
standin bail <<'EOF'
printf '1..2\nok 1 - a\nBail out! cannot go on\n'
EOF
printf 'not a program\n' >"$sa/not_executable"

# stand-in bats: TAP on stdout, then exit 1 (all ok lines, or none at all)
cat >"$tmp/fakebats/bats" <<'EOF'
#!/usr/bin/env bash
case ${FAKE_BATS:-ok_exit1} in
ok_exit1) printf '1..2\nok 1 a\nok 2 b\n' ;;
crash) echo "bats: internal error" >&2 ;;
esac
exit 1
EOF
chmod +x "$tmp/fakebats/bats"

# a PATH with what run-tests needs but no bats
for tool in bash env mktemp rm basename dirname cat tee tail sed; do
	p=$(command -v "$tool") && ln -s "$p" "$tmp/nobats/$tool"
done

# real Bats files
mkdir -p "$tmp/cli"
cat >"$tmp/cli/good.bats" <<'EOF'
@test "passes" {
	[ 1 -eq 1 ]
}
@test "skips for a reason" {
	skip "no GPU on this machine"
}
EOF
cat >"$tmp/cli/bad.bats" <<'EOF'
@test "passes" {
	true
}
@test "fails" {
	[ 1 -eq 2 ]
}
EOF
cat >"$tmp/cli/skip_no_reason.bats" <<'EOF'
@test "skips without a reason" {
	skip
}
EOF

# a stand-in built on the real harness (tests/unit/harness.o of this build)
cat >"$tmp/harness_demo.c" <<'EOF'
#include "hb_base.h"
#include "harness.h"
#include <math.h>

static void passes(void) { CHECK(1 == 1); }
static void skips(void) { hb_test_skip("no %s here", "GPU"); }
static void skips_without_reason(void) { hb_test_skip("%s", " "); }
static void fails_then_skips(void) { CHECK(1 == 2); hb_test_skip("no GPU here"); }
static void nan_max(void)
{
	static const float a[3] = {1, NAN, 3}, b[3] = {1, 2, 3}, c[3] = {1.5f, 2, 3};
	CHECK(isnan(hb_test_max_nan(0.5, NAN)));
	CHECK(isnan(hb_test_max_nan(NAN, 0.5)));
	CHECK(hb_test_max_nan(0.5, 2.0) == 2.0 && hb_test_max_nan(2.0, 0.5) == 2.0);
	CHECK(isnan(hb_test_max_abs_err(a, b, 3)));
	CHECK(hb_test_max_abs_err(c, b, 3) == 0.5);
	CHECK(hb_test_max_abs_err(b, b, 0) == 0);
}
HB_TEST_MAIN(T(passes), T(skips), T(skips_without_reason), T(fails_then_skips), T(nan_max))
EOF
demo_err=
if ! cc -std=c11 -D_GNU_SOURCE -I"$root/libcore" -I"$root/tests/unit" -o "$tmp/harness_demo" \
	"$tmp/harness_demo.c" "$build/tests/unit/harness.o" -lm 2>"$tmp/cc.err"; then
	demo_err="cannot build the harness stand-in against $build/tests/unit/harness.o: $(head -c 500 "$tmp/cc.err")"
fi

# ---------------------------------------------------------------- helpers
out= rc=
run_rt() { # [VAR=value ...] -- runners...: sets out, rc
	local envs=()
	while (($#)) && [[ $1 != -- ]]; do envs+=("$1"); shift; done
	shift
	out=$(cd "$tmp" && env "${envs[@]}" "$rt" "$@" 2>&1)
	rc=$?
}
closing() { tail -n 1 <<<"$out"; }
report() { # $1: description; $2..: the condition, evaluated
	local what=$1
	shift
	n=$((n + 1))
	if "$@"; then
		echo "ok $n - $what"
	else
		echo "not ok $n - $what"
		echo "# exit status $rc; run-tests printed:"
		sed 's/^/#   /' <<<"$out"
	fi
}
fails_with() { # $1: closing line wanted, $2: a line of the output wanted
	((rc != 0)) && [[ $(closing) == "$1" ]] && grep -qF -- "$2" <<<"$out"
}

# ---------------------------------------------------------------- cases
run_rt -- "$sa/pass" "$tmp/cli/good.bats"
report "control: passing runners and a real skip exit 0, the skip counted and its reason printed" \
	eval '((rc == 0)) && [[ $(closing) == "3 passed, 0 failed, 1 skipped" ]] && grep -qF "SKIP good.bats: 2 skips for a reason # skip no GPU on this machine" <<<"$out"'

run_rt -- "$sa/pass" "$sa/skip_reason"
report "a unit test's '# SKIP reason' counts as skipped, not passed" \
	eval '((rc == 0)) && [[ $(closing) == "4 passed, 0 failed, 1 skipped" ]] && grep -qF "no GPU on this machine" <<<"$out"'

run_rt -- "$sa/pass" "$tmp/cli/bad.bats"
report "a failing Bats file fails the run" fails_with "3 passed, 1 failed, 0 skipped" "FAIL bad.bats: not ok 2 fails"

run_rt -- "$sa/fail_case"
report "a failing unit case fails the run" fails_with "1 passed, 1 failed, 0 skipped" "FAIL fail_case: not ok 2 - b"

run_rt -- "$sa/segv_after_ok"
report "a unit test killed by SIGSEGV after all its ok lines fails the run" \
	fails_with "1 passed, 1 failed, 0 skipped" "killed by signal 11 (SEGV)"

run_rt -- "$sa/abort_midway"
report "a unit test that aborts midway fails the run, its missing cases counted" \
	fails_with "1 passed, 3 failed, 0 skipped" "killed by signal 6 (ABRT)"

run_rt PATH="$tmp/nobats" -- "$sa/pass" "$tmp/cli/good.bats"
report "a missing bats fails the run" fails_with "2 passed, 1 failed, 0 skipped" "FAIL good.bats: bats not found"

run_rt PATH="$tmp/fakebats:$PATH" FAKE_BATS=ok_exit1 -- "$tmp/cli/good.bats"
report "a bats that exits 1 after all ok lines fails the run" \
	fails_with "2 passed, 1 failed, 0 skipped" "exited with status 1, no case reported as failed"

run_rt PATH="$tmp/fakebats:$PATH" FAKE_BATS=crash -- "$sa/pass" "$tmp/cli/good.bats"
report "a bats that prints nothing and exits 1 fails the run" \
	fails_with "2 passed, 2 failed, 0 skipped" "FAIL good.bats: printed no TAP plan"

run_rt -- "$sa/fewer"
report "a unit test reporting fewer cases than its plan fails the run" \
	fails_with "2 passed, 1 failed, 0 skipped" "planned 3 cases, reported 2"

run_rt -- "$sa/more"
report "a unit test reporting more cases than its plan fails the run" \
	fails_with "2 passed, 1 failed, 0 skipped" "planned 1 cases, reported 2"

run_rt -- "$sa/no_plan"
report "a unit test without a plan fails the run" fails_with "2 passed, 1 failed, 0 skipped" "printed no TAP plan"

run_rt -- "$sa/empty_plan"
report "a unit test that plans no case fails the run" fails_with "0 passed, 1 failed, 0 skipped" "planned no cases"

run_rt -- "$sa/exit_nonzero_all_ok"
report "a unit test that exits non-zero with every case ok fails the run" \
	fails_with "1 passed, 1 failed, 0 skipped" "exited with status 3"

run_rt -- "$sa/skip_no_reason"
report "a unit test's skip without a reason fails the run" \
	fails_with "1 passed, 1 failed, 0 skipped" "skipped without a reason"

run_rt -- "$tmp/cli/skip_no_reason.bats"
report "a Bats skip without a reason fails the run" \
	fails_with "0 passed, 1 failed, 0 skipped" "skipped without a reason"

run_rt HB_RUN_TESTS_NO_SKIP=1 -- "$sa/skip_reason"
report "with HB_RUN_TESTS_NO_SKIP=1 (make test-long) even a reasoned skip fails the run" \
	fails_with "2 passed, 1 failed, 0 skipped" "every case must run here"

run_rt -- "$sa/pass" "$sa/does_not_exist" "$sa/not_executable"
report "a missing or non-executable unit test fails the run" \
	eval 'fails_with "2 passed, 2 failed, 0 skipped" "no such test program" && grep -qF "not executable" <<<"$out"'

run_rt -- "$sa/bail"
report "'Bail out!' fails the run" fails_with "1 passed, 2 failed, 0 skipped" "Bail out! cannot go on"

run_rt --
report "no runners at all fails the run" fails_with "0 passed, 1 failed, 0 skipped" "no test runners given"

# GNU time missing: the runner fails without running anything, saying so
# (a clean root has no /usr/bin/time; this case must not depend on it)
run_rt HB_RUN_TESTS_TIME=1 HB_RUN_TESTS_GNU_TIME="$tmp/no-such-time" -- "$sa/pass"
report "HB_RUN_TESTS_TIME=1 without GNU time fails the run, saying so" \
	fails_with "0 passed, 1 failed, 0 skipped" "needs GNU time"

if [[ -x /usr/bin/time ]]; then
	run_rt HB_RUN_TESTS_TIME=1 -- "$sa/pass"
	report "HB_RUN_TESTS_TIME=1 reports wall time and peak RSS and still counts" \
		eval '((rc == 0)) && [[ $(closing) == "2 passed, 0 failed, 0 skipped" ]] && grep -qE "pass: # [0-9.]+ s wall, [0-9]+ KiB peak RSS" <<<"$out"'
else
	n=$((n + 1))
	echo "ok $n - HB_RUN_TESTS_TIME=1 reports wall time and peak RSS # SKIP no GNU time (/usr/bin/time) here"
fi

# the real harness: hb_test_skip's TAP line, an empty reason, a skip that
# does not hide a failed CHECK, and the NaN-aware maxima
if [[ -n $demo_err ]]; then
	n=$((n + 1))
	echo "not ok $n - the harness's hb_test_skip and NaN-aware maxima through run-tests"
	echo "# $demo_err"
else
	run_rt -- "$tmp/harness_demo"
	report "the harness's hb_test_skip and NaN-aware maxima through run-tests" \
		eval 'fails_with "2 passed, 2 failed, 1 skipped" "SKIP harness_demo: 2 - skips # SKIP no GPU here" &&
		      grep -qF "FAIL harness_demo: not ok 3 - skips_without_reason" <<<"$out" &&
		      grep -qF "FAIL harness_demo: not ok 4 - fails_then_skips" <<<"$out"'
fi

((n == planned)) || echo "# planned $planned cases, ran $n"
