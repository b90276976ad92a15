/*
 * Unit tests: config.json with upstream semantics, the PLE hash identity and
 * the profile table.  Expected numbers come from the source documents
 * (AFN-003: 320,001,446 head rows padded to 320,001,536) and from the
 * published splitmix64 reference output, not from this code.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_json.h"
#include "model/hb_ple_hash.h"
#include "model/hb_profile.h"
#include "model/hb_qwen_config.h"

/* The released checkpoint's config in the shape the source documents give:
 * QSA layers spelled full_attention, sigmoid output gate, one PLE layer. */
static const char real_text[] =
	"{\"model_type\":\"qwen4_exp\",\"architectures\":[\"Qwen4ExpForConditionalGeneration\"],"
	"\"tie_word_embeddings\":false,\"vision_config\":{\"depth\":27},"
	"\"text_config\":{\"model_type\":\"qwen4_exp_text\",\"vocab_size\":248320,"
	"\"hidden_size\":2560,\"num_hidden_layers\":48,\"num_attention_heads\":32,"
	"\"num_key_value_heads\":2,\"head_dim\":256,\"max_position_embeddings\":262144,"
	"\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000000,"
	"\"partial_rotary_factor\":0.25,\"mrope_section\":[11,11,10],\"mrope_interleaved\":true},"
	"\"layer_types\":%s,\"hc_count\":4,\"hc_lowrank\":320,\"ple_layer_ids\":[2],"
	"\"ple_embed_dim\":2560,\"ngram_size\":3,\"heads_per_ngram\":8,"
	"\"ngram_vocab_size_base\":20000000,\"seed\":1234,\"indexer_n_heads\":16,"
	"\"indexer_kv_heads\":1,\"indexer_head_dim\":128,\"indexer_budget\":2048,"
	"\"indexer_compress_ratio\":4,\"num_experts\":512,\"num_experts_per_tok\":10,"
	"\"moe_intermediate_size\":640,\"shared_expert_intermediate_size\":640,"
	"\"output_gate_type\":\"sigmoid\",\"eos_token_id\":248044%s}}";

static char *real_config(const char *extra)
{
	static char layer_types[48 * 24 + 4];
	size_t n = 0;
	char *out;

	layer_types[n++] = '[';
	for (int i = 0; i < 48; i++)
		n += (size_t)snprintf(layer_types + n, sizeof(layer_types) - n, "%s\"%s\"",
				      i ? "," : "", (i + 1) % 4 ? "linear_attention" : "full_attention");
	layer_types[n++] = ']';
	layer_types[n] = '\0';
	out = malloc(sizeof(real_text) + sizeof(layer_types) + strlen(extra) + 16);
	snprintf(out, sizeof(real_text) + sizeof(layer_types) + strlen(extra) + 16, real_text,
		 layer_types, extra);
	return out;
}

static int parse_text(const char *text, struct hb_qwen_config *cfg, struct hb_error *err)
{
	cJSON *root = NULL;
	int rc = hb_json_parse(text, strlen(text), "config.json", &root, err);
	if (rc)
		return rc;
	rc = hb_qwen_config_parse(root, cfg, err);
	cJSON_Delete(root);
	return rc;
}

static void real_config_resolves(void)
{
	struct hb_qwen_config c;
	struct hb_error err;
	char *text = real_config("");

	hb_error_clear(&err);
	CHECK_EQ_INT(parse_text(text, &c, &err), HB_OK);
	CHECK_STR(err.msg, "");
	CHECK(c.full_attention_spelling);
	for (int i = 0; i < 48; i++)
		CHECK_EQ_INT(c.layer_kind[i], (i + 1) % 4 ? HB_LAYER_LINEAR : HB_LAYER_SPARSE);
	CHECK_EQ_INT(c.output_gate, HB_ACT_SIGMOID);
	CHECK_EQ_U64(c.rotary_dim, 64);
	CHECK(c.qsa);
	CHECK_EQ_U64(c.n_ple_layers, 1);
	CHECK_EQ_U64(c.ple_layer_ids[0], 2);
	CHECK_EQ_U64(hb_qwen_ngram_heads(&c), 16);
	CHECK(c.seed_present);
	CHECK_EQ_U64(c.split_ngram_parts, 512); /* upstream default */
	CHECK(hb_profile_auto(&c) == hb_profile_flash_next());
	CHECK_EQ_INT(hb_profile_check(hb_profile_flash_next(), &c, NULL), HB_OK);
	free(text);
}

static void upstream_defaults(void)
{
	static const char text[] =
		"{\"model_type\":\"qwen4_exp\",\"text_config\":{\"num_hidden_layers\":8,"
		"\"hidden_size\":64,\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":1e4},"
		"\"indexer_n_heads\":2,\"indexer_kv_heads\":1,\"indexer_head_dim\":256,"
		"\"indexer_budget\":8,\"indexer_compress_ratio\":4,\"ple_layer_ids\":[5,1,5],"
		"\"eos_token_id\":[7,9]}}";
	struct hb_qwen_config c;
	struct hb_error err;

	hb_error_clear(&err);
	CHECK_EQ_INT(parse_text(text, &c, &err), HB_OK);
	CHECK_STR(err.msg, "");
	/* full_attention_interval 4: layers 4 and 8 (one-indexed) are sparse */
	for (int i = 0; i < 8; i++)
		CHECK_EQ_INT(c.layer_kind[i], (i + 1) % 4 ? HB_LAYER_LINEAR : HB_LAYER_SPARSE);
	CHECK(!c.full_attention_spelling);
	CHECK_EQ_INT(c.output_gate, HB_ACT_SILU); /* hidden_act */
	CHECK(!c.output_gate_explicit);
	CHECK_EQ_U64(c.ple_embed_dim, 64);       /* hidden_size */
	CHECK(!c.ple_embed_dim_explicit);
	CHECK_EQ_U64(c.n_ple_layers, 2);         /* sorted(set(...)) */
	CHECK_EQ_U64(c.ple_layer_ids[0], 1);
	CHECK_EQ_U64(c.ple_layer_ids[1], 5);
	CHECK(!c.seed_present);
	CHECK_EQ_U64(c.seed, 1234);
	CHECK_EQ_U64(c.vocab_size, 248320);
	CHECK_EQ_U64(c.num_experts, 512);
	CHECK_EQ_U64(c.hc_lowrank, 320);
	CHECK_EQ_U64(c.n_eos, 2);
	CHECK_EQ_INT(c.eos_token_ids[1], 9);
	CHECK_EQ_U64(c.rotary_dim, 256);
	CHECK(hb_profile_auto(&c) == hb_profile_dev());
}

struct refusal {
	const char *key;   /* text_config key to set (replacing any original) */
	const char *value; /* its new JSON value */
	const char *id;
	const char *field;
};

/* Parse the real config, set one text_config key, parse again. */
static int mutated(const char *key, const char *value, struct hb_error *err)
{
	struct hb_qwen_config c;
	char *text = real_config("");
	cJSON *root = cJSON_Parse(text), *tc, *v = cJSON_Parse(value);
	int rc;

	free(text);
	tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
	if (cJSON_GetObjectItemCaseSensitive(tc, key))
		cJSON_ReplaceItemInObjectCaseSensitive(tc, key, v);
	else
		cJSON_AddItemToObject(tc, key, v);
	rc = hb_qwen_config_parse(root, &c, err);
	cJSON_Delete(root);
	return rc;
}

static void refusals(void)
{
	static const struct refusal cases[] = {
		{"mystery_flag", "true", "cfg-unknown-key", "text_config.mystery_flag"},
		{"hidden_act", "\"gelu\"", "cfg-unsupported", "text_config.hidden_act"},
		{"hc_count", "1", "cfg-invalid", "text_config.hc_count"},
		{"num_experts_per_tok", "513", "cfg-invalid", "text_config.num_experts_per_tok"},
		{"indexer_kv_heads", "2", "cfg-invalid", "text_config.indexer_kv_heads"},
		{"indexer_budget", "2047", "cfg-invalid", "text_config.indexer_budget"},
		{"indexer_head_dim", "32", "cfg-invalid", "text_config.indexer_head_dim"},
		{"ple_layer_ids", "[4]", "cfg-invalid", "text_config.ple_layer_ids"},
		{"ple_layer_ids", "[49]", "cfg-invalid", "text_config.ple_layer_ids"},
		{"ple_layer_ids", "[0]", "cfg-invalid", "text_config.ple_layer_ids"},
		{"ple_embed_dim", "2550", "cfg-invalid", "text_config.ple_embed_dim"},
		{"output_gate_type", "\"tanh\"", "cfg-invalid", "text_config.output_gate_type"},
		{"hidden_size", "\"2560\"", "cfg-json", "text_config.hidden_size"},
		{"hidden_size", "2560.5", "cfg-json", "text_config.hidden_size"},
		{"model_type", "\"qwen3_next\"", "cfg-model-type", "text_config.model_type"},
		{"rope_parameters", "{\"rope_type\":\"yarn\",\"rope_theta\":1}", "cfg-unsupported",
		 "text_config.rope_parameters.rope_type"},
		{"rope_parameters", "{\"rope_type\":\"default\"}", "cfg-missing",
		 "text_config.rope_parameters.rope_theta"},
		{"eos_token_id", "248320", "cfg-invalid", "text_config.eos_token_id"},
		{"eos_token_id", "null", "cfg-invalid", "text_config.eos_token_id"},
		{"layer_types", "[\"linear_attention\"]", "cfg-invalid", "text_config.layer_types"},
		{"indexer_n_heads", "null", "cfg-missing", "text_config.indexer_n_heads"},
	};

	for (size_t i = 0; i < HB_ARRAY_LEN(cases); i++) {
		struct hb_error err;
		hb_error_clear(&err);
		if (mutated(cases[i].key, cases[i].value, &err) == HB_OK) {
			hb_check_fail(__FILE__, __LINE__, "case %zu (%s) was accepted", i, cases[i].key);
			continue;
		}
		CHECK_STR(err.id, cases[i].id);
		CHECK_STR(err.field, cases[i].field);
	}
}

/* transformers moves legacy top-level rope keys into rope_parameters; they
 * are accepted when they agree and refused when they contradict. */
static void legacy_rope_keys(void)
{
	struct hb_error err;

	hb_error_clear(&err);
	CHECK_EQ_INT(mutated("partial_rotary_factor", "0.25", &err), HB_OK);
	CHECK_EQ_INT(mutated("rope_theta", "10000000", &err), HB_OK);
	hb_error_clear(&err);
	CHECK(mutated("partial_rotary_factor", "0.5", &err) != HB_OK);
	CHECK_STR(err.id, "cfg-invalid");
	CHECK_STR(err.field, "text_config.partial_rotary_factor");
}

static void duplicate_and_unknown_top_level(void)
{
	struct hb_qwen_config c;
	struct hb_error err;

	hb_error_clear(&err);
	CHECK(parse_text("{\"model_type\":\"qwen4_exp\",\"model_type\":\"x\",\"text_config\":{}}", &c, &err) != HB_OK);
	CHECK_STR(err.id, "cfg-duplicate-key");
	hb_error_clear(&err);
	CHECK(parse_text("{\"model_type\":\"qwen4_exp\",\"surprise\":1,\"text_config\":{}}", &c, &err) != HB_OK);
	CHECK_STR(err.id, "cfg-unknown-key");
	CHECK_STR(err.field, "config.surprise");
	hb_error_clear(&err);
	CHECK(parse_text("{\"model_type\":\"qwen4_exp\"}", &c, &err) != HB_OK);
	CHECK_STR(err.id, "cfg-missing");
	hb_error_clear(&err);
	CHECK(parse_text("[]", &c, &err) != HB_OK);
	CHECK_STR(err.id, "cfg-json");
}

/* A profile equality broken while the identity signature holds is refused
 * by the profile, not demoted to dev. */
static void profile_near_miss(void)
{
	struct hb_qwen_config c;
	struct hb_error err;
	char *text = real_config("");

	CHECK_EQ_INT(parse_text(text, &c, NULL), HB_OK);
	free(text);
	c.num_experts_per_tok = 8;
	CHECK(hb_profile_auto(&c) == hb_profile_flash_next());
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_profile_check(hb_profile_flash_next(), &c, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "profile-mismatch");
	CHECK_STR(err.field, "text_config.num_experts_per_tok");
	c.num_experts_per_tok = 10;
	c.layer_kind[7] = HB_LAYER_LINEAR;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_profile_check(hb_profile_flash_next(), &c, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.field, "text_config.layer_types[7]");
	CHECK_STR(hb_profile_flash_next()->status, "pinned-not-supported");
	CHECK_STR(hb_profile_dev()->status, "correctness-fixture");
	CHECK(hb_profile_find("supported") == NULL);
}

/* splitmix64 from state 0 yields 0xe220a8397b1dcdaf first: the published
 * reference output of Vigna's splitmix64.c. */
static void splitmix_reference(void)
{
	CHECK_EQ_U64(hb_splitmix64(0), 0xe220a8397b1dcdafull);
	CHECK(hb_is_prime(2) && hb_is_prime(3) && !hb_is_prime(1) && !hb_is_prime(9));
	CHECK(hb_is_prime(20000003));   /* the first prime after 2e7 */
	CHECK(!hb_is_prime(20000001));
}

/* AFN-003: the sixteen heads end at 320,001,446 rows, padded to 320,001,536. */
static void real_ple_geometry(void)
{
	struct hb_qwen_config c;
	struct hb_ple_table_hash h;
	uint8_t d1[HB_SHA256_BYTES], d2[HB_SHA256_BYTES];
	char *text = real_config("");

	CHECK_EQ_INT(parse_text(text, &c, NULL), HB_OK);
	free(text);
	CHECK_EQ_INT(hb_ple_hash_compute(&c, 0, &h, NULL), HB_OK);
	CHECK_EQ_U64(h.heads, 16);
	CHECK_EQ_U64(h.logical_rows, 320001446u);
	CHECK_EQ_U64(h.physical_rows, 320001536u);
	CHECK_EQ_U64(h.physical_rows - h.logical_rows, 90);
	CHECK_EQ_U64(h.row_width, 160);
	CHECK_EQ_U64(h.head_sizes[0], 20000003u);
	CHECK_EQ_U64(h.head_offsets[0], 0);
	CHECK_EQ_U64(h.head_offsets[1], 20000003u);
	for (int i = 0; i < 3; i++)
		CHECK(h.multipliers[i] % 2 == 1);
	CHECK_EQ_INT(hb_profile_check_ple(hb_profile_flash_next(), &h, NULL), HB_OK);
	/* the identity digest moves with the seed */
	CHECK_EQ_INT(hb_ple_hash_digest(&c, d1, NULL), HB_OK);
	c.seed = 1235;
	CHECK_EQ_INT(hb_ple_hash_digest(&c, d2, NULL), HB_OK);
	CHECK(memcmp(d1, d2, sizeof(d1)) != 0);
	CHECK_EQ_INT(hb_ple_hash_compute(&c, 0, &h, NULL), HB_OK);
	CHECK_EQ_INT(hb_profile_check_ple(hb_profile_flash_next(), &h, NULL), HB_OK); /* rows do not depend on seed */
}

/*
 * Against upstream: each oracle set's manifest records what transformers
 * itself resolved from the same config.json (config_resolved, an upstream
 * capture).  Our reader and hash recomputation must agree on every value.
 */
static void check_against_upstream(const char *set)
{
	char path[4096];
	cJSON *m = NULL;
	const cJSON *r, *lt, *item, *ple;
	struct hb_qwen_config c;
	struct hb_error err;
	size_t i = 0;
	const char *gate = NULL;
	uint64_t u = 0;

	snprintf(path, sizeof(path), "%s/tests/fixtures/upstream/%s/checkpoint/config.json",
		 hb_test_srcdir(), set);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_qwen_config_load(path, &c, &err), HB_OK);
	CHECK_STR(err.msg, "");
	snprintf(path, sizeof(path), "%s/tests/fixtures/upstream/%s/oracle/manifest.json",
		 hb_test_srcdir(), set);
	CHECK_EQ_INT(hb_json_parse_file(path, 64u << 20, &m, NULL), HB_OK);
	if (!m)
		return;
	r = cJSON_GetObjectItemCaseSensitive(m, "config_resolved");
	lt = cJSON_GetObjectItemCaseSensitive(r, "layer_types");
	CHECK_EQ_U64((uint64_t)cJSON_GetArraySize(lt), c.num_layers);
	cJSON_ArrayForEach(item, lt)
		CHECK_STR(hb_layer_kind_name((enum hb_layer_kind)c.layer_kind[i++]), item->valuestring);
	CHECK_EQ_INT(hb_json_str(r, "output_gate", "output_gate", &gate, NULL), HB_OK);
	CHECK_STR(hb_act_name(c.output_gate), gate);
	CHECK_EQ_INT(hb_json_u64(r, "ple_embed_dim", "ple_embed_dim", &u, NULL), HB_OK);
	CHECK_EQ_U64(c.ple_embed_dim, u);
	CHECK_EQ_INT(hb_json_u64(r, "rotary_dim", "rotary_dim", &u, NULL), HB_OK);
	CHECK_EQ_U64(c.rotary_dim, u);
	CHECK_EQ_INT(hb_json_u64(r, "eos_token_id_used", "eos", &u, NULL), HB_OK);
	CHECK_EQ_U64((uint64_t)c.eos_token_ids[0], u);
	ple = cJSON_GetObjectItemCaseSensitive(r, "ple");
	CHECK_EQ_U64((uint64_t)cJSON_GetArraySize(ple), c.n_ple_layers);
	i = 0;
	cJSON_ArrayForEach(item, ple) {
		struct hb_ple_table_hash h;
		const cJSON *v;
		size_t k = 0;
		CHECK_EQ_INT(hb_ple_hash_compute(&c, i, &h, NULL), HB_OK);
		CHECK_EQ_U64(h.layer_id - 1, strtoull(item->string + 1, NULL, 10));
		cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(item, "head_vocab_sizes"))
			CHECK_EQ_U64(h.head_sizes[k++], (uint64_t)v->valuedouble);
		CHECK_EQ_U64(k, h.heads);
		k = 0;
		cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(item, "head_offsets"))
			CHECK_EQ_U64(h.head_offsets[k++], (uint64_t)v->valuedouble);
		k = 0;
		cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(item, "layer_multipliers_decimal"))
			CHECK_EQ_U64(h.multipliers[k++], strtoull(v->valuestring, NULL, 10));
		CHECK_EQ_U64(k, h.ngram_size);
		CHECK_EQ_INT(hb_json_u64(item, "total_vocab_size", "t", &u, NULL), HB_OK);
		CHECK_EQ_U64(h.logical_rows, u);
		CHECK_EQ_INT(hb_json_u64(item, "padded_rows", "p", &u, NULL), HB_OK);
		CHECK_EQ_U64(h.physical_rows, u);
		CHECK_EQ_INT(hb_json_u64(item, "head_dim_per_ngram", "w", &u, NULL), HB_OK);
		CHECK_EQ_U64(h.row_width, u);
		i++;
	}
	cJSON_Delete(m);
}

static void realshape_matches_upstream(void)
{
	check_against_upstream("realshape");
}

static void general_matches_upstream(void)
{
	check_against_upstream("general");
}

HB_TEST_MAIN(T(real_config_resolves), T(upstream_defaults), T(refusals),
	     T(legacy_rope_keys), T(duplicate_and_unknown_top_level), T(profile_near_miss), T(splitmix_reference),
	     T(real_ple_geometry), T(realshape_matches_upstream),
	     T(general_matches_upstream))
