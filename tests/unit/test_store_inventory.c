/*
 * Unit tests: tensor inventory.  The source listings come from the oracle
 * manifests (checkpoint.tensors: name, file, dtype, shape as upstream's
 * save_pretrained wrote them); mutations of those listings are
 * contract-control cases, one defect each, with the exact diagnostic.
 */
#include "hb_base.h"
#include "harness.h"
#include "model/hb_inventory.h"
#include "hb_json.h"

struct listing {
	struct hb_inv_source *v;
	char **names;
	size_t n;
	struct hb_qwen_config cfg;
};

static void listing_free(struct listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* room for `extra` additional entries appended by a test */
static bool load_listing(const char *set, size_t extra, struct listing *l)
{
	char path[4096];
	cJSON *m = NULL;
	const cJSON *t, *item;
	size_t n, i = 0;

	memset(l, 0, sizeof(*l));
	snprintf(path, sizeof(path), "%s/tests/fixtures/upstream/%s/checkpoint/config.json",
		 hb_test_srcdir(), set);
	if (hb_qwen_config_load(path, &l->cfg, NULL))
		return false;
	snprintf(path, sizeof(path), "%s/tests/fixtures/upstream/%s/oracle/manifest.json",
		 hb_test_srcdir(), set);
	if (hb_json_parse_file(path, 64u << 20, &m, NULL))
		return false;
	t = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "checkpoint"), "tensors");
	n = (size_t)cJSON_GetArraySize(t);
	l->v = calloc(n + extra, sizeof(*l->v));
	l->names = calloc(n + extra, sizeof(char *));
	cJSON_ArrayForEach(item, t) {
		struct hb_inv_source *s = &l->v[i];
		const cJSON *d;
		const char *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype")->valuestring;
		uint64_t elems = 1;
		l->names[i] = strdup(item->string);
		s->name = l->names[i];
		hb_dtype_from_name(dt, strlen(dt), &s->dtype);
		cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(item, "shape")) {
			s->shape[s->ndim++] = (uint64_t)d->valuedouble;
			elems *= (uint64_t)d->valuedouble;
		}
		s->nbytes = elems * hb_dtype_size(s->dtype);
		s->shard = "fixture";
		i++;
	}
	l->n = n;
	cJSON_Delete(m);
	return true;
}

static struct hb_inv_source *find_src(struct listing *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->v[i].name, name))
			return &l->v[i];
	return NULL;
}

static void append(struct listing *l, const char *name, enum hb_dtype dt, uint32_t ndim,
		   uint64_t d0, uint64_t d1)
{
	struct hb_inv_source *s = &l->v[l->n];
	l->names[l->n] = strdup(name);
	s->name = l->names[l->n];
	s->dtype = dt;
	s->ndim = ndim;
	s->shape[0] = d0;
	s->shape[1] = d1;
	s->nbytes = d0 * (ndim > 1 ? d1 : 1) * hb_dtype_size(dt);
	l->n++;
}

static void remove_src(struct listing *l, const char *name)
{
	struct hb_inv_source *s = find_src(l, name);
	size_t i = (size_t)(s - l->v);
	free(l->names[i]);
	memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof(*l->v));
	memmove(&l->names[i], &l->names[i + 1], (l->n - i - 1) * sizeof(char *));
	l->n--;
}

#define P "model.language_model.layers."

static void realshape_classified(void)
{
	struct listing l;
	struct hb_inventory inv;
	struct hb_error err;
	const struct hb_inv_entry *e;

	CHECK(load_listing("realshape", 0, &l));
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_inventory_build(&l.cfg, l.v, l.n, &inv, &err), HB_OK);
	CHECK_STR(err.msg, "");
	CHECK_EQ_U64(inv.n, 983);
	CHECK_EQ_U64(inv.count[HB_INV_VISION], 21);
	CHECK_EQ_U64(inv.count[HB_INV_MTP], 0);
	CHECK_EQ_U64(inv.count[HB_INV_EXPERT], 8 * 32 * 3);
	CHECK_EQ_U64(inv.count[HB_INV_PLE], 4 + 3 + 6); /* shards, hash buffers, projections */
	CHECK_EQ_U64(inv.count[HB_INV_BASE] + inv.count[HB_INV_EXPERT] + inv.count[HB_INV_PLE] +
		     inv.count[HB_INV_VISION], inv.n);
	CHECK_EQ_INT(inv.expert_layout, HB_EXPERTS_PER_EXPERT);
	CHECK(!inv.fp8_experts);
	CHECK_EQ_U64(inv.ple_table_parts[0], 4);
	e = hb_inventory_find(&inv, P "3.self_attn.q_proj.weight");
	CHECK(e && e->dest == HB_DEST_DENSE);
	CHECK_STR(e ? e->dest_name : NULL, "layers.3.self_attn.q_proj.weight");
	e = hb_inventory_find(&inv, P "7.mlp.experts.31.down_proj.weight");
	CHECK(e && e->dest == HB_DEST_EXPERT_STORE && e->layer == 7 && e->expert == 31 &&
	      e->role == HB_ROLE_DOWN);
	e = hb_inventory_find(&inv, P "1.ple.ple_embedding.ngram_embedding.shard_2.weight");
	CHECK(e && e->dest == HB_DEST_PLE_STORE && e->shard_index == 2);
	e = hb_inventory_find(&inv, P "1.ple.ple_embedding.layer_multipliers");
	CHECK(e && e->dest == HB_DEST_METADATA && e->role == HB_ROLE_PLE_MULTIPLIERS);
	e = hb_inventory_find(&inv, P "1.ple.key_proj.weight");
	CHECK(e && e->cls == HB_INV_PLE && e->dest == HB_DEST_DENSE);
	e = hb_inventory_find(&inv, "model.visual.pos_embed.weight");
	CHECK(e && e->dest == HB_DEST_EXCLUDED && e->rule && !strncmp(e->rule, "vision", 6));
	e = hb_inventory_find(&inv, "lm_head.weight");
	CHECK(e && !strcmp(e->dest_name, "lm_head.weight"));
	hb_inventory_free(&inv);
	listing_free(&l);
}

static void other_layouts(void)
{
	struct listing l;
	struct hb_inventory inv;
	struct hb_error err;
	uint8_t d[HB_SHA256_BYTES];

	CHECK(load_listing("general", 0, &l));
	CHECK_EQ_INT(hb_inventory_build(&l.cfg, l.v, l.n, &inv, NULL), HB_OK);
	CHECK_EQ_U64(inv.count[HB_INV_EXPERT], 6 * 40 * 3);
	CHECK_EQ_U64(inv.count[HB_INV_PLE], 2 * (2 + 3 + 6));
	memcpy(d, inv.digest, sizeof(d));
	hb_inventory_free(&inv);
	/* the listing order does not change the digest */
	{
		struct hb_inv_source tmp = l.v[0];
		l.v[0] = l.v[l.n - 1];
		l.v[l.n - 1] = tmp;
	}
	CHECK_EQ_INT(hb_inventory_build(&l.cfg, l.v, l.n, &inv, NULL), HB_OK);
	CHECK(memcmp(d, inv.digest, sizeof(d)) == 0);
	hb_inventory_free(&inv);
	listing_free(&l);

	CHECK(load_listing("realshape-packed", 0, &l));
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_inventory_build(&l.cfg, l.v, l.n, &inv, &err), HB_OK);
	CHECK_STR(err.msg, "");
	CHECK_EQ_INT(inv.expert_layout, HB_EXPERTS_PACKED);
	CHECK_EQ_U64(inv.count[HB_INV_EXPERT], 8 * 2);
	hb_inventory_free(&inv);
	listing_free(&l);

	CHECK(load_listing("realshape-fp8", 0, &l));
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_inventory_build(&l.cfg, l.v, l.n, &inv, &err), HB_OK);
	CHECK_STR(err.msg, "");
	CHECK(inv.fp8_experts);
	CHECK_EQ_U64(inv.count[HB_INV_EXPERT], 8 * 32 * 3 * 2); /* weights and scales */
	hb_inventory_free(&inv);
	listing_free(&l);
}

struct mutation {
	const char *what;
	const char *set;
	void (*apply)(struct listing *l);
	const char *id;
	const char *field;
};

static void m_missing_dense(struct listing *l) { remove_src(l, P "3.self_attn.k_norm.weight"); }
static void m_missing_expert(struct listing *l) { remove_src(l, P "5.mlp.experts.17.up_proj.weight"); }
static void m_unknown(struct listing *l) { append(l, P "0.linear_attn.surprise.weight", HB_DTYPE_BF16, 1, 4, 0); }
static void m_unknown_top(struct listing *l) { append(l, "model.language_model.final_norm.weight", HB_DTYPE_BF16, 1, 64, 0); }
static void m_shape(struct listing *l) { find_src(l, P "0.linear_attn.in_proj_z.weight")->shape[0] = 63; }
static void m_rank(struct listing *l) { find_src(l, P "0.mlp.gate.weight")->ndim = 1; }
static void m_expert_shape(struct listing *l) { find_src(l, P "2.mlp.experts.0.down_proj.weight")->shape[1] = 17; }
static void m_dtype(struct listing *l) { find_src(l, "lm_head.weight")->dtype = HB_DTYPE_I32; }
static void m_buffer_dtype(struct listing *l) { find_src(l, P "1.ple.ple_embedding.ngram_heads_offsets")->dtype = HB_DTYPE_I32; }
static void m_missing_buffer(struct listing *l) { remove_src(l, P "1.ple.ple_embedding.layer_multipliers"); }
static void m_missing_shard(struct listing *l) { remove_src(l, P "1.ple.ple_embedding.ngram_embedding.shard_3.weight"); }
static void m_extra_shard(struct listing *l) { append(l, P "1.ple.ple_embedding.ngram_embedding.shard_4.weight", HB_DTYPE_BF16, 2, 10, 5); }
static void m_ple_width(struct listing *l) { find_src(l, P "1.ple.ple_embedding.ngram_embedding.shard_0.weight")->shape[1] = 4; }
static void m_ple_on_wrong_layer(struct listing *l) { append(l, P "2.ple.key_proj.weight", HB_DTYPE_BF16, 2, 256, 80); }
static void m_mixed_layout(struct listing *l) { append(l, P "0.mlp.experts.gate_up_proj", HB_DTYPE_BF16, 2, 32, 32); }
static void m_expert_out_of_range(struct listing *l) { append(l, P "0.mlp.experts.32.up_proj.weight", HB_DTYPE_BF16, 2, 16, 64); }
static void m_layer_out_of_range(struct listing *l) { append(l, P "8.mlp.gate.weight", HB_DTYPE_BF16, 2, 32, 64); }
static void m_leading_zero(struct listing *l) { append(l, P "01.mlp.gate.weight", HB_DTYPE_BF16, 2, 32, 64); }
static void m_duplicate(struct listing *l) { append(l, "lm_head.weight", HB_DTYPE_BF16, 2, 1024, 64); }
static void m_fp8_without_config(struct listing *l) { find_src(l, P "0.mlp.experts.0.gate_proj.weight")->dtype = HB_DTYPE_F8_E4M3; }
static void m_fp8_missing_scale(struct listing *l) { remove_src(l, P "4.mlp.experts.9.gate_proj.weight_scale_inv"); }
static void m_fp8_scale_dtype(struct listing *l) { find_src(l, P "4.mlp.experts.9.gate_proj.weight_scale_inv")->dtype = HB_DTYPE_BF16; }

/* MTP tensors are excluded by rule, counted, not refused. */
static void mtp_excluded(void)
{
	struct listing l;
	struct hb_inventory inv;
	const struct hb_inv_entry *e;

	CHECK(load_listing("realshape", 2, &l));
	append(&l, "mtp.fc.weight", HB_DTYPE_BF16, 2, 64, 128);
	append(&l, "mtp.layers.0.mlp.gate.weight", HB_DTYPE_BF16, 2, 32, 64);
	CHECK_EQ_INT(hb_inventory_build(&l.cfg, l.v, l.n, &inv, NULL), HB_OK);
	CHECK_EQ_U64(inv.count[HB_INV_MTP], 2);
	CHECK_EQ_U64(inv.bytes[HB_INV_MTP], (64 * 128 + 32 * 64) * 2);
	e = hb_inventory_find(&inv, "mtp.fc.weight");
	CHECK(e && e->dest == HB_DEST_EXCLUDED && e->rule && !strncmp(e->rule, "mtp", 3));
	hb_inventory_free(&inv);
	listing_free(&l);
}

static void mutations_refused(void)
{
	static const struct mutation cases[] = {
		{"missing dense", "realshape", m_missing_dense, "inv-missing-tensor", P "3.self_attn.k_norm.weight"},
		{"missing expert", "realshape", m_missing_expert, "inv-missing-tensor", P "5.mlp.experts.17.up_proj.weight"},
		{"unknown", "realshape", m_unknown, "inv-unknown-tensor", P "0.linear_attn.surprise.weight"},
		{"unknown top", "realshape", m_unknown_top, "inv-unknown-tensor", "model.language_model.final_norm.weight"},
		{"shape", "realshape", m_shape, "inv-shape", P "0.linear_attn.in_proj_z.weight"},
		{"rank", "realshape", m_rank, "inv-shape", P "0.mlp.gate.weight"},
		{"expert shape", "realshape", m_expert_shape, "inv-shape", P "2.mlp.experts.0.down_proj.weight"},
		{"dtype", "realshape", m_dtype, "inv-dtype", "lm_head.weight"},
		{"buffer dtype", "realshape", m_buffer_dtype, "inv-dtype", P "1.ple.ple_embedding.ngram_heads_offsets"},
		{"missing buffer", "realshape", m_missing_buffer, "inv-missing-tensor", P "1.ple.ple_embedding.layer_multipliers"},
		{"missing shard", "realshape", m_missing_shard, "inv-missing-tensor", P "1.ple.ple_embedding.ngram_embedding"},
		{"extra shard", "realshape", m_extra_shard, "inv-unknown-tensor", P "1.ple.ple_embedding.ngram_embedding.shard_4.weight"},
		{"ple width", "realshape", m_ple_width, "inv-shape", P "1.ple.ple_embedding.ngram_embedding.shard_0.weight"},
		{"ple on a non-PLE layer", "realshape", m_ple_on_wrong_layer, "inv-unknown-tensor", P "2.ple.key_proj.weight"},
		{"mixed layout", "realshape", m_mixed_layout, "inv-shape", P "0.mlp.experts.gate_up_proj"},
		{"expert index", "realshape", m_expert_out_of_range, "inv-unknown-tensor", P "0.mlp.experts.32.up_proj.weight"},
		{"layer index", "realshape", m_layer_out_of_range, "inv-unknown-tensor", P "8.mlp.gate.weight"},
		{"leading zero", "realshape", m_leading_zero, "inv-unknown-tensor", P "01.mlp.gate.weight"},
		{"duplicate", "realshape", m_duplicate, "inv-duplicate", "lm_head.weight"},
		{"fp8 without config", "realshape", m_fp8_without_config, "inv-dtype", P "0.mlp.experts.0.gate_proj.weight"},
		{"fp8 missing scale", "realshape-fp8", m_fp8_missing_scale, "inv-fp8-scale", P "4.mlp.experts.9.gate_proj.weight"},
		{"fp8 scale dtype", "realshape-fp8", m_fp8_scale_dtype, "inv-dtype", P "4.mlp.experts.9.gate_proj.weight_scale_inv"},
	};

	for (size_t i = 0; i < HB_ARRAY_LEN(cases); i++) {
		struct listing l;
		struct hb_inventory inv;
		struct hb_error err;
		if (!load_listing(cases[i].set, 2, &l)) {
			hb_check_fail(__FILE__, __LINE__, "cannot load %s", cases[i].set);
			continue;
		}
		cases[i].apply(&l);
		hb_error_clear(&err);
		if (hb_inventory_build(&l.cfg, l.v, l.n, &inv, &err) == HB_OK) {
			hb_check_fail(__FILE__, __LINE__, "mutation '%s' was accepted", cases[i].what);
			hb_inventory_free(&inv);
		} else {
			if (!err.id || strcmp(err.id, cases[i].id) || strcmp(err.field, cases[i].field))
				hb_check_fail(__FILE__, __LINE__, "mutation '%s': got %s at %s (%s)",
					      cases[i].what, err.id ? err.id : "(none)", err.field, err.msg);
		}
		listing_free(&l);
	}
}

/* A mixed layout with a correctly shaped packed tensor is refused as such. */
static void mixed_layout_refused(void)
{
	struct listing l;
	struct hb_inventory inv;
	struct hb_error err;

	CHECK(load_listing("realshape", 2, &l));
	{
		struct hb_inv_source *s = &l.v[l.n];
		l.names[l.n] = strdup(P "0.mlp.experts.down_proj");
		s->name = l.names[l.n];
		s->dtype = HB_DTYPE_BF16;
		s->ndim = 3;
		s->shape[0] = l.cfg.num_experts, s->shape[1] = l.cfg.hidden_size;
		s->shape[2] = l.cfg.moe_intermediate_size;
		l.n++;
	}
	hb_error_clear(&err);
	CHECK(hb_inventory_build(&l.cfg, l.v, l.n, &inv, &err) != HB_OK);
	CHECK_STR(err.id, "inv-expert-layout");
	listing_free(&l);
}

HB_TEST_MAIN(T(realshape_classified), T(other_layouts), T(mtp_excluded), T(mutations_refused),
	     T(mixed_layout_refused))
