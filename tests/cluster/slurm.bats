#!/usr/bin/env bats
# The Slurm flow of scripts/replay-cluster under a real Slurm (issue 19):
# Debian's slurm-wlm and munge, slurmctld and slurmd on this machine,
# configured here in a temporary directory (ports chosen free, state,
# spool, logs and the munge socket all in it) and stopped at the end.  The
# label array (8 tasks, one shard each) and the merge job after it are
# submitted, waited for and checked against one unsharded run, byte for
# byte; a task killed by SIGKILL fails the dependency, and the driver run
# again resumes it (the other tasks run twice and change nothing); the
# merge job run over incomplete shards fails loudly.  make test-slurm runs
# this file, as root.

bats_require_minimum_version 1.5.0

setup_file() {
	load lib
	[ "$(id -u)" -eq 0 ] || { echo "make test-slurm starts slurmd and munged: run it as root" >&2; return 1; }
	cluster_setup_file
	S=$BATS_FILE_TMPDIR/slurm
	mkdir -p "$S/munge" "$S/state" "$S/spool" "$S/log"
	chmod 700 "$S/munge"
	mungekey -c -k "$S/munge/munge.key"
	munged -f --key-file="$S/munge/munge.key" --socket="$S/munge/sock" --pid-file="$S/munge/munged.pid" \
		--log-file="$S/munge/munged.log" --seed-file="$S/munge/munged.seed"
	read -r p1 p2 < <(python3 -c "
import socket
s = [socket.socket() for _ in range(2)]
for x in s:
    x.bind(('127.0.0.1', 0))
print(*[x.getsockname()[1] for x in s])")
	host=$(hostname -s)
	cat >"$S/slurm.conf" <<CONF
ClusterName=hebrus-test
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$p1
SlurmdPort=$p2
AuthType=auth/munge
AuthInfo=socket=$S/munge/sock
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MinJobAge=3600
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=hebrus Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
	export SLURM_CONF=$S/slurm.conf
	slurmctld
	slurmd
	# the node answers (a bound on waiting, not a timing assertion)
	for _ in $(seq 120); do
		[[ $(sinfo -h -o %t 2>/dev/null) == idle ]] && return 0
		sleep 1
	done
	echo "slurmd did not come up: $(sinfo 2>&1)" >&2
	tail -n 20 "$S/log/slurmctld.log" "$S/log/slurmd.log" >&2
	return 1
}

teardown_file() {
	S=$BATS_FILE_TMPDIR/slurm
	export SLURM_CONF=$S/slurm.conf
	scancel --user=root 2>/dev/null || true
	# stop each daemon by its pid and wait until it is gone, so that none
	# still writes into the directory bats removes next
	for f in "$S/slurmd.pid" "$S/slurmctld.pid" "$S/munge/munged.pid"; do
		[[ -f $f ]] || continue
		pid=$(cat "$f")
		kill "$pid" 2>/dev/null || continue
		for _ in $(seq 100); do
			kill -0 "$pid" 2>/dev/null || break
			[[ $(ps -o stat= -p "$pid" 2>/dev/null) == Z* ]] && break
			sleep 0.1
		done
	done
}

setup() {
	load lib
	cluster_paths
	S=$BATS_FILE_TMPDIR/slurm
	export SLURM_CONF=$S/slurm.conf
	rc=$root/scripts/replay-cluster
	so=$build/tests/tools/crash-at.so
	cd "$BATS_TEST_TMPDIR"
}

# wait_for JOB: until Slurm holds no task of JOB pending or running (a bound
# of 10 minutes on the wait, not a timing assertion)
wait_for() {
	for _ in $(seq 600); do
		[[ -z $(squeue -h -j "$1" 2>/dev/null) ]] && return 0
		sleep 1
	done
	echo "job $1 still queued: $(squeue -j "$1")" >&2
	return 1
}

# states JOB: "STATE EXIT" of each of its tasks, sorted and counted
states() {
	scontrol show job "$1" | grep -o 'JobState=[A-Z_]* \|ExitCode=[0-9:]*' | paste -d ' ' - - |
		sed 's/JobState=//; s/ExitCode=//; s/  */ /g' | sort | uniq -c | sed 's/^ *//'
}

# submit ARGS...: the driver; sets label and merge to the job ids it printed
submit() {
	run --separate-stderr "$rc" slurm --replay "$rp" --shards 8 --cpus 1 -m "$art/rs.gguf" -o W "$art/t.jsonl" "$@"
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	label=$(sed -n 's/^label job \([0-9]*\): sbatch .*/\1/p' <<<"$output")
	merge=$(sed -n 's/^merge job \([0-9]*\): sbatch .*--dependency=afterok:'"$label"' .*/\1/p' <<<"$output")
	[ -n "$label" ]
	[ -n "$merge" ]
}

@test "slurm: the label array and the merge after it give the unsharded labels, byte for byte" {
	submit -- --max-shard-bytes 20000
	wait_for "$merge"
	[ "$(states "$label")" = "8 COMPLETED 0:0" ]
	[ "$(states "$merge")" = "1 COMPLETED 0:0" ]
	diff -r "$art/U" W/merged
	[ "$(ls W/shards | sed -n 's/^labels-\(....-of-0008\)-.*/\1/p' | sort -u | wc -l)" -eq 8 ]
	[ "$(cat W/logs/merge-$merge.out)" = "merge.sbatch: $PWD/W/merged covers every transcript of $art/t.jsonl exactly once" ]
}

@test "slurm: a task killed by SIGKILL fails the merge's dependency; the driver run again resumes it and changes nothing else" {
	# hb-replay as the tasks run it: the first to reach its 20th disk change
	# dies there, once (tests/tools/crash-at.c)
	cat >replay <<SH
#!/bin/sh
HB_CRASH_AT=20 HB_CRASH_ONCE=$PWD/killed LD_PRELOAD=$so exec $rp "\$@"
SH
	chmod +x replay
	rp=$PWD/replay
	submit -- --max-shard-bytes 20000
	wait_for "$label"
	wait_for "$merge"
	[ -e killed ]
	[ "$(states "$label")" = "7 COMPLETED 0:0
1 FAILED 0:9" ]
	[ "$(states "$merge")" = "1 CANCELLED 0:0" ]
	[ ! -e W/merged ]
	before=$(tree W/shards)
	submit -- --max-shard-bytes 20000
	wait_for "$merge"
	[ "$(states "$label")" = "8 COMPLETED 0:0" ]
	[ "$(states "$merge")" = "1 COMPLETED 0:0" ]
	diff -r "$art/U" W/merged
	# every shard complete before is untouched (the same bytes and
	# modification time): seven tasks ran twice and wrote nothing, the
	# killed one wrote only what it lacked
	[ "$(comm -23 <(grep '\.json ' <<<"$before") <(tree W/shards))" = "" ]
	[ "$(grep -l ': 0 shards written, ' W/logs/label-"$label"_*.out | wc -l)" -eq 7 ]
}

@test "slurm: the merge job over incomplete shards fails loudly and writes nothing" {
	export HB_REPLAY=$rp HB_MODEL=$art/rs.gguf HB_TRANSCRIPTS=$art/t.jsonl HB_SHARDS=$PWD/shards HB_MERGED=$PWD/merged
	export HB_LABEL_ARGS="--max-shard-bytes 20000"
	for i in 0 1 3; do
		SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_TASK_COUNT=4 "$root/scripts/slurm/label.sbatch" >/dev/null 2>&1
	done
	id=$(sbatch --parsable --output="$PWD/merge-%j.out" --export=ALL "$root/scripts/slurm/merge.sbatch")
	wait_for "$id"
	[ "$(states "$id")" = "1 FAILED 1:0" ]
	[ ! -e merged ]
	grep -qx "merge.sbatch: FAILED: the shards of $PWD/shards do not cover $art/t.jsonl (exit 1); $PWD/merged not written; proof in $PWD/merged.proof.json:" merge-$id.out
	grep -qx "merge.sbatch:   line\[3\]: sequence 2 is in no shard" merge-$id.out
}
