#!/usr/bin/env bats
# Crash consistency, full disks and racing writers for hb-convert, the
# whole binary, on a synthetic checkpoint (scripts/make-synthetic-checkpoint.py,
# a contract-control input).
#
# The kill points come from the crash seam (libcore/hb_fault.h):
# HB_TEST_KILL_AT=N makes the process SIGKILL itself at its Nth I/O step
# (every open, read, write, fsync and rename of the I/O and publication code
# counts), so a point lands between any two steps rather than wherever a
# timer happens to fire.  The points are drawn from HB_CRASH_SEED (printed)
# over the step count of an uninterrupted run.  After every kill the target
# must be the complete old artifact, the complete new one, or absent where
# there was none, and the next run must publish the new artifact and leave
# no temporary file.
#
# Binaries come from "${HB_BUILD:-build}" under the repository root.

bats_require_minimum_version 1.5.0

setup_file() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	cd "$BATS_FILE_TMPDIR"
	python3 "$root/scripts/make-synthetic-checkpoint.py" --out ck >/dev/null
	"$build/bin/hb-convert" -q --threads 2 ck new.gguf
	# the old artifact differs from the new one in its expert payload
	"$build/bin/hb-convert" -q --threads 2 --expert-codec affine4-g64 ck old.gguf
}

setup() {
	load crash_lib
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	conv=$build/bin/hb-convert
	if [[ ! -x $conv ]]; then
		echo "missing $conv: build first (make all)" >&2
		return 1
	fi
	cd "$BATS_TEST_TMPDIR"
	ck=$BATS_FILE_TMPDIR/ck
	new=$BATS_FILE_TMPDIR/new.gguf
	old=$BATS_FILE_TMPDIR/old.gguf
	seed=${HB_CRASH_SEED:-20261201}
}

# A failed case must not leave its small file system mounted (a clean root's
# test run refuses to delete a tree with a mount below it).
teardown() {
	if [[ -d $BATS_TEST_TMPDIR/fs ]]; then
		umount "$BATS_TEST_TMPDIR/fs" 2>/dev/null || true
	fi
}

temps() { ls -A "${1:-.}" | grep -c hbtmp || true; }

@test "crash: hb-convert killed at 100 seeded I/O steps leaves nothing or the whole artifact; the next run publishes it" {
	steps=$(count_steps 'rm -f probe.gguf' "$conv" -q --threads 2 "$ck" probe.gguf)
	rm -f probe.gguf
	[ "$steps" -ge 20 ]
	read -r -a at < <(crash_points "$steps" "$seed" 100)
	killed=0 present=0 completed=0
	for n in "${at[@]}"; do
		rm -f out.gguf
		rc=0
		HB_TEST_KILL_AT=$n "$conv" -q --threads 2 "$ck" out.gguf 2>/dev/null || rc=$?
		if ((rc == 0)); then
			completed=$((completed + 1))
		else
			[ "$rc" -eq 137 ]
			killed=$((killed + 1))
		fi
		if [[ -e out.gguf ]]; then
			cmp -s out.gguf "$new" || { echo "point $n: a target that is not the whole new artifact" >&2; return 1; }
			present=$((present + 1))
			rm out.gguf
		fi
		"$conv" -q --threads 2 "$ck" out.gguf
		cmp out.gguf "$new"
		[ "$(temps)" -eq 0 ]
	done
	[ $((killed + completed)) -eq "${#at[@]}" ]
	[ "$killed" -ge 90 ]
	[ "$present" -gt 0 ]
	echo "# seed $seed: $steps I/O steps; ${#at[@]} points (first ${at[0]}, last ${at[-1]}): $killed killed, $completed ran to the end; the whole new artifact there after $present, absent after the rest" >&3
}

@test "crash: hb-convert --force over an old artifact, killed at 100 seeded steps, leaves the old or the new one whole" {
	steps=$(count_steps 'cp "$old" out.gguf' "$conv" -q --threads 2 --force "$ck" out.gguf)
	read -r -a at < <(crash_points "$steps" "$seed" 100)
	olds=0 news=0 completed=0
	for n in "${at[@]}"; do
		cp "$old" out.gguf
		rc=0
		HB_TEST_KILL_AT=$n "$conv" -q --threads 2 --force "$ck" out.gguf 2>/dev/null || rc=$?
		if ((rc == 0)); then
			completed=$((completed + 1))
		else
			[ "$rc" -eq 137 ]
		fi
		if cmp -s out.gguf "$old"; then
			olds=$((olds + 1))
		elif cmp -s out.gguf "$new"; then
			news=$((news + 1))
		else
			echo "point $n: the target is neither the old nor the new artifact" >&2
			return 1
		fi
		"$conv" -q --threads 2 --force "$ck" out.gguf
		cmp out.gguf "$new"
		[ "$(temps)" -eq 0 ]
	done
	[ $((olds + news)) -eq "${#at[@]}" ]
	[ "$olds" -gt 0 ]
	[ "$news" -gt "$completed" ] # some kills came after the rename
	echo "# seed $seed: $steps I/O steps, ${#at[@]} points, $completed ran to the end: old artifact whole after $olds, new one after $news" >&3
}

@test "crash: a dead writer's temporary file is removed by the next conversion; a live one's refuses it (busy)" {
	# a leftover with a temporary name that nobody holds: swept
	: >.out.gguf.hbtmp.Zz9Yy8
	"$conv" -q --threads 2 "$ck" out.gguf
	cmp out.gguf "$new"
	[ "$(temps)" -eq 0 ]
	# a temporary file held by a live process (flock, as a writer holds it)
	rm out.gguf
	: >.out.gguf.hbtmp.Hh7Gg6
	exec {lockfd}<.out.gguf.hbtmp.Hh7Gg6
	flock -x "$lockfd"
	run --separate-stderr "$conv" -q --threads 2 "$ck" out.gguf
	exec {lockfd}<&-
	[ "$status" -eq 3 ]
	[ "$stderr" = "hb-convert: out.gguf: another process is writing this target (its temporary file is locked)" ]
	[ ! -e out.gguf ]
	[ "$(ls -A | grep hbtmp)" = ".out.gguf.hbtmp.Hh7Gg6" ]
}

@test "race: two conversions into one target at once: one wins whole, the other is refused or runs after it" {
	busy=0 serial=0
	for round in 1 2 3 4 5 6; do
		rm -f out.gguf
		rc1=0 rc2=0
		"$conv" -q --threads 1 --force "$ck" out.gguf 2>a.err &
		p1=$!
		"$conv" -q --threads 1 --force --expert-codec affine4-g64 "$ck" out.gguf 2>b.err &
		p2=$!
		wait "$p1" || rc1=$?
		wait "$p2" || rc2=$?
		# each either published or was refused as busy, exit 3
		for r in "$rc1:a" "$rc2:b"; do
			case ${r%%:*} in
			0) ;;
			3) grep -qF "another process is writing this target" "${r#*:}.err" ;;
			*) cat "${r#*:}.err" >&2; return 1 ;;
			esac
		done
		[ $((rc1 == 0 || rc2 == 0)) -eq 1 ]
		if ((rc1 == 0 && rc2 == 0)); then serial=$((serial + 1)); else busy=$((busy + 1)); fi
		cmp -s out.gguf "$new" || cmp -s out.gguf "$old" || { echo "round $round: a mixed target" >&2; return 1; }
		[ "$(temps)" -eq 0 ]
	done
	echo "# 6 rounds: one refused as busy in $busy, both published one after the other in $serial" >&3
}

@test "full disk: hb-convert onto a file system that fills part way fails with ENOSPC naming the path; nothing published, the old artifact intact" {
	if [[ $(id -u) != 0 ]] || ! command -v mount >/dev/null; then
		hb_skip_reason="mounting a small tmpfs needs root"
	fi
	size=$(stat -c %s "$new")
	mkdir fs
	if [[ -z ${hb_skip_reason:-} ]] && ! mount -t tmpfs -o size=$((size / 2 / 4096 * 4096)) tmpfs fs 2>mount.err; then
		hb_skip_reason="cannot mount a tmpfs here: $(cat mount.err)"
	fi
	if [[ -n ${hb_skip_reason:-} ]]; then
		skip "$hb_skip_reason"
	fi
	rc=0
	"$conv" -q --threads 2 "$ck" fs/out.gguf 2>err || rc=$?
	ls -A fs >listing 2>/dev/null || true
	umount fs
	[ "$rc" -eq 3 ]
	grep -qE "^hb-convert: write failed 'fs/out\.gguf': No space left on device\$" err
	[ ! -s listing ]
	# over an old artifact that fits, with --force: the old one stays whole
	mount -t tmpfs -o size=$(((size / 2 + $(stat -c %s "$old")) / 4096 * 4096 + 4096)) tmpfs fs
	cp "$old" fs/out.gguf
	rc=0
	"$conv" -q --threads 2 --force "$ck" fs/out.gguf 2>err || rc=$?
	if cmp -s fs/out.gguf "$old"; then same=1; else same=0; fi
	ls -A fs >listing 2>/dev/null || true
	umount fs
	[ "$rc" -eq 3 ]
	grep -qF 'No space left on device' err
	[ "$same" -eq 1 ]
	[ "$(cat listing)" = "out.gguf" ]
}

@test "full disk: hb-replay label onto a file system that fills part way fails with ENOSPC naming the shard; complete shards stay, nothing half-written; resumed with room it ends byte-identical" {
	if [[ $(id -u) != 0 ]]; then
		skip "mounting a small tmpfs needs root"
	fi
	replay=$build/bin/hb-replay
	"$conv" -q "$root/tests/fixtures/upstream/realshape/checkpoint" rs.gguf
	python3 -c 'import json
for i in range(6):
    print(json.dumps({"owner": 0, "thread": i, "turn": 0, "sequence": i,
                      "tokens": [(i * 7 + j * 3) % 60 + 1 for j in range(40)]}))' >t.jsonl
	"$replay" label -m rs.gguf -o ref --threads 2 --max-shard-bytes 40000 t.jsonl >/dev/null
	[ "$(ls ref | wc -l)" -eq 12 ]
	mkdir fs
	if ! mount -t tmpfs -o size=100k tmpfs fs 2>mount.err; then
		skip "cannot mount a tmpfs here: $(cat mount.err)"
	fi
	rc=0
	"$replay" label -m rs.gguf -o fs/L --threads 2 --max-shard-bytes 40000 t.jsonl 2>err >/dev/null || rc=$?
	ls -A fs/L >listing 2>/dev/null || true
	# every shard left is whole: its manifest is there and describes it
	partial=$(grep -c hbtmp listing || true)
	mount -o remount,size=4m fs
	rc2=0
	"$replay" label -m rs.gguf -o fs/L --threads 2 --max-shard-bytes 40000 t.jsonl >resume.out 2>&1 || rc2=$?
	same=0
	if diff -r ref fs/L >/dev/null; then same=1; fi
	umount fs
	[ "$rc" -eq 3 ]
	grep -qE '^hb-replay: trace-io: fs/L/labels-[0-9]+-of-[0-9]+-[0-9]+\.hbtrace: write failed: No space left on device$' err
	[ "$partial" -eq 0 ]
	[ $(($(wc -l <listing) % 2)) -eq 0 ]
	[ "$rc2" -eq 0 ]
	grep -qE "[1-9][0-9]* kept" resume.out
	[ "$same" -eq 1 ]
	echo "# before the disk filled: $(($(wc -l <listing) / 2)) of 6 shards complete; resumed: $(cat resume.out)" >&3
}

@test "race: a second hb-replay label of the same shard in one directory is refused as busy and touches nothing; a dead run's lock is taken" {
	replay=$build/bin/hb-replay
	"$conv" -q "$root/tests/fixtures/upstream/realshape/checkpoint" rs.gguf
	python3 -c 'import json
for i in range(4):
    print(json.dumps({"owner": 0, "thread": i, "turn": 0, "sequence": i, "tokens": [i + j + 1 for j in range(20)]}))' >t.jsonl
	"$replay" label -m rs.gguf -o ref --threads 2 --max-shard-bytes 40000 t.jsonl >/dev/null
	# a first run killed part way: its shards, a stray temporary file, its lock file
	mkdir L
	"$replay" label -m rs.gguf -o L --threads 2 --max-shard-bytes 40000 t.jsonl >/dev/null
	rm L/labels-0000-of-0001-000001.json
	: >L/.labels-0000-of-0001-000001.hbtrace.hbtmp.Qq1Ww2
	: >L/.labels-0000-of-0001.lock
	before=$(cd L && ls -A | sort | xargs sha256sum)
	# another instance is running (it holds the lock): refused, nothing touched
	exec {lockfd}<L/.labels-0000-of-0001.lock
	flock -x "$lockfd"
	run --separate-stderr "$replay" label -m rs.gguf -o L --threads 2 --max-shard-bytes 40000 t.jsonl
	exec {lockfd}<&-
	[ "$status" -eq 3 ]
	[[ $stderr == "hb-replay: L: another hb-replay label is writing shard 0/1 here (L/.labels-0000-of-0001.lock is locked)" ]]
	[ "$(cd L && ls -A | sort | xargs sha256sum)" = "$before" ]
	# the dead run's lock is taken, the resume ends byte-identical, no lock or temporary file stays
	"$replay" label -m rs.gguf -o L --threads 2 --max-shard-bytes 40000 t.jsonl >/dev/null
	diff -r ref L
	[ -z "$(ls -A L | grep -e '\.lock$' -e hbtmp || true)" ]
}
