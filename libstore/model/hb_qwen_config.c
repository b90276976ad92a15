/*
 * hb_qwen_config.c: config.json -> resolved Qwen4Exp text configuration.
 *
 * Defaults and validity rules transcribe Qwen4ExpTextConfig (transformers
 * 5.17.0): the class defaults, __post_init__ (layer_types default pattern,
 * "full_attention" -> sparse, ple_embed_dim default) and
 * validate_architecture.  Each refusal carries a stable diagnostic id:
 *   cfg-json          not an object / wrong JSON type for a field
 *   cfg-duplicate-key a key appears twice in one object
 *   cfg-model-type    model_type is not qwen4_exp / qwen4_exp_text
 *   cfg-unknown-key   a key this reader does not understand
 *   cfg-missing       a required field is absent
 *   cfg-invalid       a value upstream's validation refuses
 *   cfg-unsupported   valid upstream, deliberately not supported here
 */
#include "hb_base.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_qwen_config.h"

#include <math.h>

/* Keys PreTrainedConfig writes into every config.json; inert for the text
 * model's arithmetic. */
static const char *const generic_keys[] = {
	"architectures", "model_type", "transformers_version", "dtype",
	"torch_dtype", "_name_or_path", "return_dict", "output_hidden_states",
	"output_attentions", "chunk_size_feed_forward", "is_encoder_decoder",
	"id2label", "label2id", "problem_type", "tokenizer_class", "prefix",
	"sep_token_id", "decoder_start_token_id", "task_specific_params",
	"finetuning_task", "use_cache", "initializer_range",
	"output_router_logits", "router_aux_loss_coef", "attention_dropout",
	"base_config_key",
	/* MTP belongs to excluded tensors (mtp.*), never executed */
	"mtp_num_hidden_layers", "mtp_use_dedicated_embeddings",
};

static const char *const text_keys[] = {
	"vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
	"num_key_value_heads", "hidden_act", "max_position_embeddings",
	"rms_norm_eps", "tie_word_embeddings", "rope_parameters",
	"attention_bias", "head_dim", "linear_conv_kernel_dim",
	"linear_key_head_dim", "linear_value_head_dim", "linear_num_key_heads",
	"linear_num_value_heads", "moe_intermediate_size",
	"shared_expert_intermediate_size", "num_experts_per_tok", "num_experts",
	"layer_types", "pad_token_id", "bos_token_id", "eos_token_id",
	"hc_count", "hc_lowrank", "ple_layer_ids", "ple_embed_dim",
	"ple_conv_kernel_size", "ngram_size", "heads_per_ngram",
	"ngram_vocab_size_base", "make_ngram_vocab_size_divisible_by", "seed",
	"split_ngram_parts", "indexer_n_heads", "indexer_kv_heads",
	"indexer_head_dim", "indexer_budget", "indexer_compress_ratio",
	"norm_topk_prob", "output_gate_type", "full_attention_interval",
	/* legacy spellings transformers folds into rope_parameters */
	"rope_theta", "partial_rotary_factor",
	/* derived by upstream's __post_init__ and saved; checked, not used */
	"number_of_conv_states",
};

static const char *const top_keys[] = {
	"text_config", "vision_config", "image_token_id", "video_token_id",
	"vision_start_token_id", "vision_end_token_id", "tie_word_embeddings",
	"quantization_config",
};

static bool in_list(const char *key, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(key, list[i]))
			return true;
	return false;
}

static int check_keys(const cJSON *obj, const char *prefix,
		      const char *const *known, size_t n_known,
		      struct hb_error *err)
{
	const cJSON *item;
	char field[HB_ERROR_FIELD_MAX];

	cJSON_ArrayForEach(item, obj) {
		/* Python's json keeps the last duplicate, cJSON finds the first:
		 * an ambiguous document is refused rather than read differently. */
		for (const cJSON *prev = obj->child; prev != item; prev = prev->next) {
			if (!strcmp(prev->string, item->string)) {
				snprintf(field, sizeof(field), "%s.%s", prefix, item->string);
				return hb_error_diag(err, "cfg-duplicate-key", HB_ERR_FORMAT, field,
						     false, 0, "key appears more than once");
			}
		}
		if (in_list(item->string, known, n_known) ||
		    in_list(item->string, generic_keys, HB_ARRAY_LEN(generic_keys)))
			continue;
		snprintf(field, sizeof(field), "%s.%s", prefix, item->string);
		return hb_error_diag(err, "cfg-unknown-key", HB_ERR_UNSUPPORTED, field,
				     false, 0, "unknown configuration key (refusing to ignore it)");
	}
	return HB_OK;
}

/* Optional member present and not JSON null. */
static const cJSON *present(const cJSON *obj, const char *key)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
	return item && !cJSON_IsNull(item) ? item : NULL;
}

struct reader {
	const cJSON *obj;
	const char *prefix;
	struct hb_error *err;
	int rc;
};

static void path_of(const struct reader *r, const char *key, char *buf, size_t len)
{
	snprintf(buf, len, "%s.%s", r->prefix, key);
}

static int fail(struct reader *r, const char *id, int code, const char *key,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail(struct reader *r, const char *id, int code, const char *key,
		const char *fmt, ...)
{
	char field[HB_ERROR_FIELD_MAX], msg[HB_ERROR_MSG_MAX];
	va_list ap;

	path_of(r, key, field, sizeof(field));
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!r->rc)
		r->rc = hb_error_diag(r->err, id, code, field, false, 0, "%s", msg);
	return r->rc;
}

/* An integer field >= min; absent -> def (or cfg-missing when required). */
static uint64_t get_u64(struct reader *r, const char *key, bool required,
			uint64_t def, uint64_t min, bool *was_present)
{
	const cJSON *item = present(r->obj, key);
	char field[HB_ERROR_FIELD_MAX];
	uint64_t v = def;

	if (was_present)
		*was_present = item != NULL;
	if (r->rc)
		return def;
	if (!item) {
		if (required)
			fail(r, "cfg-missing", HB_ERR_CONTRACT, key, "required field is absent");
		return def;
	}
	path_of(r, key, field, sizeof(field));
	if (hb_json_item_u64(item, field, &v, NULL)) {
		fail(r, "cfg-json", HB_ERR_FORMAT, key, "expected a non-negative integer");
		return def;
	}
	if (v < min)
		fail(r, "cfg-invalid", HB_ERR_CONTRACT, key, "must be at least %" PRIu64 ", got %" PRIu64, min, v);
	return v;
}

static double get_f64(struct reader *r, const char *key, double def)
{
	const cJSON *item = present(r->obj, key);

	if (r->rc || !item)
		return def;
	if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble)) {
		fail(r, "cfg-json", HB_ERR_FORMAT, key, "expected a finite number");
		return def;
	}
	return item->valuedouble;
}

static bool get_bool(struct reader *r, const char *key, bool def)
{
	const cJSON *item = present(r->obj, key);

	if (r->rc || !item)
		return def;
	if (!cJSON_IsBool(item)) {
		fail(r, "cfg-json", HB_ERR_FORMAT, key, "expected true or false");
		return def;
	}
	return cJSON_IsTrue(item);
}

static int parse_act(struct reader *r, const char *key, const char *s, enum hb_act *out)
{
	if (!strcmp(s, "silu"))
		*out = HB_ACT_SILU;
	else if (!strcmp(s, "sigmoid"))
		*out = HB_ACT_SIGMOID;
	else
		return fail(r, "cfg-invalid", HB_ERR_CONTRACT, key,
			    "activation '%s' is not sigmoid or silu", s);
	return HB_OK;
}

static const char *get_str(struct reader *r, const char *key)
{
	const cJSON *item = present(r->obj, key);

	if (r->rc || !item)
		return NULL;
	if (!cJSON_IsString(item) || !item->valuestring) {
		fail(r, "cfg-json", HB_ERR_FORMAT, key, "expected a string");
		return NULL;
	}
	return item->valuestring;
}

static void parse_layer_types(struct reader *r, struct hb_qwen_config *c)
{
	const cJSON *lt = present(r->obj, "layer_types"), *item;
	size_t i = 0;

	if (r->rc)
		return;
	if (!lt) {
		/* upstream: every `full_attention_interval`-th layer is sparse */
		uint64_t interval = get_u64(r, "full_attention_interval", false, 4, 1, NULL);
		for (i = 0; i < c->num_layers; i++)
			c->layer_kind[i] = (i + 1) % interval ? HB_LAYER_LINEAR : HB_LAYER_SPARSE;
		return;
	}
	if (present(r->obj, "full_attention_interval"))
		get_u64(r, "full_attention_interval", false, 4, 1, NULL);
	if (!cJSON_IsArray(lt)) {
		fail(r, "cfg-json", HB_ERR_FORMAT, "layer_types", "expected an array of strings");
		return;
	}
	if ((uint64_t)cJSON_GetArraySize(lt) != c->num_layers) {
		fail(r, "cfg-invalid", HB_ERR_CONTRACT, "layer_types",
		     "%d entries for %" PRIu64 " layers", cJSON_GetArraySize(lt), c->num_layers);
		return;
	}
	cJSON_ArrayForEach(item, lt) {
		char key[48];
		snprintf(key, sizeof(key), "layer_types[%zu]", i);
		if (!cJSON_IsString(item)) {
			fail(r, "cfg-json", HB_ERR_FORMAT, key, "expected a string");
			return;
		}
		if (!strcmp(item->valuestring, "linear_attention")) {
			c->layer_kind[i] = HB_LAYER_LINEAR;
		} else if (!strcmp(item->valuestring, "qwen_sparse_attention")) {
			c->layer_kind[i] = HB_LAYER_SPARSE;
		} else if (!strcmp(item->valuestring, "full_attention")) {
			/* The released checkpoint's spelling for QSA layers. */
			c->layer_kind[i] = HB_LAYER_SPARSE;
			c->full_attention_spelling = true;
		} else {
			fail(r, "cfg-invalid", HB_ERR_CONTRACT, key,
			     "unsupported layer type '%s'", item->valuestring);
			return;
		}
		i++;
	}
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static void parse_ple_ids(struct reader *r, struct hb_qwen_config *c)
{
	const cJSON *ids = present(r->obj, "ple_layer_ids"), *item;
	size_t n = 0;

	if (r->rc || !ids)
		return;
	if (!cJSON_IsArray(ids)) {
		fail(r, "cfg-json", HB_ERR_FORMAT, "ple_layer_ids", "expected an array of integers");
		return;
	}
	cJSON_ArrayForEach(item, ids) {
		uint64_t v = 0;
		if (hb_json_item_u64(item, "ple_layer_ids", &v, NULL) || v > UINT32_MAX) {
			fail(r, "cfg-json", HB_ERR_FORMAT, "ple_layer_ids", "expected integers");
			return;
		}
		if (v < 1 || v > c->num_layers) {
			fail(r, "cfg-invalid", HB_ERR_CONTRACT, "ple_layer_ids",
			     "one-indexed id %" PRIu64 " outside [1, %" PRIu64 "]", v, c->num_layers);
			return;
		}
		/* upstream keeps sorted(set(ids)): a repeat is dropped here, so the
		 * table never holds more than num_layers (<= 256) distinct ids */
		{
			bool seen = false;
			for (size_t i = 0; i < n && !seen; i++)
				seen = c->ple_layer_ids[i] == (uint32_t)v;
			if (!seen)
				c->ple_layer_ids[n++] = (uint32_t)v;
		}
	}
	/* upstream: sorted(set(ids)) */
	qsort(c->ple_layer_ids, n, sizeof(uint32_t), cmp_u32);
	c->n_ple_layers = 0;
	for (size_t i = 0; i < n; i++)
		if (i == 0 || c->ple_layer_ids[i] != c->ple_layer_ids[i - 1])
			c->ple_layer_ids[c->n_ple_layers++] = c->ple_layer_ids[i];
}

static int64_t get_token_id(struct reader *r, const char *key, bool *has)
{
	const cJSON *item = present(r->obj, key);
	int64_t v = 0;

	*has = false;
	if (r->rc || !item)
		return 0;
	if (hb_json_item_i64(item, key, &v, NULL) || v < 0) {
		fail(r, "cfg-json", HB_ERR_FORMAT, key, "expected a non-negative integer id");
		return 0;
	}
	*has = true;
	return v;
}

static void parse_eos(struct reader *r, struct hb_qwen_config *c)
{
	const cJSON *e = present(r->obj, "eos_token_id"), *item;

	if (r->rc || !e)
		return;
	if (cJSON_IsArray(e)) {
		cJSON_ArrayForEach(item, e) {
			int64_t v = 0;
			if (c->n_eos == HB_QWEN_MAX_EOS) {
				fail(r, "cfg-unsupported", HB_ERR_UNSUPPORTED, "eos_token_id", "more than %d ids", HB_QWEN_MAX_EOS);
				return;
			}
			if (hb_json_item_i64(item, "eos_token_id", &v, NULL) || v < 0) {
				fail(r, "cfg-json", HB_ERR_FORMAT, "eos_token_id", "expected non-negative integer ids");
				return;
			}
			c->eos_token_ids[c->n_eos++] = v;
		}
		return;
	}
	{
		bool has;
		int64_t v = get_token_id(r, "eos_token_id", &has);
		if (has)
			c->eos_token_ids[c->n_eos++] = v;
	}
}

static void parse_rope(struct reader *r, struct hb_qwen_config *c)
{
	const cJSON *rp = present(r->obj, "rope_parameters"), *ms;
	static const char *const rope_keys[] = {
		"rope_type", "rope_theta", "partial_rotary_factor", "mrope_section",
		"mrope_interleaved",
	};
	struct reader sub = { rp, "text_config.rope_parameters", r->err, 0 };
	const char *type;

	if (r->rc)
		return;
	if (!rp) {
		fail(r, "cfg-missing", HB_ERR_CONTRACT, "rope_parameters", "required field is absent");
		return;
	}
	if (!cJSON_IsObject(rp)) {
		fail(r, "cfg-json", HB_ERR_FORMAT, "rope_parameters", "expected an object");
		return;
	}
	if ((r->rc = check_keys(rp, sub.prefix, rope_keys, HB_ARRAY_LEN(rope_keys), r->err)))
		return;
	type = get_str(&sub, "rope_type");
	if (!sub.rc && (!type || strcmp(type, "default")))
		fail(&sub, "cfg-unsupported", HB_ERR_UNSUPPORTED, "rope_type",
		     "only the default rope type is implemented");
	if (!sub.rc && !present(rp, "rope_theta"))
		fail(&sub, "cfg-missing", HB_ERR_CONTRACT, "rope_theta", "required field is absent");
	c->rope_theta = get_f64(&sub, "rope_theta", 0);
	c->partial_rotary_factor = get_f64(&sub, "partial_rotary_factor", 1.0);
	if (!sub.rc && (c->rope_theta <= 0 || c->partial_rotary_factor <= 0 || c->partial_rotary_factor > 1))
		fail(&sub, "cfg-invalid", HB_ERR_CONTRACT, "partial_rotary_factor",
		     "rope_theta must be positive and the factor in (0, 1]");
	c->mrope_section[0] = 11, c->mrope_section[1] = 11, c->mrope_section[2] = 10;
	ms = present(rp, "mrope_section");
	if (!sub.rc && ms) {
		const cJSON *item;
		size_t i = 0;
		if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) != 3) {
			fail(&sub, "cfg-json", HB_ERR_FORMAT, "mrope_section", "expected three integers");
		} else {
			cJSON_ArrayForEach(item, ms)
				if (hb_json_item_u64(item, "mrope_section", &c->mrope_section[i++], NULL))
					fail(&sub, "cfg-json", HB_ERR_FORMAT, "mrope_section", "expected integers");
		}
	}
	c->mrope_interleaved = get_bool(&sub, "mrope_interleaved", false);
	/* int(head_dim * partial_rotary_factor), as upstream computes it */
	/* Legacy top-level copies must agree with rope_parameters. */
	if (!sub.rc && present(r->obj, "rope_theta") &&
	    get_f64(r, "rope_theta", 0) != c->rope_theta)
		fail(r, "cfg-invalid", HB_ERR_CONTRACT, "rope_theta",
		     "disagrees with rope_parameters.rope_theta");
	if (!sub.rc && present(r->obj, "partial_rotary_factor") &&
	    get_f64(r, "partial_rotary_factor", 0) != c->partial_rotary_factor)
		fail(r, "cfg-invalid", HB_ERR_CONTRACT, "partial_rotary_factor",
		     "disagrees with rope_parameters.partial_rotary_factor");
	{
		/* Converting a double outside [0, 2^64) to uint64_t is undefined
		 * (a negative or huge factor): leave 0, refused just below. */
		double rd = floor((double)c->head_dim * c->partial_rotary_factor);
		c->rotary_dim = rd >= 0 && rd < 18446744073709551616.0 ? (uint64_t)rd : 0;
	}
	if (!sub.rc && (c->rotary_dim == 0 || c->rotary_dim % 2))
		fail(&sub, "cfg-unsupported", HB_ERR_UNSUPPORTED, "partial_rotary_factor",
		     "rotary dimension %" PRIu64 " must be even and positive", c->rotary_dim);
	/* A legacy-key disagreement above already set r->rc and the error
	 * record (first error wins): keep its code so the two agree. */
	if (sub.rc && !r->rc)
		r->rc = sub.rc;
}

static void parse_qsa(struct reader *r, struct hb_qwen_config *c)
{
	static const char *const names[] = {
		"indexer_n_heads", "indexer_kv_heads", "indexer_head_dim",
		"indexer_budget", "indexer_compress_ratio",
	};
	uint64_t *dst[] = {
		&c->indexer_n_heads, &c->indexer_kv_heads, &c->indexer_head_dim,
		&c->indexer_budget, &c->indexer_compress_ratio,
	};
	size_t have = 0;
	bool any_sparse = false;

	for (size_t i = 0; i < HB_ARRAY_LEN(names); i++)
		have += present(r->obj, names[i]) != NULL;
	/* num_layers is bounded by HB_QWEN_MAX_LAYERS only when no error was
	 * recorded: return before indexing layer_kind with it. */
	if (r->rc)
		return;
	for (size_t i = 0; i < c->num_layers; i++)
		any_sparse |= c->layer_kind[i] == HB_LAYER_SPARSE;
	if (have == 0) {
		/* Upstream builds an indexer in every sparse layer; without the
		 * five fields the model cannot be constructed. */
		if (any_sparse)
			fail(r, "cfg-missing", HB_ERR_CONTRACT, "indexer_n_heads",
			     "sparse-attention layers need the QSA indexer fields");
		return;
	}
	for (size_t i = 0; i < HB_ARRAY_LEN(names); i++)
		*dst[i] = get_u64(r, names[i], true, 0, 1, NULL);
	if (r->rc)
		return;
	c->qsa = true;
	if (c->indexer_kv_heads != 1)
		fail(r, "cfg-invalid", HB_ERR_CONTRACT, "indexer_kv_heads", "Qwen4Exp QSA requires exactly one key head");
	else if (c->indexer_budget % c->indexer_compress_ratio)
		fail(r, "cfg-invalid", HB_ERR_CONTRACT, "indexer_budget", "not divisible by indexer_compress_ratio");
	else if (c->rotary_dim > c->indexer_head_dim)
		fail(r, "cfg-invalid", HB_ERR_CONTRACT, "indexer_head_dim",
		     "rotary dimension %" PRIu64 " does not fit the index head %" PRIu64,
		     c->rotary_dim, c->indexer_head_dim);
}

static void parse_ple(struct reader *r, struct hb_qwen_config *c)
{
	uint64_t heads;

	parse_ple_ids(r, c);
	c->ple_embed_dim = get_u64(r, "ple_embed_dim", false, c->hidden_size, 1, &c->ple_embed_dim_explicit);
	c->ple_conv_kernel_size = get_u64(r, "ple_conv_kernel_size", false, 4, 1, NULL);
	c->ngram_size = get_u64(r, "ngram_size", false, 3, 2, NULL);
	c->heads_per_ngram = get_u64(r, "heads_per_ngram", false, 8, 1, NULL);
	c->ngram_vocab_size_base = get_u64(r, "ngram_vocab_size_base", false, 20000000, 2, NULL);
	c->ngram_vocab_divisor = get_u64(r, "make_ngram_vocab_size_divisible_by", false, 128, 1, NULL);
	c->split_ngram_parts = get_u64(r, "split_ngram_parts", false, 512, 1, NULL);
	c->seed = get_u64(r, "seed", false, 1234, 0, &c->seed_present);
	if (r->rc || !c->n_ple_layers)
		return;
	heads = hb_qwen_ngram_heads(c);
	if (c->ngram_size > 8)
		fail(r, "cfg-unsupported", HB_ERR_UNSUPPORTED, "ngram_size", "n-grams longer than 8");
	else if (heads == 0 || c->ple_embed_dim % heads)
		fail(r, "cfg-invalid", HB_ERR_CONTRACT, "ple_embed_dim",
		     "%" PRIu64 " is not divisible by the %" PRIu64 " n-gram heads", c->ple_embed_dim, heads);
	for (size_t i = 0; !r->rc && i < c->n_ple_layers; i++)
		if (c->layer_kind[c->ple_layer_ids[i] - 1] != HB_LAYER_LINEAR)
			fail(r, "cfg-invalid", HB_ERR_CONTRACT, "ple_layer_ids",
			     "PLE on layer %u, which is not a linear-attention layer", c->ple_layer_ids[i]);
	if (!r->rc && c->n_eos == 0)
		fail(r, "cfg-invalid", HB_ERR_CONTRACT, "eos_token_id",
		     "must be set when PLE layers are enabled");
}

/* upstream derives number_of_conv_states = 3 with PLE, else 1, and saves it */
static void check_conv_states(struct reader *r, const struct hb_qwen_config *c)
{
	bool has;
	uint64_t v = get_u64(r, "number_of_conv_states", false, 0, 0, &has);

	if (!r->rc && has && v != (c->n_ple_layers ? 3u : 1u))
		fail(r, "cfg-invalid", HB_ERR_CONTRACT, "number_of_conv_states",
		     "%" PRIu64 " contradicts the PLE layers", v);
}

static int parse_text(const cJSON *t, struct hb_qwen_config *c, struct hb_error *err)
{
	struct reader r = { t, "text_config", err, 0 };
	const char *s;

	if (!cJSON_IsObject(t))
		return hb_error_diag(err, "cfg-json", HB_ERR_FORMAT, "text_config", false, 0, "expected an object");
	if ((r.rc = check_keys(t, "text_config", text_keys, HB_ARRAY_LEN(text_keys), err)))
		return r.rc;
	s = get_str(&r, "model_type");
	if (s && strcmp(s, "qwen4_exp_text"))
		fail(&r, "cfg-model-type", HB_ERR_CONTRACT, "model_type", "'%s' is not qwen4_exp_text", s);

	c->vocab_size = get_u64(&r, "vocab_size", false, 248320, 1, NULL);
	c->hidden_size = get_u64(&r, "hidden_size", false, 2048, 1, NULL);
	c->num_layers = get_u64(&r, "num_hidden_layers", false, 40, 1, NULL);
	if (!r.rc && c->num_layers > HB_QWEN_MAX_LAYERS)
		fail(&r, "cfg-unsupported", HB_ERR_UNSUPPORTED, "num_hidden_layers", "more than %d layers", HB_QWEN_MAX_LAYERS);
	c->num_heads = get_u64(&r, "num_attention_heads", false, 16, 1, NULL);
	c->num_kv_heads = get_u64(&r, "num_key_value_heads", false, 2, 1, NULL);
	c->head_dim = get_u64(&r, "head_dim", false, 256, 1, NULL);
	c->max_position_embeddings = get_u64(&r, "max_position_embeddings", false, 32768, 1, NULL);
	c->rms_norm_eps = get_f64(&r, "rms_norm_eps", 1e-6);
	c->attention_bias = get_bool(&r, "attention_bias", false);
	c->tie_word_embeddings = get_bool(&r, "tie_word_embeddings", false);
	c->norm_topk_prob = get_bool(&r, "norm_topk_prob", true);
	s = get_str(&r, "hidden_act");
	c->hidden_act = HB_ACT_SILU;
	if (s && strcmp(s, "silu"))
		fail(&r, "cfg-unsupported", HB_ERR_UNSUPPORTED, "hidden_act",
		     "experts are SwiGLU: only silu is implemented, got '%s'", s);
	c->output_gate = c->hidden_act;
	s = get_str(&r, "output_gate_type");
	c->output_gate_explicit = s != NULL;
	if (s)
		parse_act(&r, "output_gate_type", s, &c->output_gate);

	c->linear_conv_kernel = get_u64(&r, "linear_conv_kernel_dim", false, 4, 1, NULL);
	c->linear_key_head_dim = get_u64(&r, "linear_key_head_dim", false, 128, 1, NULL);
	c->linear_value_head_dim = get_u64(&r, "linear_value_head_dim", false, 128, 1, NULL);
	c->linear_num_key_heads = get_u64(&r, "linear_num_key_heads", false, 16, 1, NULL);
	c->linear_num_value_heads = get_u64(&r, "linear_num_value_heads", false, 32, 1, NULL);
	c->moe_intermediate_size = get_u64(&r, "moe_intermediate_size", false, 512, 1, NULL);
	c->shared_expert_intermediate_size = get_u64(&r, "shared_expert_intermediate_size", false, 512, 1, NULL);
	c->num_experts = get_u64(&r, "num_experts", false, 512, 1, NULL);
	c->num_experts_per_tok = get_u64(&r, "num_experts_per_tok", false, 10, 1, NULL);
	if (!r.rc && c->num_experts_per_tok > c->num_experts)
		fail(&r, "cfg-invalid", HB_ERR_CONTRACT, "num_experts_per_tok",
		     "%" PRIu64 " exceeds num_experts %" PRIu64, c->num_experts_per_tok, c->num_experts);
	c->hc_count = get_u64(&r, "hc_count", false, 4, 2, NULL);
	c->hc_lowrank = get_u64(&r, "hc_lowrank", false, 320, 1, NULL);
	if (!r.rc && c->num_heads % c->num_kv_heads)
		fail(&r, "cfg-invalid", HB_ERR_CONTRACT, "num_key_value_heads",
		     "num_attention_heads is not a multiple of it");
	if (!r.rc && c->linear_num_value_heads % c->linear_num_key_heads)
		fail(&r, "cfg-invalid", HB_ERR_CONTRACT, "linear_num_value_heads",
		     "not a multiple of linear_num_key_heads");

	parse_layer_types(&r, c);
	parse_rope(&r, c);
	parse_qsa(&r, c);
	{
		bool has;
		c->pad_token_id = get_token_id(&r, "pad_token_id", &has);
		c->has_pad_token_id = has;
		c->bos_token_id = get_token_id(&r, "bos_token_id", &has);
		c->has_bos_token_id = has;
	}
	parse_eos(&r, c);
	for (size_t i = 0; !r.rc && i < c->n_eos; i++)
		if ((uint64_t)c->eos_token_ids[i] >= c->vocab_size)
			fail(&r, "cfg-invalid", HB_ERR_CONTRACT, "eos_token_id",
			     "id %" PRId64 " is outside the vocabulary", c->eos_token_ids[i]);
	parse_ple(&r, c);
	check_conv_states(&r, c);
	return r.rc;
}

static int parse_quantization(const cJSON *q, struct hb_qwen_config *c, struct hb_error *err)
{
	static const char *const keys[] = {
		"quant_method", "fmt", "weight_block_size", "activation_scheme",
		"modules_to_not_convert",
	};
	struct reader r = { q, "quantization_config", err, 0 };
	const cJSON *bs;
	const char *s;

	if (!cJSON_IsObject(q))
		return hb_error_diag(err, "cfg-json", HB_ERR_FORMAT, "quantization_config", false, 0, "expected an object");
	if ((r.rc = check_keys(q, r.prefix, keys, HB_ARRAY_LEN(keys), err)))
		return r.rc;
	s = get_str(&r, "quant_method");
	if (!r.rc && (!s || strcmp(s, "fp8")))
		return fail(&r, "cfg-unsupported", HB_ERR_UNSUPPORTED, "quant_method",
			    "only fp8 block quantization is understood");
	s = get_str(&r, "fmt");
	if (!r.rc && s && strcmp(s, "e4m3"))
		return fail(&r, "cfg-unsupported", HB_ERR_UNSUPPORTED, "fmt", "only e4m3 is understood");
	bs = present(q, "weight_block_size");
	if (!r.rc) {
		uint64_t v[2] = {0, 0};
		if (!bs || !cJSON_IsArray(bs) || cJSON_GetArraySize(bs) != 2 ||
		    hb_json_item_u64(cJSON_GetArrayItem(bs, 0), "", &v[0], NULL) ||
		    hb_json_item_u64(cJSON_GetArrayItem(bs, 1), "", &v[1], NULL) || !v[0] || !v[1])
			return fail(&r, "cfg-invalid", HB_ERR_CONTRACT, "weight_block_size",
				    "expected two positive integers");
		c->fp8 = true;
		c->fp8_block_rows = v[0];
		c->fp8_block_cols = v[1];
	}
	return r.rc;
}

int hb_qwen_config_parse(const cJSON *root, struct hb_qwen_config *cfg,
			 struct hb_error *err)
{
	struct hb_qwen_config c;
	struct reader r = { root, "config", err, 0 };
	const cJSON *q;
	const char *s;
	bool has;
	int rc;

	memset(&c, 0, sizeof(c));
	if (!cJSON_IsObject(root))
		return hb_error_diag(err, "cfg-json", HB_ERR_FORMAT, "config", false, 0, "expected a JSON object");
	if ((rc = check_keys(root, "config", top_keys, HB_ARRAY_LEN(top_keys), err)))
		return rc;
	s = get_str(&r, "model_type");
	if (!r.rc && (!s || strcmp(s, "qwen4_exp")))
		fail(&r, "cfg-model-type", HB_ERR_CONTRACT, "model_type",
		     "'%s' is not qwen4_exp", s ? s : "(absent)");
	if (r.rc)
		return r.rc;
	if (!present(root, "text_config"))
		return fail(&r, "cfg-missing", HB_ERR_CONTRACT, "text_config", "required field is absent");
	if ((rc = parse_text(present(root, "text_config"), &c, err)))
		return rc;
	c.has_vision_config = present(root, "vision_config") != NULL;
	c.image_token_id = get_token_id(&r, "image_token_id", &has);
	if (!has)
		c.image_token_id = 248056;
	c.video_token_id = get_token_id(&r, "video_token_id", &has);
	if (!has)
		c.video_token_id = 248057;
	c.vision_start_token_id = get_token_id(&r, "vision_start_token_id", &has);
	if (!has)
		c.vision_start_token_id = 248053;
	c.vision_end_token_id = get_token_id(&r, "vision_end_token_id", &has);
	if (!has)
		c.vision_end_token_id = 248054;
	/* The top-level tie flag is what ForConditionalGeneration obeys
	 * (PreTrainedModel.tie_weights reads self.config.tie_word_embeddings):
	 * tied, lm_head is the embedding and the checkpoint carries no copy. */
	c.tie_word_embeddings = get_bool(&r, "tie_word_embeddings", false);
	if (r.rc)
		return r.rc;
	q = present(root, "quantization_config");
	if (q && (rc = parse_quantization(q, &c, err)))
		return rc;
	*cfg = c;
	return HB_OK;
}

int hb_qwen_config_load(const char *path, struct hb_qwen_config *cfg,
			struct hb_error *err)
{
	cJSON *root = NULL;
	int rc = hb_json_parse_file(path, 16u << 20, &root, err);

	if (rc)
		return rc;
	rc = hb_qwen_config_parse(root, cfg, err);
	cJSON_Delete(root);
	return rc;
}

uint64_t hb_qwen_ngram_heads(const struct hb_qwen_config *cfg)
{
	return (cfg->ngram_size - 1) * cfg->heads_per_ngram;
}

int hb_qwen_ple_index(const struct hb_qwen_config *cfg, uint32_t layer1)
{
	for (size_t i = 0; i < cfg->n_ple_layers; i++)
		if (cfg->ple_layer_ids[i] == layer1)
			return (int)i;
	return -1;
}

const char *hb_layer_kind_name(enum hb_layer_kind kind)
{
	return kind == HB_LAYER_LINEAR ? "linear_attention" :
	       kind == HB_LAYER_SPARSE ? "qwen_sparse_attention" : "unknown";
}

const char *hb_act_name(enum hb_act act)
{
	return act == HB_ACT_SILU ? "silu" : act == HB_ACT_SIGMOID ? "sigmoid" : "unknown";
}
