# Shared by the cluster tests (tests/cli/cluster.bats, tests/cluster/*.bats):
# one artifact, a seeded transcript set and its unsharded labels, made once
# per file in setup_file.  Sourced, not run.

# cluster_paths: sets root, build, rp (hb-replay), art (the directory of the
# artifact rs.gguf, the transcripts t.jsonl and the unsharded labels U)
cluster_paths() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	rp=$build/bin/hb-replay
	art=$BATS_FILE_TMPDIR
}

# 24 transcripts of 5 owners, 5 to 39 tokens each (seeded: the same every
# run); shards of at most 20000 bytes, so that workers cut several shards
# and an owner change cuts one too
cluster_setup_file() {
	cluster_paths
	"$build/bin/hb-convert" -q "$root/tests/fixtures/upstream/realshape/checkpoint" "$art/rs.gguf"
	python3 - "$art/t.jsonl" <<'PY'
import json, random, sys
r = random.Random(5)
with open(sys.argv[1], "w") as f:
    for i in range(24):
        f.write(json.dumps({"owner": i % 5, "thread": i, "turn": 0,
                            "tokens": [r.randrange(1000) for _ in range(r.randrange(5, 40))]}) + "\n")
PY
	"$rp" label -m "$art/rs.gguf" -o "$art/U" --max-shard-bytes 20000 "$art/t.jsonl" >/dev/null
}

# tree DIR: every file of DIR with its size, SHA-256 and modification time,
# one a line, sorted: two equal listings are the same bytes, never rewritten
tree() {
	(cd "$1" && find . -type f -printf '%P %s %T@\n' | sort | while read -r f s t; do
		echo "$f $s $(sha256sum <"$f" | cut -c1-64) $t"
	done)
}
