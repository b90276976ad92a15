/*
 * hb_convert_meta.c: the artifact's GGUF metadata (keys in hb_artifact.h).
 *
 * Integer model constants are u32 (counts far below 2^32) except row counts,
 * seeds and hash values, which are u64; floating constants are f64 so that
 * config.json's decimal values survive exactly as parsed.  Admission
 * demands these exact types.
 */
#include "hb_base.h"
#include "artifact/hb_artifact.h"
#include "hb_convert_int.h"

#define U32(key, v) do { if (!rc) rc = hb_gguf_writer_add_u32(w, key, (uint32_t)(v), err); } while (0)
#define U64(key, v) do { if (!rc) rc = hb_gguf_writer_add_u64(w, key, (uint64_t)(v), err); } while (0)
#define F64(key, v) do { if (!rc) rc = hb_gguf_writer_add_f64(w, key, (double)(v), err); } while (0)
#define BOOL(key, v) do { if (!rc) rc = hb_gguf_writer_add_bool(w, key, (v), err); } while (0)
#define STR(key, v) do { if (!rc) rc = hb_gguf_writer_add_str(w, key, (v), err); } while (0)

static bool fits_u32(const struct hb_qwen_config *c)
{
	const uint64_t v[] = {
		c->num_layers, c->hidden_size, c->vocab_size, c->max_position_embeddings,
		c->hc_count, c->hc_lowrank, c->num_heads, c->num_kv_heads, c->head_dim,
		c->rotary_dim, c->linear_conv_kernel, c->linear_key_head_dim,
		c->linear_value_head_dim, c->linear_num_key_heads, c->linear_num_value_heads,
		c->indexer_n_heads, c->indexer_kv_heads, c->indexer_head_dim,
		c->indexer_budget, c->indexer_compress_ratio, c->num_experts,
		c->num_experts_per_tok, c->moe_intermediate_size,
		c->shared_expert_intermediate_size, c->ple_embed_dim,
		c->ple_conv_kernel_size, c->ngram_size, c->heads_per_ngram,
		c->ngram_vocab_divisor, c->mrope_section[0], c->mrope_section[1],
		c->mrope_section[2],
	};
	for (size_t i = 0; i < HB_ARRAY_LEN(v); i++)
		if (v[i] > UINT32_MAX)
			return false;
	return true;
}

int hb_artifact_write_model_constants(struct hb_gguf_writer *w, const struct hb_qwen_config *q,
				      struct hb_error *err)
{
	const char *types[HB_QWEN_MAX_LAYERS];
	uint32_t mrope[3] = {(uint32_t)q->mrope_section[0], (uint32_t)q->mrope_section[1],
			     (uint32_t)q->mrope_section[2]};
	int rc = 0;

	if (!fits_u32(q))
		return hb_error_diag(err, "cfg-unsupported", HB_ERR_UNSUPPORTED, "text_config", false, 0,
				     "a model constant exceeds 32 bits");
	U32(HB_KEY_BLOCKS, q->num_layers);
	U32(HB_KEY_HIDDEN, q->hidden_size);
	U32(HB_KEY_VOCAB, q->vocab_size);
	U32(HB_KEY_CONTEXT, q->max_position_embeddings);
	F64(HB_KEY_RMS_EPS, q->rms_norm_eps);
	for (uint64_t i = 0; i < q->num_layers; i++)
		types[i] = hb_layer_kind_name((enum hb_layer_kind)q->layer_kind[i]);
	if (!rc)
		rc = hb_gguf_writer_add_str_array(w, HB_KEY_LAYER_TYPES, types, NULL, q->num_layers, err);
	U32(HB_KEY_HC_COUNT, q->hc_count);
	U32(HB_KEY_HC_LOWRANK, q->hc_lowrank);
	U32(HB_KEY_HEADS, q->num_heads);
	U32(HB_KEY_KV_HEADS, q->num_kv_heads);
	U32(HB_KEY_HEAD_DIM, q->head_dim);
	BOOL(HB_KEY_ATTN_BIAS, q->attention_bias);
	F64(HB_KEY_ROPE_THETA, q->rope_theta);
	F64(HB_KEY_ROPE_PARTIAL, q->partial_rotary_factor);
	U32(HB_KEY_ROPE_DIM, q->rotary_dim);
	if (!rc)
		rc = hb_gguf_writer_add_array(w, HB_KEY_ROPE_MROPE, HB_GGUF_U32, mrope, 3, err);
	BOOL(HB_KEY_ROPE_MROPE_INTERLEAVED, q->mrope_interleaved);
	U32(HB_KEY_GDN_CONV, q->linear_conv_kernel);
	U32(HB_KEY_GDN_KEY_DIM, q->linear_key_head_dim);
	U32(HB_KEY_GDN_VALUE_DIM, q->linear_value_head_dim);
	U32(HB_KEY_GDN_KEY_HEADS, q->linear_num_key_heads);
	U32(HB_KEY_GDN_VALUE_HEADS, q->linear_num_value_heads);
	STR(HB_KEY_GDN_GATE, hb_act_name(q->output_gate));
	U32(HB_KEY_QSA_HEADS, q->indexer_n_heads);
	U32(HB_KEY_QSA_KV_HEADS, q->indexer_kv_heads);
	U32(HB_KEY_QSA_HEAD_DIM, q->indexer_head_dim);
	U32(HB_KEY_QSA_BUDGET, q->indexer_budget);
	U32(HB_KEY_QSA_RATIO, q->indexer_compress_ratio);
	U32(HB_KEY_EXPERTS, q->num_experts);
	U32(HB_KEY_EXPERTS_USED, q->num_experts_per_tok);
	U32(HB_KEY_EXPERT_WIDTH, q->moe_intermediate_size);
	U32(HB_KEY_SHARED_WIDTH, q->shared_expert_intermediate_size);
	BOOL(HB_KEY_NORM_TOPK, q->norm_topk_prob);
	BOOL(HB_KEY_TIE_EMBEDDINGS, q->tie_word_embeddings);
	return rc;
}

static int ple_constants(struct hb_conv *c, struct hb_error *err)
{
	struct hb_gguf_writer *w = &c->gw;
	const struct hb_qwen_config *q = &c->cfg;
	uint32_t ids[HB_QWEN_MAX_LAYERS];
	uint64_t *mult, *sizes, *offs, rows[HB_QWEN_MAX_LAYERS], logical[HB_QWEN_MAX_LAYERS];
	size_t np = q->n_ple_layers, nm = 0, nh = 0;
	char hex[HB_SHA256_HEX];
	int rc = 0;

	for (size_t p = 0; p < np; p++)
		ids[p] = q->ple_layer_ids[p];
	rc = hb_gguf_writer_add_array(w, HB_KEY_PLE_LAYERS, HB_GGUF_U32, ids, np, err);
	U32(HB_KEY_PLE_DIM, q->ple_embed_dim);
	U32(HB_KEY_PLE_CONV, q->ple_conv_kernel_size);
	U32(HB_KEY_PLE_NGRAM, q->ngram_size);
	U32(HB_KEY_PLE_HEADS_PER_NGRAM, q->heads_per_ngram);
	U64(HB_KEY_PLE_BASE, q->ngram_vocab_size_base);
	U32(HB_KEY_PLE_DIVISOR, q->ngram_vocab_divisor);
	U64(HB_KEY_PLE_SEED, q->seed);
	if (rc || !np)
		return rc;
	/* per table, concatenated in PLE-layer order */
	mult = calloc(np * HB_PLE_MAX_NGRAM, sizeof(uint64_t));
	sizes = calloc(np * HB_PLE_MAX_HEADS, sizeof(uint64_t));
	offs = calloc(np * HB_PLE_MAX_HEADS, sizeof(uint64_t));
	if (!mult || !sizes || !offs) {
		free(mult), free(sizes), free(offs);
		return hb_error_set(err, HB_ERR_NOMEM, "metadata", "out of memory");
	}
	for (size_t p = 0; p < np; p++) {
		const struct hb_ple_table_hash *h = &c->ple_hash[p];
		for (uint32_t i = 0; i < h->ngram_size; i++)
			mult[nm++] = h->multipliers[i];
		for (uint32_t i = 0; i < h->heads; i++, nh++) {
			sizes[nh] = h->head_sizes[i];
			offs[nh] = h->head_offsets[i];
		}
		rows[p] = h->physical_rows;
		logical[p] = h->logical_rows;
	}
	rc = hb_gguf_writer_add_array(w, HB_KEY_PLE_MULTIPLIERS, HB_GGUF_U64, mult, nm, err);
	if (!rc)
		rc = hb_gguf_writer_add_array(w, HB_KEY_PLE_HEAD_SIZES, HB_GGUF_U64, sizes, nh, err);
	if (!rc)
		rc = hb_gguf_writer_add_array(w, HB_KEY_PLE_HEAD_OFFSETS, HB_GGUF_U64, offs, nh, err);
	if (!rc)
		rc = hb_gguf_writer_add_array(w, HB_KEY_PLE_ROWS, HB_GGUF_U64, rows, np, err);
	if (!rc)
		rc = hb_gguf_writer_add_array(w, HB_KEY_PLE_LOGICAL_ROWS, HB_GGUF_U64, logical, np, err);
	free(mult), free(sizes), free(offs);
	U32(HB_KEY_PLE_ROW_WIDTH, c->ple_hash[0].row_width);
	hb_hex_encode(c->ple_hash_digest, HB_SHA256_BYTES, hex);
	STR(HB_KEY_PLE_HASH, hex);
	return rc;
}

static int special_ids(struct hb_conv *c, struct hb_error *err)
{
	struct hb_gguf_writer *w = &c->gw;
	uint32_t eos[HB_QWEN_MAX_EOS], stop[HB_QWEN_MAX_EOS];
	size_t ns = 0;
	int rc;

	for (size_t i = 0; i < c->cfg.n_eos; i++)
		eos[i] = (uint32_t)c->cfg.eos_token_ids[i];
	rc = hb_gguf_writer_add_array(w, HB_KEY_EOS, HB_GGUF_U32, eos, c->cfg.n_eos, err);
	/* The stop set is exact (AFN-005): the profile's where it pins one,
	 * otherwise every id config.json declares as EOS. */
	if (c->profile->n_stop_ids) {
		for (size_t i = 0; i < c->profile->n_stop_ids; i++)
			stop[ns++] = (uint32_t)c->profile->stop_ids[i];
	} else {
		for (size_t i = 0; i < c->cfg.n_eos; i++)
			stop[ns++] = eos[i];
	}
	if (!rc)
		rc = hb_gguf_writer_add_array(w, HB_KEY_STOP, HB_GGUF_U32, stop, ns, err);
	return rc;
}

static int identity(struct hb_conv *c, struct hb_error *err)
{
	struct hb_gguf_writer *w = &c->gw;
	const struct hb_profile *p = c->profile;
	const char *rules[2];
	size_t nr = 0;
	char hex[HB_SHA256_HEX];
	int rc = 0;

	STR(HB_KEY_PROFILE, p->id);
	STR(HB_KEY_STATUS, p->status);
	STR(HB_KEY_GEOMETRY_SOURCE, p->from_config ? "config.json" : "profile");
	if (p->source_repo)
		STR(HB_KEY_SOURCE_REPO, p->source_repo);
	if (c->o->source_revision)
		STR(HB_KEY_SOURCE_REVISION, c->o->source_revision);
	hb_hex_encode(c->inv.digest, HB_SHA256_BYTES, hex);
	STR(HB_KEY_SOURCE_INVENTORY, hex);
	hb_hex_encode(c->config_sha, HB_SHA256_BYTES, hex);
	STR(HB_KEY_SOURCE_CONFIG, hex);
	U64(HB_KEY_SOURCE_TENSORS, c->inv.n);
	U64(HB_KEY_SOURCE_BYTES, c->ck.total_bytes);
	U64(HB_KEY_SOURCE_SHARDS, c->ck.nshards);
	U64(HB_KEY_EXCL_VISION, c->inv.count[HB_INV_VISION]);
	U64(HB_KEY_EXCL_MTP, c->inv.count[HB_INV_MTP]);
	rules[nr++] = "vision: model.visual.*";
	rules[nr++] = "mtp: mtp.*";
	if (!rc)
		rc = hb_gguf_writer_add_str_array(w, HB_KEY_EXCL_RULES, rules, NULL, nr, err);
	BOOL(HB_KEY_TEXT_ONLY, true);
	BOOL(HB_KEY_MTP_EXECUTED, false);
	{
		const struct hb_em_codec *codec = hb_em_codec_get(
			c->o->expert_codec == HB_CONV_EXPERTS_AFFINE4_G64 ? HB_EM_CODEC_AFFINE4_G64 : HB_EM_CODEC_BF16);
		STR(HB_KEY_EXPERT_CODEC, codec->name);
		STR(HB_KEY_EXPERT_CODEC_LABEL, codec->label);
	}
	STR(HB_KEY_EXPERT_SOURCE_DTYPE, c->expert_source_dtype ? c->expert_source_dtype : "none");
	/* placeholder of the final length: the digests are filled in before the
	 * header is written, which happens after the stores (hb_convert.c) */
	if (!rc) {
		uint64_t n = 32 * c->cfg.num_layers * c->cfg.num_experts;
		uint8_t *zeros = calloc((size_t)n, 1);
		rc = zeros ? hb_gguf_writer_add_array(w, HB_KEY_EXPERT_RECORD_SHA, HB_GGUF_U8, zeros, n, err)
			   : hb_error_set(err, HB_ERR_NOMEM, "metadata", "out of memory");
		free(zeros);
	}
	if (c->cfg.n_ple_layers) {
		STR(HB_KEY_PLE_CODEC, c->o->ple_codec == HB_CONV_PLE_AFFINE4_G32 ? "mlx-affine4-g32" : "bf16");
		STR(HB_KEY_PLE_SOURCE_DTYPE, c->ple_source_dtype ? c->ple_source_dtype : "none");
	}
	if (c->tokenizer_json) {
		hb_hex_encode(c->tokenizer_sha, HB_SHA256_BYTES, hex);
		STR(HB_KEY_TOKENIZER_SHA, hex);
		if (!rc)
			rc = hb_gguf_writer_add_strn(w, HB_KEY_TOKENIZER_JSON, c->tokenizer_json,
						     c->tokenizer_len, err);
	}
	if (c->chat_template) {
		hb_hex_encode(c->template_sha, HB_SHA256_BYTES, hex);
		STR(HB_KEY_TEMPLATE_SHA, hex);
		if (!rc)
			rc = hb_gguf_writer_add_strn(w, HB_KEY_CHAT_TEMPLATE, c->chat_template,
						     c->template_len, err);
	}
	STR(HB_KEY_CONVERTER, "hb-convert " HB_VERSION);
	return rc;
}

/* The source dtype of a class, or "mixed" when its tensors disagree. */
static const char *class_dtype(const struct hb_conv *c, enum hb_inv_role lo, enum hb_inv_role hi)
{
	const char *seen = NULL;

	for (size_t i = 0; i < c->inv.n; i++) {
		const struct hb_inv_entry *e = &c->inv.entries[i];
		const char *name;
		if (e->is_scale || e->role < lo || e->role > hi)
			continue;
		name = hb_dtype_name(e->src->dtype);
		if (seen && strcmp(seen, name))
			return "mixed";
		seen = name;
	}
	return seen;
}

int hb_conv_metadata(struct hb_conv *c, struct hb_error *err)
{
	struct hb_gguf_writer *w = &c->gw;
	int rc;

	c->expert_source_dtype = class_dtype(c, HB_ROLE_GATE, HB_ROLE_DOWN_PACKED);
	c->ple_source_dtype = class_dtype(c, HB_ROLE_PLE_TABLE, HB_ROLE_PLE_TABLE);
	rc = hb_gguf_writer_add_str(w, HB_KEY_ARCH, HB_ARCH, err);
	if (!rc)
		rc = hb_gguf_writer_add_u32(w, HB_KEY_ALIGNMENT, HB_ALIGNMENT, err);
	if (!rc)
		rc = hb_gguf_writer_add_str(w, HB_KEY_NAME, c->profile->from_config ?
					    "Qwen4Exp development checkpoint" : "Qwen3.8-Flash-Next", err);
	if (!rc)
		rc = hb_artifact_write_model_constants(&c->gw, &c->cfg, err);
	if (!rc)
		rc = ple_constants(c, err);
	if (!rc)
		rc = special_ids(c, err);
	if (!rc)
		rc = identity(c, err);
	return rc;
}
