/*
 * hb_artifact.h: the names an artifact is made of, in one place.
 *
 * hb-convert writes these keys and tensors; hb-admit demands them.  The
 * metadata schema (every key, its exact GGUF type) is documented in
 * man/man5/hebrus-artifact.5.  Model constants live under "qwen4exp.",
 * identity and provenance under "hebrus.", the tokenizer under
 * "tokenizer.".  Values are the RESOLVED configuration (AFN-004: a layer
 * type is recorded as what upstream executes, never as the raw spelling).
 */
#ifndef HB_ARTIFACT_H
#define HB_ARTIFACT_H

#define HB_ARCH "qwen4exp"
#define HB_ALIGNMENT 4096u /* every tensor O_DIRECT-aligned; ggml accepts it (offsets contiguous modulo padding) */
#define HB_TENSOR_EXPERT_STORE "ds4.expert_major.v2"
#define HB_TENSOR_PLE_STORE "ds4.ple_rows.v1"
#define HB_STORE_FILE_ALIGN 4096u

/* general.* */
#define HB_KEY_ARCH "general.architecture"
#define HB_KEY_ALIGNMENT "general.alignment"
#define HB_KEY_NAME "general.name"

/* qwen4exp.*: model constants */
#define HB_KEY_BLOCKS "qwen4exp.block_count"
#define HB_KEY_HIDDEN "qwen4exp.embedding_length"
#define HB_KEY_VOCAB "qwen4exp.vocab_size"
#define HB_KEY_CONTEXT "qwen4exp.context_length"
#define HB_KEY_RMS_EPS "qwen4exp.rms_norm_eps"
#define HB_KEY_LAYER_TYPES "qwen4exp.layer_types"
#define HB_KEY_HC_COUNT "qwen4exp.hc.count"
#define HB_KEY_HC_LOWRANK "qwen4exp.hc.lowrank"
#define HB_KEY_HEADS "qwen4exp.attention.head_count"
#define HB_KEY_KV_HEADS "qwen4exp.attention.head_count_kv"
#define HB_KEY_HEAD_DIM "qwen4exp.attention.key_length"
#define HB_KEY_ATTN_BIAS "qwen4exp.attention.bias"
#define HB_KEY_ROPE_THETA "qwen4exp.rope.freq_base"
#define HB_KEY_ROPE_PARTIAL "qwen4exp.rope.partial_rotary_factor"
#define HB_KEY_ROPE_DIM "qwen4exp.rope.dimension_count"
#define HB_KEY_ROPE_MROPE "qwen4exp.rope.mrope_section"
#define HB_KEY_ROPE_MROPE_INTERLEAVED "qwen4exp.rope.mrope_interleaved"
#define HB_KEY_GDN_CONV "qwen4exp.gdn.conv_kernel"
#define HB_KEY_GDN_KEY_DIM "qwen4exp.gdn.key_head_dim"
#define HB_KEY_GDN_VALUE_DIM "qwen4exp.gdn.value_head_dim"
#define HB_KEY_GDN_KEY_HEADS "qwen4exp.gdn.key_head_count"
#define HB_KEY_GDN_VALUE_HEADS "qwen4exp.gdn.value_head_count"
#define HB_KEY_GDN_GATE "qwen4exp.gdn.output_gate"
#define HB_KEY_QSA_HEADS "qwen4exp.qsa.index_head_count"
#define HB_KEY_QSA_KV_HEADS "qwen4exp.qsa.index_kv_head_count"
#define HB_KEY_QSA_HEAD_DIM "qwen4exp.qsa.index_head_dim"
#define HB_KEY_QSA_BUDGET "qwen4exp.qsa.budget"
#define HB_KEY_QSA_RATIO "qwen4exp.qsa.compress_ratio"
#define HB_KEY_EXPERTS "qwen4exp.moe.expert_count"
#define HB_KEY_EXPERTS_USED "qwen4exp.moe.expert_used_count"
#define HB_KEY_EXPERT_WIDTH "qwen4exp.moe.expert_width"
#define HB_KEY_SHARED_WIDTH "qwen4exp.moe.shared_expert_width"
#define HB_KEY_NORM_TOPK "qwen4exp.moe.norm_topk_prob"
#define HB_KEY_TIE_EMBEDDINGS "qwen4exp.tie_word_embeddings"
#define HB_KEY_PLE_LAYERS "qwen4exp.ple.layer_ids"
#define HB_KEY_PLE_DIM "qwen4exp.ple.embed_dim"
#define HB_KEY_PLE_CONV "qwen4exp.ple.conv_kernel"
#define HB_KEY_PLE_NGRAM "qwen4exp.ple.ngram_size"
#define HB_KEY_PLE_HEADS_PER_NGRAM "qwen4exp.ple.heads_per_ngram"
#define HB_KEY_PLE_BASE "qwen4exp.ple.vocab_size_base"
#define HB_KEY_PLE_DIVISOR "qwen4exp.ple.vocab_divisor"
#define HB_KEY_PLE_SEED "qwen4exp.ple.seed"
#define HB_KEY_PLE_MULTIPLIERS "qwen4exp.ple.multipliers"
#define HB_KEY_PLE_HEAD_SIZES "qwen4exp.ple.head_sizes"
#define HB_KEY_PLE_HEAD_OFFSETS "qwen4exp.ple.head_offsets"
#define HB_KEY_PLE_ROWS "qwen4exp.ple.rows"
#define HB_KEY_PLE_LOGICAL_ROWS "qwen4exp.ple.logical_rows"
#define HB_KEY_PLE_ROW_WIDTH "qwen4exp.ple.row_width"
#define HB_KEY_PLE_HASH "qwen4exp.ple.hash_sha256"
#define HB_KEY_EOS "qwen4exp.eos_token_ids"
#define HB_KEY_STOP "qwen4exp.stop_token_ids"

/* hebrus.*: identity, provenance, policy */
#define HB_KEY_PROFILE "hebrus.profile"
#define HB_KEY_STATUS "hebrus.status"
#define HB_KEY_GEOMETRY_SOURCE "hebrus.geometry_source"
#define HB_KEY_SOURCE_REPO "hebrus.source.repo"
#define HB_KEY_SOURCE_REVISION "hebrus.source.revision"
#define HB_KEY_SOURCE_INVENTORY "hebrus.source.inventory_sha256"
#define HB_KEY_SOURCE_CONFIG "hebrus.source.config_sha256"
#define HB_KEY_SOURCE_TENSORS "hebrus.source.tensor_count"
#define HB_KEY_SOURCE_BYTES "hebrus.source.bytes"
#define HB_KEY_SOURCE_SHARDS "hebrus.source.shard_count"
#define HB_KEY_EXCL_VISION "hebrus.exclusions.vision"
#define HB_KEY_EXCL_MTP "hebrus.exclusions.mtp"
#define HB_KEY_EXCL_RULES "hebrus.exclusions.rules"
#define HB_KEY_TEXT_ONLY "hebrus.policy.text_only"
#define HB_KEY_MTP_EXECUTED "hebrus.policy.mtp_executed"
#define HB_KEY_EXPERT_CODEC "hebrus.codec.experts"
#define HB_KEY_EXPERT_CODEC_LABEL "hebrus.codec.experts_label"
#define HB_KEY_EXPERT_SOURCE_DTYPE "hebrus.codec.experts_source_dtype"
/* SHA-256 of every expert record, layer-major, expert-minor (u8 array of
 * 32 x layers x experts): the expert store's v2 header has only a whole-
 * payload digest, and a verifier must name the record that is bad. */
#define HB_KEY_EXPERT_RECORD_SHA "hebrus.experts.record_sha256"
#define HB_KEY_PLE_CODEC "hebrus.codec.ple"
#define HB_KEY_PLE_SOURCE_DTYPE "hebrus.codec.ple_source_dtype"
#define HB_KEY_TOKENIZER_SHA "hebrus.tokenizer.sha256"
#define HB_KEY_TEMPLATE_SHA "hebrus.template.sha256"
#define HB_KEY_CONVERTER "hebrus.converter"

/* tokenizer.* */
#define HB_KEY_TOKENIZER_JSON "tokenizer.huggingface.json"
#define HB_KEY_CHAT_TEMPLATE "tokenizer.chat_template"

#endif
