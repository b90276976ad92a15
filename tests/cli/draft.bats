#!/usr/bin/env bats
# hb-admit --draft DIR ARTIFACT, the DFlash2 compatibility gate (AFN-020):
# the two public drafts' contract controls are refused on their first
# mismatching field; a draft made for the artifact (tests/tools/make-draft.py)
# is admitted, and each field of the order, changed alone, is refused with
# its id and field path, in the order the man page gives; a shape-compatible
# tensor set under other names is refused too.

bats_require_minimum_version 1.5.0

setup() {
	root=${HB_SRCDIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
	build=${HB_BUILD:-build}
	[[ $build == /* ]] || build=$root/$build
	admit=$build/bin/hb-admit
	mkdraft=$root/tests/tools/make-draft.py
	cd "$BATS_TEST_TMPDIR"
	"$build/bin/hb-convert" -q "$root/tests/fixtures/upstream/realshape/checkpoint" r.gguf
}

# refused DIR ID FIELD: hb-admit --draft DIR refuses with exactly that line.
refused() {
	run --separate-stderr "$admit" --draft "$1" r.gguf
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[[ "$stderr" == "hb-admit: $2: $3: "* ]] || { echo "got: $stderr" >&2; return 1; }
}

@test "draft: both public DFlash2 controls are refused on their first mismatch" {
	run --separate-stderr "$admit" --draft "$root/tests/fixtures/draft/qwen3.8-27b-dflash2" r.gguf
	[ "$status" -eq 1 ]
	[ "$output" = "" ]
	[ "$stderr" = "hb-admit: draft-vocab: draft.config.vocab_size: 248320, the target's vocabulary is 1024" ]
	run --separate-stderr "$admit" --draft "$root/tests/fixtures/draft/glm-5.3-flash-dflash2" r.gguf
	[ "$status" -eq 1 ]
	[ "$stderr" = "hb-admit: draft-vocab: draft.config.vocab_size: 154880, the target's vocabulary is 1024" ]
}

@test "draft: a draft made for the artifact is admitted with one summary line" {
	python3 "$mkdraft" r.gguf ok
	run --separate-stderr "$admit" --draft ok r.gguf
	[ "$status" -eq 0 ]
	[ "$stderr" = "" ]
	[ "$output" = "admitted draft ok for r.gguf: 14 tensors, every target-bound field equal" ]
	run --separate-stderr "$admit" --draft ok -q r.gguf
	[ "$status" -eq 0 ]
	[ "$output" = "" ]
}

@test "draft: every target-bound field changed alone is refused with its id and path" {
	local -a cases=(
		'architectures=["Qwen3ForCausalLM"]|draft-architecture|draft.config.architectures'
		'vocab_size=1025|draft-vocab|draft.config.vocab_size'
		'num_target_layers=9|draft-target-layers|draft.config.num_target_layers'
		'hidden_size=128|draft-width|draft.config.hidden_size'
		'dflash_config.target_layer_ids=[4,1]|draft-capture|draft.config.dflash_config.target_layer_ids'
		'dflash_config.target_layer_ids=[1,8]|draft-capture|draft.config.dflash_config.target_layer_ids'
		'dflash_config.target_layer_ids=[]|draft-capture|draft.config.dflash_config.target_layer_ids'
		'dflash_config.mask_token_id=1024|draft-special-token|draft.config.dflash_config.mask_token_id'
		'eos_token_id=2|draft-special-token|draft.config.eos_token_id'
		'rope_theta=1000000|draft-position|draft.config.rope_theta'
		'max_position_embeddings=8192|draft-position|draft.config.max_position_embeddings'
		'block_size=17|draft-block|draft.config.block_size'
		'dflash_config.num_candidates=0|draft-block|draft.config.dflash_config.num_candidates'
		'dflash_config.verifier="sampling"|draft-verifier|draft.config.dflash_config.verifier'
		'dflash_config.rollback="none"|draft-rollback|draft.config.dflash_config.rollback'
		'dflash_config.target_revision="de4b8e4d43b917e7706784d8bb445c9af86a3540"|draft-revision|draft.config.dflash_config.target_revision'
		'dflash_config.tokenizer_sha256="00"|draft-revision|draft.config.dflash_config.tokenizer_sha256'
		'-dflash_config.verifier|draft-field|draft.config.dflash_config.verifier'
		'-num_target_layers|draft-field|draft.config.num_target_layers'
		'hidden_size="64"|draft-field|draft.config.hidden_size'
	)
	local c mut id field n=0
	for c in "${cases[@]}"; do
		IFS='|' read -r mut id field <<<"$c"
		rm -rf d
		python3 "$mkdraft" r.gguf d "$mut"
		refused d "$id" "$field"
		n=$((n + 1))
	done
	[ "$n" -eq 20 ]
}

@test "draft: the first mismatch in the order is the one reported" {
	# wrong vocabulary, depth and width at once: step 2 speaks
	python3 "$mkdraft" r.gguf d vocab_size=1 num_target_layers=1 hidden_size=1
	refused d draft-vocab draft.config.vocab_size
	python3 "$mkdraft" r.gguf e num_target_layers=1 hidden_size=1 dflash_config.verifier='"x"'
	refused e draft-target-layers draft.config.num_target_layers
}

@test "draft: a shape-compatible tensor set under other names is refused, never partly loaded" {
	python3 "$mkdraft" r.gguf a rename:fc.weight:proj.weight
	refused a draft-tensor-unknown draft.weights.proj.weight
	python3 "$mkdraft" r.gguf b drop:layers.0.mlp.up_proj.weight
	refused b draft-tensor-missing draft.weights.layers.0.mlp.up_proj.weight
	python3 "$mkdraft" r.gguf c shape:fc.weight:64,128
	refused c draft-tensor-shape draft.weights.fc.weight
	python3 "$mkdraft" r.gguf e dtype:norm.weight:I32
	refused e draft-tensor-type draft.weights.norm.weight
	python3 "$mkdraft" r.gguf f
	printf 'not safetensors' >f/model.safetensors
	refused f draft-weights draft.weights
}

@test "draft: no config, a rejected artifact, and usage are told apart" {
	mkdir empty
	refused empty draft-config draft.config
	python3 "$mkdraft" r.gguf ok
	printf 'GGUF' >bad.gguf
	run --separate-stderr "$admit" --draft ok bad.gguf
	[ "$status" -eq 1 ]
	[[ "$stderr" == "hb-admit: gguf-"* ]]
	run --separate-stderr "$admit" --draft ok --json r.gguf
	[ "$status" -eq 2 ]
	[ "${stderr%%$'\n'*}" = "hb-admit: --draft takes no --json, --report or --profile" ]
	run --separate-stderr "$admit" --draft ok missing.gguf
	[ "$status" -eq 3 ]
}
