/*
 * hb_admit_meta.c: admission steps 4 (model constants) and 5 (text
 * identity).
 *
 * Every key of the artifact schema (hb_artifact.h) is read with its exact
 * GGUF type; a u32 where a u64 belongs is refused even when the number is
 * the same.  The constants are then put back into config.json form and
 * validated by the very reader the converter used (hb_qwen_config), so an
 * artifact cannot carry a combination upstream would refuse, and finally
 * compared with the profile's pinned values.
 */
#include "hb_base.h"
#include "hb_admit_int.h"
#include "artifact/hb_artifact.h"
#include "hb_json.h"
#include "hb_sha256.h"

struct schema_key {
	const char *key;
	uint32_t type;
	uint32_t elem;  /* arrays */
	int need;       /* 0 optional, 1 always, 2 with PLE layers */
};

#define A HB_GGUF_ARRAY
static const struct schema_key schema[] = {
	{HB_KEY_ARCH, HB_GGUF_STRING, 0, 1}, {HB_KEY_ALIGNMENT, HB_GGUF_U32, 0, 1},
	{HB_KEY_NAME, HB_GGUF_STRING, 0, 0},
	{HB_KEY_BLOCKS, HB_GGUF_U32, 0, 1}, {HB_KEY_HIDDEN, HB_GGUF_U32, 0, 1},
	{HB_KEY_VOCAB, HB_GGUF_U32, 0, 1}, {HB_KEY_CONTEXT, HB_GGUF_U32, 0, 1},
	{HB_KEY_RMS_EPS, HB_GGUF_F64, 0, 1}, {HB_KEY_LAYER_TYPES, A, HB_GGUF_STRING, 1},
	{HB_KEY_HC_COUNT, HB_GGUF_U32, 0, 1}, {HB_KEY_HC_LOWRANK, HB_GGUF_U32, 0, 1},
	{HB_KEY_HEADS, HB_GGUF_U32, 0, 1}, {HB_KEY_KV_HEADS, HB_GGUF_U32, 0, 1},
	{HB_KEY_HEAD_DIM, HB_GGUF_U32, 0, 1}, {HB_KEY_ATTN_BIAS, HB_GGUF_BOOL, 0, 1},
	{HB_KEY_ROPE_THETA, HB_GGUF_F64, 0, 1}, {HB_KEY_ROPE_PARTIAL, HB_GGUF_F64, 0, 1},
	{HB_KEY_ROPE_DIM, HB_GGUF_U32, 0, 1}, {HB_KEY_ROPE_MROPE, A, HB_GGUF_U32, 1},
	{HB_KEY_ROPE_MROPE_INTERLEAVED, HB_GGUF_BOOL, 0, 1},
	{HB_KEY_GDN_CONV, HB_GGUF_U32, 0, 1}, {HB_KEY_GDN_KEY_DIM, HB_GGUF_U32, 0, 1},
	{HB_KEY_GDN_VALUE_DIM, HB_GGUF_U32, 0, 1}, {HB_KEY_GDN_KEY_HEADS, HB_GGUF_U32, 0, 1},
	{HB_KEY_GDN_VALUE_HEADS, HB_GGUF_U32, 0, 1}, {HB_KEY_GDN_GATE, HB_GGUF_STRING, 0, 1},
	{HB_KEY_QSA_HEADS, HB_GGUF_U32, 0, 1}, {HB_KEY_QSA_KV_HEADS, HB_GGUF_U32, 0, 1},
	{HB_KEY_QSA_HEAD_DIM, HB_GGUF_U32, 0, 1}, {HB_KEY_QSA_BUDGET, HB_GGUF_U32, 0, 1},
	{HB_KEY_QSA_RATIO, HB_GGUF_U32, 0, 1},
	{HB_KEY_EXPERTS, HB_GGUF_U32, 0, 1}, {HB_KEY_EXPERTS_USED, HB_GGUF_U32, 0, 1},
	{HB_KEY_EXPERT_WIDTH, HB_GGUF_U32, 0, 1}, {HB_KEY_SHARED_WIDTH, HB_GGUF_U32, 0, 1},
	{HB_KEY_NORM_TOPK, HB_GGUF_BOOL, 0, 1}, {HB_KEY_TIE_EMBEDDINGS, HB_GGUF_BOOL, 0, 1},
	{HB_KEY_PLE_LAYERS, A, HB_GGUF_U32, 1}, {HB_KEY_PLE_DIM, HB_GGUF_U32, 0, 1},
	{HB_KEY_PLE_CONV, HB_GGUF_U32, 0, 1}, {HB_KEY_PLE_NGRAM, HB_GGUF_U32, 0, 1},
	{HB_KEY_PLE_HEADS_PER_NGRAM, HB_GGUF_U32, 0, 1}, {HB_KEY_PLE_BASE, HB_GGUF_U64, 0, 1},
	{HB_KEY_PLE_DIVISOR, HB_GGUF_U32, 0, 1}, {HB_KEY_PLE_SEED, HB_GGUF_U64, 0, 1},
	{HB_KEY_PLE_MULTIPLIERS, A, HB_GGUF_U64, 2}, {HB_KEY_PLE_HEAD_SIZES, A, HB_GGUF_U64, 2},
	{HB_KEY_PLE_HEAD_OFFSETS, A, HB_GGUF_U64, 2}, {HB_KEY_PLE_ROWS, A, HB_GGUF_U64, 2},
	{HB_KEY_PLE_LOGICAL_ROWS, A, HB_GGUF_U64, 2}, {HB_KEY_PLE_ROW_WIDTH, HB_GGUF_U32, 0, 2},
	{HB_KEY_PLE_HASH, HB_GGUF_STRING, 0, 2},
	{HB_KEY_EOS, A, HB_GGUF_U32, 1}, {HB_KEY_STOP, A, HB_GGUF_U32, 1},
	{HB_KEY_PROFILE, HB_GGUF_STRING, 0, 1}, {HB_KEY_STATUS, HB_GGUF_STRING, 0, 1},
	{HB_KEY_GEOMETRY_SOURCE, HB_GGUF_STRING, 0, 1},
	{HB_KEY_SOURCE_REPO, HB_GGUF_STRING, 0, 0}, {HB_KEY_SOURCE_REVISION, HB_GGUF_STRING, 0, 0},
	{HB_KEY_SOURCE_INVENTORY, HB_GGUF_STRING, 0, 1}, {HB_KEY_SOURCE_CONFIG, HB_GGUF_STRING, 0, 1},
	{HB_KEY_SOURCE_TENSORS, HB_GGUF_U64, 0, 1}, {HB_KEY_SOURCE_BYTES, HB_GGUF_U64, 0, 1},
	{HB_KEY_SOURCE_SHARDS, HB_GGUF_U64, 0, 1},
	{HB_KEY_EXCL_VISION, HB_GGUF_U64, 0, 1}, {HB_KEY_EXCL_MTP, HB_GGUF_U64, 0, 1},
	{HB_KEY_EXCL_RULES, A, HB_GGUF_STRING, 1},
	{HB_KEY_TEXT_ONLY, HB_GGUF_BOOL, 0, 1}, {HB_KEY_MTP_EXECUTED, HB_GGUF_BOOL, 0, 1},
	{HB_KEY_EXPERT_CODEC, HB_GGUF_STRING, 0, 1}, {HB_KEY_EXPERT_CODEC_LABEL, HB_GGUF_STRING, 0, 1},
	{HB_KEY_EXPERT_SOURCE_DTYPE, HB_GGUF_STRING, 0, 1},
	{HB_KEY_EXPERT_RECORD_SHA, A, HB_GGUF_U8, 1},
	{HB_KEY_PLE_CODEC, HB_GGUF_STRING, 0, 2}, {HB_KEY_PLE_SOURCE_DTYPE, HB_GGUF_STRING, 0, 2},
	{HB_KEY_TOKENIZER_SHA, HB_GGUF_STRING, 0, 0}, {HB_KEY_TEMPLATE_SHA, HB_GGUF_STRING, 0, 0},
	{HB_KEY_CONVERTER, HB_GGUF_STRING, 0, 1},
	{HB_KEY_TOKENIZER_JSON, HB_GGUF_STRING, 0, 0}, {HB_KEY_CHAT_TEMPLATE, HB_GGUF_STRING, 0, 0},
};
#undef A

static const struct schema_key *schema_find(const char *key)
{
	for (size_t i = 0; i < HB_ARRAY_LEN(schema); i++)
		if (!strcmp(schema[i].key, key))
			return &schema[i];
	return NULL;
}

static uint64_t u(const struct hb_gguf_value *v)
{
	return v->type == HB_GGUF_U64 ? v->v.u64 : v->type == HB_GGUF_U32 ? v->v.u32 : 0;
}

#define KV(key, type, out) \
	do { if ((rc = hb_adm_kv(a, key, type, 0, true, &(out), err))) return rc; } while (0)

/* Add a number to obj only when rc is still 0 (keeps the caller linear). */
static void put_num(cJSON *obj, const char *k, double v, int *rc)
{
	if (!*rc && !cJSON_AddNumberToObject(obj, k, v))
		*rc = HB_ERR_NOMEM;
}

static int array_to_json(const struct hb_gguf_value *v, cJSON *obj, const char *k)
{
	cJSON *arr = cJSON_AddArrayToObject(obj, k);

	if (!arr)
		return HB_ERR_NOMEM;
	for (uint64_t i = 0; i < v->count; i++) {
		cJSON *item = v->elem_type == HB_GGUF_STRING ?
			cJSON_CreateString(((const struct hb_gguf_str *)v->elems)[i].ptr) :
			cJSON_CreateNumber((double)((const uint32_t *)v->elems)[i]);
		if (!item || !cJSON_AddItemToArray(arr, item))
			return HB_ERR_NOMEM;
	}
	return HB_OK;
}

/* The artifact's constants in config.json form, for hb_qwen_config. */
static int synthesize(struct hb_adm *a, cJSON **out, struct hb_error *err)
{
	static const struct { const char *key, *cfg; } u32s[] = {
		{HB_KEY_VOCAB, "vocab_size"}, {HB_KEY_HIDDEN, "hidden_size"},
		{HB_KEY_BLOCKS, "num_hidden_layers"}, {HB_KEY_HEADS, "num_attention_heads"},
		{HB_KEY_KV_HEADS, "num_key_value_heads"}, {HB_KEY_HEAD_DIM, "head_dim"},
		{HB_KEY_CONTEXT, "max_position_embeddings"}, {HB_KEY_GDN_CONV, "linear_conv_kernel_dim"},
		{HB_KEY_GDN_KEY_DIM, "linear_key_head_dim"}, {HB_KEY_GDN_VALUE_DIM, "linear_value_head_dim"},
		{HB_KEY_GDN_KEY_HEADS, "linear_num_key_heads"}, {HB_KEY_GDN_VALUE_HEADS, "linear_num_value_heads"},
		{HB_KEY_QSA_HEADS, "indexer_n_heads"}, {HB_KEY_QSA_KV_HEADS, "indexer_kv_heads"},
		{HB_KEY_QSA_HEAD_DIM, "indexer_head_dim"}, {HB_KEY_QSA_BUDGET, "indexer_budget"},
		{HB_KEY_QSA_RATIO, "indexer_compress_ratio"}, {HB_KEY_EXPERTS, "num_experts"},
		{HB_KEY_EXPERTS_USED, "num_experts_per_tok"}, {HB_KEY_EXPERT_WIDTH, "moe_intermediate_size"},
		{HB_KEY_SHARED_WIDTH, "shared_expert_intermediate_size"}, {HB_KEY_HC_COUNT, "hc_count"},
		{HB_KEY_HC_LOWRANK, "hc_lowrank"}, {HB_KEY_PLE_DIM, "ple_embed_dim"},
		{HB_KEY_PLE_CONV, "ple_conv_kernel_size"}, {HB_KEY_PLE_NGRAM, "ngram_size"},
		{HB_KEY_PLE_HEADS_PER_NGRAM, "heads_per_ngram"},
		{HB_KEY_PLE_DIVISOR, "make_ngram_vocab_size_divisible_by"},
	};
	const struct hb_gguf_value *v;
	cJSON *root = cJSON_CreateObject(), *t, *rope;
	int rc = 0;

	t = root ? cJSON_AddObjectToObject(root, "text_config") : NULL;
	rope = t ? cJSON_AddObjectToObject(t, "rope_parameters") : NULL;
	if (!rope || !cJSON_AddStringToObject(root, "model_type", "qwen4_exp") ||
	    !cJSON_AddStringToObject(rope, "rope_type", "default")) {
		cJSON_Delete(root);
		return hb_error_set(err, HB_ERR_NOMEM, "admission", "out of memory");
	}
	for (size_t i = 0; !rc && i < HB_ARRAY_LEN(u32s); i++) {
		if ((rc = hb_adm_kv(a, u32s[i].key, HB_GGUF_U32, 0, true, &v, err)))
			break;
		put_num(t, u32s[i].cfg, v->v.u32, &rc);
	}
#define F64(key, obj, name) if (!rc && !(rc = hb_adm_kv(a, key, HB_GGUF_F64, 0, true, &v, err))) put_num(obj, name, v->v.f64, &rc)
#define U64(key, obj, name) if (!rc && !(rc = hb_adm_kv(a, key, HB_GGUF_U64, 0, true, &v, err))) put_num(obj, name, (double)v->v.u64, &rc)
#define BOOL(key, obj, name) if (!rc && !(rc = hb_adm_kv(a, key, HB_GGUF_BOOL, 0, true, &v, err)) && !cJSON_AddBoolToObject(obj, name, v->v.b)) rc = HB_ERR_NOMEM
	F64(HB_KEY_RMS_EPS, t, "rms_norm_eps");
	F64(HB_KEY_ROPE_THETA, rope, "rope_theta");
	F64(HB_KEY_ROPE_PARTIAL, rope, "partial_rotary_factor");
	U64(HB_KEY_PLE_BASE, t, "ngram_vocab_size_base");
	U64(HB_KEY_PLE_SEED, t, "seed");
	BOOL(HB_KEY_ATTN_BIAS, t, "attention_bias");
	BOOL(HB_KEY_NORM_TOPK, t, "norm_topk_prob");
	BOOL(HB_KEY_TIE_EMBEDDINGS, root, "tie_word_embeddings");
	BOOL(HB_KEY_ROPE_MROPE_INTERLEAVED, rope, "mrope_interleaved");
#undef F64
#undef U64
#undef BOOL
	if (!rc && !(rc = hb_adm_kv(a, HB_KEY_ROPE_MROPE, HB_GGUF_ARRAY, HB_GGUF_U32, true, &v, err)))
		rc = array_to_json(v, rope, "mrope_section");
	if (!rc && !(rc = hb_adm_kv(a, HB_KEY_LAYER_TYPES, HB_GGUF_ARRAY, HB_GGUF_STRING, true, &v, err)))
		rc = array_to_json(v, t, "layer_types");
	if (!rc && !(rc = hb_adm_kv(a, HB_KEY_PLE_LAYERS, HB_GGUF_ARRAY, HB_GGUF_U32, true, &v, err)))
		rc = array_to_json(v, t, "ple_layer_ids");
	if (!rc && !(rc = hb_adm_kv(a, HB_KEY_EOS, HB_GGUF_ARRAY, HB_GGUF_U32, true, &v, err)))
		rc = array_to_json(v, t, "eos_token_id");
	if (!rc && !(rc = hb_adm_kv(a, HB_KEY_GDN_GATE, HB_GGUF_STRING, 0, true, &v, err)) &&
	    !cJSON_AddStringToObject(t, "output_gate_type", v->str.ptr))
		rc = HB_ERR_NOMEM;
	if (rc) {
		cJSON_Delete(root);
		return rc == HB_ERR_NOMEM ? hb_error_set(err, rc, "admission", "out of memory") : rc;
	}
	*out = root;
	return HB_OK;
}

static int check_unknown_keys(const struct hb_adm *a, struct hb_error *err)
{
	for (uint64_t i = 0; i < a->g.n_kv; i++) {
		const char *k = a->g.kv[i].key.ptr;
		bool ours = !strncmp(k, "qwen4exp.", 9) || !strncmp(k, "hebrus.", 7) ||
			    !strncmp(k, "general.", 8) || !strncmp(k, "tokenizer.", 10);
		if (ours && !schema_find(k))
			return hb_adm_fail(err, HB_ADMIT_KEY_UNKNOWN, HB_ERR_CONTRACT, k,
					   "the artifact schema defines no such key");
		if (!ours)
			return hb_adm_fail(err, HB_ADMIT_KEY_UNKNOWN, HB_ERR_CONTRACT, k,
					   "a key outside the general/qwen4exp/hebrus/tokenizer namespaces");
	}
	return HB_OK;
}

int hb_adm_constants(struct hb_adm *a, struct hb_error *err)
{
	const struct hb_gguf_value *v;
	struct hb_error sub;
	cJSON *cfg_json = NULL;
	int rc;

	for (size_t i = 0; i < HB_ARRAY_LEN(schema); i++)
		if (schema[i].need == 1 &&
		    (rc = hb_adm_kv(a, schema[i].key, schema[i].type, schema[i].elem, true, &v, err)))
			return rc;
	for (size_t i = 0; i < HB_ARRAY_LEN(schema); i++)
		if ((rc = hb_adm_kv(a, schema[i].key, schema[i].type, schema[i].elem, false, &v, err)))
			return rc;
	if ((rc = check_unknown_keys(a, err)))
		return rc;
	KV(HB_KEY_ALIGNMENT, HB_GGUF_U32, v);
	if (v->v.u32 != 4096)
		return hb_adm_fail(err, HB_ADMIT_CONSTANT_INVALID, HB_ERR_CONTRACT, HB_KEY_ALIGNMENT,
				   "artifacts are 4096-aligned, got %u", v->v.u32);
	if ((rc = synthesize(a, &cfg_json, err)))
		return rc;
	hb_error_clear(&sub);
	rc = hb_qwen_config_parse(cfg_json, &a->cfg, &sub);
	cJSON_Delete(cfg_json);
	if (rc)
		return hb_adm_fail(err, HB_ADMIT_CONSTANT_INVALID, HB_ERR_CONTRACT, sub.field,
				   "%s (%s)", sub.msg, sub.id ? sub.id : "invalid");
	/* AFN-004: a layer type is recorded as what upstream executes; the raw
	 * spelling "full_attention" (which the reader resolves) never is */
	if ((rc = hb_adm_kv(a, HB_KEY_LAYER_TYPES, HB_GGUF_ARRAY, HB_GGUF_STRING, true, &v, err)))
		return rc;
	for (uint64_t i = 0; i < v->count && i < a->cfg.num_layers; i++) {
		const char *want = hb_layer_kind_name((enum hb_layer_kind)a->cfg.layer_kind[i]);
		const char *got = ((const struct hb_gguf_str *)v->elems)[i].ptr;
		if (strcmp(got, want)) {
			char field[64];
			snprintf(field, sizeof(field), HB_KEY_LAYER_TYPES "[%" PRIu64 "]", i);
			return hb_adm_fail(err, HB_ADMIT_CONSTANT_INVALID, HB_ERR_CONTRACT, field,
					   "'%s' is a spelling; the artifact records the resolved '%s'", got, want);
		}
	}
	KV(HB_KEY_ROPE_DIM, HB_GGUF_U32, v);
	if (v->v.u32 != a->cfg.rotary_dim)
		return hb_adm_fail(err, HB_ADMIT_CONSTANT_INVALID, HB_ERR_CONTRACT, HB_KEY_ROPE_DIM,
				   "%u, but head_dim x partial_rotary_factor is %" PRIu64, v->v.u32, a->cfg.rotary_dim);
	if (a->cfg.n_ple_layers)
		for (size_t i = 0; i < HB_ARRAY_LEN(schema); i++)
			if (schema[i].need == 2 &&
			    (rc = hb_adm_kv(a, schema[i].key, schema[i].type, schema[i].elem, true, &v, err)))
				return rc;
	hb_error_clear(&sub);
	if (hb_profile_check(a->profile, &a->cfg, &sub))
		return hb_adm_fail(err, HB_ADMIT_PROFILE_CONSTANT, HB_ERR_CONTRACT, sub.field, "%s", sub.msg);
	return HB_OK;
}

/* Largest id in tokenizer.json's model.vocab and added_tokens, plus one
 * (hb_admit_vocab.c). */
static int semantic_vocab(const struct hb_gguf_str *json, uint64_t *out, struct hb_error *err)
{
	if (hb_admit_tokenizer_vocab(json->ptr, (size_t)json->len, out, NULL))
		return hb_adm_fail(err, HB_ADMIT_VOCAB_SEMANTIC, HB_ERR_FORMAT, HB_KEY_TOKENIZER_JSON,
				   "the embedded tokenizer.json does not parse, or gives an id that is not a whole number "
				   "of at most 2^53 - 1");
	return HB_OK;
}

static int digest_matches(const struct hb_adm *a, const char *data_key, const char *sha_key,
			  enum hb_admit_diag d, struct hb_error *err)
{
	const struct hb_gguf_value *data = NULL, *sha = NULL;
	uint8_t dig[HB_SHA256_BYTES];
	char hex[HB_SHA256_HEX];
	int rc;

	if ((rc = hb_adm_kv(a, data_key, HB_GGUF_STRING, 0, false, &data, err)) ||
	    (rc = hb_adm_kv(a, sha_key, HB_GGUF_STRING, 0, false, &sha, err)))
		return rc;
	if (!data && !sha)
		return HB_OK;
	if (!data || !sha)
		return hb_adm_fail(err, d, HB_ERR_CONTRACT, data ? sha_key : data_key,
				   "present without its %s", data ? "digest" : "bytes");
	hb_sha256_buf(data->str.ptr, (size_t)data->str.len, dig);
	hb_hex_encode(dig, sizeof(dig), hex);
	if (strcmp(hex, sha->str.ptr))
		return hb_adm_fail(err, d, HB_ERR_DIGEST, sha_key, "recorded %s, bytes hash to %s",
				   sha->str.ptr, hex);
	return HB_OK;
}

int hb_adm_text(struct hb_adm *a, struct hb_error *err)
{
	const struct hb_gguf_value *tok = NULL, *stop, *eos;
	const struct hb_profile *p = a->profile;
	int rc;

	if ((rc = digest_matches(a, HB_KEY_TOKENIZER_JSON, HB_KEY_TOKENIZER_SHA, HB_ADMIT_TOKENIZER_DIGEST, err)) ||
	    (rc = digest_matches(a, HB_KEY_CHAT_TEMPLATE, HB_KEY_TEMPLATE_SHA, HB_ADMIT_TEMPLATE_DIGEST, err)) ||
	    (rc = hb_adm_kv(a, HB_KEY_TOKENIZER_JSON, HB_GGUF_STRING, 0, false, &tok, err)))
		return rc;
	if (!tok && !p->from_config)
		return hb_adm_fail(err, HB_ADMIT_TOKENIZER_MISSING, HB_ERR_CONTRACT, HB_KEY_TOKENIZER_JSON,
				   "profile %s binds a tokenizer; none is embedded", p->id);
	if (tok) {
		uint64_t semantic = 0;
		if ((rc = semantic_vocab(&tok->str, &semantic, err)))
			return rc;
		if (!semantic || (!p->from_config ? semantic != p->vocab_semantic : semantic > a->cfg.vocab_size))
			return hb_adm_fail(err, HB_ADMIT_VOCAB_SEMANTIC, HB_ERR_CONTRACT, HB_KEY_TOKENIZER_JSON,
					   "%" PRIu64 " token ids for %" PRIu64 " physical rows%s", semantic,
					   a->cfg.vocab_size, p->from_config ? "" : " (the profile pins 248,077)");
		a->vocab_semantic = semantic;
	}
	if ((rc = hb_adm_kv(a, HB_KEY_EOS, HB_GGUF_ARRAY, HB_GGUF_U32, true, &eos, err)) ||
	    (rc = hb_adm_kv(a, HB_KEY_STOP, HB_GGUF_ARRAY, HB_GGUF_U32, true, &stop, err)))
		return rc;
	for (uint64_t i = 0; i < eos->count; i++)
		if (((const uint32_t *)eos->elems)[i] >= a->cfg.vocab_size)
			return hb_adm_fail(err, HB_ADMIT_EOS_IDS, HB_ERR_CONTRACT, HB_KEY_EOS,
					   "id %u outside the vocabulary", ((const uint32_t *)eos->elems)[i]);
	/* the stop set is exact: the profile's, or the EOS ids for dev */
	{
		const uint32_t *s = stop->elems, *e = eos->elems;
		bool same = p->n_stop_ids ? stop->count == p->n_stop_ids : stop->count == eos->count;
		for (uint64_t i = 0; same && i < stop->count; i++)
			same = s[i] == (p->n_stop_ids ? (uint32_t)p->stop_ids[i] : e[i]);
		if (!same)
			return hb_adm_fail(err, HB_ADMIT_STOP_IDS, HB_ERR_CONTRACT, HB_KEY_STOP,
					   p->n_stop_ids ? "profile %s stops on exactly 248044 and 248046" :
							   "profile %s stops on exactly the EOS ids", p->id);
	}
	(void)u;
	return HB_OK;
}
