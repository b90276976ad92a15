#!/usr/bin/env bats
# Crash consistency of hb-replay label and hb-replay merge -o, the whole
# binary, killed by the crash seam (libcore/hb_fault.h): HB_TEST_KILL_AT=N
# makes the process SIGKILL itself at its Nth I/O step (every open, read,
# write, fsync and rename of the I/O and publication code), as
# tests/cli/crash.bats does for hb-convert.  The points are the last 8 steps
# of an uninterrupted run (the last shard's rename, its manifest's, the
# directory syncs; the last 5 of a 10-point sample) and others drawn from
# HB_CRASH_SEED (printed) over all of its steps; HB_CRASH_POINTS of them (10
# in `make test`, 100 in `make test-crash`).  After every kill each published file is byte for byte the
# one an uninterrupted run publishes (a shard is whole or absent, a
# manifest likewise), and the directory is either complete or refused by
# the merge proof; the next run then ends byte-identical to the
# uninterrupted one with no temporary or lock file left.
#
# Binaries come from "${HB_BUILD:-build}" under the repository root.

bats_require_minimum_version 1.5.0

setup_file() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	cd "$BATS_FILE_TMPDIR"
	"$build/bin/hb-convert" -q "$root/tests/fixtures/upstream/realshape/checkpoint" rs.gguf
	python3 -c 'import json
for i in range(6):
    print(json.dumps({"owner": 0, "thread": i, "turn": 0, "sequence": i,
                      "tokens": [(i * 7 + j * 3) % 60 + 1 for j in range(40)]}))' >t.jsonl
	rp=$build/bin/hb-replay
	# the uninterrupted references: one unsharded run, and two workers
	# whose merge is that run byte for byte
	"$rp" label -m rs.gguf -o ref --threads 2 --max-shard-bytes 40000 t.jsonl >/dev/null
	"$rp" label -m rs.gguf -o B --shard 0/2 --threads 2 --max-shard-bytes 40000 t.jsonl >/dev/null
	"$rp" label -m rs.gguf -o B --shard 1/2 --threads 2 --max-shard-bytes 40000 t.jsonl >/dev/null
}

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	rp=$build/bin/hb-replay
	cd "$BATS_TEST_TMPDIR"
	art=$BATS_FILE_TMPDIR
	seed=${HB_CRASH_SEED:-20261201}
	npoints=${HB_CRASH_POINTS:-10}
	load crash_lib
}

# Every published (not hidden) file of $1 is the same-named file of $2.
published_whole() { # dir ref point
	local f
	[[ -d $1 ]] || return 0
	for f in "$1"/*; do
		[[ -e $f ]] || continue
		cmp -s "$f" "$2/${f##*/}" || { echo "point $3: ${f##*/} is not the file an uninterrupted run publishes" >&2; return 1; }
	done
}

# Complete (the same files as ref) or refused by the merge proof.
complete_or_refused() { # dir ref point
	local rc=0
	if [[ -d $1 ]] && diff -r -x '.*' "$1" "$2" >/dev/null; then
		echo complete
		return 0
	fi
	"$rp" merge --transcripts "$art/t.jsonl" "$1" >/dev/null 2>&1 || rc=$?
	if ((rc == 0)); then
		echo "point $3: an incomplete directory passed the merge proof" >&2
		return 1
	fi
	echo refused
}

# After the resumed run: byte-identical to ref, nothing hidden left.
resumed_same() { # dir ref point
	diff -r "$1" "$2" || { echo "point $3: the resumed run differs from an uninterrupted one" >&2; return 1; }
	[ -z "$(ls -A "$1" | grep -e '^\.' || true)" ] || { echo "point $3: left $(ls -A "$1" | grep '^\.')" >&2; return 1; }
}

@test "crash: hb-replay label killed at seeded I/O steps publishes only whole shards and manifests, is refused until complete, and resumes byte-identical" {
	lab=("$rp" label -m "$art/rs.gguf" -o L --threads 2 --max-shard-bytes 40000 "$art/t.jsonl")
	steps=$(count_steps 'rm -rf L' "${lab[@]}")
	[ "$steps" -ge 100 ]
	read -r -a at < <(crash_points "$steps" "$seed" "$npoints")
	killed=0 complete=0 refused=0 kept=0
	for n in "${at[@]}"; do
		rm -rf L
		rc=0
		HB_TEST_KILL_AT=$n "${lab[@]}" >/dev/null 2>&1 || rc=$?
		if ((rc != 0)); then
			[ "$rc" -eq 137 ]
			killed=$((killed + 1))
		fi
		published_whole L "$art/ref" "$n"
		case $(complete_or_refused L "$art/ref" "$n") in
		complete) complete=$((complete + 1)) ;;
		refused) refused=$((refused + 1)) ;;
		*) return 1 ;;
		esac
		if [[ -d L ]] && (($(ls L | wc -l) >= 2)); then kept=$((kept + 1)); fi
		"${lab[@]}" >/dev/null
		resumed_same L "$art/ref" "$n"
	done
	[ $((complete + refused)) -eq "${#at[@]}" ]
	[ "$killed" -ge $((${#at[@]} * 8 / 10)) ]
	[ "$refused" -gt 0 ]
	echo "# seed $seed: $steps I/O steps, ${#at[@]} points (first ${at[0]}, last ${at[-1]}): $killed killed; complete after $complete, refused by the merge proof after $refused (published shards kept in $kept); every resume byte-identical" >&3
}

@test "crash: hb-replay merge -o killed at seeded I/O steps publishes only whole shards and manifests, is refused until complete, and resumes byte-identical to one unsharded run" {
	"$rp" merge --transcripts "$art/t.jsonl" -o M0 "$art/B" >/dev/null
	diff -r "$art/ref" M0
	inputs=$(cd "$art/B" && ls -A | sort | xargs sha256sum)
	mer=("$rp" merge --transcripts "$art/t.jsonl" -o M "$art/B")
	steps=$(count_steps 'rm -rf M' "${mer[@]}")
	[ "$steps" -ge 50 ]
	read -r -a at < <(crash_points "$steps" "$seed" "$npoints")
	killed=0 complete=0 refused=0
	for n in "${at[@]}"; do
		rm -rf M
		rc=0
		HB_TEST_KILL_AT=$n "${mer[@]}" >/dev/null 2>&1 || rc=$?
		if ((rc != 0)); then
			[ "$rc" -eq 137 ]
			killed=$((killed + 1))
		fi
		published_whole M "$art/ref" "$n"
		case $(complete_or_refused M "$art/ref" "$n") in
		complete) complete=$((complete + 1)) ;;
		refused) refused=$((refused + 1)) ;;
		*) return 1 ;;
		esac
		"${mer[@]}" >/dev/null
		resumed_same M "$art/ref" "$n"
		# the inputs are read, never touched
		[ "$(cd "$art/B" && ls -A | sort | xargs sha256sum)" = "$inputs" ]
	done
	[ $((complete + refused)) -eq "${#at[@]}" ]
	[ "$killed" -ge $((${#at[@]} * 8 / 10)) ]
	[ "$refused" -gt 0 ]
	echo "# seed $seed: $steps I/O steps, ${#at[@]} points (first ${at[0]}, last ${at[-1]}): $killed killed; complete after $complete, refused by the merge proof after $refused; every resume byte-identical" >&3
}
