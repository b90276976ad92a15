/*
 * Unit tests: --expert-cache through the real graph (hb_model_stream,
 * hb_moe_forward's streamed path) on the upstream fixtures.  Each fixture
 * checkpoint is converted (general with bf16 experts, realshape with
 * bf16 and with affine4-g64); its first prompt runs as one prefill, then
 * its fed ids one decode step at a time, resident (the mapping) and
 * streamed under budgets of 1 slot (the smallest legal budget), 3 slots,
 * 25% and 100% of the store, for every predictor (none, previous,
 * router-ahead), both eviction policies (lru, score), and three
 * completion orders: the caller-driven engine's oldest-first, a seeded
 * random order (hb_stream_test.h, threads 0), and real I/O workers.
 * Compared bit for bit with the resident run: prefill and decode logits,
 * the state digests, and an ordered hash of every observation (routes,
 * route weights, hidden streams, QSA, PLE).  After each run the cache
 * audit rehashes every valid slot.  With the pool of 2 threads a decode
 * step's experts run as jobs side by side, several threads waiting on one
 * route (budgets of more than 2 slots); under the one-slot budget they run
 * one by one: both paths are compared.  Pools of 1, 2 and 3 threads are
 * compared once more on their own.
 *
 * Faults at the session level: an injected EIO, short read or digest
 * mismatch during a decode step, and an allocation failure during the
 * prefill, fail that chunk with the stream's error; the state digest, the
 * frontier and the caller's logits buffer are unchanged; after the fault
 * is reset the same call succeeds with the resident run's bits.
 *
 * Prefill extent streaming (H5): --prefill-extent off, auto and always,
 * bit-identical to the resident run under tiny to full budgets; a fault in
 * an extent window fails the prefill the same way.
 */
#include "hb_base.h"
#include "harness.h"
#include "graph/hb_model.h"
#include "graph/hb_session.h"
#include "hb-convert/hb_convert.h"
#include "hb_pool.h"
#include "oracle.h"
#include "stream/hb_stream_test.h"

#include <math.h>
#include <unistd.h>

#define MAXT 128

struct outcome {
	float *pre, *dec; /* [T][V], [S][V] */
	size_t T, S;
	uint8_t d_pre[32], d_dec[32];
	uint64_t trail, obs;
};

struct trail {
	uint64_t h, n;
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

	fnv(&t->h, &k, sizeof(k));
	fnv(&t->h, &layer, sizeof(layer));
	fnv(&t->h, &pos, sizeof(pos));
	fnv(&t->h, &n, sizeof(n));
	fnv(&t->h, data, n * width);
	t->n++;
}

static bool convert(const char *set, int codec)
{
	struct hb_convert_opts o;
	char src[4096];

	snprintf(src, sizeof(src), "%s/tests/fixtures/upstream/%s/checkpoint", hb_test_srcdir(), set);
	memset(&o, 0, sizeof(o));
	o.src_dir = src;
	o.out_path = "a.gguf";
	o.expert_codec = codec;
	o.ple_codec = HB_CONV_PLE_BF16;
	return hb_convert(&o, NULL, NULL) == HB_OK;
}

struct prompt {
	int32_t ids[MAXT], fed[MAXT];
	size_t T, S;
};

static bool prompt_load(const char *set, struct prompt *p)
{
	struct oracle o;
	uint64_t dims[4];
	int64_t *ids = NULL, *fed = NULL;
	bool ok;

	memset(p, 0, sizeof(*p));
	if (!oracle_open(&o, set))
		return false;
	ids = oracle_array(&o, "pre/p0/ids", &p->T, dims);
	fed = oracle_array(&o, "dec/p0/in_ids", &p->S, dims);
	ok = ids && fed && p->T && p->T <= MAXT && p->S && p->S <= MAXT;
	for (size_t t = 0; ok && t < p->T; t++)
		p->ids[t] = (int32_t)ids[t];
	for (size_t t = 0; ok && t < p->S; t++)
		p->fed[t] = (int32_t)fed[t];
	free(ids), free(fed);
	oracle_close(&o);
	return ok;
}

static bool run(const struct hb_model *m, struct hb_pool *pool, const struct prompt *p, struct outcome *out)
{
	size_t V = (size_t)m->vocab_physical;
	struct hb_session *s = NULL;
	struct trail tr = {1469598103934665603ull, 0};
	struct hb_error err;
	bool ok = false;

	memset(out, 0, sizeof(*out));
	out->T = p->T, out->S = p->S;
	out->pre = malloc(p->T * V * sizeof(float));
	out->dec = malloc(p->S * V * sizeof(float));
	hb_error_clear(&err);
	if (!out->pre || !out->dec || hb_session_create(m, pool, 256, &s, &err))
		goto done;
	if (hb_session_forward(s, p->ids, p->T, out->pre, observe, &tr, &err))
		goto done;
	hb_session_digest(s, out->d_pre);
	for (size_t i = 0; i < p->S; i++)
		if (hb_session_forward(s, &p->fed[i], 1, out->dec + i * V, observe, &tr, &err))
			goto done;
	hb_session_digest(s, out->d_dec);
	out->trail = tr.h, out->obs = tr.n;
	ok = true;
done:
	if (!ok)
		printf("# run failed: %s: %s\n", err.field, err.msg);
	hb_session_free(s);
	return ok;
}

static void outcome_free(struct outcome *x)
{
	free(x->pre), free(x->dec);
	x->pre = x->dec = NULL;
}

/* which parts differ (0: none) */
static int differ(const struct outcome *got, const struct outcome *want, size_t V)
{
	int d = 0;

	if (got->T != want->T || got->S != want->S)
		return 16;
	if (memcmp(got->pre, want->pre, got->T * V * sizeof(float)))
		d |= 1;
	if (memcmp(got->dec, want->dec, got->S * V * sizeof(float)))
		d |= 2;
	if (memcmp(got->d_pre, want->d_pre, 32) || memcmp(got->d_dec, want->d_dec, 32))
		d |= 4;
	if (got->trail != want->trail || got->obs != want->obs)
		d |= 8;
	return d;
}

static uint64_t slot_bytes_of(const char *path)
{
	struct hb_xs_source src;
	uint64_t b = 0;

	if (hb_xs_source_open(path, &src, NULL) == HB_OK)
		b = hb_xs_slot_bytes(&src);
	hb_xs_source_release(&src);
	return b;
}

enum order { ORDER_FIFO, ORDER_RANDOM, ORDER_WORKERS };
/* --prefill-extent of the models stream_model opens (the H5 tests set it) */
static enum hb_xs_extent g_extent = HB_XS_EXTENT_OFF;
static const char *const order_name[] = {"fifo", "random", "workers"};

/* a model streaming under (size, predictor, policy, order); NULL on failure */
static struct hb_model *stream_model(const char *size, enum hb_xs_predictor pred, enum hb_xs_policy pol,
				     enum order ord, uint64_t seed)
{
	struct hb_model *m = NULL;
	struct hb_xs_config c;
	struct hb_error err;

	hb_error_clear(&err);
	if (hb_model_load("a.gguf", &m, &err))
		return NULL;
	hb_xs_config_default(&c);
	c.policy = pol;
	c.extent = g_extent;
	if (ord != ORDER_WORKERS)
		c.threads = 0;
	if (hb_model_stream(m, size, &c, pred, &err) || !m->xs) {
		printf("# stream %s: %s: %s\n", size, err.field, err.msg);
		hb_model_free(m);
		return NULL;
	}
	if (ord == ORDER_RANDOM)
		hb_xs_test_random_order(m->xs, seed);
	return m;
}

static void identity_on(const char *set, int codec)
{
	const char *cname = codec == HB_CONV_EXPERTS_BF16 ? "bf16" : "affine4";
	struct hb_model *ref_m = NULL;
	struct hb_pool *pool = NULL;
	struct prompt p;
	struct outcome ref;
	char sizes[4][32];
	uint64_t slot, runs = 0, hits = 0, misses = 0, pf = 0;
	size_t V;

	CHECK(convert(set, codec));
	CHECK(prompt_load(set, &p));
	CHECK_EQ_INT(hb_model_load("a.gguf", &ref_m, NULL), HB_OK);
	CHECK_EQ_INT(hb_pool_create(2, &pool, NULL), HB_OK);
	if (!ref_m || !pool)
		goto out;
	V = (size_t)ref_m->vocab_physical;
	CHECK(ref_m->xs == NULL);
	CHECK(run(ref_m, pool, &p, &ref));
	slot = slot_bytes_of("a.gguf");
	CHECK(slot > 0);
	snprintf(sizes[0], sizeof(sizes[0]), "%" PRIu64, slot);
	snprintf(sizes[1], sizeof(sizes[1]), "%" PRIu64, 3 * slot);
	snprintf(sizes[2], sizeof(sizes[2]), "25%%");
	snprintf(sizes[3], sizeof(sizes[3]), "100%%");
	for (int b = 0; b < 4; b++)
		for (int pr = 0; pr < 3; pr++)
			for (int pol = 0; pol < 2; pol++)
				for (int ord = 0; ord < 3; ord++) {
					struct hb_model *m = stream_model(sizes[b], (enum hb_xs_predictor)pr,
									  (enum hb_xs_policy)pol, (enum order)ord,
									  (uint64_t)(b * 97 + pr * 13 + pol * 5 + 1));
					struct hb_xs_stats st;
					struct outcome got;
					int d;
					CHECK(m != NULL);
					if (!m)
						continue;
					CHECK(run(m, pool, &p, &got));
					runs++;
					d = got.pre ? differ(&got, &ref, V) : 32;
					if (d)
						hb_check_fail(__FILE__, __LINE__,
							      "%s %s: cache %s predictor %s policy %s order %s differs "
							      "from resident in%s%s%s%s%s",
							      set, cname, sizes[b], hb_xs_predictor_name((enum hb_xs_predictor)pr),
							      pol ? "score" : "lru", order_name[ord], d & 1 ? " prefill-logits" : "",
							      d & 2 ? " decode-logits" : "", d & 4 ? " state-digest" : "",
							      d & 8 ? " observations" : "", d & 48 ? " (run failed)" : "");
					CHECK_EQ_U64(hb_xs_test_audit(m->xs), 0);
					hb_xs_stats_get(m->xs, &st);
					/* every read was of the store, every want served */
					CHECK(st.wants > 0 && st.wants == st.hits + st.joined + st.misses);
					CHECK_EQ_U64(st.failed_io + st.failed_short + st.failed_digest + st.failed_alloc, 0);
					CHECK_EQ_U64(st.leases_taken, st.leases_released);
					if (b == 0)
						CHECK(st.slots == 1);
					if (pr == HB_XS_PRED_NONE)
						CHECK_EQ_U64(st.tickets[1] + st.tickets[2], 0);
					hits += st.hits, misses += st.misses, pf += st.tickets[1] + st.tickets[2];
					outcome_free(&got);
					hb_model_free(m);
				}
	/* the matrix exercised hits, misses and predictions, not one of them */
	CHECK(hits > 0 && misses > 0 && pf > 0);
	printf("# %s, experts %s: %" PRIu64 " streamed runs bit-identical to resident (budgets %s, %s, %s, %s "
	       "bytes/slot %" PRIu64 "; %" PRIu64 " hits, %" PRIu64 " misses, %" PRIu64 " predicted reads)\n",
	       set, cname, runs, sizes[0], sizes[1], sizes[2], sizes[3], slot, hits, misses, pf);
	outcome_free(&ref);
out:
	hb_pool_destroy(pool);
	hb_model_free(ref_m);
}

static void identity_general_bf16(void)
{
	identity_on("general", HB_CONV_EXPERTS_BF16);
}

static void identity_realshape_bf16(void)
{
	identity_on("realshape", HB_CONV_EXPERTS_BF16);
}

static void identity_realshape_affine4(void)
{
	identity_on("realshape", HB_CONV_EXPERTS_AFFINE4_G64);
}

/* the streamed run over pools of 1, 2 and 3 threads: one by one, and
 * as jobs on 2 and 3 threads sharing a route (the caller-driven engine's
 * waits then read for each other) */
static void threads_streamed(void)
{
	static const unsigned counts[] = {1, 2, 3};
	struct hb_model *ref_m = NULL;
	struct hb_pool *one = NULL;
	struct prompt p;
	struct outcome ref;
	char sizes[2][32];
	uint64_t slot;
	size_t V, runs = 0;

	CHECK(convert("general", HB_CONV_EXPERTS_BF16));
	CHECK(prompt_load("general", &p));
	CHECK_EQ_INT(hb_model_load("a.gguf", &ref_m, NULL), HB_OK);
	CHECK_EQ_INT(hb_pool_create(1, &one, NULL), HB_OK);
	if (!ref_m || !one)
		goto out;
	V = (size_t)ref_m->vocab_physical;
	CHECK(run(ref_m, one, &p, &ref));
	slot = slot_bytes_of("a.gguf");
	snprintf(sizes[0], sizeof(sizes[0]), "%" PRIu64, 4 * slot);
	snprintf(sizes[1], sizeof(sizes[1]), "25%%");
	for (size_t c = 0; c < HB_ARRAY_LEN(counts); c++) {
		struct hb_pool *pool = NULL;
		CHECK_EQ_INT(hb_pool_create(counts[c], &pool, NULL), HB_OK);
		for (int b = 0; pool && b < 2; b++)
			for (int ord = 0; ord < 3; ord++) {
				struct hb_model *m = stream_model(sizes[b], HB_XS_PRED_ROUTER_AHEAD, HB_XS_POLICY_SCORE,
								  (enum order)ord, (uint64_t)(c * 31 + b * 7 + ord + 3));
				struct outcome got;
				CHECK(m != NULL);
				if (!m)
					continue;
				CHECK(run(m, pool, &p, &got));
				runs++;
				if (!got.pre || differ(&got, &ref, V))
					hb_check_fail(__FILE__, __LINE__, "%u threads, cache %s, order %s: differs from resident",
						      counts[c], sizes[b], order_name[ord]);
				CHECK_EQ_U64(hb_xs_test_audit(m->xs), 0);
				outcome_free(&got);
				hb_model_free(m);
			}
		hb_pool_destroy(pool);
	}
	printf("# general bf16: %zu streamed runs on 1, 2, 3 threads bit-identical to resident on 1\n", runs);
	outcome_free(&ref);
out:
	hb_pool_destroy(one);
	hb_model_free(ref_m);
}

/* the comparison can fail: a record corrupted in a valid slot after its
 * verification changes the outputs (the audit names it too) */
static void identity_can_fail(void)
{
	struct hb_model *ref_m = NULL, *m;
	struct hb_pool *pool = NULL;
	struct prompt p;
	struct outcome ref, got;
	struct hb_session *s = NULL;
	size_t V;

	CHECK(convert("general", HB_CONV_EXPERTS_BF16));
	CHECK(prompt_load("general", &p));
	CHECK_EQ_INT(hb_model_load("a.gguf", &ref_m, NULL), HB_OK);
	CHECK_EQ_INT(hb_pool_create(1, &pool, NULL), HB_OK);
	m = stream_model("100%", HB_XS_PRED_NONE, HB_XS_POLICY_LRU, ORDER_FIFO, 0);
	CHECK(m != NULL);
	if (!ref_m || !pool || !m)
		goto out;
	V = (size_t)m->vocab_physical;
	CHECK(run(ref_m, pool, &p, &ref));
	/* warm the cache with the prompt, then corrupt one record of layer 0
	 * that the prompt routes to: the next run hits it */
	CHECK_EQ_INT(hb_session_create(m, pool, 256, &s, NULL), HB_OK);
	CHECK_EQ_INT(hb_session_forward(s, p.ids, p.T, NULL, NULL, NULL, NULL), HB_OK);
	hb_session_free(s);
	{
		bool done = false;
		for (uint32_t e = 0; e < (uint32_t)m->cfg.num_experts && !done; e++)
			done = hb_xs_test_corrupt(m->xs, 0, e) == HB_OK;
		CHECK(done);
	}
	CHECK(hb_xs_test_audit(m->xs) > 0);
	CHECK(run(m, pool, &p, &got));
	CHECK(got.pre && differ(&got, &ref, V) != 0);
	outcome_free(&got);
	outcome_free(&ref);
out:
	hb_model_free(m);
	hb_model_free(ref_m);
	hb_pool_destroy(pool);
}

static const struct {
	enum hb_xs_fault kind;
	int code;
	const char *name;
} kinds[] = {
	{HB_XS_FAULT_EIO, HB_ERR_IO, "eio"},
	{HB_XS_FAULT_SHORT, HB_ERR_SHORT, "short"},
	{HB_XS_FAULT_DIGEST, HB_ERR_DIGEST, "digest"},
	{HB_XS_FAULT_ALLOC, HB_ERR_NOMEM, "alloc"},
};

/*
 * One fault kind: the failing chunk is the prefill for alloc (a slot's
 * buffer is allocated at its first read, so only a fresh engine reaches
 * the site), a decode step for the others (3 slots: every step misses).
 */
static void fault_case(size_t kind, enum hb_xs_predictor pred, enum order ord, struct hb_pool *pool,
		       const struct prompt *p, const struct outcome *ref, uint64_t slot)
{
	char size[32];
	struct hb_model *m;
	struct hb_session *s = NULL;
	struct hb_error err;
	uint8_t before[32], after[32];
	size_t V, step = 1;
	float *logits;
	bool in_prefill = kinds[kind].kind == HB_XS_FAULT_ALLOC;
	const int32_t *toks = in_prefill ? p->ids : &p->fed[step];
	size_t T = in_prefill ? p->T : 1;
	int rc;

	snprintf(size, sizeof(size), "%" PRIu64, 3 * slot);
	m = stream_model(size, pred, HB_XS_POLICY_SCORE, ord, 7);
	CHECK(m != NULL);
	if (!m)
		return;
	V = (size_t)m->vocab_physical;
	logits = malloc(p->T * V * sizeof(float));
	CHECK(logits != NULL);
	CHECK_EQ_INT(hb_session_create(m, pool, 256, &s, NULL), HB_OK);
	if (!logits || !s)
		goto out;
	if (!in_prefill) {
		CHECK_EQ_INT(hb_session_forward(s, p->ids, p->T, NULL, NULL, NULL, NULL), HB_OK);
		for (size_t i = 0; i < step; i++)
			CHECK_EQ_INT(hb_session_forward(s, &p->fed[i], 1, NULL, NULL, NULL, NULL), HB_OK);
	}
	hb_session_digest(s, before);
	memset(logits, 0x5a, T * V * sizeof(float));
	hb_xs_test_fault_arm(m->xs, kinds[kind].kind, 1);
	hb_error_clear(&err);
	rc = hb_session_forward(s, toks, T, logits, NULL, NULL, &err);
	CHECK_EQ_INT(rc, kinds[kind].code);
	CHECK(strstr(err.field, "expert_store.layer[") != NULL);
	CHECK(hb_xs_test_fault_calls(m->xs, kinds[kind].kind) >= 1);
	hb_session_digest(s, after);
	CHECK(memcmp(before, after, 32) == 0);
	CHECK_EQ_U64(hb_session_frontier(s), in_prefill ? 0 : p->T + step);
	{
		bool untouched = true;
		for (size_t i = 0; i < T * V * sizeof(float); i++)
			untouched &= ((const uint8_t *)logits)[i] == 0x5a;
		CHECK(untouched);
	}
	CHECK_EQ_U64(hb_xs_test_audit(m->xs), 0);
	/* the fault clears: the same call succeeds with the resident bits */
	hb_xs_test_fault_reset(m->xs);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_session_forward(s, toks, T, logits, NULL, NULL, &err), HB_OK);
	CHECK_STR(err.msg, "");
	if (in_prefill) {
		CHECK(memcmp(logits, ref->pre, T * V * sizeof(float)) == 0);
		hb_session_digest(s, after);
		CHECK(memcmp(after, ref->d_pre, 32) == 0);
	} else {
		CHECK(memcmp(logits, ref->dec + step * V, V * sizeof(float)) == 0);
		for (size_t i = step + 1; i < p->S; i++)
			CHECK_EQ_INT(hb_session_forward(s, &p->fed[i], 1, logits, NULL, NULL, NULL), HB_OK);
		hb_session_digest(s, after);
		CHECK(memcmp(after, ref->d_dec, 32) == 0);
	}
	CHECK_EQ_U64(hb_xs_test_audit(m->xs), 0);
out:
	hb_session_free(s);
	free(logits);
	hb_model_free(m);
}

static void faults_fail_the_chunk(void)
{
	struct hb_model *ref_m = NULL;
	struct hb_pool *pool = NULL;
	struct prompt p;
	struct outcome ref;
	uint64_t slot;
	size_t cases = 0;

	CHECK(convert("general", HB_CONV_EXPERTS_BF16));
	CHECK(prompt_load("general", &p));
	CHECK(p.S >= 3);
	CHECK_EQ_INT(hb_model_load("a.gguf", &ref_m, NULL), HB_OK);
	CHECK_EQ_INT(hb_pool_create(2, &pool, NULL), HB_OK);
	if (!ref_m || !pool || p.S < 3)
		goto out;
	CHECK(run(ref_m, pool, &p, &ref));
	slot = slot_bytes_of("a.gguf");
	for (size_t k = 0; k < HB_ARRAY_LEN(kinds); k++)
		for (int pr = 0; pr < 3; pr += 2)
			for (int ord = 0; ord < 3; ord += 2) {
				fault_case(k, (enum hb_xs_predictor)pr, (enum order)ord, pool, &p, &ref, slot);
				cases++;
			}
	printf("# %zu fault cases (eio, short, digest, alloc x predictor none, router-ahead x caller-driven, "
	       "workers): chunk failed, state unchanged, next call exact\n", cases);
	outcome_free(&ref);
out:
	hb_pool_destroy(pool);
	hb_model_free(ref_m);
}

/*
 * H5: prefill extent streaming off, auto and always, bit-identical to the
 * resident run (and so to the record path, which the matrix above holds
 * to the same bits) under budgets of 8 slots (a ring of 2 x 2 slots and 4
 * slots), 16 slots, 25% and 100%, three completion orders, two
 * predictors; always reads windows in the prefill (when the budget holds
 * the ring).
 */
static void extent_identity_on(const char *set, int codec)
{
	struct hb_model *ref_m = NULL;
	struct hb_pool *pool = NULL;
	struct prompt p;
	struct outcome ref;
	char sizes[4][32];
	uint64_t slot, runs = 0, windows = 0;
	size_t V;

	CHECK(convert(set, codec));
	CHECK(prompt_load(set, &p));
	CHECK_EQ_INT(hb_model_load("a.gguf", &ref_m, NULL), HB_OK);
	CHECK_EQ_INT(hb_pool_create(2, &pool, NULL), HB_OK);
	if (!ref_m || !pool)
		goto out;
	V = (size_t)ref_m->vocab_physical;
	CHECK(run(ref_m, pool, &p, &ref));
	slot = slot_bytes_of("a.gguf");
	snprintf(sizes[0], sizeof(sizes[0]), "%" PRIu64, 8 * slot);
	snprintf(sizes[1], sizeof(sizes[1]), "%" PRIu64, 16 * slot);
	snprintf(sizes[2], sizeof(sizes[2]), "25%%");
	snprintf(sizes[3], sizeof(sizes[3]), "100%%");
	for (int mode = 0; mode < 3; mode++)
		for (int b = 0; b < 4; b++)
			for (int pr = 0; pr < 3; pr += 2)
				for (int ord = 0; ord < 3; ord++) {
					struct hb_model *m;
					struct hb_xs_stats st;
					struct outcome got;
					int d;
					g_extent = (enum hb_xs_extent)mode;
					m = stream_model(sizes[b], (enum hb_xs_predictor)pr, HB_XS_POLICY_SCORE,
							 (enum order)ord, (uint64_t)(mode * 31 + b * 7 + ord + 1));
					g_extent = HB_XS_EXTENT_OFF;
					CHECK(m != NULL);
					if (!m)
						continue;
					CHECK(run(m, pool, &p, &got));
					runs++;
					d = got.pre ? differ(&got, &ref, V) : 32;
					if (d)
						hb_check_fail(__FILE__, __LINE__,
							      "%s: prefill-extent %s cache %s predictor %s order %s differs "
							      "from resident (%d)",
							      set, hb_xs_extent_name((enum hb_xs_extent)mode), sizes[b],
							      hb_xs_predictor_name((enum hb_xs_predictor)pr), order_name[ord], d);
					CHECK_EQ_U64(hb_xs_test_audit(m->xs), 0);
					hb_xs_stats_get(m->xs, &st);
					CHECK_EQ_U64(st.failed_io + st.failed_short + st.failed_digest + st.failed_alloc, 0);
					CHECK_EQ_U64(st.leases_taken, st.leases_released);
					CHECK(st.slots * st.slot_bytes + st.ring_bytes <= st.budget_bytes);
					if (mode == HB_XS_EXTENT_OFF)
						CHECK_EQ_U64(st.extent_reads + st.ring_bytes, 0);
					if (mode == HB_XS_EXTENT_ALWAYS && st.ring_bytes)
						CHECK(st.extent_reads > 0);
					windows += st.extent_reads;
					outcome_free(&got);
					hb_model_free(m);
				}
	CHECK(windows > 0);
	printf("# %s: %" PRIu64 " runs with --prefill-extent off/auto/always bit-identical to resident "
	       "(%" PRIu64 " extent windows read)\n",
	       set, runs, windows);
	outcome_free(&ref);
out:
	hb_pool_destroy(pool);
	hb_model_free(ref_m);
}

static void extent_identity(void)
{
	extent_identity_on("general", HB_CONV_EXPERTS_BF16);
	CHECK_EQ_INT(unlink("a.gguf"), 0); /* the converter never replaces a file */
	extent_identity_on("realshape", HB_CONV_EXPERTS_AFFINE4_G64);
}

/* a fault in a prefill's extent window fails the chunk: state, frontier
 * and the caller's logits unchanged; the next call is exact */
static void extent_faults_fail_the_chunk(void)
{
	struct hb_model *ref_m = NULL;
	struct hb_pool *pool = NULL;
	struct prompt p;
	struct outcome ref;
	char size[32];
	size_t cases = 0;

	CHECK(convert("general", HB_CONV_EXPERTS_BF16));
	CHECK(prompt_load("general", &p));
	CHECK_EQ_INT(hb_model_load("a.gguf", &ref_m, NULL), HB_OK);
	CHECK_EQ_INT(hb_pool_create(2, &pool, NULL), HB_OK);
	if (!ref_m || !pool)
		goto out;
	CHECK(run(ref_m, pool, &p, &ref));
	snprintf(size, sizeof(size), "%" PRIu64, 16 * slot_bytes_of("a.gguf"));
	for (size_t k = 0; k < 3; k++)
		for (int ord = 0; ord < 3; ord += 2) {
			struct hb_model *m;
			struct hb_session *s = NULL;
			struct hb_xs_stats st;
			struct hb_error err;
			uint8_t before[32], after[32];
			size_t V = (size_t)ref_m->vocab_physical;
			float *logits = malloc(p.T * V * sizeof(float));
			bool untouched = true;
			g_extent = HB_XS_EXTENT_ALWAYS;
			m = stream_model(size, HB_XS_PRED_NONE, HB_XS_POLICY_SCORE, (enum order)ord, 3);
			g_extent = HB_XS_EXTENT_OFF;
			CHECK(m != NULL && logits != NULL);
			if (!m || !logits || hb_session_create(m, pool, 256, &s, NULL)) {
				free(logits);
				hb_model_free(m);
				continue;
			}
			hb_session_digest(s, before);
			memset(logits, 0x5a, p.T * V * sizeof(float));
			hb_xs_test_fault_arm(m->xs, kinds[k].kind, 1);
			hb_error_clear(&err);
			CHECK_EQ_INT(hb_session_forward(s, p.ids, p.T, logits, NULL, NULL, &err), kinds[k].code);
			CHECK(strstr(err.field, "expert_store.layer[") != NULL);
			hb_xs_stats_get(m->xs, &st);
			CHECK(st.ring_bytes > 0);
			hb_session_digest(s, after);
			CHECK(memcmp(before, after, 32) == 0);
			CHECK_EQ_U64(hb_session_frontier(s), 0);
			for (size_t i = 0; i < p.T * V * sizeof(float); i++)
				untouched &= ((const uint8_t *)logits)[i] == 0x5a;
			CHECK(untouched);
			CHECK_EQ_U64(hb_xs_test_audit(m->xs), 0);
			hb_xs_test_fault_reset(m->xs);
			CHECK_EQ_INT(hb_session_forward(s, p.ids, p.T, logits, NULL, NULL, NULL), HB_OK);
			CHECK(memcmp(logits, ref.pre, p.T * V * sizeof(float)) == 0);
			hb_session_digest(s, after);
			CHECK(memcmp(after, ref.d_pre, 32) == 0);
			hb_xs_stats_get(m->xs, &st);
			CHECK(st.extent_reads > 0);
			cases++;
			hb_session_free(s);
			free(logits);
			hb_model_free(m);
		}
	printf("# %zu extent-window fault cases (eio, short, digest x caller-driven, workers): chunk failed, "
	       "state unchanged, next call exact\n",
	       cases);
	outcome_free(&ref);
out:
	hb_pool_destroy(pool);
	hb_model_free(ref_m);
}

/* what hb_model_stream refuses, and that a refusal leaves the model resident */
static void stream_refusals(void)
{
	struct hb_model *m = NULL;
	struct hb_xs_config c;
	struct hb_error err;

	CHECK(convert("general", HB_CONV_EXPERTS_BF16));
	CHECK_EQ_INT(hb_model_load("a.gguf", &m, NULL), HB_OK);
	if (!m)
		return;
	hb_xs_config_default(&c);
	const char *bad[] = {"0", "1", "4095", "abc", "0%", "101%", "5X", ""};
	for (size_t i = 0; i < HB_ARRAY_LEN(bad); i++) {
		hb_error_clear(&err);
		CHECK(hb_model_stream(m, bad[i], &c, HB_XS_PRED_NONE, &err) < 0);
		CHECK_STR(err.field, "expert_cache");
		CHECK(m->xs == NULL);
	}
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_model_stream(m, "all", &c, HB_XS_PRED_ROUTER_AHEAD, &err), HB_OK);
	CHECK(m->xs == NULL);
	CHECK_EQ_INT(hb_model_stream(m, NULL, &c, HB_XS_PRED_NONE, &err), HB_OK);
	CHECK(m->xs == NULL);
	CHECK_EQ_INT(hb_model_stream(m, "50%", &c, (enum hb_xs_predictor)7, &err), HB_ERR_INVALID);
	CHECK(m->xs == NULL);
	CHECK_EQ_INT(hb_model_stream(m, "50%", &c, HB_XS_PRED_NONE, &err), HB_OK);
	CHECK(m->xs != NULL);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_model_stream(m, "50%", &c, HB_XS_PRED_NONE, &err), HB_ERR_INVALID);
	CHECK_STR(err.field, "expert_cache");
	/* the syntax check a command line runs before loading */
	CHECK_EQ_INT(hb_xs_budget_check("all", NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_budget_check("12.5%", NULL), HB_OK);
	CHECK_EQ_INT(hb_xs_budget_check("64M", NULL), HB_OK);
	CHECK(hb_xs_budget_check("0", NULL) < 0);
	CHECK(hb_xs_budget_check("64Q", NULL) < 0);
	CHECK(hb_xs_budget_check("-1", NULL) < 0);
	hb_model_free(m);
}

HB_TEST_MAIN(T(identity_general_bf16), T(identity_realshape_bf16), T(identity_realshape_affine4),
	     T(threads_streamed), T(identity_can_fail), T(faults_fail_the_chunk), T(stream_refusals),
	     T(extent_identity), T(extent_faults_fail_the_chunk))
