#!/usr/bin/env bats
# Crash consistency of every file hb-run publishes at the end of a run:
# --stream-trace, --features (a shard, then features.json), --router-ahead
# (predictions.hbtrace), --deadlines and --dump-routes, all in one run over
# the outputs of an older run with another prompt and length (so each file
# has an old and a new content).  The run is killed by the crash seam
# (HB_TEST_KILL_AT, see tests/cli/crash.bats) at HB_CRASH_POINTS of its I/O
# steps (10 in `make test`, 100 in `make test-crash`; the last min(8, N/2)
# and others drawn from HB_CRASH_SEED).  After each kill every output is
# whole and either the old one or the new one (a manifest new only over
# new shards); the next run publishes the new outputs and leaves no
# temporary file.  The stream trace and the deadlines carry measured times,
# so "the new one" is, for those two, a whole file the reader accepts with
# the new run's shape (its token and layer records, its positions); the
# others are compared byte for byte.  hb-run resumes nothing (the session
# library's save and restore are not an hb-run option), so there is no
# resumed run to compare.
#
# Binaries come from "${HB_BUILD:-build}" under the repository root.

bats_require_minimum_version 1.5.0

setup_file() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	"$build/bin/hb-convert" -q "$root/tests/fixtures/upstream/general/checkpoint" "$BATS_FILE_TMPDIR/general.gguf"
}

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	bin=$build/bin
	cd "$BATS_TEST_TMPDIR"
	art=$BATS_FILE_TMPDIR/general.gguf
	seed=${HB_CRASH_SEED:-20261201}
	npoints=${HB_CRASH_POINTS:-10}
	load crash_lib
}

# hb-run over directory $1 with prompt $2 and $3 new tokens.
run_into() { # dir tokens n
	"$bin/hb-run" -q -m "$art" --tokens "$2" -n "$3" --threads 2 --expert-cache 25% --expert-predict none \
		--stream-trace "$1/st.bin" --features "$1/F" --router-ahead "$1/RA" --deadlines "$1/dl.json" \
		--dump-routes "$1/r.trace"
}

# The timing-free shape of a stream trace or a deadlines file, or a refusal.
shape() { # file
	case $1 in
	*.bin)
		local recs
		recs=$("$bin/hb-trace" cat "$1") || return 1
		python3 -c 'import json, sys
for l in sys.stdin:
    r = json.loads(l)
    if r["kind"] == "token":
        print("token", r["token"], r["tokens"], r["phase"])
    elif r["kind"] == "layer":
        print("layer", r["token"], r["layer"], r["tokens"])' <<<"$recs"
		;;
	*.json)
		python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(d["format"], d["sequence"], d["prompt_tokens"], d["layers"])
for r in d["records"]:
    print(r[0], r[1])' "$1"
		;;
	esac
}

# $1/$2 is the old or the new output ("old" / "new" on stdout).
old_or_new() { # dir file point
	local got=$1/$2
	if cmp -s "$got" "old/$2"; then
		echo old
		return 0
	fi
	case $2 in
	st.bin | dl.json)
		local s
		s=$(shape "$got" 2>/dev/null) || { echo "point $3: $2 is not a whole file" >&2; return 1; }
		if [ "$s" = "$(shape "new/$2")" ]; then
			echo new
			return 0
		fi
		;;
	*)
		if cmp -s "$got" "new/$2"; then
			echo new
			return 0
		fi
		;;
	esac
	echo "point $3: $2 is neither the old nor the new output" >&2
	return 1
}

@test "crash: hb-run's published outputs (stream trace, features, router-ahead, deadlines, routes) killed at seeded I/O steps: each old or new, no temporary file after the rerun" {
	outs=(st.bin dl.json r.trace RA/predictions.hbtrace F/features-000000.safetensors F/features.json)
	mkdir old new
	run_into old 3,40,77 2 >/dev/null
	run_into new 3,40,77,114,151 4 >/dev/null
	for f in "${outs[@]}"; do
		[ -s "old/$f" ]
		[ -s "new/$f" ]
		if cmp -s "old/$f" "new/$f"; then
			echo "$f: the old and the new runs do not differ" >&2
			return 1
		fi
	done
	if [ "$(shape old/st.bin)" = "$(shape new/st.bin)" ]; then
		echo "the two stream traces have one shape" >&2
		return 1
	fi
	reset_old() { rm -rf O; cp -r old O; }
	steps=$(count_steps reset_old run_into O 3,40,77,114,151 4)
	[ "$steps" -ge 20 ]
	read -r -a at < <(crash_points "$steps" "$seed" "$npoints")
	killed=0 olds=0 news=0
	for n in "${at[@]}"; do
		reset_old
		rc=0
		HB_TEST_KILL_AT=$n run_into O 3,40,77,114,151 4 >/dev/null 2>&1 || rc=$?
		if ((rc != 0)); then
			[ "$rc" -eq 137 ]
			killed=$((killed + 1))
		fi
		for f in "${outs[@]}"; do
			v=$(old_or_new O "$f" "$n")
			case $v in
			old) olds=$((olds + 1)) ;;
			new) news=$((news + 1)) ;;
			*) return 1 ;;
			esac
			if [[ $f == F/features.json && $v == new ]]; then
				# the manifest is published after its shard
				cmp O/F/features-000000.safetensors new/F/features-000000.safetensors
			fi
		done
		run_into O 3,40,77,114,151 4 >/dev/null
		for f in "${outs[@]}"; do
			[ "$(old_or_new O "$f" "$n")" = new ]
		done
		left=$(find O -name '*hbtmp*')
		[ -z "$left" ] || { echo "point $n: left $left" >&2; return 1; }
	done
	[ "$killed" -ge $((${#at[@]} / 2)) ]
	[ "$olds" -gt 0 ]
	[ "$news" -gt 0 ]
	echo "# seed $seed: $steps I/O steps, ${#at[@]} points (first ${at[0]}, last ${at[-1]}): $killed killed; outputs old $olds times, new $news times; every rerun published the new ones" >&3
}
