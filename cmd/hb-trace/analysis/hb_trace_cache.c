/*
 * hb_trace_cache.c: the cache-sim driver (hb_trace_cache.h).
 *
 * Records are batched as dense keys; each batch is replayed through every
 * (policy, budget) simulation, simulations spread over an hb_pool.  For
 * Belady the first pass also computes, for every access, the index of the
 * next access to the same key: the forward scan knows only the previous
 * access of a key, so it writes "next of previous = this" into a file-backed
 * array (8 bytes per access, an unlinked file under $TMPDIR, mapped in
 * 32 MiB segments); the second pass reads it back in order.  Resident memory
 * stays bounded by the batch; the array's pages are the kernel's to write
 * back.
 */
#include "hb_base.h"
#include "hb_trace_cache_int.h"
#include "hb_trace_input.h"
#include "hb_pool.h"

#include <fcntl.h>
#include <math.h>
#include <sys/mman.h>
#include <unistd.h>

#define BATCH_RECORDS 4096u
#define SEG_SHIFT 22u /* 4 Mi entries = 32 MiB per segment */
#define SEG_ENTRIES (1ull << SEG_SHIFT)

static const char *const names[HB_TC_POLICIES] = { "lru", "lfu", "lfu-decay", "score", "belady" };

const char *hb_tcache_policy_name(enum hb_tcache_policy p)
{
	return (unsigned)p < HB_TC_POLICIES ? names[p] : NULL;
}

int hb_tcache_policy_parse(const char *name, enum hb_tcache_policy *out)
{
	for (int i = 0; i < HB_TC_POLICIES; i++)
		if (!strcmp(name, names[i])) {
			*out = (enum hb_tcache_policy)i;
			return HB_OK;
		}
	return HB_ERR_INVALID;
}

void hb_tcache_opts_default(struct hb_tcache_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->half_life_tokens = 32;
	o->latency_s = 100e-6;
	o->bandwidth = 2e9;
	o->policies = HB_TC_ALL;
	o->threads = 1;
	o->seed = 1;
}

struct hb_tcache {
	struct hb_trace_header h;
	struct hb_tcache_opts o;
	struct hb_pool *pool;
	struct hb_tc_sim *sims;
	struct hb_tcache_cell *cells;
	size_t nsims;
	bool belady, second;
	/* batch */
	uint32_t *keys, *scope;
	size_t nkeys;
	uint64_t base;             /* global access index of keys[0] */
	uint64_t *per_layer;       /* records per layer */
	/* next-use file */
	int fd;
	uint64_t **seg;
	size_t nseg;
	uint64_t *last;            /* per key: last access index */
	uint64_t accesses, records, second_records;
	struct hb_tcache_result res;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void hb_tcache_free(struct hb_tcache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nsims; i++)
		hb_tc_sim_release(&c->sims[i]);
	for (size_t i = 0; i < c->nseg; i++)
		munmap(c->seg[i], SEG_ENTRIES * sizeof(uint64_t));
	if (c->fd >= 0)
		close(c->fd);
	hb_pool_destroy(c->pool);
	free(c->sims), free(c->cells), free(c->keys), free(c->scope), free(c->per_layer);
	free(c->seg), free(c->last);
	free(c);
}

int hb_tcache_create(struct hb_tcache **out, const struct hb_trace_header *h,
		     const struct hb_tcache_opts *o, struct hb_error *err)
{
	struct hb_tcache *c;
	uint64_t *budgets;
	size_t keys = (size_t)h->layers * h->experts;
	int rc;

	*out = NULL;
	if (!o->nbudgets || !o->policies || (o->policies & ~HB_TC_ALL) || !(o->half_life_tokens > 0) ||
	    !(o->latency_s >= 0) || !(o->bandwidth > 0))
		return hb_error_set(err, HB_ERR_INVALID, "cache-sim",
				    "needs a budget, a policy, half-life > 0, latency >= 0 and bandwidth > 0");
	c = calloc(1, sizeof(*c));
	if (!c)
		return hb_error_set(err, HB_ERR_NOMEM, "cache-sim", "out of memory");
	c->fd = -1;
	c->h = *h;
	c->o = *o;
	c->o.budgets = NULL;
	budgets = malloc(o->nbudgets * sizeof(*budgets));
	c->sims = calloc(HB_TC_POLICIES * o->nbudgets, sizeof(*c->sims));
	c->cells = calloc(HB_TC_POLICIES * o->nbudgets, sizeof(*c->cells));
	c->keys = malloc((size_t)BATCH_RECORDS * h->top_k * sizeof(*c->keys));
	c->scope = malloc((size_t)BATCH_RECORDS * h->top_k * sizeof(*c->scope));
	c->per_layer = calloc(h->layers, sizeof(*c->per_layer));
	if (!budgets || !c->sims || !c->cells || !c->keys || !c->scope || !c->per_layer) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "cache-sim", "out of memory");
		goto fail;
	}
	memcpy(budgets, o->budgets, o->nbudgets * sizeof(*budgets));
	qsort(budgets, o->nbudgets, sizeof(*budgets), cmp_u64);
	for (int p = 0; p < HB_TC_POLICIES; p++) {
		if (!(o->policies & (1u << p)))
			continue;
		for (size_t b = 0; b < o->nbudgets; b++) {
			struct hb_tcache_cell *cell = &c->cells[c->nsims];
			if (hb_tc_sim_init(&c->sims[c->nsims], (enum hb_tcache_policy)p, budgets[b], h, &c->o)) {
				rc = hb_error_set(err, HB_ERR_NOMEM, "cache-sim", "out of memory");
				goto fail;
			}
			cell->policy = (enum hb_tcache_policy)p;
			cell->budget = budgets[b];
			cell->scope_budget = c->sims[c->nsims].cap;
			c->nsims++;
		}
	}
	c->belady = o->policies & (1u << HB_TC_BELADY);
	if (c->belady) {
		const char *dir = getenv("TMPDIR");
		c->last = malloc(keys * sizeof(*c->last));
		if (!c->last) {
			rc = hb_error_set(err, HB_ERR_NOMEM, "cache-sim", "out of memory");
			goto fail;
		}
		for (size_t i = 0; i < keys; i++)
			c->last[i] = HB_TC_NEVER;
		c->fd = open(dir && *dir ? dir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (c->fd < 0) {
			rc = hb_error_sys(err, errno, dir && *dir ? dir : "/tmp",
					  "cannot create Belady's next-use file in");
			goto fail;
		}
	}
	if (o->threads > 1 && (rc = hb_pool_create(o->threads, &c->pool, err)))
		goto fail;
	free(budgets);
	*out = c;
	return HB_OK;
fail:
	free(budgets);
	hb_tcache_free(c);
	return rc;
}

bool hb_tcache_wants_second_pass(const struct hb_tcache *c)
{
	return c->belady;
}

static uint64_t *nu_at(struct hb_tcache *c, uint64_t a)
{
	return c->seg[a >> SEG_SHIFT] + (a & (SEG_ENTRIES - 1));
}

static int nu_reserve(struct hb_tcache *c, uint64_t a, struct hb_error *err)
{
	while ((a >> SEG_SHIFT) >= c->nseg) {
		uint64_t **g = realloc(c->seg, (c->nseg + 1) * sizeof(*g));
		void *m;
		if (!g)
			return hb_error_set(err, HB_ERR_NOMEM, "cache-sim", "out of memory");
		c->seg = g;
		if (ftruncate(c->fd, (off_t)((c->nseg + 1) * SEG_ENTRIES * sizeof(uint64_t))))
			return hb_error_sys(err, errno, "cache-sim", "cannot grow Belady's next-use file");
		m = mmap(NULL, SEG_ENTRIES * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, c->fd,
			 (off_t)(c->nseg * SEG_ENTRIES * sizeof(uint64_t)));
		if (m == MAP_FAILED)
			return hb_error_sys(err, errno, "cache-sim", "cannot map Belady's next-use file");
		c->seg[c->nseg++] = m;
	}
	return HB_OK;
}

struct job {
	struct hb_tcache *c;
	bool second;
};

static int run_sim(void *ctx, size_t i, unsigned worker)
{
	struct job *j = ctx;
	struct hb_tcache *c = j->c;
	struct hb_tc_sim *s = &c->sims[i];

	if ((s->policy == HB_TC_BELADY) != j->second)
		return 0;
	for (size_t a = 0; a < c->nkeys; a++)
		hb_tc_sim_access(s, c->keys[a], s->scopes > 1 ? c->scope[a] : 0,
				 j->second ? *nu_at(c, c->base + a) : 0);
	return 0;
}

static void flush(struct hb_tcache *c, bool second)
{
	struct job j = { c, second };
	if (!c->nkeys)
		return;
	if (c->pool)
		hb_pool_run(c->pool, c->nsims, run_sim, &j);
	else
		for (size_t i = 0; i < c->nsims; i++)
			run_sim(&j, i, 0);
	c->base += c->nkeys;
	c->nkeys = 0;
}

static void stage(struct hb_tcache *c, const struct hb_route *r)
{
	for (uint32_t i = 0; i < c->h.top_k; i++) {
		c->keys[c->nkeys] = r->layer * c->h.experts + r->ids[i];
		c->scope[c->nkeys++] = r->layer;
	}
}

int hb_tcache_add(struct hb_tcache *c, const struct hb_route *r, struct hb_error *err)
{
	int rc;

	if (c->second)
		return hb_error_set(err, HB_ERR_INTERNAL, "cache-sim", "first-pass record after the second began");
	if (c->belady) {
		if ((rc = nu_reserve(c, c->accesses + c->h.top_k - 1, err)))
			return rc;
		for (uint32_t i = 0; i < c->h.top_k; i++) {
			uint32_t key = r->layer * c->h.experts + r->ids[i];
			uint64_t a = c->accesses + i;
			*nu_at(c, a) = HB_TC_NEVER;
			if (c->last[key] != HB_TC_NEVER)
				*nu_at(c, c->last[key]) = a;
			c->last[key] = a;
		}
	}
	c->accesses += c->h.top_k;
	c->records++;
	c->per_layer[r->layer]++;
	stage(c, r);
	if (c->nkeys == (size_t)BATCH_RECORDS * c->h.top_k)
		flush(c, false);
	return HB_OK;
}

int hb_tcache_begin_second(struct hb_tcache *c, struct hb_error *err)
{
	flush(c, false);
	c->second = true;
	c->base = 0;
	return HB_OK;
}

int hb_tcache_add_second(struct hb_tcache *c, const struct hb_route *r, struct hb_error *err)
{
	if (!c->second || c->second_records == c->records)
		return hb_error_set(err, HB_ERR_CHANGED, "cache-sim",
				    "the second pass holds more records than the first (%" PRIu64 ")", c->records);
	c->second_records++;
	stage(c, r);
	if (c->nkeys == (size_t)BATCH_RECORDS * c->h.top_k)
		flush(c, true);
	return HB_OK;
}

int hb_tcache_finish(struct hb_tcache *c, const struct hb_tcache_result **out,
		     struct hb_error *err)
{
	uint64_t tokens = c->per_layer[0];

	flush(c, c->second);
	if (c->belady && c->second_records != c->records)
		return hb_error_set(err, HB_ERR_CHANGED, "cache-sim",
				    "the second pass held %" PRIu64 " records, the first %" PRIu64,
				    c->second_records, c->records);
	for (uint32_t l = 1; l < c->h.layers; l++)
		if (c->per_layer[l] != tokens)
			return hb_error_diag(err, hb_trace_input_diag_id(HB_TRI_ORDER), HB_ERR_UNSUPPORTED, "trace",
					     false, 0,
					     "layer %u has %" PRIu64 " records and layer 0 has %" PRIu64
					     "; per-token figures need every token at every layer",
					     l, c->per_layer[l], tokens);
	for (size_t i = 0; i < c->nsims; i++) {
		struct hb_tcache_cell *cell = &c->cells[i];
		const struct hb_tc_sim *s = &c->sims[i];
		cell->accesses = s->accesses;
		cell->hits = s->hits;
		cell->misses = s->accesses - s->hits;
		cell->hit_rate = s->accesses ? (double)s->hits / (double)s->accesses : NAN;
		cell->misses_per_token = tokens ? (double)cell->misses / (double)tokens : NAN;
		cell->bytes_per_token = tokens && c->o.record_bytes
						? (double)cell->misses * (double)c->o.record_bytes / (double)tokens
						: NAN;
	}
	c->res.records = c->records;
	c->res.tokens = tokens;
	c->res.accesses = c->accesses;
	c->res.ncells = c->nsims;
	c->res.cells = c->cells;
	*out = &c->res;
	return HB_OK;
}
