/*
 * Unit tests: AFN-021 Gate 5 at library level (libkern/predict/hb_learned.h).
 *
 * A predictor checkpoint in the streaming runtime only moves bytes: the
 * realshape fixture runs its first prompt (one prefill, then its fed ids a
 * decode step each) resident and streamed with the learned predictor's P1
 * hints, under budgets of 1 slot, 3 slots, 25% and 100% of the store, both
 * eviction policies and three completion orders (oldest first, a seeded
 * random order, real I/O workers); prefill and decode logits, state
 * digests and an ordered hash of every observation must equal the resident
 * run's bit for bit, and the shadow observer must count no P0 starvation
 * attempt while the hints issue reads.  The checkpoint is refused field by
 * field against another artifact, tokenizer digest, projection, geometry
 * or a train thread.  The starvation counter itself counts a P1 dispatched
 * while a P0 waits (so that its zero can fail).
 */
#include "hb_base.h"
#include "harness.h"
#include "graph/hb_model.h"
#include "graph/hb_session.h"
#include "hb-convert/hb_convert.h"
#include "hb_pool.h"
#include "oracle.h"
#include "predict/hb_learned.h"
#include "stream/hb_stream_test.h"

#define MAXT 128

struct trail {
	uint64_t h, n;
	struct hb_learned *lp;
};

static void fnv(uint64_t *h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		*h = (*h ^ b[i]) * 1099511628211ull;
}

static void observe(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct trail *t = ctx;
	size_t width = kind == HB_OBS_PLE_ROWS ? 8 : 4;
	uint32_t k = (uint32_t)kind;

	if (t->lp)
		hb_learned_observe(t->lp, kind, layer, pos, data);
	fnv(&t->h, &k, sizeof(k));
	fnv(&t->h, &layer, sizeof(layer));
	fnv(&t->h, &pos, sizeof(pos));
	fnv(&t->h, &n, sizeof(n));
	fnv(&t->h, data, n * width);
	t->n++;
}

struct outcome {
	float *pre, *dec;
	uint8_t d_pre[32], d_dec[32];
	uint64_t trail, obs;
};

static struct {
	int32_t ids[MAXT], fed[MAXT];
	size_t T, S;
} P;

static bool setup(void)
{
	struct hb_convert_opts o;
	struct oracle orc;
	char src[4096];
	uint64_t dims[4];
	int64_t *ids = NULL, *fed = NULL;
	bool ok;

	snprintf(src, sizeof(src), "%s/tests/fixtures/upstream/realshape/checkpoint", hb_test_srcdir());
	memset(&o, 0, sizeof(o));
	o.src_dir = src;
	o.out_path = "a.gguf";
	o.expert_codec = HB_CONV_EXPERTS_BF16;
	o.ple_codec = HB_CONV_PLE_BF16;
	if (hb_convert(&o, NULL, NULL) != HB_OK || !oracle_open(&orc, "realshape"))
		return false;
	ids = oracle_array(&orc, "pre/p0/ids", &P.T, dims);
	fed = oracle_array(&orc, "dec/p0/in_ids", &P.S, dims);
	ok = ids && fed && P.T && P.T <= MAXT && P.S && P.S <= MAXT;
	for (size_t t = 0; ok && t < P.T; t++)
		P.ids[t] = (int32_t)ids[t];
	for (size_t t = 0; ok && t < P.S; t++)
		P.fed[t] = (int32_t)fed[t];
	free(ids), free(fed);
	oracle_close(&orc);
	return ok;
}

static bool run(const struct hb_model *m, struct hb_pool *pool, struct hb_learned *lp, struct outcome *out)
{
	size_t V = (size_t)m->vocab_physical;
	struct hb_session *s = NULL;
	struct trail tr = {1469598103934665603ull, 0, lp};
	bool ok = false;

	memset(out, 0, sizeof(*out));
	out->pre = malloc(P.T * V * sizeof(float));
	out->dec = malloc(P.S * V * sizeof(float));
	if (!out->pre || !out->dec || hb_session_create(m, pool, 256, &s, NULL))
		goto done;
	if (hb_session_forward(s, P.ids, P.T, out->pre, observe, &tr, NULL))
		goto done;
	hb_session_digest(s, out->d_pre);
	for (size_t i = 0; i < P.S; i++)
		if (hb_session_forward(s, &P.fed[i], 1, out->dec + i * V, observe, &tr, NULL))
			goto done;
	hb_session_digest(s, out->d_dec);
	out->trail = tr.h, out->obs = tr.n;
	ok = true;
done:
	hb_session_free(s);
	return ok;
}

static bool same(const struct outcome *a, const struct outcome *b, size_t V)
{
	return !memcmp(a->pre, b->pre, P.T * V * sizeof(float)) && !memcmp(a->dec, b->dec, P.S * V * sizeof(float)) &&
	       !memcmp(a->d_pre, b->d_pre, 32) && !memcmp(a->d_dec, b->d_dec, 32) && a->trail == b->trail &&
	       a->obs == b->obs;
}

/* a checkpoint of random weights for the model's geometry, trained (so
 * its identities say) on threads 5 and 9 of split "train" */
static bool make_ckpt(const struct hb_model *m, const char *path, void (*edit)(struct hb_predictor *))
{
	struct hb_predictor p;
	uint64_t s = 12345, threads[2] = {5, 9};
	float *P_ = NULL;
	bool ok;

	memset(&p, 0, sizeof(p));
	p.width = 16, p.rank = 4, p.layers = (uint32_t)m->cfg.num_layers;
	p.experts = (uint32_t)m->cfg.num_experts, p.top_k = (uint32_t)m->cfg.num_experts_per_tok;
	if (hb_predictor_alloc(&p, NULL))
		return false;
	for (size_t i = 0; i < (size_t)p.rank * p.width; i++)
		s = s * 6364136223846793005ull + 1, p.trunk[i] = (float)((int)(s >> 40) % 200 - 100) / 100.0f;
	for (size_t i = 0; i < (size_t)p.experts * p.rank; i++)
		s = s * 6364136223846793005ull + 1, p.head[i] = (float)((int)(s >> 40) % 200 - 100) / 100.0f;
	memcpy(p.id.artifact, m->artifact_sha, 32);
	p.id.projection_seed = 9;
	p.id.width = 16, p.id.source_width = (uint32_t)m->cfg.hidden_size, p.id.layers = p.layers;
	snprintf(p.id.split, sizeof(p.id.split), "train");
	snprintf(p.id.tap, sizeof(p.id.tap), "pre-attention-mix");
	ok = hb_projection_make(9, p.id.source_width, 16, &P_, p.id.projection, NULL) == HB_OK;
	free(P_);
	p.train_threads = malloc(sizeof(threads));
	if (p.train_threads)
		memcpy(p.train_threads, threads, sizeof(threads)), p.n_train_threads = 2;
	if (edit)
		edit(&p);
	ok = ok && p.train_threads && hb_predictor_save(path, &p, NULL) == HB_OK;
	hb_predictor_release(&p);
	return ok;
}

static const char *const order_name[] = {"fifo", "random", "workers"};

static void learned_only_moves_bytes(void)
{
	static const uint8_t no_text[32];
	struct hb_model *ref_m = NULL;
	struct hb_pool *pool = NULL;
	struct outcome ref;
	uint64_t slot = 0, runs = 0, issued = 0, dispatched = 0;
	char sizes[4][32];
	size_t V;

	CHECK(setup());
	CHECK_EQ_INT(hb_model_load("a.gguf", &ref_m, NULL), HB_OK);
	CHECK_EQ_INT(hb_pool_create(2, &pool, NULL), HB_OK);
	if (!ref_m || !pool)
		goto out;
	V = (size_t)ref_m->vocab_physical;
	CHECK(make_ckpt(ref_m, "p.safetensors", NULL));
	CHECK(run(ref_m, pool, NULL, &ref));
	{
		struct hb_xs_source src;
		if (hb_xs_source_open("a.gguf", &src, NULL) == HB_OK)
			slot = hb_xs_slot_bytes(&src);
		hb_xs_source_release(&src);
	}
	CHECK(slot > 0);
	snprintf(sizes[0], sizeof(sizes[0]), "%" PRIu64, slot);
	snprintf(sizes[1], sizeof(sizes[1]), "%" PRIu64, 3 * slot);
	snprintf(sizes[2], sizeof(sizes[2]), "25%%");
	snprintf(sizes[3], sizeof(sizes[3]), "100%%");
	for (int b = 0; b < 4; b++)
		for (int pol = 0; pol < 2; pol++)
			for (int ord = 0; ord < 3; ord++) {
				struct hb_model *m = NULL;
				struct hb_xs_config c;
				struct hb_learned lp;
				struct hb_shadow sh;
				struct outcome got;
				cJSON *j = cJSON_CreateObject();
				hb_shadow_init(&sh);
				hb_xs_config_default(&c);
				c.policy = (enum hb_xs_policy)pol;
				c.threads = ord == 2 ? c.threads : 0;
				c.observe = hb_shadow_ticket, c.observe_ctx = &sh;
				CHECK_EQ_INT(hb_model_load("a.gguf", &m, NULL), HB_OK);
				CHECK_EQ_INT(hb_model_stream(m, sizes[b], &c, HB_XS_PRED_NONE, NULL), HB_OK);
				if (!m || !m->xs) {
					hb_model_free(m);
					hb_shadow_release(&sh);
					cJSON_Delete(j);
					continue;
				}
				if (ord == 1)
					hb_xs_test_random_order(m->xs, (uint64_t)(b * 7 + pol + 1));
				CHECK_EQ_INT(hb_learned_open(&lp, "p.safetensors", m, no_text, false, 0, NULL), HB_OK);
				CHECK(run(m, pool, &lp, &got));
				runs++;
				if (!same(&got, &ref, V))
					hb_check_fail(__FILE__, __LINE__, "learned: cache %s policy %s order %s differs from resident",
						      sizes[b], pol ? "score" : "lru", order_name[ord]);
				CHECK_EQ_U64(hb_xs_test_audit(m->xs), 0);
				issued += lp.issued;
				hb_learned_release(&lp);
				hb_model_free(m); /* the engine's last completions, then the shadow */
				CHECK_EQ_INT(hb_shadow_json(&sh, j), HB_OK);
				CHECK_EQ_U64(sh.starvation, 0);
				dispatched += sh.dispatched_predicted;
				hb_shadow_release(&sh);
				cJSON_Delete(j);
				free(got.pre), free(got.dec);
			}
	/* not vacuous: the hints issued reads and the engine dispatched them */
	CHECK(issued > 0 && dispatched > 0);
	printf("# realshape: %" PRIu64 " streamed runs with the learned predictor bit-identical to resident; %" PRIu64
	       " predicted reads issued, %" PRIu64 " dispatched, 0 P0 starvation attempts\n", runs, issued, dispatched);
	free(ref.pre), free(ref.dec);
out:
	hb_pool_destroy(pool);
	hb_model_free(ref_m);
}

static void other_artifact(struct hb_predictor *p) { p->id.artifact[0] ^= 1; }
static void other_projection(struct hb_predictor *p) { p->id.projection_seed = 10; }
static void other_layers(struct hb_predictor *p) { p->id.layers = p->layers = p->layers - 1; }
static void other_experts(struct hb_predictor *p) { p->top_k++; }
static void other_tap(struct hb_predictor *p) { snprintf(p->id.tap, sizeof(p->id.tap), "post-attention"); }

static void learned_refusals(void)
{
	static const uint8_t no_text[32], text[32] = {1};
	static const struct {
		void (*edit)(struct hb_predictor *);
		const char *id, *field;
	} cases[] = {
		{other_artifact, "predictor-artifact", "artifact"},
		{other_projection, "predictor-projection", "projection"},
		{other_tap, "predictor-projection", "projection"},
		{other_layers, "predictor-geometry", "layers"},
		{other_experts, "predictor-geometry", "experts"},
	};
	struct hb_model *m = NULL;
	struct hb_learned lp;
	struct hb_error err;

	CHECK(setup());
	CHECK_EQ_INT(hb_model_load("a.gguf", &m, NULL), HB_OK);
	if (!m)
		return;
	CHECK(make_ckpt(m, "p.safetensors", NULL));
	for (size_t i = 0; i < HB_ARRAY_LEN(cases); i++) {
		CHECK(make_ckpt(m, "q.safetensors", cases[i].edit));
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_learned_open(&lp, "q.safetensors", m, no_text, false, 0, &err), HB_ERR_CONTRACT);
		CHECK_STR(err.id, cases[i].id);
		CHECK_STR(err.field, cases[i].field);
	}
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_learned_open(&lp, "p.safetensors", m, text, false, 0, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "predictor-text");
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_learned_open(&lp, "p.safetensors", m, no_text, true, 9, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "predictor-leak");
	/* the control: the same checkpoint, another thread, is accepted */
	CHECK_EQ_INT(hb_learned_open(&lp, "p.safetensors", m, no_text, true, 6, NULL), HB_OK);
	hb_learned_release(&lp);
	hb_model_free(m);
}

static void starvation_counts(void)
{
	struct hb_shadow sh;
	struct hb_xs_ticket p0 = {.id = 1, .exact = true, .prio = HB_XS_P0, .state = HB_XS_T_QUEUED};
	struct hb_xs_ticket p1 = {.id = 2, .prio = HB_XS_P1, .state = HB_XS_T_QUEUED};

	hb_shadow_init(&sh);
	hb_shadow_ticket(&sh, HB_XS_EV_ISSUE, &p1);
	hb_shadow_ticket(&sh, HB_XS_EV_ISSUE, &p0);
	p1.state = HB_XS_T_INFLIGHT;
	hb_shadow_ticket(&sh, HB_XS_EV_DISPATCH, &p1); /* a P0 waits: an attempt */
	CHECK_EQ_U64(sh.starvation, 1);
	p0.state = HB_XS_T_INFLIGHT;
	hb_shadow_ticket(&sh, HB_XS_EV_DISPATCH, &p0);
	p1.id = 3, p1.state = HB_XS_T_QUEUED;
	hb_shadow_ticket(&sh, HB_XS_EV_ISSUE, &p1);
	p1.state = HB_XS_T_INFLIGHT;
	hb_shadow_ticket(&sh, HB_XS_EV_DISPATCH, &p1); /* none waits */
	CHECK_EQ_U64(sh.starvation, 1);
	CHECK_EQ_U64(sh.dispatched_predicted, 2);
	/* a predicted ticket promoted while queued is a P0 that waits */
	p1.id = 4, p1.state = HB_XS_T_QUEUED, p1.prio = HB_XS_P1;
	hb_shadow_ticket(&sh, HB_XS_EV_ISSUE, &p1);
	p1.prio = HB_XS_P0;
	hb_shadow_ticket(&sh, HB_XS_EV_PROMOTE, &p1);
	p0.id = 5, p0.prio = HB_XS_P2, p0.exact = false, p0.state = HB_XS_T_INFLIGHT;
	hb_shadow_ticket(&sh, HB_XS_EV_DISPATCH, &p0);
	CHECK_EQ_U64(sh.starvation, 2);
	hb_shadow_release(&sh);
}

HB_TEST_MAIN(T(learned_only_moves_bytes), T(learned_refusals), T(starvation_counts))
