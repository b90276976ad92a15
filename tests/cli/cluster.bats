#!/usr/bin/env bats
# Replay beyond one machine (issue 19, hb-replay(1) CLUSTERS): the GNU
# parallel flow of scripts/replay-cluster labels a transcript set as 8
# shards with 2 jobs at once and merges them into labels byte-identical to
# one unsharded run; a task run twice, and the whole flow run again, change
# nothing; merge refuses a shard made by another artifact, tokenizer digest
# or split and names it.  The Slurm scripts are run here as Slurm would run
# them (the array task's environment), and the driver against a stand-in
# sbatch that records what it was asked; make test-slurm runs them under a
# real Slurm, make test-crash kills them.
#
# Needs GNU parallel (scripts/bootstrap installs it) and python3 (standard
# library).

bats_require_minimum_version 1.5.0

setup_file() {
	load ../cluster/lib
	cluster_setup_file
}

setup() {
	load ../cluster/lib
	cluster_paths
	rc=$root/scripts/replay-cluster
	cd "$BATS_TEST_TMPDIR"
}

@test "cluster: GNU parallel runs 8 shards 2 at a time; the merged labels are byte-identical to one unsharded run" {
	run --separate-stderr "$rc" parallel --replay "$rp" --shards 8 -j 2 -m "$art/rs.gguf" -o W "$art/t.jsonl" \
		-- --max-shard-bytes 20000
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	[ "${lines[2]}" = "merged: $PWD/W/merged" ]
	[[ ${lines[0]} == "label: parallel --will-cite --halt now\\,fail=1 --joblog $PWD/W/logs/parallel.joblog -j 2 '$rp label -m $art/rs.gguf -o $PWD/W/shards --shard {}/8 --max-shard-bytes 20000 $art/t.jsonl >$PWD/W/logs/label-{}.out 2>&1' ::: 0 1 2 3 4 5 6 7" ]]
	# eight workers ran, each exited 0 once
	[ "$(ls W/shards | sed -n 's/^labels-\(....-of-0008\)-.*/\1/p' | sort -u | wc -l)" -eq 8 ]
	[ "$(awk 'NR > 1 && $7 == 0' W/logs/parallel.joblog | wc -l)" -eq 8 ]
	# the same files, the same bytes
	[ "$(ls W/merged)" = "$(ls "$art/U")" ]
	diff -r "$art/U" W/merged
	python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert (j['coverage'], j['sequences'], j['transcripts_checked'], j['problems']) == (True, 24, True, []), j
" W/merged.proof.json
}

@test "cluster: a task run twice, and the whole flow run again, change nothing" {
	"$rc" parallel --replay "$rp" --shards 8 -j 2 -m "$art/rs.gguf" -o W "$art/t.jsonl" -- --max-shard-bytes 20000 >/dev/null
	before=$(tree W/shards; tree W/merged)
	kept=$(ls W/shards/labels-0003-of-0008-*.json | wc -l)
	run --separate-stderr "$rp" label -m "$art/rs.gguf" -o W/shards --shard 3/8 --max-shard-bytes 20000 "$art/t.jsonl"
	[ "$status" -eq 0 ]
	[ "$output" = "labelled 0 sequences, 0 positions, 0 records: 0 shards written, $kept kept, 0 partial discarded" ]
	run --separate-stderr "$rc" parallel --replay "$rp" --shards 8 -j 2 -m "$art/rs.gguf" -o W "$art/t.jsonl" \
		-- --max-shard-bytes 20000
	[ "$status" -eq 0 ]
	[ "$(tree W/shards; tree W/merged)" = "$before" ]
	diff -r "$art/U" W/merged
}

@test "cluster: merge refuses a shard of another artifact, tokenizer digest or split, and names it" {
	"$build/bin/hb-convert" -q "$root/tests/fixtures/upstream/realshape-packed/checkpoint" packed.gguf
	other=$(printf '%064d' 7)
	for d in A T; do
		"$rp" label -m "$art/rs.gguf" -o $d --shard 0/3 --max-shard-bytes 20000 "$art/t.jsonl" >/dev/null
		"$rp" label -m "$art/rs.gguf" -o $d --shard 1/3 --max-shard-bytes 20000 "$art/t.jsonl" >/dev/null
	done
	"$rp" label -m packed.gguf -o A --shard 2/3 --max-shard-bytes 20000 "$art/t.jsonl" >/dev/null
	"$rp" label -m "$art/rs.gguf" -o T --shard 2/3 --max-shard-bytes 20000 --text-digest "$other" "$art/t.jsonl" >/dev/null
	n=$(ls A/*.json | wc -l)
	good=$(ls A/labels-000[01]-*.json | wc -l)
	for d in A T; do
		run --separate-stderr "$rp" merge --transcripts "$art/t.jsonl" $d
		[ "$status" -eq 1 ]
		[ "$stderr" = "hb-replay: replay-coverage: $d/labels-0002-of-0003-000000.json: artifact or tokenizer digest differs from the other shards' ($good of $n agree with $d/labels-0000-of-0003-000000.json)" ]
		run --separate-stderr "$rp" merge --transcripts "$art/t.jsonl" -o M $d
		[ "$status" -eq 1 ]
		[ ! -e M ]
	done
	# a shard of the validation split among the train split's
	"$rp" split --seed 3 --validation 0.4 --temporal 0 -o s "$art/t.jsonl" >/dev/null
	"$rp" label -m "$art/rs.gguf" -o S --shard 0/2 --max-shard-bytes 20000 s/train.jsonl >/dev/null
	"$rp" label -m "$art/rs.gguf" -o S --shard 1/2 --max-shard-bytes 20000 s/train.jsonl >/dev/null
	run --separate-stderr "$rp" merge --transcripts s/train.jsonl S
	[ "$status" -eq 0 ]
	"$rp" label -m "$art/rs.gguf" -o S --max-shard-bytes 20000 s/validation.jsonl >/dev/null
	first=$(python3 -c "import json; print(json.loads(open('s/validation.jsonl').readline())['sequence'])")
	run --separate-stderr "$rp" merge --transcripts s/train.jsonl S
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-replay: replay-coverage: S/labels-0000-of-0001-000000.json: sequence $first is not in the transcripts (a shard of another transcript file or split)" ]
}

@test "cluster: the Slurm scripts, run as Slurm runs an array and its merge, give the unsharded labels" {
	export HB_REPLAY=$rp HB_MODEL=$art/rs.gguf HB_TRANSCRIPTS=$art/t.jsonl HB_SHARDS=$PWD/shards HB_MERGED=$PWD/merged
	export HB_LABEL_ARGS="--max-shard-bytes 20000" SLURM_ARRAY_TASK_COUNT=8 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=7
	for i in 7 0 3 1 2 6 5 4; do
		SLURM_ARRAY_TASK_ID=$i "$root/scripts/slurm/label.sbatch" 2>/dev/null >/dev/null
	done
	# a requeued task resumes and changes nothing
	SLURM_ARRAY_TASK_ID=5 run --separate-stderr "$root/scripts/slurm/label.sbatch"
	[ "$status" -eq 0 ]
	[[ $output == "labelled 0 sequences, 0 positions, 0 records: 0 shards written, "*" kept, 0 partial discarded" ]]
	[ "$stderr" = "label.sbatch: task 5/8 on $(hostname)" ]
	run --separate-stderr "$root/scripts/slurm/merge.sbatch"
	[ "$status" -eq 0 ]
	[ "$stderr" = "merge.sbatch: $PWD/merged covers every transcript of $art/t.jsonl exactly once" ]
	diff -r "$art/U" merged
}

@test "cluster: label.sbatch refuses an array it cannot shard; merge.sbatch fails loudly on incomplete coverage and writes nothing" {
	export HB_REPLAY=$rp HB_MODEL=$art/rs.gguf HB_TRANSCRIPTS=$art/t.jsonl HB_SHARDS=$PWD/shards HB_MERGED=$PWD/merged
	export HB_LABEL_ARGS="--max-shard-bytes 20000"
	SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=8 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=14 \
		run --separate-stderr "$root/scripts/slurm/label.sbatch"
	[ "$status" -eq 1 ]
	[ "$stderr" = "label.sbatch: the array must be 0-7 without a stride (it is 0-14 of 8 tasks)" ]
	[ ! -e shards ]
	run --separate-stderr env -u SLURM_ARRAY_TASK_ID "$root/scripts/slurm/label.sbatch"
	[ "$status" -eq 1 ]
	[[ $stderr == *"label.sbatch: not an array task (submit with --array=0-(N-1))" ]]
	for i in 0 1 3; do
		SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_TASK_COUNT=4 "$root/scripts/slurm/label.sbatch" >/dev/null 2>&1
	done
	run --separate-stderr "$root/scripts/slurm/merge.sbatch"
	[ "$status" -eq 1 ]
	[ ! -e merged ]
	[ "${stderr_lines[0]}" = "hb-replay: replay-coverage: line[3]: sequence 2 is in no shard" ]
	[ "${stderr_lines[1]}" = "merge.sbatch: FAILED: the shards of $PWD/shards do not cover $art/t.jsonl (exit 1); $PWD/merged not written; proof in $PWD/merged.proof.json:" ]
	[ "${stderr_lines[2]}" = "merge.sbatch:   line[3]: sequence 2 is in no shard" ]
	[ "${stderr_lines[8]}" = "merge.sbatch:   transcripts: shards hold 18 sequences, the transcripts 24" ]
	[ "${#stderr_lines[@]}" -eq 10 ]
	[ "${stderr_lines[-1]}" = "merge.sbatch: rerun the failed label tasks (they resume), then this job" ]
	python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j['coverage'] is False and j['problems_total'] == 7, j
" merged.proof.json
}

@test "cluster: the driver submits the array and then the merge after it, and prints what it submitted" {
	mkdir bin
	cat >bin/sbatch <<'SH'
#!/bin/sh
# a stand-in: records its arguments, answers as sbatch --parsable does
n=$(($(cat "$SB_LOG.n" 2>/dev/null || echo 1000) + 1))
echo "$n" >"$SB_LOG.n"
printf '%s\n' "$*" >>"$SB_LOG"
echo "$n"
SH
	chmod +x bin/sbatch
	export SB_LOG=$PWD/sbatch.log PATH=$PWD/bin:$PATH
	run --separate-stderr "$rc" slurm --replay "$rp" --shards 16 --gpu --cpus 4 --partition gpu --time 2:00:00 \
		-m "$art/rs.gguf" -o W "$art/t.jsonl" -- --max-shard-bytes 20000
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	env="--export=ALL,HB_REPLAY=$rp,HB_TRANSCRIPTS=$art/t.jsonl,HB_SHARDS=$PWD/W/shards,HB_MERGED=$PWD/W/merged"
	label="--parsable --kill-on-invalid-dep=yes --partition=gpu --array=0-15 --output=$PWD/W/logs/label-%A_%a.out $env,HB_MODEL=$art/rs.gguf,HB_LABEL_ARGS=--backend cuda --max-shard-bytes 20000 --cpus-per-task=4 --time=2:00:00 --gres=gpu:1 $root/scripts/slurm/label.sbatch"
	merge="--parsable --kill-on-invalid-dep=yes --partition=gpu --dependency=afterok:1001 --output=$PWD/W/logs/merge-%j.out $env $root/scripts/slurm/merge.sbatch"
	[ "$(cat sbatch.log)" = "$label
$merge" ]
	[[ ${lines[0]} == "label job 1001: sbatch --parsable "*" $root/scripts/slurm/label.sbatch" ]]
	[[ ${lines[1]} == "merge job 1002: sbatch --parsable --kill-on-invalid-dep=yes --partition=gpu --dependency=afterok:1001 "* ]]
	[ "${lines[2]}" = "wait for job 1002 (squeue -j 1002; sacct -j 1001,1002); the labels are then in $PWD/W/merged" ]
	[ "${#lines[@]}" -eq 3 ]
	# what it printed is what it ran
	eval "set -- ${lines[0]#label job 1001: }"
	shift
	[ "$*" = "$label" ]
	run --separate-stderr "$rc" slurm --replay "$rp" --gpus 0,1 -m "$art/rs.gguf" -o W "$art/t.jsonl"
	[ "$status" -eq 2 ]
	[ "$stderr" = "replay-cluster: --sshloginfile and --gpus are for parallel; slurm takes --gpu" ]
}

@test "cluster: GNU parallel over an --sshloginfile runs the same flow (here its one host is this machine, ':')" {
	printf '2/:\n' >hosts
	run --separate-stderr "$rc" parallel --replay "$rp" --sshloginfile hosts -m "$art/rs.gguf" -o W "$art/t.jsonl" \
		-- --max-shard-bytes 20000
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == "label: parallel --will-cite --halt now\\,fail=1 --joblog $PWD/W/logs/parallel.joblog -j 2 --sshloginfile $PWD/hosts '"* ]]
	[ "$(awk 'NR > 1 && $2 == ":" && $7 == 0' W/logs/parallel.joblog | wc -l)" -eq 8 ]
	diff -r "$art/U" W/merged
}

@test "cluster: GNU parallel with --gpus runs one job per GPU, each with its own CUDA_VISIBLE_DEVICES" {
	# hb-replay as a CUDA build would be run: it records the GPU it was
	# given and drops --backend cuda (this build has no GPU backend)
	cat >gpu-replay <<SH
#!/bin/sh
[ "\$1" = label ] && echo "\$CUDA_VISIBLE_DEVICES" >>$PWD/gpus
n=\$#; i=0; skip=
for a in "\$@"; do
	i=\$((i + 1)); shift
	if [ -n "\$skip" ]; then skip=; continue; fi
	if [ "\$a" = --backend ]; then skip=1; continue; fi
	set -- "\$@" "\$a"
done
exec $rp "\$@"
SH
	chmod +x gpu-replay
	export TMPDIR=$PWD  # the GPU locks of this test only
	run --separate-stderr "$rc" parallel --replay "$PWD/gpu-replay" --gpus 3,5 -m "$art/rs.gguf" -o W "$art/t.jsonl" \
		-- --max-shard-bytes 20000
	[ "$status" -eq 0 ]
	[[ ${lines[0]} == *" -j 2 'g=; for c in 3 5; do exec 9>"* ]]
	[[ ${lines[0]} == *"CUDA_VISIBLE_DEVICES=\$g $PWD/gpu-replay label -m $art/rs.gguf -o $PWD/W/shards --shard {}/8 --backend cuda --max-shard-bytes 20000 "* ]]
	[ "$(wc -l <gpus)" -eq 8 ]
	[ "$(grep -cvx '[35]' gpus)" -eq 0 ]
	diff -r "$art/U" W/merged
	# a GPU whose lock is held (another job on this host) is not taken
	rm gpus
	exec 8>"$TMPDIR/hb-replay-gpu-3.lock"
	flock -n 8
	run --separate-stderr "$rc" parallel --replay "$PWD/gpu-replay" --gpus 3,5 --shards 1 -m "$art/rs.gguf" -o W1 \
		"$art/t.jsonl" -- --max-shard-bytes 20000
	[ "$status" -eq 0 ]
	[ "$(cat gpus)" = 5 ]
	exec 8>&-
}

@test "cluster: merge -o refuses what it cannot re-cut exactly, and writes nothing" {
	"$rp" label -m "$art/rs.gguf" -o X --shard 0/2 --max-shard-bytes 20000 "$art/t.jsonl" >/dev/null
	"$rp" label -m "$art/rs.gguf" -o X --shard 1/2 --max-shard-bytes 30000 "$art/t.jsonl" >/dev/null
	run --separate-stderr "$rp" merge --transcripts "$art/t.jsonl" -o M X
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-replay: replay-manifest: X/labels-0001-of-0002-000000.json: geometry or shard size differs from X/labels-0000-of-0002-000000.json's" ]
	[ ! -e M ]
	"$rp" label -m "$art/rs.gguf" -o H --capture-hidden 1 --max-shard-bytes 200000 "$art/t.jsonl" >/dev/null
	run --separate-stderr "$rp" merge --transcripts "$art/t.jsonl" -o M H
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-replay: replay-manifest: H/labels-0000-of-0001-000000.json: has a hidden-state sidecar, which merge -o does not carry" ]
	[ ! -e M ]
	run --separate-stderr "$rp" merge --transcripts "$art/t.jsonl" -o H H
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-replay: H: is also an input of the merge" ]
	run --separate-stderr "$rp" merge -o M "$art/U"
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-replay: merge -o needs --transcripts
try 'hb-replay --help'" ]
	[ ! -e M ]
	# the unsharded labels merged are themselves
	run --separate-stderr "$rp" merge --transcripts "$art/t.jsonl" -o M "$art/U"
	[ "$status" -eq 0 ]
	diff -r "$art/U" M
}
