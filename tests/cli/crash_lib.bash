# Shared by tests/cli/crash.bats, crash-replay.bats and crash-publish.bats:
# the crash seam's step count and the seeded kill points.

# The number of I/O steps of an uninterrupted run of "$@": the smallest N at
# which HB_TEST_KILL_AT=N no longer kills it, minus one (bisection).  $1 is
# a command (eval'd) that restores the starting state before each run.
count_steps() { # reset-command command...
	local reset=$1 lo=1 hi=1 rc
	shift
	while :; do
		rc=0
		eval "$reset"
		HB_TEST_KILL_AT=$hi "$@" >/dev/null 2>&1 || rc=$?
		((rc == 0)) && break
		((rc == 137)) || { echo "count_steps: exit $rc at $hi" >&2; return 1; }
		lo=$((hi + 1))
		hi=$((hi * 2))
	done
	while ((lo < hi)); do
		local mid=$(((lo + hi) / 2))
		rc=0
		eval "$reset"
		HB_TEST_KILL_AT=$mid "$@" >/dev/null 2>&1 || rc=$?
		if ((rc == 0)); then hi=$mid; else lo=$((mid + 1)); fi
	done
	echo $((lo - 1))
}

# $3 distinct points in 1..$1: the last min(8, $3 / 2) steps and the rest
# drawn from seed $2 (all of them when there are fewer).
crash_points() { # steps seed count
	python3 -c 'import random, sys
n, seed, k = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
tail = set(range(max(1, n - min(8, k // 2) + 1), n + 1))
rest = [i for i in range(1, n + 1) if i not in tail]
pick = tail | set(random.Random(seed).sample(rest, max(0, min(len(rest), k - len(tail)))))
print(*sorted(pick))' "$1" "$2" "$3"
}
