/*
 * test_trace_cache.c: cache-sim against tests/fixtures/traces/README.md's
 * hand-worked hit counts, and properties on random traces: Belady's hit
 * rate is never below any other policy's at the same budget, LRU equals a
 * brute-force list LRU, and LRU and Belady hit rates never fall as the
 * budget grows (global and per layer).
 */
#include "hb_base.h"
#include "harness.h"
#include "hb-trace/analysis/hb_trace_cache.h"

#include <math.h>

struct trace {
	struct hb_trace_header h;
	size_t n;
	struct hb_route *r;
};

static void tiny(struct trace *t)
{
	static const uint32_t ids[6][2] = { {0, 1}, {1, 2}, {1, 2}, {1, 2}, {2, 3}, {0, 3} };
	memset(t, 0, sizeof(*t));
	t->h.top_k = 2, t->h.layers = 2, t->h.experts = 4;
	t->n = 6;
	t->r = calloc(6, sizeof(*t->r));
	for (uint32_t i = 0; i < 6; i++) {
		t->r[i].ordinal = i / 2, t->r[i].layer = i % 2;
		memcpy(t->r[i].ids, ids[i], sizeof(ids[i]));
	}
}

static void random_trace(struct trace *t, uint64_t seed, uint32_t T, uint32_t L, uint32_t E, uint32_t k,
			 uint32_t hot)
{
	memset(t, 0, sizeof(*t));
	t->h.top_k = k, t->h.layers = L, t->h.experts = E;
	t->n = (size_t)T * L;
	t->r = calloc(t->n, sizeof(*t->r));
	for (size_t i = 0; i < t->n; i++) {
		struct hb_route *r = &t->r[i];
		r->ordinal = i / L, r->layer = (uint32_t)(i % L);
		for (uint32_t j = 0; j < k; j++) {
			uint32_t v;
			bool dup;
			do { /* skewed: half the draws from a few hot experts */
				seed = seed * 6364136223846793005ull + 1442695040888963407ull;
				v = (uint32_t)(seed >> 33) % ((seed >> 20) & 1 ? hot : E);
				dup = false;
				for (uint32_t q = 0; q < j; q++)
					dup |= r->ids[q] == v;
			} while (dup);
			r->ids[j] = v;
		}
	}
}

static int simulate(const struct trace *t, const uint64_t *budgets, size_t nb, bool per_layer, uint32_t policies,
		    unsigned threads, struct hb_tcache **out, const struct hb_tcache_result **res)
{
	struct hb_tcache_opts o;
	struct hb_error err;
	int rc;

	hb_error_clear(&err);
	hb_tcache_opts_default(&o);
	o.budgets = budgets, o.nbudgets = nb, o.per_layer = per_layer, o.policies = policies, o.threads = threads;
	o.record_bytes = 1000;
	if ((rc = hb_tcache_create(out, &t->h, &o, &err)))
		return rc;
	for (size_t i = 0; i < t->n; i++)
		if ((rc = hb_tcache_add(*out, &t->r[i], &err)))
			return rc;
	if (hb_tcache_wants_second_pass(*out)) {
		hb_tcache_begin_second(*out, &err);
		for (size_t i = 0; i < t->n; i++)
			if ((rc = hb_tcache_add_second(*out, &t->r[i], &err)))
				return rc;
	}
	return hb_tcache_finish(*out, res, &err);
}

static const struct hb_tcache_cell *cell(const struct hb_tcache_result *r, enum hb_tcache_policy p, uint64_t b)
{
	for (size_t i = 0; i < r->ncells; i++)
		if (r->cells[i].policy == p && r->cells[i].budget == b)
			return &r->cells[i];
	return NULL;
}

static void tiny_by_hand(void)
{
	struct trace t;
	struct hb_tcache *c = NULL, *pl = NULL;
	const struct hb_tcache_result *r, *q;
	const uint64_t budgets[] = { 4, 2 };

	tiny(&t);
	CHECK_EQ_INT(simulate(&t, budgets, 2, false, HB_TC_ALL, 1, &c, &r), 0);
	CHECK_EQ_U64(r->tokens, 3);
	CHECK_EQ_U64(r->accesses, 12);
	CHECK_EQ_U64(cell(r, HB_TC_LRU, 2)->hits, 0);
	CHECK_EQ_U64(cell(r, HB_TC_LRU, 4)->hits, 4);
	CHECK(fabs(cell(r, HB_TC_LRU, 4)->misses_per_token - 8.0 / 3.0) < 1e-12);
	CHECK(fabs(cell(r, HB_TC_LRU, 4)->bytes_per_token - 8000.0 / 3.0) < 1e-9);
	CHECK_EQ_U64(cell(r, HB_TC_BELADY, 2)->hits, 3);
	CHECK_EQ_U64(cell(r, HB_TC_BELADY, 4)->hits, 4);
	CHECK_EQ_U64(cell(r, HB_TC_LFU, 2)->hits, 0);
	CHECK_EQ_U64(r->cells[0].budget, 2); /* budgets ascending */
	CHECK_EQ_INT(simulate(&t, budgets, 1, true, 1u << HB_TC_LRU, 1, &pl, &q), 0);
	CHECK_EQ_U64(q->cells[0].scope_budget, 2);
	CHECK_EQ_U64(q->cells[0].hits, 4);
	hb_tcache_free(c), hb_tcache_free(pl);
	free(t.r);
}

static void uneven_layers_refused(void)
{
	struct trace t;
	struct hb_tcache *c = NULL;
	const struct hb_tcache_result *r;
	const uint64_t b = 2;

	tiny(&t);
	t.n = 5; /* token 2 lacks layer 1 */
	CHECK_EQ_INT(simulate(&t, &b, 1, false, 1u << HB_TC_LRU, 1, &c, &r), HB_ERR_UNSUPPORTED);
	hb_tcache_free(c);
	free(t.r);
}

/* brute-force LRU: an array ordered by recency, linear search */
static uint64_t lru_brute(const struct trace *t, uint64_t cap)
{
	uint32_t *list = malloc((cap + 1) * sizeof(*list));
	uint64_t n = 0, hits = 0;
	for (size_t i = 0; i < t->n; i++)
		for (uint32_t j = 0; j < t->h.top_k; j++) {
			uint32_t key = t->r[i].layer * t->h.experts + t->r[i].ids[j];
			uint64_t at = n;
			for (uint64_t q = 0; q < n; q++)
				if (list[q] == key)
					at = q;
			if (at < n)
				hits++;
			else if (!cap)
				continue;
			else if (n < cap)
				at = n++;
			else
				at = n - 1;
			memmove(list + 1, list, at * sizeof(*list));
			list[0] = key;
		}
	free(list);
	return hits;
}

static void properties(void)
{
	const uint64_t budgets[] = { 0, 1, 3, 8, 16, 24, 40, 64, 100, 160, 256 };
	const size_t nb = HB_ARRAY_LEN(budgets);

	for (uint64_t seed = 1; seed <= 12; seed++) {
		struct trace t;
		uint32_t L = 1 + (uint32_t)(seed % 4), E = 8 + 8 * (uint32_t)(seed % 5), k = 1 + (uint32_t)(seed % 4);
		for (int pl = 0; pl < 2; pl++) {
			struct hb_tcache *c = NULL;
			const struct hb_tcache_result *r;
			random_trace(&t, seed * 7919, 150, L, E, k, 1 + E / 4);
			CHECK_EQ_INT(simulate(&t, budgets, nb, pl, HB_TC_ALL, seed % 2 ? 3 : 1, &c, &r), 0);
			for (size_t b = 0; b < nb; b++) {
				const struct hb_tcache_cell *bel = cell(r, HB_TC_BELADY, budgets[b]);
				for (int p = 0; p < HB_TC_BELADY; p++) {
					const struct hb_tcache_cell *x = cell(r, (enum hb_tcache_policy)p, budgets[b]);
					if (x->hits > bel->hits)
						hb_check_fail(__FILE__, __LINE__, "seed %" PRIu64 " %s budget %" PRIu64
							      ": %s %" PRIu64 " hits > belady %" PRIu64, seed,
							      pl ? "per-layer" : "global", budgets[b],
							      hb_tcache_policy_name((enum hb_tcache_policy)p), x->hits, bel->hits);
				}
				if (!pl)
					CHECK_EQ_U64(cell(r, HB_TC_LRU, budgets[b])->hits, lru_brute(&t, budgets[b]));
				if (b) {
					CHECK(cell(r, HB_TC_LRU, budgets[b])->hits >= cell(r, HB_TC_LRU, budgets[b - 1])->hits);
					CHECK(bel->hits >= cell(r, HB_TC_BELADY, budgets[b - 1])->hits);
				}
			}
			CHECK_EQ_U64(cell(r, HB_TC_LRU, 0)->hits, 0);
			hb_tcache_free(c);
			free(t.r);
		}
	}
}

/* threads change nothing: every simulation sees the same batch */
static void threads_agree(void)
{
	const uint64_t budgets[] = { 5, 20, 60 };
	struct trace t;
	struct hb_tcache *a = NULL, *b = NULL;
	const struct hb_tcache_result *x, *y;

	random_trace(&t, 99, 5000, 3, 32, 4, 6); /* > one 4096-record batch */
	CHECK_EQ_INT(simulate(&t, budgets, 3, false, HB_TC_ALL, 1, &a, &x), 0);
	CHECK_EQ_INT(simulate(&t, budgets, 3, false, HB_TC_ALL, 4, &b, &y), 0);
	CHECK_EQ_U64(x->ncells, y->ncells);
	for (size_t i = 0; i < x->ncells; i++)
		CHECK_EQ_U64(x->cells[i].hits, y->cells[i].hits);
	hb_tcache_free(a), hb_tcache_free(b);
	free(t.r);
}

HB_TEST_MAIN(T(tiny_by_hand), T(uneven_layers_refused), T(properties), T(threads_agree))
