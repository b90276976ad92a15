#!/usr/bin/env bats
# hb-convert, the whole binary, on synthetic checkpoints written by
# scripts/make-synthetic-checkpoint.py (contract-control inputs, not upstream
# captures): exclusions accounted exactly, shard sets and expert layouts that
# hold the same weights give the same stores, and defective sources are
# refused with the exact diagnostic line and exit status, publishing nothing.
# Byte-level checks of the same inputs are in
# tests/unit/test_convert_synthetic.c.
#
# Binaries come from "${HB_BUILD:-build}" under the repository root.

bats_require_minimum_version 1.5.0

setup_file() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	gen=$root/scripts/make-synthetic-checkpoint.py
	cd "$BATS_FILE_TMPDIR"
	# the same weights (same --seed) in three shards + index, and in one file
	python3 "$gen" --out three --vision --mtp --shards 3 --summary three.json >/dev/null
	python3 "$gen" --out one --vision --mtp --summary one.json >/dev/null
}

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	conv=$build/bin/hb-convert
	dump=$build/tests/tools/gguf-dump
	gen=$root/scripts/make-synthetic-checkpoint.py
	for t in "$conv" "$dump"; do
		if [[ ! -x $t ]]; then
			echo "missing $t: build first (make DEVELOPER=1 all units)" >&2
			return 1
		fi
	done
	cd "$BATS_TEST_TMPDIR"
	ln -s "$BATS_FILE_TMPDIR/three" three
	ln -s "$BATS_FILE_TMPDIR/one" one
}

# jq-like without jq: print one line per Python expression over the parsed
# documents r (FILE1) and s (FILE2, optional).  One interpreter per call.
json() {
	python3 - "$@" <<'EOF'
import json, sys
docs = [json.load(open(f)) for f in sys.argv[1:] if not f.startswith("=")]
r, s = docs[0], (docs[1] if len(docs) > 1 else None)
for e in (a[1:] for a in sys.argv[1:] if a.startswith("=")):
    print(eval(e))
EOF
}

# Nothing of a refused conversion is left in the working directory.
nothing_published() {
	[ ! -e out.gguf ]
	[ "$(ls -A . | grep -v -x -e three -e one -e ck)" = "" ]
}

@test "synthetic: the generator's PLE hash buffers equal those upstream saved" {
	# an independent witness for the generator's own reading of upstream
	run python3 - "$gen" "$root/tests/fixtures/upstream" <<'EOF'
import importlib.util, json, struct, sys, types
spec = importlib.util.spec_from_file_location("g", sys.argv[1])
g = importlib.util.module_from_spec(spec); spec.loader.exec_module(g)
checked = 0
for name in ("realshape", "general"):
    ck = "%s/%s/checkpoint" % (sys.argv[2], name)
    c = json.load(open(ck + "/config.json"))["text_config"]
    a = types.SimpleNamespace(ngram_size=c["ngram_size"], heads_per_ngram=c["heads_per_ngram"],
                              ngram_base=c["ngram_vocab_size_base"], vocab=c["vocab_size"],
                              ngram_divisor=c["make_ngram_vocab_size_divisible_by"],
                              config_seed=c["seed"])
    ids = sorted(set(c["ple_layer_ids"]))
    index = ck + "/model.safetensors.index.json"
    try:
        files = sorted(set(json.load(open(index))["weight_map"].values()))
    except FileNotFoundError:
        files = ["model.safetensors"]
    stored, rows = {}, {}
    for f in files:
        b = open(ck + "/" + f, "rb").read()
        n = struct.unpack("<Q", b[:8])[0]
        for k, v in json.loads(b[8:8 + n]).items():
            if k.endswith(("layer_multipliers", "vocab_sizes", "heads_offsets")):
                s, e = v["data_offsets"]
                stored[k] = list(struct.unpack("<%dq" % ((e - s) // 8), b[8 + n + s:8 + n + e]))
            elif ".ngram_embedding." in k:
                layer = k.split(".")[3]
                rows[layer] = rows.get(layer, 0) + v["shape"][0]
    for lid, x in zip(ids, g.ple_identity(a, len(ids))):
        p = "model.language_model.layers.%d.ple.ple_embedding." % (lid - 1)
        assert stored[p + "layer_multipliers"] == x["multipliers"], (name, lid)
        assert stored[p + "ngram_heads_vocab_sizes"] == x["head_sizes"], (name, lid)
        assert stored[p + "ngram_heads_offsets"] == x["head_offsets"], (name, lid)
        assert rows[str(lid - 1)] == x["physical_rows"], (name, lid)
        checked += 1
print("checked", checked)
EOF
	[ "$status" -eq 0 ]
	[ "$output" = "checked 3" ]
}

@test "synthetic: the generator is deterministic" {
	python3 "$gen" --out again --vision --mtp --summary again.json >/dev/null
	cmp again/model.safetensors one/model.safetensors
	cmp again/config.json one/config.json
}

@test "synthetic: mtp.* and model.visual.* are excluded by rule, bytes accounted" {
	run "$conv" -q --json one out.gguf
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >report.json
	# what the generator wrote (s) against what the report accounts (r)
	run json report.json "$BATS_FILE_TMPDIR/one.json" \
		'=[s["groups"][g]["tensors"] for g in ("vision", "mtp")]' \
		'=[s["groups"][g]["bytes"] for g in ("vision", "mtp")]' \
		'=[r["exclusions"][g]["tensors"] for g in ("vision", "mtp")]' \
		'=[r["exclusions"][g]["bytes"] for g in ("vision", "mtp")]' \
		'=[r["counts"][g] for g in ("vision", "mtp")]' \
		'=[r["exclusions"][g]["rule"] for g in ("vision", "mtp")]' \
		'=sorted({t["rule"] for t in r["tensors"] if t["destination"] == "excluded"})' \
		'=sum(t["name"].startswith(("mtp.", "model.visual.")) != (t["destination"] == "excluded") for t in r["tensors"])' \
		'=sum("artifact_tensor" in t and t["artifact_tensor"].startswith(("mtp.", "model.visual.", "visual.")) for t in r["tensors"])'
	[ "$status" -eq 0 ]
	[ "$output" = "[21, 23]
[22464, 145280]
[21, 23]
[22464, 145280]
[21, 23]
['vision: model.visual.*', 'mtp: mtp.*']
['mtp: mtp.*', 'vision: model.visual.*']
0
0" ]
	# none is an artifact tensor: the GGUF file, read back, says so
	run "$dump" --layout out.gguf
	[ "$status" -eq 0 ]
	[ "$(grep -c '^tensor ' <<<"$output")" = 101 ]
	run grep -c -E '^tensor (mtp\.|model\.visual\.|visual\.)' <<<"$output"
	[ "$status" -eq 1 ]
	[ "$output" = 0 ]
}

@test "synthetic: three shards + index convert to the same stores as one file" {
	run "$conv" -q --json three a.gguf
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >a.json
	run "$conv" -q --json one b.gguf
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >b.json
	[ -e three/model.safetensors.index.json ]
	# the expert store's manifest binds the source inventory (shard names
	# and offsets), so it alone may differ; the payloads may not
	run json a.json b.json '=(r["source"]["shards"], s["source"]["shards"])' \
		'=r["stores"]["experts"]["payload_sha256"] == s["stores"]["experts"]["payload_sha256"]' \
		'=r["stores"]["ple"]["payload_sha256"] == s["stores"]["ple"]["payload_sha256"]' \
		'=r["stores"]["ple"]["hash_identity_sha256"] == s["stores"]["ple"]["hash_identity_sha256"]' \
		'=r["source"]["bytes"] == s["source"]["bytes"]'
	[ "$status" -eq 0 ]
	[ "$output" = "(3, 1)
True
True
True
True" ]
	run json a.json "$BATS_FILE_TMPDIR/three.json" '=r["source"]["bytes"] == s["bytes"]'
	[ "$output" = True ]
}

@test "synthetic: packed experts convert to the same expert store as per-expert" {
	python3 "$gen" --out ck --experts-layout packed --vision --mtp >/dev/null
	run "$conv" -q --json ck a.gguf
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >a.json
	run "$conv" -q --json one b.gguf
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >b.json
	run json a.json b.json '=r["source"]["expert_layout"]' \
		'=r["stores"]["experts"]["payload_sha256"] == s["stores"]["experts"]["payload_sha256"]'
	[ "$output" = "packed
True" ]
}

@test "synthetic: FP8 E4M3 experts with 128x128 scales are dequantised and rounded" {
	python3 "$gen" --out ck --expert-dtype fp8 --hidden 128 --moe-intermediate 128 --ple-embed-dim 128 >/dev/null
	run "$conv" -q --json ck out.gguf
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >r.json
	# 4 layers x 8 experts x 3 matrices, each with its scale
	run json r.json '=r["codecs"]["experts_source_dtype"]' '=r["codecs"]["experts_rounded_to_bf16"]' \
		'=r["counts"]["expert"]' '=sum(t["name"].endswith("_scale_inv") for t in r["tensors"])'
	[ "$output" = "F8_E4M3
True
192
96" ]
}

@test "hb-convert refuses a missing tensor (inv-missing-tensor, exit 1)" {
	python3 "$gen" --out ck --omit model.language_model.layers.0.mlp.experts.3.up_proj.weight >/dev/null
	run "$conv" -q ck out.gguf
	[ "$status" -eq 1 ]
	[ "$output" = "hb-convert: inv-missing-tensor: model.language_model.layers.0.mlp.experts.3.up_proj.weight: expected routed-expert tensor is absent" ]
	nothing_published
	python3 "$gen" --out ck --force --omit model.language_model.layers.1.linear_attn.A_log >/dev/null
	run "$conv" -q ck out.gguf
	[ "$status" -eq 1 ]
	[ "$output" = "hb-convert: inv-missing-tensor: model.language_model.layers.1.linear_attn.A_log: expected tensor is absent" ]
	nothing_published
}

@test "hb-convert refuses an unknown tensor (inv-unknown-tensor, exit 1)" {
	python3 "$gen" --out ck --extra model.language_model.layers.0.mlp.bogus.weight >/dev/null
	run "$conv" -q ck out.gguf
	[ "$status" -eq 1 ]
	[ "$output" = "hb-convert: inv-unknown-tensor: model.language_model.layers.0.mlp.bogus.weight: no rule classifies this tensor" ]
	nothing_published
}

@test "hb-convert refuses a stored PLE hash value that config.json contradicts (conv-ple-hash, exit 1)" {
	python3 "$gen" --out ck --tamper-ple-buffer ngram_heads_vocab_sizes:3 >/dev/null
	run "$conv" -q ck out.gguf
	[ "$status" -eq 1 ]
	[ "$output" = "hb-convert: conv-ple-hash: model.language_model.layers.1.ple.ple_embedding.ngram_heads_vocab_sizes: stored value [3] = 111 but config.json gives 109" ]
	nothing_published
	python3 "$gen" --out ck --force --tamper-ple-buffer layer_multipliers:1 >/dev/null
	run "$conv" -q ck out.gguf
	[ "$status" -eq 1 ]
	[ "$output" = "hb-convert: conv-ple-hash: model.language_model.layers.1.ple.ple_embedding.layer_multipliers: stored value [1] = 35454616657218899 but config.json gives 35454616657218897" ]
	nothing_published
}

@test "hb-convert refuses a truncated shard (st-buffer-short, exit 1)" {
	cp -r "$BATS_FILE_TMPDIR/three" ck
	truncate -s -100 ck/model-00002-of-00003.safetensors
	run "$conv" -q ck out.gguf
	[ "$status" -eq 1 ]
	[ "$output" = "hb-convert: st-buffer-short: model-00002-of-00003.safetensors: tensors need 480008 data bytes, the file has 479908 at byte 490236" ]
	nothing_published
}

@test "hb-convert refuses a checkpoint without config.json (exit 1)" {
	cp -r "$BATS_FILE_TMPDIR/one" ck
	rm ck/config.json
	run "$conv" -q ck out.gguf
	[ "$status" -eq 1 ]
	[ "$output" = "hb-convert: cannot open 'ck/config.json': No such file or directory" ]
	nothing_published
}

@test "hb-convert keeps an existing target without --force (exit 2) and replaces it with --force" {
	echo keep >out.gguf
	run "$conv" -q one out.gguf
	[ "$status" -eq 2 ]
	[ "$output" = "hb-convert: out.gguf: target exists (refusing to replace it)" ]
	[ "$(cat out.gguf)" = keep ]
	run "$conv" -q --force one out.gguf
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
	[ "$(head -c 4 out.gguf)" = GGUF ]
	[ "$(ls -A | grep -v -x -e three -e one -e out.gguf)" = "" ]
}

@test "hb-convert refuses a bad option (exit 2)" {
	run "$conv" --bogus one out.gguf
	[ "$status" -eq 2 ]
	[ "$output" = "hb-convert: bad option '--bogus'
try 'hb-convert --help'" ]
	run "$conv" --threads 0 one out.gguf
	[ "$status" -eq 2 ]
	[ "$output" = "hb-convert: --threads takes 1..1024, not '0'
try 'hb-convert --help'" ]
	nothing_published
}

@test "synthetic: tied embeddings convert without lm_head and run bit-identically to an untied copy" {
	# Upstream ties lm_head to embed_tokens when config.json says
	# tie_word_embeddings; the control is an untied checkpoint whose lm_head
	# holds exactly the embedding's bytes: the two must compute the same logits.
	python3 "$gen" --out tied --lm-head tied >/dev/null
	python3 "$gen" --out copy --lm-head embedding-copy >/dev/null
	run python3 - <<'PY'
import json, struct
def names(d):
    b = open(d + "/model.safetensors", "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return set(k for k in json.loads(b[8:8 + n]) if k != "__metadata__")
assert "lm_head.weight" not in names("tied"), "tied checkpoint carries lm_head"
assert "lm_head.weight" in names("copy")
assert json.load(open("tied/config.json"))["tie_word_embeddings"] is True
PY
	[ "$status" -eq 0 ]
	"$conv" -q tied tied.gguf
	"$conv" -q copy copy.gguf
	"$build/bin/hb-admit" -q tied.gguf
	run "$dump" --layout tied.gguf
	[ "$status" -eq 0 ]
	[[ $output != *lm_head* ]]
	grep -q "embed_tokens" <<<"$output"
	"$dump" --layout copy.gguf | grep -q "lm_head.weight"
	"$build/bin/hb-run" -q -m tied.gguf --tokens 3,1,4,1,5,9,2,6 -n 4 --dump-logits tied.bin >tied.ids
	"$build/bin/hb-run" -q -m copy.gguf --tokens 3,1,4,1,5,9,2,6 -n 4 --dump-logits copy.bin >copy.ids
	[ -s tied.bin ]
	cmp tied.bin copy.bin
	cmp tied.ids copy.ids
	# tied, a checkpoint has no lm_head: one that still carries it is refused,
	# not silently dropped (upstream would overwrite it with the embedding)
	run python3 - <<'PY'
import json
c = json.load(open("copy/config.json"))
c["tie_word_embeddings"] = True
json.dump(c, open("copy/config.json", "w"))
PY
	run --separate-stderr "$conv" -q copy mixed.gguf
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-convert: inv-unknown-tensor: lm_head.weight: no rule classifies this tensor" ]
	[ ! -e mixed.gguf ]
}

@test "hb-convert refuses a bad HB_SHA256_IMPL by name (exit 2), publishing nothing" {
	HB_SHA256_IMPL=bogus run --separate-stderr "$conv" -q one out.gguf
	[ "$status" -eq 2 ]
	[ "$stderr" = "hb-convert: env.HB_SHA256_IMPL: unknown SHA-256 implementation 'bogus' (expected 'sodium' or 'ni')" ]
	[ ! -e out.gguf ]
	[ -z "$(ls -A | grep hbtmp || true)" ]
}
