/*
 * test_trace_stats.c: hb-trace stats against the hand-worked answers of
 * tests/fixtures/traces/README.md, the defects each fixture must report,
 * and order independence (token-major and layer-major give the same
 * statistics; a window too small is refused, never silently short).
 */
#include "hb_base.h"
#include "harness.h"
#include "hb-trace/analysis/hb_trace_input.h"
#include "hb-trace/analysis/hb_trace_stats.h"

#include <math.h>

#define NEAR(a, b) CHECK(fabs((a) - (b)) < 1e-9)

struct ctx {
	struct hb_tstats *st;
	struct hb_tstats_opts o;
	struct hb_error *err;
	const char *path;
};

static int add(void *vc, size_t shard, uint64_t index, const struct hb_trace_header *h, const struct hb_route *r)
{
	struct ctx *c = vc;
	int rc;
	if (!c->st && (rc = hb_tstats_create(&c->st, h, &c->o, c->err)))
		return rc;
	return hb_tstats_add(c->st, r, c->path, index, c->err);
}

static int stats_of(const char *name, struct ctx *c, struct hb_error *err)
{
	char path[1024];
	const char *paths[1] = { path };
	struct hb_trace_set s;
	int rc;

	snprintf(path, sizeof(path), "%s/tests/fixtures/traces/%s", hb_test_srcdir(), name);
	if (!c->o.window)
		hb_tstats_opts_default(&c->o);
	c->err = err;
	c->path = path;
	hb_error_clear(err);
	if ((rc = hb_trace_set_init(&s, paths, 1, err)))
		return rc;
	rc = hb_trace_set_scan(&s, add, c, NULL, err);
	hb_trace_set_release(&s);
	return rc;
}

static void check_tiny(const struct hb_tstats_result *r)
{
	const struct hb_tstats_part *A = &r->overall, *L0 = &r->layers[0], *L1 = &r->layers[1];
	CHECK_EQ_U64(r->records, 6);
	CHECK_EQ_U64(r->tokens, 3);
	CHECK_EQ_U64(r->sequences, 1);
	CHECK_EQ_U64(L0->prev_pairs, 2);
	NEAR(L0->prev_mean, 1.0);
	NEAR(L1->prev_mean, 1.0);
	CHECK_EQ_U64(A->prev_pairs, 4);
	CHECK_EQ_U64(A->prev_hist[0], 1);
	CHECK_EQ_U64(A->prev_hist[1], 2);
	CHECK_EQ_U64(A->prev_hist[2], 1);
	CHECK_EQ_U64(L0->adj_pairs, 0);
	CHECK(isnan(L0->adj_mean));
	CHECK_EQ_U64(L1->adj_pairs, 3);
	CHECK_EQ_U64(A->adj_hist[1], 2);
	CHECK_EQ_U64(A->adj_hist[2], 1);
	NEAR(A->adj_mean, 4.0 / 3.0);
	NEAR(A->unique_mean[1], 2.0);
	NEAR(A->unique_mean[2], 3.0);
	NEAR(L0->unique_mean[2], 3.0);
	NEAR(L1->unique_mean[2], 3.0);
	NEAR(A->unique_mean[3], 4.0);
	CHECK_EQ_U64(A->blocks[4], 0);
	CHECK(isnan(A->unique_mean[4]));
	NEAR(L0->entropy_bits, log2(6.0) / 3 + 2 * log2(3.0) / 3);
	NEAR(L0->top1_share, 2.0 / 6.0);
	CHECK_EQ_U64(L0->top1_n, 1);
	CHECK_EQ_U64(L0->top10_n, 1);
	NEAR(A->entropy_bits, log2(12.0) / 3 + 2 * log2(6.0) / 3);
	NEAR(A->entropy_norm, (log2(12.0) / 3 + 2 * log2(6.0) / 3) / 3.0);
	NEAR(A->top1_share, 2.0 / 12.0);
	NEAR(A->top10_share, 2.0 / 12.0);
	CHECK_EQ_U64(A->population, 8);
	CHECK_EQ_U64(A->used, 8);
}

static void tiny_by_hand(void)
{
	struct ctx c = { 0 };
	struct hb_error err;
	struct hb_tstats_breakeven e;
	hb_error_clear(&err);
	const struct hb_tstats_result *r;

	CHECK_EQ_INT(stats_of("tiny.trace", &c, &err), 0);
	r = hb_tstats_finish(c.st);
	check_tiny(r);
	CHECK_EQ_INT(hb_tstats_break_even(r, 2, 1.5, &e, &err), 0);
	NEAR(e.unique, 3.0);
	NEAR(e.limit, 3.0);
	NEAR(e.ratio, 1.0);
	CHECK(!e.saves);
	CHECK_EQ_INT(hb_tstats_break_even(r, 3, 2.5, &e, &err), 0);
	CHECK(e.saves); /* 4 < 5 */
	CHECK_EQ_INT(hb_tstats_break_even(r, 2, 2.5, &e, &err), HB_ERR_INVALID); /* tau > B */
	CHECK_EQ_INT(hb_tstats_break_even(r, 6, 1, &e, &err), HB_ERR_INVALID);
	hb_tstats_free(c.st);
}

static void layer_major_same(void)
{
	struct ctx c = { 0 };
	struct hb_error err;
	CHECK_EQ_INT(stats_of("tiny-layer-major.trace", &c, &err), 0);
	check_tiny(hb_tstats_finish(c.st));
	hb_tstats_free(c.st);
}

static void two_sequences(void)
{
	struct ctx c = { 0 };
	struct hb_error err;
	const struct hb_tstats_result *r;

	CHECK_EQ_INT(stats_of("two-sequences.trace", &c, &err), 0);
	r = hb_tstats_finish(c.st);
	CHECK_EQ_U64(r->tokens, 3);
	CHECK_EQ_U64(r->sequences, 2);
	CHECK_EQ_U64(r->overall.prev_pairs, 2);
	NEAR(r->overall.prev_mean, 1.5);
	NEAR(r->overall.adj_mean, 4.0 / 3.0);
	NEAR(r->overall.unique_mean[2], 2.5);
	hb_tstats_free(c.st);
	/* one live sequence: 9 returns after 7 evicted it, refused */
	memset(&c, 0, sizeof(c));
	hb_tstats_opts_default(&c.o);
	c.o.max_sequences = 1;
	CHECK_EQ_INT(stats_of("two-sequences.trace", &c, &err), HB_ERR_UNSUPPORTED);
	CHECK_STR(err.id, "trace-window");
	hb_tstats_free(c.st);
}

static void defects(void)
{
	static const struct { const char *file, *id; } cases[] = {
		{"truncated.trace", "trace-truncated"}, {"crc.trace", "trace-crc"},
		{"duplicate-expert.trace", "trace-duplicate"}, {"backwards.trace", "trace-order"},
	};
	for (size_t i = 0; i < HB_ARRAY_LEN(cases); i++) {
		struct ctx c = { 0 };
		struct hb_error err;
		CHECK(stats_of(cases[i].file, &c, &err) != 0);
		CHECK_STR(err.id, cases[i].id);
		CHECK(strstr(err.field, cases[i].file) != NULL);
		hb_tstats_free(c.st);
	}
}

static void mismatch(void)
{
	char a[1024], b[1024];
	const char *paths[2] = { a, b };
	struct hb_trace_set s;
	struct hb_error err;
	struct ctx c = { 0 };

	snprintf(a, sizeof(a), "%s/tests/fixtures/traces/tiny.trace", hb_test_srcdir());
	snprintf(b, sizeof(b), "%s/tests/fixtures/traces/other-experts.trace", hb_test_srcdir());
	hb_tstats_opts_default(&c.o);
	c.err = &err;
	c.path = "t";
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_trace_set_init(&s, paths, 2, &err), 0);
	CHECK_EQ_INT(hb_trace_set_scan(&s, add, &c, NULL, &err), HB_ERR_CONTRACT);
	CHECK_STR(err.id, "trace-mismatch");
	CHECK(strstr(err.msg, "experts 5 differs from 4") != NULL);
	hb_tstats_free(c.st);
	paths[1] = "-";
	paths[0] = "-";
	CHECK_EQ_INT(hb_trace_set_init(&s, paths, 2, &err), HB_ERR_INVALID);
}

/* random routes, fed token-major and layer-major (prompt-like), agree */
static void random_routes(uint64_t *seed, uint32_t T, uint32_t L, uint32_t E, uint32_t k, uint32_t *ids)
{
	for (uint32_t t = 0; t < T; t++)
		for (uint32_t l = 0; l < L; l++) {
			uint32_t *s = ids + ((size_t)t * L + l) * k;
			for (uint32_t i = 0; i < k; i++) {
				uint32_t v;
				bool dup;
				do {
					*seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
					v = (uint32_t)(*seed >> 33) % E;
					dup = false;
					for (uint32_t j = 0; j < i; j++)
						dup |= s[j] == v;
				} while (dup);
				s[i] = v;
			}
		}
}

static void order_independent(void)
{
	enum { T = 300, L = 4, E = 16, K = 3 };
	struct hb_trace_header h = { 1, K, L, E, 0, {0}, {0}, 0, 0, false, 0 };
	uint32_t *ids = malloc(sizeof(uint32_t) * T * L * K);
	uint64_t seed = 42;
	struct hb_tstats *a = NULL, *b = NULL, *small = NULL;
	struct hb_tstats_opts o;
	struct hb_error err;
	struct hb_route r;
	int rc_small = 0;

	hb_error_clear(&err);
	random_routes(&seed, T, L, E, K, ids);
	hb_tstats_opts_default(&o);
	CHECK_EQ_INT(hb_tstats_create(&a, &h, &o, &err), 0);
	CHECK_EQ_INT(hb_tstats_create(&b, &h, &o, &err), 0);
	o.window = 64;
	CHECK_EQ_INT(hb_tstats_create(&small, &h, &o, &err), 0);
	memset(&r, 0, sizeof(r));
	for (uint32_t t = 0; t < T; t++)
		for (uint32_t l = 0; l < L; l++) {
			r.ordinal = t, r.layer = l;
			memcpy(r.ids, ids + ((size_t)t * L + l) * K, K * sizeof(uint32_t));
			CHECK_EQ_INT(hb_tstats_add(a, &r, "a", 0, &err), 0);
		}
	for (uint32_t l = 0; l < L; l++) /* the whole trace as one layer-major prefill */
		for (uint32_t t = 0; t < T; t++) {
			r.ordinal = t, r.layer = l;
			memcpy(r.ids, ids + ((size_t)t * L + l) * K, K * sizeof(uint32_t));
			CHECK_EQ_INT(hb_tstats_add(b, &r, "b", 0, &err), 0);
			if (!rc_small)
				rc_small = hb_tstats_add(small, &r, "small", 0, &err);
		}
	CHECK_EQ_INT(rc_small, HB_ERR_UNSUPPORTED);
	CHECK_STR(err.id, "trace-window");
	{
		const struct hb_tstats_result *x = hb_tstats_finish(a), *y = hb_tstats_finish(b);
		CHECK_EQ_U64(x->tokens, T);
		CHECK_EQ_U64(y->tokens, T);
		CHECK_EQ_U64(x->overall.prev_pairs, (T - 1) * L);
		CHECK_EQ_U64(x->overall.adj_pairs, T * (L - 1));
		CHECK_EQ_U64(y->overall.adj_pairs, T * (L - 1));
		CHECK(!memcmp(x->overall.prev_hist, y->overall.prev_hist, sizeof(x->overall.prev_hist)));
		CHECK(!memcmp(x->overall.adj_hist, y->overall.adj_hist, sizeof(x->overall.adj_hist)));
		CHECK(!memcmp(x->overall.block_unique, y->overall.block_unique, sizeof(x->overall.block_unique)));
		CHECK_EQ_U64(x->overall.blocks[5], (T - 4) * L);
		NEAR(x->overall.entropy_bits, y->overall.entropy_bits);
	}
	hb_tstats_free(a), hb_tstats_free(b), hb_tstats_free(small);
	free(ids);
}

HB_TEST_MAIN(T(tiny_by_hand), T(layer_major_same), T(two_sequences), T(defects), T(mismatch),
	     T(order_independent))
