#!/usr/bin/env bats
# Sample input for tests/runner/test-lint-tests.sh: each line that
# scripts/lint-tests must flag carries "expect: <rule>"; no other line may
# be flagged.  Never run as a test.

setup() {
	bins=()
	for b in /bin/*; do
		[[ -f $b && -x $b ]] && bins+=("$b")
	done
	! true  # expect: bats-negation
	true
}

helper_ends_negated() {
	libs=$(ldd /bin/sh) || return 2
	! grep -q cuda <<<"$libs"
}

helper_negation_not_last() {
	! grep -q cuda /dev/null  # expect: bats-negation
	true
}

oneline() { python3 -c "print(1)"; }

@test "statements that set -e ignores" {
	! grep -q lm_head <<<"$output"  # expect: bats-negation
	[ "$w" -eq 880 ] && [ "$h" -eq 520 ]  # expect: bats-and-chain
	for f in a b; do
		[ "$f" = a ] && echo "$f"  # expect: bats-and-chain
	done
	mkdir d && (cd d && true)  # expect: bats-and-chain
	[ -n "$x" ] &&  # expect: bats-and-chain
		[ -n "$y" ]
	skip  # expect: bats-skip
}

@test "forms that do fail, or are conditions" {
	run ! grep -q lm_head <<<"$output"
	if ! cmp -s a b; then
		echo differ
	fi
	while ! [ -e f ]; do touch f; done
	! LC_ALL=C grep -q '[^[:print:]]' e || { echo "unprintable" >&2; return 1; }
	[[ -n $a && -n $b ]]
	[ "$x" = 1 ] || [ "$y" = 2 ]
	v=$(cd / && pwd)
	echo "a && b" '! c' "$(true && false)"
	(( a && b )) || true
	# ! commented && out
	python3 - <<'PY'
! this is python && not bash
PY
	cat <<-EOF2
	! here && there
	EOF2
	[ "$w" -eq 1 ] && [ "$h" -eq 2 ]  # lint: ok the sample's allowed chain
	skip "no GPU on this machine"
	[ ! -e l.bin ]
	[ ! -e r.trace ]
}

@test "a reasonless lint: ok does not allow" {
	[ 1 = 1 ] && [ 2 = 2 ]  # expect: bats-and-chain; lint: ok
}
