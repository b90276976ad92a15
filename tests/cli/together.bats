#!/usr/bin/env bats
# hb-replay label --together N (cmd/hb-replay/together.c): N transcripts'
# chunks run as one batch (hb_session_forward_batch).  On the CPU reference
# the shards and manifests must be byte-identical to a run of one
# transcript at a time: for several N, for a worker of --shard, with
# shards cut small, and resumed part way through a transcript.  It labels
# routes only, so the captures and the streaming cache are refused with it.
#
# Needs python3 (standard library).

bats_require_minimum_version 1.5.0

setup_file() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	cd "$BATS_FILE_TMPDIR"
	"$build/bin/hb-convert" -q "$root/tests/fixtures/upstream/realshape/checkpoint" r.gguf
	# seven transcripts of 3 to 40 tokens: the batch's sequences end at different chunks
	python3 - <<'PY' >in.jsonl
import json, random
r = random.Random(3)
for o in range(7):
    print(json.dumps({"owner": o, "thread": "t%d" % o, "turn": 0,
                      "tokens": [r.randrange(700) for _ in range(r.randint(3, 40))]}))
PY
	"$build/bin/hb-replay" label -m r.gguf -o ONE --chunk 5 in.jsonl >/dev/null
	"$build/bin/hb-replay" label -m r.gguf -o SMALL --chunk 5 --max-shard-bytes 3000 in.jsonl >/dev/null
}

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	rp=$build/bin/hb-replay
	F=$BATS_FILE_TMPDIR
	cd "$BATS_TEST_TMPDIR"
}

@test "together: 2, 3, 7 and 64 transcripts a batch write the shards and manifests of one at a time, byte for byte" {
	[ "$(ls "$F/ONE" | wc -l)" -eq 14 ]
	for n in 2 3 7 64; do
		run --separate-stderr "$rp" label -m "$F/r.gguf" -o L$n --chunk 5 --together $n "$F/in.jsonl"
		[ "$status" -eq 0 ]
		[ "$output" = "labelled 7 sequences, 188 positions, 1504 records: 7 shards written, 0 kept, 0 partial discarded" ]
		diff -r "$F/ONE" L$n
	done
}

@test "together: one worker of --shard 1/2, and shards cut at 3000 bytes, match their one-at-a-time runs" {
	"$rp" label -m "$F/r.gguf" -o S1 --chunk 7 --shard 1/2 "$F/in.jsonl" >/dev/null
	"$rp" label -m "$F/r.gguf" -o S3 --chunk 7 --shard 1/2 --together 3 "$F/in.jsonl" >/dev/null
	diff -r S1 S3
	"$rp" label -m "$F/r.gguf" -o M --chunk 5 --max-shard-bytes 3000 --together 4 "$F/in.jsonl" >/dev/null
	diff -r "$F/SMALL" M
}

@test "together: a run resumed inside a transcript (its later manifests gone) ends byte-identical" {
	cp -r "$F/SMALL" Q
	for f in $(ls Q | grep 'json$' | tail -50); do rm "Q/$f"; done
	run --separate-stderr "$rp" label -m "$F/r.gguf" -o Q --chunk 5 --max-shard-bytes 3000 --together 3 --json "$F/in.jsonl"
	[ "$status" -eq 0 ]
	python3 -c 'import json, sys; d = json.loads(sys.argv[1]); assert d["positions_skipped"] == 34 and d["shards_kept"] == 45, d' "$output"
	diff -r "$F/SMALL" Q
}

@test "together: refused with captures, the streaming cache, outside label, and past 64" {
	run --separate-stderr "$rp" label -m "$F/r.gguf" -o X --together 2 --capture-hidden 1 "$F/in.jsonl"
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-replay: --together labels routes only: not with --capture-hidden, --features, --router-ahead or --expert-cache"* ]]
	run --separate-stderr "$rp" label -m "$F/r.gguf" -o X --together 2 --expert-cache 50% "$F/in.jsonl"
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-replay: --together labels routes only:"* ]]
	run --separate-stderr "$rp" label -m "$F/r.gguf" -o X --together 65 "$F/in.jsonl"
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-replay: --together takes 1..64, not '65'"* ]]
	run --separate-stderr "$rp" split --together 2 -o Y "$F/in.jsonl"
	[ "$status" -eq 2 ]
	[[ $stderr == "hb-replay: --together is for label"* ]]
	[ ! -e X ]
	[ ! -e Y ]
}
