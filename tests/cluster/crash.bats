#!/usr/bin/env bats
# Crash consistency of the cluster flows (issue 19): a labelling task, or
# the merge, is killed with SIGKILL at 20 points drawn with a fixed seed
# from three kinds: during a shard's write (its temporary file open, before
# its rename), between a shard's publication and its manifest's, and during
# merge -o.  Every time the interrupted state fails the coverage proof, the
# rerun resumes, and the result is byte-identical to an uninterrupted run:
# the worker's shards to those of a run never killed, the merged labels to
# one unsharded run.
#
# The kill comes from tests/tools/crash-at.c, preloaded into hb-replay: it
# numbers every call that changes the disk and kills the process at the
# chosen one, before the call is made.  A first run with HB_CRASH_LOG lists
# the points; the seed picks among them.  make test-crash runs this file.

bats_require_minimum_version 1.5.0

setup_file() {
	load lib
	cluster_setup_file
	so=$build/tests/tools/crash-at.so
	[ -f "$so" ] || { echo "$so is not built (make test-crash builds it)" >&2; return 1; }
	# every worker of 8, never killed
	for i in 0 1 2 3 4 5 6 7; do
		"$rp" label -m "$art/rs.gguf" -o "$art/B" --shard $i/8 --max-shard-bytes 20000 "$art/t.jsonl" >/dev/null
	done
	# the points of worker 3 and of the merge
	HB_CRASH_LOG=$art/label.points LD_PRELOAD=$so \
		"$rp" label -m "$art/rs.gguf" -o "$art/W3" --shard 3/8 --max-shard-bytes 20000 "$art/t.jsonl" >/dev/null
	HB_CRASH_LOG=$art/merge.points LD_PRELOAD=$so \
		"$rp" merge --transcripts "$art/t.jsonl" -o "$art/M0" "$art/B" >/dev/null
	diff -r "$art/U" "$art/M0"
	# 7 + 7 + 6 points, seed 19
	python3 - "$art" <<'PY'
import random, re, sys
art = sys.argv[1]
def points(name):
    return [l.split(" ", 2) for l in open("%s/%s.points" % (art, name)).read().splitlines()]
write, between, cur = [], [], None
for n, call, path in points("label"):
    if call == "mkostemp" and ".hbtrace.hbtmp." in path:
        cur = write
    if cur is not None:
        cur.append(int(n))
    if call == "renameat2" and path.endswith(".hbtrace"):
        cur = between
    elif call == "renameat2" and path.endswith(".json"):
        cur = None
merge = points("merge")
last = max(i for i, (n, call, path) in enumerate(merge) if call == "renameat2" and path.endswith(".json"))
merge = [int(n) for n, _, _ in merge[:last + 1]]
r = random.Random(19)
with open(art + "/plan", "w") as f:
    for kind, pool, k in (("write", write, 7), ("between", between, 7), ("merge", merge, 6)):
        assert len(pool) >= k, (kind, pool)
        for p in sorted(r.sample(pool, k)):
            f.write("%s %d\n" % (kind, p))
PY
}

setup() {
	load lib
	cluster_paths
	so=$build/tests/tools/crash-at.so
	cd "$BATS_TEST_TMPDIR"
}

# killed_worker P: worker 3 killed at point P, then resumed
killed_worker() {
	rm -rf C M
	cp -a "$art/B" C
	rm C/labels-0003-of-0008-*
	run env HB_CRASH_AT="$1" LD_PRELOAD="$so" "$rp" label -m "$art/rs.gguf" -o C --shard 3/8 \
		--max-shard-bytes 20000 "$art/t.jsonl"
	[ "$status" -eq 137 ] || { echo "point $1: the kill did not come (exit $status)" >&2; return 1; }
	# what the kill left is not complete, and merge says so
	run "$rp" merge --transcripts "$art/t.jsonl" C
	[ "$status" -eq 1 ] || { echo "point $1: merge proved an interrupted run" >&2; return 1; }
	run --separate-stderr "$rp" label -m "$art/rs.gguf" -o C --shard 3/8 --max-shard-bytes 20000 "$art/t.jsonl"
	[ "$status" -eq 0 ] || { echo "point $1: the resume failed: $stderr" >&2; return 1; }
	diff -r "$art/B" C || { echo "point $1: the resumed shards differ" >&2; return 1; }
	"$rp" merge --transcripts "$art/t.jsonl" -o M C >/dev/null
	diff -r "$art/U" M
}

# killed_workers KIND N: killed_worker at each point of KIND in the plan,
# which holds N of them
killed_workers() {
	local kind p n=0
	while read -r kind p; do
		[ "$kind" = "$1" ] || continue
		killed_worker "$p"
		n=$((n + 1))
	done <"$art/plan"
	[ "$n" -eq "$2" ]
}

@test "crash: a labelling task killed while it writes a shard resumes to the same bytes (7 seeded points)" {
	killed_workers write 7
}

@test "crash: a labelling task killed between a shard and its manifest resumes to the same bytes (7 seeded points)" {
	killed_workers between 7
}

@test "crash: a merge killed while it writes resumes to the unsharded labels (6 seeded points)" {
	n=0
	while read -r kind p; do
		[ "$kind" = merge ] || continue
		rm -rf M
		run env HB_CRASH_AT="$p" LD_PRELOAD="$so" "$rp" merge --transcripts "$art/t.jsonl" -o M "$art/B"
		[ "$status" -eq 137 ]
		# not complete: coverage fails (1), or M was never made (3)
		run "$rp" merge --transcripts "$art/t.jsonl" M
		[ "$status" -ne 0 ]
		run --separate-stderr "$rp" merge --transcripts "$art/t.jsonl" -o M "$art/B"
		[ "$status" -eq 0 ]
		diff -r "$art/U" M
		n=$((n + 1))
	done <"$art/plan"
	[ "$n" -eq 6 ]
}

@test "crash: the kill lands where it is aimed: nothing is written at or after the point" {
	# the control of the harness itself: killed at the first shard's first
	# write, worker 3 leaves only its temporary file, its run's lock file
	# (hb-replay(1) FILES) and the directory
	p=$(awk '$2 == "mkostemp" && $3 ~ /hbtrace/ { m = 1 } m && ($2 == "write" || $2 == "pwrite") { print $1; exit }' "$art/label.points")
	run env HB_CRASH_AT="$p" LD_PRELOAD="$so" "$rp" label -m "$art/rs.gguf" -o K --shard 3/8 --max-shard-bytes 20000 "$art/t.jsonl"
	[ "$status" -eq 137 ]
	[ "$(ls -A K | grep -vx '\.labels-0003-of-0008\.lock')" = "$(cd K && ls -A | grep '^\.labels-0003-of-0008-000000\.hbtrace\.hbtmp\.')" ]
	[ -e K/.labels-0003-of-0008.lock ]
	[ "$(stat -c %s K/.labels-0003-of-0008-000000.hbtrace.hbtmp.*)" -eq 0 ]
	# without HB_CRASH_AT the library changes nothing
	LD_PRELOAD="$so" "$rp" label -m "$art/rs.gguf" -o N --shard 3/8 --max-shard-bytes 20000 "$art/t.jsonl" >/dev/null
	diff -r "$art/W3" N
}
