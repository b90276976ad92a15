/*
 * hb_inventory.c: exact classification of checkpoint tensors (see header).
 *
 * Diagnostic ids:
 *   inv-unknown-tensor  a name no rule and no expected tensor covers
 *   inv-missing-tensor  an expected tensor is absent
 *   inv-duplicate       a name listed twice
 *   inv-shape           shape disagrees with config.json
 *   inv-dtype           dtype the destination cannot take
 *   inv-expert-layout   per-expert and packed layouts mixed, or incomplete
 *   inv-fp8-scale       FP8 weight without its scale, or a stray scale
 *   inv-name-length     a destination name longer than GGUF readers accept
 */
#include "hb_base.h"
#include "hb_checked.h"
#include "hb_inventory.h"

#define TEXT_PREFIX "model.language_model."
#define LAYER_PREFIX "model.language_model.layers."

#define expect hb_expected_tensor

struct expect_list {
	struct expect *v;
	size_t n, cap;
	int rc;
};

static void expect_add(struct expect_list *l, const char *src, uint32_t ndim,
		       uint64_t d0, uint64_t d1, uint64_t d2)
{
	struct expect *e;

	if (l->rc)
		return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		struct expect *v = realloc(l->v, cap * sizeof(*v));
		if (!v) {
			l->rc = HB_ERR_NOMEM;
			return;
		}
		l->v = v;
		l->cap = cap;
	}
	e = &l->v[l->n++];
	memset(e, 0, sizeof(*e));
	snprintf(e->src, sizeof(e->src), "%s", src);
	/* The artifact drops the multimodal wrapper's prefix. */
	snprintf(e->dest, sizeof(e->dest), "%s",
		 strncmp(src, TEXT_PREFIX, strlen(TEXT_PREFIX)) ? src : src + strlen(TEXT_PREFIX));
	if (strlen(src) >= sizeof(e->src) ||
	    strlen(strncmp(src, TEXT_PREFIX, strlen(TEXT_PREFIX)) ? src : src + strlen(TEXT_PREFIX)) >= HB_INV_DEST_NAME)
		l->rc = HB_ERR_OVERFLOW;
	e->ndim = ndim;
	e->shape[0] = d0, e->shape[1] = d1, e->shape[2] = d2;
}

static void add_hyper(struct expect_list *l, const char *base, const struct hb_qwen_config *c,
		      bool combine)
{
	char n[160];
	uint64_t hch = c->hc_count * c->hidden_size;

	snprintf(n, sizeof(n), "%s.hc_norm.weight", base);
	expect_add(l, n, 1, hch, 0, 0);
	snprintf(n, sizeof(n), "%s.input_mix_weight_down.weight", base);
	expect_add(l, n, 2, c->hc_lowrank, hch, 0);
	snprintf(n, sizeof(n), "%s.input_mix_weight_up.weight", base);
	expect_add(l, n, 2, hch, c->hc_lowrank, 0);
	if (combine) {
		snprintf(n, sizeof(n), "%s.block_inject_weight.weight", base);
		expect_add(l, n, 2, c->hc_count, hch, 0);
	}
}

static void add_layer(struct expect_list *l, const struct hb_qwen_config *c, uint64_t i)
{
	char p[96], n[160];
	uint64_t H = c->hidden_size, hch = c->hc_count * H;

	snprintf(p, sizeof(p), LAYER_PREFIX "%" PRIu64 ".", i);
	snprintf(n, sizeof(n), "%sattn_hyper_connection", p);
	add_hyper(l, n, c, true);
	snprintf(n, sizeof(n), "%smlp_hyper_connection", p);
	add_hyper(l, n, c, true);
#define ADD(suffix, nd, a, b, d) do { snprintf(n, sizeof(n), "%s" suffix, p); expect_add(l, n, nd, a, b, d); } while (0)
	if (c->layer_kind[i] == HB_LAYER_LINEAR) {
		uint64_t kd = c->linear_num_key_heads * c->linear_key_head_dim;
		uint64_t vd = c->linear_num_value_heads * c->linear_value_head_dim;
		uint64_t nv = c->linear_num_value_heads;
		ADD("linear_attn.conv1d.weight", 3, 2 * kd + vd, 1, c->linear_conv_kernel);
		ADD("linear_attn.dt_bias", 1, nv, 0, 0);
		ADD("linear_attn.A_log", 1, nv, 0, 0);
		ADD("linear_attn.norm.weight", 1, c->linear_value_head_dim, 0, 0);
		ADD("linear_attn.out_proj.weight", 2, H, vd, 0);
		ADD("linear_attn.in_proj_qkv.weight", 2, 2 * kd + vd, H, 0);
		ADD("linear_attn.in_proj_z.weight", 2, vd, H, 0);
		ADD("linear_attn.in_proj_b.weight", 2, nv, H, 0);
		ADD("linear_attn.in_proj_a.weight", 2, nv, H, 0);
	} else {
		uint64_t q = c->num_heads * c->head_dim, kv = c->num_kv_heads * c->head_dim;
		ADD("self_attn.q_proj.weight", 2, 2 * q, H, 0);
		ADD("self_attn.k_proj.weight", 2, kv, H, 0);
		ADD("self_attn.v_proj.weight", 2, kv, H, 0);
		ADD("self_attn.o_proj.weight", 2, H, q, 0);
		if (c->attention_bias) {
			ADD("self_attn.q_proj.bias", 1, 2 * q, 0, 0);
			ADD("self_attn.k_proj.bias", 1, kv, 0, 0);
			ADD("self_attn.v_proj.bias", 1, kv, 0, 0);
			ADD("self_attn.o_proj.bias", 1, H, 0, 0);
		}
		ADD("self_attn.q_norm.weight", 1, c->head_dim, 0, 0);
		ADD("self_attn.k_norm.weight", 1, c->head_dim, 0, 0);
		ADD("self_attn.indexer.index_qk_proj.weight", 2,
		    (c->indexer_n_heads + c->indexer_kv_heads) * c->indexer_head_dim, H, 0);
		ADD("self_attn.indexer.q_layernorm.weight", 1, c->indexer_head_dim, 0, 0);
		ADD("self_attn.indexer.k_layernorm.weight", 1, c->indexer_head_dim, 0, 0);
	}
	ADD("mlp.gate.weight", 2, c->num_experts, H, 0);
	ADD("mlp.shared_expert.gate_proj.weight", 2, c->shared_expert_intermediate_size, H, 0);
	ADD("mlp.shared_expert.up_proj.weight", 2, c->shared_expert_intermediate_size, H, 0);
	ADD("mlp.shared_expert.down_proj.weight", 2, H, c->shared_expert_intermediate_size, 0);
	ADD("mlp.shared_expert_gate.weight", 2, 1, H, 0);
	if (hb_qwen_ple_index(c, (uint32_t)(i + 1)) >= 0) {
		ADD("ple.key_proj.weight", 2, hch, c->ple_embed_dim, 0);
		ADD("ple.value_proj.weight", 2, H, c->ple_embed_dim, 0);
		ADD("ple.norm_key.weight", 1, hch, 0, 0);
		ADD("ple.norm_query.weight", 1, hch, 0, 0);
		ADD("ple.norm_conv.weight", 1, hch, 0, 0);
		ADD("ple.conv1d.weight", 3, hch, 1, c->ple_conv_kernel_size);
	}
#undef ADD
}

static int cmp_expect(const void *a, const void *b)
{
	return strcmp(((const struct expect *)a)->src, ((const struct expect *)b)->src);
}

static int build_expected(const struct hb_qwen_config *c, struct expect_list *l)
{
	expect_add(l, TEXT_PREFIX "embed_tokens.weight", 2, c->vocab_size, c->hidden_size, 0);
	if (!c->tie_word_embeddings) /* tied: the output projection is embed_tokens */
		expect_add(l, "lm_head.weight", 2, c->vocab_size, c->hidden_size, 0);
	add_hyper(l, TEXT_PREFIX "hyper_connection_mixer", c, false);
	for (uint64_t i = 0; i < c->num_layers; i++)
		add_layer(l, c, i);
	if (!l->rc)
		qsort(l->v, l->n, sizeof(*l->v), cmp_expect);
	return l->rc;
}

static struct expect *find_expect(struct expect_list *l, const char *name)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, l->v[mid].src);
		if (!c)
			return &l->v[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* Parse "<decimal>" at *p, advancing it; false without digits or on overflow. */
static bool take_index(const char **p, int64_t limit, int32_t *out)
{
	int64_t v = 0;
	const char *s = *p;

	if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9'))
		return false;
	while (*s >= '0' && *s <= '9') {
		v = v * 10 + (*s - '0');
		if (v > limit)
			return false;
		s++;
	}
	*p = s;
	*out = (int32_t)v;
	return true;
}

static bool eat(const char **p, const char *lit)
{
	size_t n = strlen(lit);
	if (strncmp(*p, lit, n))
		return false;
	*p += n;
	return true;
}

/* Recognise expert, PLE-table and PLE-buffer names under layers.L. */
static bool classify_layer_special(const struct hb_qwen_config *c, const char *name,
				   struct hb_inv_entry *e)
{
	const char *p = name;
	int32_t layer, idx;

	if (!eat(&p, LAYER_PREFIX) || !take_index(&p, (int64_t)c->num_layers - 1, &layer) || !eat(&p, "."))
		return false;
	e->layer = layer;
	if (eat(&p, "mlp.experts.")) {
		if (eat(&p, "gate_up_proj"))
			e->role = HB_ROLE_GATE_UP_PACKED;
		else if (eat(&p, "down_proj"))
			e->role = HB_ROLE_DOWN_PACKED;
		else if (take_index(&p, (int64_t)c->num_experts - 1, &idx) && eat(&p, ".")) {
			e->expert = idx;
			if (eat(&p, "gate_proj.weight"))
				e->role = HB_ROLE_GATE;
			else if (eat(&p, "up_proj.weight"))
				e->role = HB_ROLE_UP;
			else if (eat(&p, "down_proj.weight"))
				e->role = HB_ROLE_DOWN;
			else
				return false;
		} else {
			return false;
		}
		if (eat(&p, "_scale_inv"))
			e->is_scale = true;
		if (*p)
			return false;
		e->cls = HB_INV_EXPERT;
		e->dest = HB_DEST_EXPERT_STORE;
		return true;
	}
	if (hb_qwen_ple_index(c, (uint32_t)layer + 1) >= 0 && eat(&p, "ple.ple_embedding.")) {
		e->cls = HB_INV_PLE;
		if (!strcmp(p, "layer_multipliers"))
			e->role = HB_ROLE_PLE_MULTIPLIERS;
		else if (!strcmp(p, "ngram_heads_vocab_sizes"))
			e->role = HB_ROLE_PLE_HEAD_SIZES;
		else if (!strcmp(p, "ngram_heads_offsets"))
			e->role = HB_ROLE_PLE_HEAD_OFFSETS;
		if (e->role) {
			e->dest = HB_DEST_METADATA;
			return true;
		}
		if (!eat(&p, "ngram_embedding."))
			return false;
		if (eat(&p, "shard_")) {
			if (!take_index(&p, (int64_t)c->split_ngram_parts - 1, &idx) || !eat(&p, "."))
				return false;
			e->shard_index = idx;
		}
		if (strcmp(p, "weight"))
			return false;
		e->role = HB_ROLE_PLE_TABLE;
		e->dest = HB_DEST_PLE_STORE;
		return true;
	}
	return false;
}

static bool dtype_is_float(enum hb_dtype t)
{
	return t == HB_DTYPE_BF16 || t == HB_DTYPE_F16 || t == HB_DTYPE_F32;
}

static int shape_error(const struct hb_inv_source *s, struct hb_error *err, const char *want)
{
	return hb_error_diag(err, "inv-shape", HB_ERR_CONTRACT, s->name, false, 0,
			     "shape disagrees with config.json (expected %s)", want);
}

static bool shape_is(const struct hb_inv_source *s, uint32_t ndim, uint64_t a, uint64_t b, uint64_t c)
{
	const uint64_t want[3] = {a, b, c};
	if (s->ndim != ndim)
		return false;
	for (uint32_t i = 0; i < ndim && i < 3; i++)
		if (s->shape[i] != want[i])
			return false;
	return true;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
	return a / b + (a % b != 0);
}

/* Shape and dtype of an expert tensor (weights or their FP8 scales). */
static int check_expert(const struct hb_qwen_config *c, const struct hb_inv_entry *e,
			struct hb_error *err)
{
	const struct hb_inv_source *s = e->src;
	uint64_t H = c->hidden_size, I = c->moe_intermediate_size, E = c->num_experts;
	uint64_t rows = 0, cols = 0, lead = 0;
	char want[96];

	switch (e->role) {
	case HB_ROLE_GATE: case HB_ROLE_UP: rows = I, cols = H; break;
	case HB_ROLE_DOWN: rows = H, cols = I; break;
	case HB_ROLE_GATE_UP_PACKED: lead = E, rows = 2 * I, cols = H; break;
	case HB_ROLE_DOWN_PACKED: lead = E, rows = H, cols = I; break;
	default: return hb_error_set(err, HB_ERR_INTERNAL, s->name, "not an expert role");
	}
	if (e->is_scale) {
		uint64_t br = c->fp8_block_rows, bc = c->fp8_block_cols;
		if (!c->fp8)
			return hb_error_diag(err, "inv-fp8-scale", HB_ERR_CONTRACT, s->name, false, 0,
					     "FP8 scale in a checkpoint whose config declares no fp8 quantization");
		if (s->dtype != HB_DTYPE_F32)
			return hb_error_diag(err, "inv-dtype", HB_ERR_CONTRACT, s->name, false, 0,
					     "FP8 block scales must be F32, got %s", hb_dtype_name(s->dtype));
		rows = ceil_div(rows, br), cols = ceil_div(cols, bc);
	} else if (s->dtype == HB_DTYPE_F8_E4M3) {
		if (!c->fp8)
			return hb_error_diag(err, "inv-dtype", HB_ERR_CONTRACT, s->name, false, 0,
					     "F8_E4M3 weight but config.json declares no fp8 quantization");
	} else if (!dtype_is_float(s->dtype)) {
		return hb_error_diag(err, "inv-dtype", HB_ERR_CONTRACT, s->name, false, 0,
				     "expert weights must be BF16, F16, F32 or F8_E4M3, got %s",
				     hb_dtype_name(s->dtype));
	}
	if (lead ? !shape_is(s, 3, lead, rows, cols) : !shape_is(s, 2, rows, cols, 0)) {
		if (lead)
			snprintf(want, sizeof(want), "[%" PRIu64 ", %" PRIu64 ", %" PRIu64 "]", lead, rows, cols);
		else
			snprintf(want, sizeof(want), "[%" PRIu64 ", %" PRIu64 "]", rows, cols);
		return shape_error(s, err, want);
	}
	return HB_OK;
}

static int check_dense(const struct hb_qwen_config *c, const struct expect *x,
		       const struct hb_inv_source *s, bool is_scale, struct hb_error *err)
{
	char want[96];

	if (is_scale) {
		uint64_t rows = x->shape[0], cols = x->ndim > 1 ? x->shape[1] : 1;
		if (!c->fp8 || x->ndim != 2)
			return hb_error_diag(err, "inv-fp8-scale", HB_ERR_CONTRACT, s->name, false, 0,
					     "unexpected FP8 scale tensor");
		if (s->dtype != HB_DTYPE_F32)
			return hb_error_diag(err, "inv-dtype", HB_ERR_CONTRACT, s->name, false, 0,
					     "FP8 block scales must be F32");
		if (!shape_is(s, 2, ceil_div(rows, c->fp8_block_rows), ceil_div(cols, c->fp8_block_cols), 0))
			return shape_error(s, err, "the weight's FP8 block grid");
		return HB_OK;
	}
	if (!dtype_is_float(s->dtype) && !(c->fp8 && s->dtype == HB_DTYPE_F8_E4M3 && x->ndim == 2))
		return hb_error_diag(err, "inv-dtype", HB_ERR_CONTRACT, s->name, false, 0,
				     "dense tensors must be BF16, F16 or F32, got %s", hb_dtype_name(s->dtype));
	if (!shape_is(s, x->ndim, x->shape[0], x->shape[1], x->shape[2])) {
		if (x->ndim == 1)
			snprintf(want, sizeof(want), "[%" PRIu64 "]", x->shape[0]);
		else if (x->ndim == 2)
			snprintf(want, sizeof(want), "[%" PRIu64 ", %" PRIu64 "]", x->shape[0], x->shape[1]);
		else
			snprintf(want, sizeof(want), "[%" PRIu64 ", %" PRIu64 ", %" PRIu64 "]",
				 x->shape[0], x->shape[1], x->shape[2]);
		return shape_error(s, err, want);
	}
	return HB_OK;
}

static int check_ple(const struct hb_qwen_config *c, const struct hb_inv_entry *e,
		     struct hb_error *err)
{
	const struct hb_inv_source *s = e->src;
	uint64_t heads = hb_qwen_ngram_heads(c);

	switch (e->role) {
	case HB_ROLE_PLE_MULTIPLIERS:
	case HB_ROLE_PLE_HEAD_SIZES:
	case HB_ROLE_PLE_HEAD_OFFSETS:
		if (s->dtype != HB_DTYPE_I64)
			return hb_error_diag(err, "inv-dtype", HB_ERR_CONTRACT, s->name, false, 0,
					     "PLE hash buffers are I64, got %s", hb_dtype_name(s->dtype));
		if (!shape_is(s, 1, e->role == HB_ROLE_PLE_MULTIPLIERS ? c->ngram_size : heads, 0, 0))
			return shape_error(s, err, e->role == HB_ROLE_PLE_MULTIPLIERS ? "[ngram_size]" : "[n-gram heads]");
		return HB_OK;
	case HB_ROLE_PLE_TABLE:
		if (!dtype_is_float(s->dtype))
			return hb_error_diag(err, "inv-dtype", HB_ERR_CONTRACT, s->name, false, 0,
					     "the n-gram table must be BF16, F16 or F32");
		if (s->ndim != 2 || s->shape[1] != c->ple_embed_dim / heads)
			return shape_error(s, err, "[rows, ple_embed_dim / n-gram heads]");
		return HB_OK;
	default:
		return hb_error_set(err, HB_ERR_INTERNAL, s->name, "not a PLE role");
	}
}

int hb_expected_dense(const struct hb_qwen_config *cfg, struct hb_expected_tensor **out,
		      size_t *n, struct hb_error *err)
{
	struct expect_list l = {0};
	int rc = build_expected(cfg, &l);

	if (rc) {
		free(l.v);
		return hb_error_diag(err, "inv-name-length", rc, "inventory", false, 0,
				     "an expected tensor name exceeds %d bytes", HB_INV_DEST_NAME - 1);
	}
	*out = l.v;
	*n = l.n;
	return HB_OK;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct hb_inv_entry *)a)->src->name,
		      ((const struct hb_inv_entry *)b)->src->name);
}

static void digest_entries(struct hb_inventory *inv)
{
	struct hb_sha256 h;
	static const char domain[] = "hebrus.source-inventory.v1";

	hb_sha256_init(&h);
	hb_sha256_update(&h, domain, sizeof(domain));
	for (size_t i = 0; i < inv->n; i++) {
		const struct hb_inv_source *s = inv->entries[i].src;
		char line[128]; /* numbers and a dtype name only: never truncated */
		int len;
		/* the name goes in whole: a tensor name has no length limit, and
		 * formatting it into a fixed buffer would hash past its end */
		hb_sha256_update(&h, s->name, strlen(s->name));
		len = snprintf(line, sizeof(line), "\t%s\t%u", hb_dtype_name(s->dtype), s->ndim);
		hb_sha256_update(&h, line, (size_t)len);
		for (uint32_t d = 0; d < s->ndim; d++) {
			len = snprintf(line, sizeof(line), ",%" PRIu64, s->shape[d]);
			hb_sha256_update(&h, line, (size_t)len);
		}
		len = snprintf(line, sizeof(line), "\t%" PRIu64 "\t", s->nbytes);
		hb_sha256_update(&h, line, (size_t)len);
		if (s->shard)
			hb_sha256_update(&h, s->shard, strlen(s->shard));
		len = snprintf(line, sizeof(line), "\t%" PRIu64 "\n", s->shard_offset);
		hb_sha256_update(&h, line, (size_t)len);
	}
	hb_sha256_final(&h, inv->digest);
}

/* Pair FP8 weights with scales, and check expert / PLE completeness. */
static int check_completeness(const struct hb_qwen_config *c, struct hb_inventory *inv,
			      struct hb_error *err)
{
	uint64_t E = c->num_experts, L = c->num_layers;
	uint64_t per_expert = 0, packed = 0;
	size_t nbits;
	uint8_t *seen;

	for (size_t i = 0; i < inv->n; i++) {
		const struct hb_inv_entry *e = &inv->entries[i];
		bool fp8 = e->src->dtype == HB_DTYPE_F8_E4M3 && !e->is_scale;
		char want[200];
		if (fp8 || e->is_scale) {
			/* weight "X.weight" <-> scale "X.weight_scale_inv"; packed
			 * experts "X" <-> "X_scale_inv" */
			const char *n = e->src->name;
			size_t len = strlen(n);
			if (fp8)
				snprintf(want, sizeof(want), "%s_scale_inv", n);
			else
				snprintf(want, sizeof(want), "%.*s", (int)(len - strlen("_scale_inv")), n);
			if (!hb_inventory_find(inv, want))
				return hb_error_diag(err, "inv-fp8-scale", HB_ERR_CONTRACT, n, false, 0,
						     fp8 ? "FP8 weight without its weight_scale_inv" :
							   "scale without its FP8 weight");
			if (!fp8 && hb_inventory_find(inv, want)->src->dtype != HB_DTYPE_F8_E4M3)
				return hb_error_diag(err, "inv-fp8-scale", HB_ERR_CONTRACT, n, false, 0,
						     "scale for a weight that is not F8_E4M3");
		}
		if (e->cls == HB_INV_EXPERT && !e->is_scale) {
			if (e->expert >= 0)
				per_expert++;
			else
				packed++;
			if (fp8)
				inv->fp8_experts = true;
		}
	}
	if (per_expert && packed)
		return hb_error_diag(err, "inv-expert-layout", HB_ERR_CONTRACT, "experts", false, 0,
				     "per-expert and packed expert tensors are mixed");
	inv->expert_layout = packed ? HB_EXPERTS_PACKED : HB_EXPERTS_PER_EXPERT;
	/* every (layer, expert, role) or (layer, packed role) exactly once */
	nbits = (size_t)(L * (packed ? 2 : E * 3));
	seen = calloc(nbits ? nbits : 1, 1);
	if (!seen)
		return hb_error_set(err, HB_ERR_NOMEM, "inventory", "out of memory");
	for (size_t i = 0; i < inv->n; i++) {
		const struct hb_inv_entry *e = &inv->entries[i];
		size_t slot;
		if (e->cls != HB_INV_EXPERT || e->is_scale)
			continue;
		slot = packed ? (size_t)e->layer * 2 + (e->role == HB_ROLE_DOWN_PACKED)
			      : ((size_t)e->layer * E + (size_t)e->expert) * 3 + (size_t)(e->role - HB_ROLE_GATE);
		seen[slot] = 1;
	}
	for (size_t s = 0; s < nbits; s++) {
		if (!seen[s]) {
			char name[160];
			if (packed)
				snprintf(name, sizeof(name), LAYER_PREFIX "%zu.mlp.experts.%s", s / 2,
					 s % 2 ? "down_proj" : "gate_up_proj");
			else
				snprintf(name, sizeof(name), LAYER_PREFIX "%zu.mlp.experts.%zu.%s_proj.weight",
					 s / 3 / (size_t)E, s / 3 % (size_t)E,
					 (const char *[]){"gate", "up", "down"}[s % 3]);
			free(seen);
			return hb_error_diag(err, "inv-missing-tensor", HB_ERR_CONTRACT, name, false, 0,
					     "expected routed-expert tensor is absent");
		}
	}
	free(seen);
	return HB_OK;
}

static int check_ple_complete(const struct hb_qwen_config *c, struct hb_inventory *inv,
			      struct hb_error *err)
{
	for (size_t p = 0; p < c->n_ple_layers; p++) {
		uint32_t layer = c->ple_layer_ids[p] - 1;
		bool whole = false, buffers[3] = {false, false, false};
		uint64_t parts = 0;
		char name[160];
		for (size_t i = 0; i < inv->n; i++) {
			const struct hb_inv_entry *e = &inv->entries[i];
			if (e->cls != HB_INV_PLE || e->layer != (int32_t)layer)
				continue;
			if (e->role == HB_ROLE_PLE_TABLE) {
				if (e->shard_index < 0)
					whole = true;
				else
					parts++;
			} else if (e->role >= HB_ROLE_PLE_MULTIPLIERS) {
				buffers[e->role - HB_ROLE_PLE_MULTIPLIERS] = true;
			}
		}
		snprintf(name, sizeof(name), LAYER_PREFIX "%u.ple.ple_embedding.ngram_embedding", layer);
		if (whole && parts)
			return hb_error_diag(err, "inv-duplicate", HB_ERR_CONTRACT, name, false, 0,
					     "the n-gram table is stored both whole and in shards");
		if (!whole && parts != c->split_ngram_parts)
			return hb_error_diag(err, "inv-missing-tensor", HB_ERR_CONTRACT, name, false, 0,
					     "%" PRIu64 " of %" PRIu64 " n-gram table shards present",
					     parts, c->split_ngram_parts);
		for (int b = 0; b < 3; b++) {
			static const char *const bn[] = {"layer_multipliers", "ngram_heads_vocab_sizes",
							 "ngram_heads_offsets"};
			if (!buffers[b]) {
				snprintf(name, sizeof(name), LAYER_PREFIX "%u.ple.ple_embedding.%s", layer, bn[b]);
				return hb_error_diag(err, "inv-missing-tensor", HB_ERR_CONTRACT, name, false, 0,
						     "the stored hash buffer is absent (it must settle the hash identity)");
			}
		}
		inv->ple_table_parts[p] = whole ? 1 : parts;
	}
	return HB_OK;
}

int hb_inventory_build(const struct hb_qwen_config *c,
		       const struct hb_inv_source *sources, size_t n,
		       struct hb_inventory *out, struct hb_error *err)
{
	struct expect_list want = {0};
	struct hb_inventory inv;
	int rc;

	memset(&inv, 0, sizeof(inv));
	rc = build_expected(c, &want);
	if (rc) {
		free(want.v);
		return hb_error_diag(err, "inv-name-length", rc, "inventory", false, 0,
				     "an expected tensor name exceeds %d bytes", HB_INV_DEST_NAME - 1);
	}
	inv.entries = calloc(n ? n : 1, sizeof(*inv.entries));
	if (!inv.entries) {
		free(want.v);
		return hb_error_set(err, HB_ERR_NOMEM, "inventory", "out of memory");
	}
	inv.n = n;
	for (size_t i = 0; i < n; i++) {
		struct hb_inv_entry *e = &inv.entries[i];
		e->src = &sources[i];
		e->layer = e->expert = e->shard_index = -1;
	}
	qsort(inv.entries, n, sizeof(*inv.entries), cmp_entry);
	for (size_t i = 0; i < n && !rc; i++) {
		struct hb_inv_entry *e = &inv.entries[i];
		const char *name = e->src->name;
		struct expect *x;
		size_t len = strlen(name);

		if (i && !strcmp(name, inv.entries[i - 1].src->name)) {
			rc = hb_error_diag(err, "inv-duplicate", HB_ERR_CONTRACT, name, false, 0,
					   "tensor listed twice");
			break;
		}
		if (!strncmp(name, "model.visual.", strlen("model.visual."))) {
			e->cls = HB_INV_VISION, e->dest = HB_DEST_EXCLUDED;
			e->rule = "vision: model.visual.*";
		} else if (!strncmp(name, "mtp.", 4)) {
			e->cls = HB_INV_MTP, e->dest = HB_DEST_EXCLUDED;
			e->rule = "mtp: mtp.*";
		} else if (classify_layer_special(c, name, e)) {
			rc = e->cls == HB_INV_EXPERT ? check_expert(c, e, err) : check_ple(c, e, err);
		} else {
			bool scale = len > 10 && !strcmp(name + len - 10, "_scale_inv");
			char base[200];
			e->layer = -1, e->expert = -1, e->role = HB_ROLE_NONE;
			snprintf(base, sizeof(base), "%.*s", (int)(scale ? len - 10 : len), name);
			x = find_expect(&want, base);
			if (!x) {
				rc = hb_error_diag(err, "inv-unknown-tensor", HB_ERR_CONTRACT, name, false, 0,
						   "no rule classifies this tensor");
				break;
			}
			e->is_scale = scale;
			e->cls = strstr(name, ".ple.") ? HB_INV_PLE : HB_INV_BASE;
			e->dest = HB_DEST_DENSE;
			snprintf(e->dest_name, sizeof(e->dest_name), "%s", x->dest);
			rc = check_dense(c, x, e->src, scale, err);
			if (!scale)
				x->found = true;
		}
		if (!rc) {
			inv.count[e->cls]++;
			inv.bytes[e->cls] += e->src->nbytes;
			inv.dense_tensors += e->dest == HB_DEST_DENSE && !e->is_scale;
		}
	}
	for (size_t i = 0; !rc && i < want.n; i++)
		if (!want.v[i].found)
			rc = hb_error_diag(err, "inv-missing-tensor", HB_ERR_CONTRACT, want.v[i].src, false, 0,
					   "expected tensor is absent");
	free(want.v);
	if (!rc)
		rc = check_completeness(c, &inv, err);
	if (!rc)
		rc = check_ple_complete(c, &inv, err);
	if (rc) {
		free(inv.entries);
		return rc;
	}
	digest_entries(&inv);
	*out = inv;
	return HB_OK;
}

void hb_inventory_free(struct hb_inventory *inv)
{
	if (!inv)
		return;
	free(inv->entries);
	memset(inv, 0, sizeof(*inv));
}

const struct hb_inv_entry *hb_inventory_find(const struct hb_inventory *inv, const char *name)
{
	size_t lo = 0, hi = inv->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, inv->entries[mid].src->name);
		if (!c)
			return &inv->entries[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

const char *hb_inv_class_name(enum hb_inv_class cls)
{
	switch (cls) {
	case HB_INV_BASE: return "base";
	case HB_INV_EXPERT: return "expert";
	case HB_INV_PLE: return "ple";
	case HB_INV_VISION: return "vision";
	case HB_INV_MTP: return "mtp";
	}
	return "unknown";
}

const char *hb_inv_dest_name(enum hb_inv_dest dest)
{
	switch (dest) {
	case HB_DEST_DENSE: return "dense";
	case HB_DEST_EXPERT_STORE: return "ds4.expert_major.v2";
	case HB_DEST_PLE_STORE: return "ds4.ple_rows.v1";
	case HB_DEST_METADATA: return "metadata";
	case HB_DEST_EXCLUDED: return "excluded";
	}
	return "unknown";
}
