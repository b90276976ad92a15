/*
 * Unit tests: the streaming engine on real artifacts of the upstream
 * fixtures (libkern/stream/hb_stream_expert.h, the seam the graph will
 * call).  Each fixture checkpoint is converted (general with bf16 experts,
 * realshape with mlx-affine4-g64), admitted and mapped; the engine reads
 * the same artifact.  For every layer of the fixture's first prompt, with
 * the routes upstream captured (pre/p0/route/ids and /w), the routed-expert
 * output is computed twice, the way hb_moe_forward does it: resident
 * (hb_model_expert views into the mapping, experts in ascending order) and
 * streamed (hb_xs_route_next leases in arrival order, under budgets of 1,
 * 2 and 7 slots and all, completions oldest-first, in two seeded random
 * orders, or by worker threads, with and without predictions).  Each
 * expert's output goes to its (token, rank) row and the weighted sum runs
 * in route-rank order, so the two must agree bit for bit (memcmp), and the
 * views must point at the same bytes.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb-convert/hb_convert.h"
#include "graph/hb_model.h"
#include "oracle.h"
#include "stream/hb_stream.h"
#include "stream/hb_stream_expert.h"
#include "stream/hb_stream_test.h"

#define MAXL 16

struct moe_case {
	const struct hb_model *m;
	size_t L, T, k, H, I, E;
	int32_t *ids[MAXL]; /* [T][k] rank order, upstream's */
	float *w[MAXL];     /* [T][k] */
	float *x;           /* [T][H] */
	float *slots;       /* [T * k][H] */
	float *g, *u, *out, *gather, *scratch;
};

static struct hb_model *convert_load(const char *set, enum hb_expert_codec_opt codec)
{
	struct hb_model *m = NULL;
	struct hb_convert_opts co;
	struct hb_error err;
	char src[4096];

	snprintf(src, sizeof(src), "%s/tests/fixtures/upstream/%s/checkpoint", hb_test_srcdir(), set);
	memset(&co, 0, sizeof(co));
	co.src_dir = src;
	co.out_path = "a.gguf";
	co.expert_codec = codec;
	co.ple_codec = HB_CONV_PLE_BF16;
	co.threads = 1;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_convert(&co, NULL, &err), HB_OK);
	CHECK_STR(err.msg, "");
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_model_load("a.gguf", &m, &err), HB_OK);
	CHECK_STR(err.msg, "");
	return m;
}

static bool case_load(struct moe_case *c, const struct hb_model *m, const char *set)
{
	struct oracle o;
	uint64_t dims[4];
	size_t n;

	memset(c, 0, sizeof(*c));
	c->m = m;
	c->L = (size_t)m->cfg.num_layers;
	c->k = (size_t)m->cfg.num_experts_per_tok;
	c->H = (size_t)m->cfg.hidden_size;
	c->I = (size_t)m->cfg.moe_intermediate_size;
	c->E = (size_t)m->cfg.num_experts;
	CHECK(c->L <= MAXL);
	CHECK(oracle_open(&o, set));
	for (size_t l = 0; l < c->L && l < MAXL; l++) {
		char name[64];
		snprintf(name, sizeof(name), "pre/p0/route/ids/L%02zu", l);
		c->ids[l] = oracle_array(&o, name, &n, dims);
		CHECK(c->ids[l] && dims[1] == c->k);
		c->T = (size_t)dims[0];
		snprintf(name, sizeof(name), "pre/p0/route/w/L%02zu", l);
		c->w[l] = oracle_array(&o, name, &n, dims);
		CHECK(c->w[l] && n == c->T * c->k);
	}
	oracle_close(&o);
	c->x = malloc(c->T * c->H * sizeof(float));
	c->slots = malloc(c->T * c->k * c->H * sizeof(float));
	c->g = malloc(c->T * c->I * sizeof(float));
	c->u = malloc(c->T * c->I * sizeof(float));
	c->out = malloc(c->T * c->H * sizeof(float));
	c->gather = malloc(c->T * c->H * sizeof(float));
	c->scratch = malloc(4 * (c->H > c->I ? c->H : c->I) * sizeof(float));
	if (!c->x || !c->slots || !c->g || !c->u || !c->out || !c->gather || !c->scratch)
		return false;
	for (size_t i = 0; i < c->T * c->H; i++)
		c->x[i] = (float)((int)((i * 2654435761u) % 2001u) - 1000) / 997.0f;
	return c->T > 0;
}

static void case_free(struct moe_case *c)
{
	for (size_t l = 0; l < MAXL; l++)
		free(c->ids[l]), free(c->w[l]);
	free(c->x), free(c->slots), free(c->g), free(c->u), free(c->out), free(c->gather), free(c->scratch);
}

/* One expert's SwiGLU over the tokens routed to it, into their (t, r) rows. */
static void expert_pass(struct moe_case *c, size_t layer, uint32_t e, const struct hb_wmat *g,
			const struct hb_wmat *u, const struct hb_wmat *d)
{
	size_t n = 0, where[1024];

	for (size_t t = 0; t < c->T; t++)
		for (size_t r = 0; r < c->k; r++)
			if (c->ids[layer][t * c->k + r] == (int32_t)e && n < 1024) {
				memcpy(c->gather + n * c->H, c->x + t * c->H, c->H * sizeof(float));
				where[n++] = t * c->k + r;
			}
	if (!n)
		return;
	hb_swiglu(NULL, g, u, d, c->gather, n, c->g, c->u, c->g, c->out, c->scratch);
	for (size_t i = 0; i < n; i++)
		memcpy(c->slots + where[i] * c->H, c->out + i * c->H, c->H * sizeof(float));
}

/* The weighted sum in route-rank order (hb_moe_forward's loop). */
static void reduce(const struct moe_case *c, size_t layer, float *y)
{
	for (size_t t = 0; t < c->T; t++)
		for (size_t j = 0; j < c->H; j++) {
			float acc = 0;
			for (size_t r = 0; r < c->k; r++)
				acc += c->slots[(t * c->k + r) * c->H + j] * c->w[layer][t * c->k + r];
			y[t * c->H + j] = acc;
		}
}

/* The experts a layer's chunk uses, ascending; their count. */
static size_t layer_union(const struct moe_case *c, size_t layer, uint32_t *out)
{
	size_t n = 0;

	for (uint32_t e = 0; e < c->E; e++)
		for (size_t i = 0; i < c->T * c->k; i++)
			if (c->ids[layer][i] == (int32_t)e) {
				out[n++] = e;
				break;
			}
	return n;
}

static void resident(struct moe_case *c, size_t layer, float *y)
{
	uint32_t un[HB_EM_MAX_EXPERTS];
	size_t n = layer_union(c, layer, un);

	memset(c->slots, 0xff, c->T * c->k * c->H * sizeof(float));
	for (size_t i = 0; i < n; i++) {
		struct hb_wmat g, u, d;
		hb_model_expert(c->m, (uint32_t)layer, un[i], &g, &u, &d);
		expert_pass(c, layer, un[i], &g, &u, &d);
	}
	reduce(c, layer, y);
}

static bool same_view(const struct hb_wmat *a, const struct hb_wmat *b)
{
	return a->type == b->type && a->rows == b->rows && a->cols == b->cols && a->row_bytes == b->row_bytes &&
	       !memcmp(a->data, b->data, (size_t)(a->rows * a->row_bytes));
}

/* The streamed layer; returns the order the experts arrived in as a hash. */
static uint64_t streamed(struct moe_case *c, struct hb_xs *s, size_t layer, bool predict, float *y)
{
	uint32_t un[HB_EM_MAX_EXPERTS];
	struct hb_xs_want w[HB_EM_MAX_EXPERTS];
	struct hb_xs_route r;
	struct hb_xs_lease l;
	size_t n = layer_union(c, layer, un), idx, got = 0;
	uint64_t sig = 1469598103934665603ull;
	int rc;

	hb_xs_set_position(s, 0, (uint32_t)layer);
	if (predict && layer + 1 < c->L) {
		/* router-ahead with a perfect predictor (P1), and a wrong one (P2):
		 * either moves bytes only */
		uint32_t nx[HB_EM_MAX_EXPERTS];
		size_t m = layer_union(c, layer + 1, nx);
		for (size_t i = 0; i < m; i++) {
			struct hb_xs_hint h = {.layer = (uint32_t)layer + 1, .expert = nx[i], .prio = HB_XS_P1,
					       .confidence = 0.9f};
			CHECK(hb_xs_prefetch(s, &h, NULL, NULL) >= 0);
			h.expert = (nx[i] + 7) % (uint32_t)c->E;
			h.prio = HB_XS_P2;
			h.confidence = 0.2f;
			CHECK(hb_xs_prefetch(s, &h, NULL, NULL) >= 0);
		}
	}
	memset(c->slots, 0xff, c->T * c->k * c->H * sizeof(float));
	hb_xs_route_init(&r, w, HB_EM_MAX_EXPERTS);
	CHECK_EQ_INT(hb_xs_route_begin(s, &r, (uint32_t)layer, un, n, NULL), HB_OK);
	while ((rc = hb_xs_route_next(s, &r, &idx, &l, NULL)) == HB_OK) {
		struct hb_wmat g, u, d, mg, mu, md;
		CHECK_EQ_INT(hb_xs_expert_views(s, &l, &g, &u, &d, NULL), HB_OK);
		hb_model_expert(c->m, (uint32_t)layer, un[idx], &mg, &mu, &md);
		CHECK(same_view(&g, &mg) && same_view(&u, &mu) && same_view(&d, &md));
		expert_pass(c, layer, un[idx], &g, &u, &d);
		CHECK_EQ_INT(hb_xs_release(s, &l, NULL), HB_OK);
		sig = (sig ^ un[idx]) * 1099511628211ull;
		got++;
	}
	CHECK_EQ_INT(rc, HB_XS_DONE);
	CHECK_EQ_U64(got, n);
	hb_xs_route_end(s, &r);
	reduce(c, layer, y);
	return sig;
}

static void source_names_the_mapped_store(const struct hb_model *m, struct hb_xs_source *src)
{
	uint8_t d[32];

	CHECK_EQ_INT(hb_xs_source_open("a.gguf", src, NULL), HB_OK);
	CHECK_EQ_U64(src->base, (uint64_t)(m->em_base - m->map));
	CHECK_EQ_U64(src->layout.layer_count, m->em.layer_count);
	CHECK_EQ_U64(src->layout.record_bytes, m->em.record_bytes);
	/* the artifact's table names the mapped records' bytes */
	for (uint32_t l = 0; l < src->layout.layer_count; l++)
		for (uint32_t e = 0; e < src->layout.expert_count; e++) {
			const uint8_t *rec = m->em_base + m->em.layers[l].data_offset + (uint64_t)e * m->em.record_bytes;
			hb_sha256_buf(rec, (size_t)m->em.record_bytes, d);
			CHECK(!memcmp(d, src->record_sha + ((size_t)l * src->layout.expert_count + e) * 32, 32));
		}
}

static void identity_on(const char *set, enum hb_expert_codec_opt codec)
{
	struct hb_model *m = convert_load(set, codec);
	struct hb_xs_source src;
	struct moe_case c;
	float *ref, *y;
	uint64_t records;

	if (!m)
		return;
	source_names_the_mapped_store(m, &src);
	CHECK(case_load(&c, m, set));
	records = (uint64_t)src.layout.layer_count * src.layout.expert_count;
	ref = malloc(c.L * c.T * c.H * sizeof(float));
	y = malloc(c.T * c.H * sizeof(float));
	for (size_t l = 0; l < c.L; l++)
		resident(&c, l, ref + l * c.T * c.H);
	for (int b = 0; b < 4; b++) {
		static const uint64_t slots[4] = {1, 2, 7, 0};
		for (int mode = 0; mode < 4; mode++)
			for (int predict = 0; predict < 2; predict++) {
				struct hb_xs_config cfg;
				struct hb_xs_stats st;
				struct hb_xs *s = NULL;
				hb_xs_config_default(&cfg);
				cfg.threads = mode == 3 ? 2 : 0;
				cfg.depth = mode == 3 ? 2 : 4;
				cfg.budget_bytes = (slots[b] ? slots[b] : records) * hb_xs_slot_bytes(&src);
				CHECK_EQ_INT(hb_xs_open(&src, &cfg, &s, NULL), HB_OK);
				if (!s)
					continue;
				if (mode == 1 || mode == 2)
					hb_xs_test_random_order(s, mode == 1 ? 5 : 77);
				for (size_t l = 0; l < c.L; l++) {
					streamed(&c, s, l, predict, y);
					CHECK(!memcmp(y, ref + l * c.T * c.H, c.T * c.H * sizeof(float)));
				}
				CHECK_EQ_U64(hb_xs_test_audit(s), 0);
				hb_xs_stats_get(s, &st);
				CHECK(st.resident_bytes <= cfg.budget_bytes);
				CHECK_EQ_U64(st.leases_taken, st.leases_released);
				CHECK_EQ_U64(st.failed_io + st.failed_short + st.failed_digest + st.failed_alloc, 0);
				if (!slots[b]) {
					/* everything fits: a second pass is all hits */
					struct hb_xs_stats st2;
					for (size_t l = 0; l < c.L; l++)
						streamed(&c, s, l, false, y);
					hb_xs_stats_get(s, &st2);
					CHECK_EQ_U64(st2.hits - st.hits, st2.wants - st.wants);
				}
				hb_xs_close(s);
			}
	}
	free(ref);
	free(y);
	case_free(&c);
	hb_xs_source_release(&src);
	hb_model_free(m);
}

static void bf16_experts_stream_bit_identical(void)
{
	identity_on("general", HB_CONV_EXPERTS_BF16);
}

static void affine4_experts_stream_bit_identical(void)
{
	identity_on("realshape", HB_CONV_EXPERTS_AFFINE4_G64);
}

/* The random completion orders really reorder arrivals on the fixture:
 * the identity above is not one order seen three times. */
static void random_orders_reorder_arrivals_on_the_fixture(void)
{
	struct hb_model *m = convert_load("general", HB_CONV_EXPERTS_BF16);
	struct hb_xs_source src;
	struct moe_case c;
	float *y;
	uint64_t base_sig = 0;
	int differ = 0;

	if (!m)
		return;
	CHECK_EQ_INT(hb_xs_source_open("a.gguf", &src, NULL), HB_OK);
	CHECK(case_load(&c, m, "general"));
	y = malloc(c.T * c.H * sizeof(float));
	for (uint64_t seed = 0; seed < 4; seed++) {
		struct hb_xs_config cfg;
		struct hb_xs *s = NULL;
		uint64_t sig = 0;
		hb_xs_config_default(&cfg);
		cfg.threads = 0;
		cfg.budget_bytes = 3 * hb_xs_slot_bytes(&src);
		CHECK_EQ_INT(hb_xs_open(&src, &cfg, &s, NULL), HB_OK);
		if (!s)
			continue;
		if (seed)
			hb_xs_test_random_order(s, seed * 1000003);
		for (size_t l = 0; l < c.L; l++)
			sig = sig * 31 + streamed(&c, s, l, false, y);
		if (!seed)
			base_sig = sig;
		else
			differ += sig != base_sig;
		hb_xs_close(s);
	}
	CHECK(differ > 0);
	free(y);
	case_free(&c);
	hb_xs_source_release(&src);
	hb_model_free(m);
}

HB_TEST_MAIN(T(bf16_experts_stream_bit_identical), T(affine4_experts_stream_bit_identical),
	     T(random_orders_reorder_arrivals_on_the_fixture))
