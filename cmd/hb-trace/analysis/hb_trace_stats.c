/*
 * hb_trace_stats.c: streaming route statistics (hb_trace_stats.h).
 *
 * Each live sequence keeps, per layer, a ring of its recent records indexed
 * by ordinal (slot = ordinal mod capacity).  A record pairs with the
 * records already present when it arrives (previous token, both adjacent
 * layers, the blocks it closes), so every pair is counted exactly once,
 * whatever the interleaving.  A ring entry is overwritten only when both of
 * its adjacent-layer partners have arrived or been passed; otherwise the
 * ring doubles, up to opts.window, and past that the walk stops with
 * trace-window rather than dropping a pair.
 */
#include "hb_base.h"
#include "hb_trace_stats.h"
#include "hb_trace_input.h"

#include <math.h>

#define NONE UINT64_MAX

struct seq {
	uint64_t id, seen;   /* seen: stream index of its last record (eviction) */
	uint32_t cap;        /* ring ordinals per layer, a power of two */
	uint64_t *ord;       /* layers x cap: ordinal held by a slot, NONE if empty */
	uint32_t *ids;       /* layers x cap x k */
	uint64_t *latest;    /* per layer: latest ordinal seen, NONE if none */
};

struct hb_tstats {
	struct hb_tstats_opts o;
	struct hb_tstats_result res;
	uint32_t k, L, E;
	uint64_t *pop;       /* layers x experts */
	uint32_t *stamp, tick;
	struct seq **seqs;
	size_t nseq;
	uint64_t *retired;   /* sorted ids of evicted sequences */
	size_t nretired, cretired;
	uint64_t clock;
};

void hb_tstats_opts_default(struct hb_tstats_opts *o)
{
	o->window = 65536;
	o->max_sequences = 64;
}

static void seq_free(struct seq *q)
{
	if (q) {
		free(q->ord), free(q->ids), free(q->latest);
		free(q);
	}
}

void hb_tstats_free(struct hb_tstats *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nseq; i++)
		seq_free(s->seqs[i]);
	free(s->seqs), free(s->retired), free(s->pop), free(s->stamp), free(s->res.layers);
	free(s);
}

int hb_tstats_create(struct hb_tstats **out, const struct hb_trace_header *h,
		     const struct hb_tstats_opts *o, struct hb_error *err)
{
	struct hb_tstats *s;

	*out = NULL;
	if (o->window < 8 || (o->window & (o->window - 1)) || !o->max_sequences)
		return hb_error_set(err, HB_ERR_INVALID, "stats.window",
				    "window %u must be a power of two >= 8, and sequences >= 1", o->window);
	s = calloc(1, sizeof(*s));
	if (!s)
		return hb_error_set(err, HB_ERR_NOMEM, "stats", "out of memory");
	s->o = *o;
	s->k = h->top_k, s->L = h->layers, s->E = h->experts;
	s->res.h = *h;
	s->pop = calloc((size_t)s->L * s->E, sizeof(*s->pop));
	s->stamp = calloc(s->E, sizeof(*s->stamp));
	s->res.layers = calloc(s->L, sizeof(*s->res.layers));
	if (!s->pop || !s->stamp || !s->res.layers) {
		hb_tstats_free(s);
		return hb_error_set(err, HB_ERR_NOMEM, "stats", "out of memory");
	}
	*out = s;
	return HB_OK;
}

static uint32_t next_tick(struct hb_tstats *s)
{
	if (++s->tick == 0) { /* wrapped: old stamps could alias */
		memset(s->stamp, 0, s->E * sizeof(*s->stamp));
		s->tick = 1;
	}
	return s->tick;
}

static uint32_t overlap(struct hb_tstats *s, const uint32_t *a, const uint32_t *b)
{
	uint32_t t = next_tick(s), n = 0;
	for (uint32_t i = 0; i < s->k; i++)
		s->stamp[a[i]] = t;
	for (uint32_t i = 0; i < s->k; i++)
		n += s->stamp[b[i]] == t;
	return n;
}

static struct seq *seq_new(struct hb_tstats *s, uint64_t id)
{
	struct seq *q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->id = id;
	q->cap = 8;
	q->ord = malloc((size_t)s->L * q->cap * sizeof(*q->ord));
	q->ids = malloc((size_t)s->L * q->cap * s->k * sizeof(*q->ids));
	q->latest = malloc(s->L * sizeof(*q->latest));
	if (!q->ord || !q->ids || !q->latest) {
		seq_free(q);
		return NULL;
	}
	for (size_t i = 0; i < (size_t)s->L * q->cap; i++)
		q->ord[i] = NONE;
	for (uint32_t l = 0; l < s->L; l++)
		q->latest[l] = NONE;
	return q;
}

/* The first index of the sorted retired ids whose id is not below id. */
static size_t retired_lower_bound(const struct hb_tstats *s, uint64_t id)
{
	size_t lo = 0, hi = s->nretired;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->retired[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool retired(const struct hb_tstats *s, uint64_t id)
{
	size_t i = retired_lower_bound(s, id);
	return i < s->nretired && s->retired[i] == id;
}

static int retire(struct hb_tstats *s, size_t victim, struct hb_error *err)
{
	uint64_t id = s->seqs[victim]->id;
	size_t pos = 0;

	if (s->nretired == s->cretired) {
		size_t c = s->cretired ? 2 * s->cretired : 64;
		uint64_t *g = realloc(s->retired, c * sizeof(*g));
		if (!g)
			return hb_error_set(err, HB_ERR_NOMEM, "stats", "out of memory");
		s->retired = g, s->cretired = c;
	}
	pos = retired_lower_bound(s, id); /* binary: retiring stays O(log n) per sequence */
	memmove(s->retired + pos + 1, s->retired + pos, (s->nretired - pos) * sizeof(*s->retired));
	s->retired[pos] = id;
	s->nretired++;
	seq_free(s->seqs[victim]);
	s->seqs[victim] = s->seqs[--s->nseq];
	return HB_OK;
}

static int find_seq(struct hb_tstats *s, uint64_t id, struct seq **out, const char *what,
		    uint64_t index, struct hb_error *err)
{
	struct seq *q = NULL;
	int rc;

	for (size_t i = 0; i < s->nseq; i++)
		if (s->seqs[i]->id == id) {
			*out = s->seqs[i];
			if (i) { /* keep the busiest sequence first */
				struct seq *t = s->seqs[0];
				s->seqs[0] = s->seqs[i], s->seqs[i] = t;
			}
			return HB_OK;
		}
	if (retired(s, id))
		return hb_error_diag(err, hb_trace_input_diag_id(HB_TRI_WINDOW), HB_ERR_UNSUPPORTED, what,
				     false, 0,
				     "record %" PRIu64 ": sequence %" PRIu64 " returns after %u other live "
				     "sequences evicted it; raise --sequences", index, id, s->o.max_sequences);
	if (s->nseq == s->o.max_sequences) {
		size_t v = 0;
		for (size_t i = 1; i < s->nseq; i++)
			if (s->seqs[i]->seen < s->seqs[v]->seen)
				v = i;
		if ((rc = retire(s, v, err)))
			return rc;
	}
	if (!s->seqs) {
		s->seqs = calloc(s->o.max_sequences, sizeof(*s->seqs));
		if (!s->seqs)
			return hb_error_set(err, HB_ERR_NOMEM, "stats", "out of memory");
	}
	if (!(q = seq_new(s, id)))
		return hb_error_set(err, HB_ERR_NOMEM, "stats", "out of memory");
	s->seqs[s->nseq++] = q;
	s->res.sequences++;
	*out = q;
	return HB_OK;
}

static const uint32_t *lookup(const struct hb_tstats *s, const struct seq *q, uint32_t l, uint64_t o)
{
	size_t slot = (size_t)l * q->cap + (o & (q->cap - 1));
	return q->ord[slot] == o ? q->ids + slot * s->k : NULL;
}

/* Whether the entry in slot (l, ordinal o) may be overwritten. */
static bool droppable(const struct hb_tstats *s, const struct seq *q, uint32_t l, uint64_t o)
{
	if (o == NONE)
		return true;
	if (l > 0 && (q->latest[l - 1] == NONE || q->latest[l - 1] < o))
		return false;
	if (l + 1 < s->L && (q->latest[l + 1] == NONE || q->latest[l + 1] < o))
		return false;
	return true;
}

static int grow(struct hb_tstats *s, struct seq *q, struct hb_error *err)
{
	uint32_t cap = q->cap * 2;
	uint64_t *ord = malloc((size_t)s->L * cap * sizeof(*ord));
	uint32_t *ids = malloc((size_t)s->L * cap * s->k * sizeof(*ids));

	if (!ord || !ids) {
		free(ord), free(ids);
		return hb_error_set(err, HB_ERR_NOMEM, "stats", "out of memory");
	}
	for (size_t i = 0; i < (size_t)s->L * cap; i++)
		ord[i] = NONE;
	for (uint32_t l = 0; l < s->L; l++)
		for (uint32_t j = 0; j < q->cap; j++) {
			size_t from = (size_t)l * q->cap + j;
			uint64_t o = q->ord[from];
			size_t to = (size_t)l * cap + (o & (cap - 1));
			if (o == NONE)
				continue;
			ord[to] = o;
			memcpy(ids + to * s->k, q->ids + from * s->k, s->k * sizeof(*ids));
		}
	free(q->ord), free(q->ids);
	q->ord = ord, q->ids = ids, q->cap = cap;
	return HB_OK;
}

int hb_tstats_add(struct hb_tstats *s, const struct hb_route *r, const char *what, uint64_t index,
		  struct hb_error *err)
{
	struct hb_tstats_part *P = &s->res.layers[r->layer];
	const uint32_t l = r->layer, k = s->k;
	const uint64_t o = r->ordinal;
	const uint32_t *other;
	struct seq *q = NULL;
	bool new_token = true;
	size_t slot;
	int rc;

	if (o == NONE)
		return hb_error_diag(err, hb_trace_input_diag_id(HB_TRI_ORDER), HB_ERR_UNSUPPORTED, what, false, 0,
				     "record %" PRIu64 ": token ordinal 2^64-1 is reserved", index);
	if ((rc = find_seq(s, r->sequence, &q, what, index, err)))
		return rc;
	q->seen = s->clock++;
	if (q->latest[l] != NONE && o <= q->latest[l])
		return hb_error_diag(err, hb_trace_input_diag_id(o == q->latest[l] ? HB_TRI_DUPLICATE : HB_TRI_ORDER),
				     HB_ERR_FORMAT, what, false, 0,
				     "record %" PRIu64 ": sequence %" PRIu64 " layer %u token %" PRIu64
				     " after token %" PRIu64, index, r->sequence, l, o, q->latest[l]);
	/* make room: never overwrite an entry whose adjacent partner may still come */
	while (!droppable(s, q, l, q->ord[(size_t)l * q->cap + (o & (q->cap - 1))])) {
		if (q->cap >= s->o.window)
			return hb_error_diag(err, hb_trace_input_diag_id(HB_TRI_WINDOW), HB_ERR_UNSUPPORTED, what,
					     false, 0,
					     "record %" PRIu64 ": sequence %" PRIu64 " layer %u token %" PRIu64
					     " would evict token %" PRIu64 " before its adjacent layers arrive; "
					     "raise --window (now %u)", index, r->sequence, l, o,
					     q->ord[(size_t)l * q->cap + (o & (q->cap - 1))], s->o.window);
		if ((rc = grow(s, q, err)))
			return rc;
	}
	for (uint32_t m = 0; m < s->L; m++)
		if (q->latest[m] != NONE && o <= q->latest[m] && lookup(s, q, m, o)) {
			new_token = false;
			break;
		}
	s->res.tokens += new_token;
	s->res.records++;
	P->records++;
	for (uint32_t i = 0; i < k; i++)
		s->pop[(size_t)l * s->E + r->ids[i]]++;
	if (o > 0 && (other = lookup(s, q, l, o - 1))) {
		uint32_t n = overlap(s, other, r->ids);
		P->prev_pairs++, P->prev_sum += n, P->prev_hist[n]++;
	}
	if (l > 0 && (other = lookup(s, q, l - 1, o))) {
		uint32_t n = overlap(s, other, r->ids);
		P->adj_pairs++, P->adj_sum += n, P->adj_hist[n]++;
	}
	if (l + 1 < s->L && (other = lookup(s, q, l + 1, o))) {
		struct hb_tstats_part *N = &s->res.layers[l + 1];
		uint32_t n = overlap(s, r->ids, other);
		N->adj_pairs++, N->adj_sum += n, N->adj_hist[n]++;
	}
	/* blocks ending at o: the union grows one token at a time */
	{
		uint32_t t = next_tick(s), uniq = 0;
		for (uint32_t b = 1; b <= HB_TSTATS_MAX_BLOCK; b++) {
			const uint32_t *ids = r->ids;
			if (b > 1 && (o < b - 1 || !(ids = lookup(s, q, l, o - (b - 1)))))
				break;
			for (uint32_t i = 0; i < k; i++)
				if (s->stamp[ids[i]] != t)
					s->stamp[ids[i]] = t, uniq++;
			P->blocks[b]++, P->block_unique[b] += uniq;
		}
	}
	slot = (size_t)l * q->cap + (o & (q->cap - 1));
	q->ord[slot] = o;
	memcpy(q->ids + slot * k, r->ids, k * sizeof(uint32_t));
	q->latest[l] = o;
	return HB_OK;
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* Entropy and top shares of counts c[0..n) (sorted in place, descending). */
static void skew(struct hb_tstats_part *P, uint64_t *c, uint32_t n)
{
	uint64_t total = 0, a1 = 0, a10 = 0;
	double h = 0;

	qsort(c, n, sizeof(*c), cmp_desc);
	P->population = n;
	P->used = 0;
	for (uint32_t i = 0; i < n; i++)
		total += c[i], P->used += c[i] > 0;
	P->uses = total;
	P->top1_n = (uint32_t)(((uint64_t)n + 99) / 100);
	P->top10_n = (uint32_t)(((uint64_t)n + 9) / 10);
	for (uint32_t i = 0; i < n; i++) {
		if (c[i]) {
			double p = (double)c[i] / (double)total;
			h -= p * log2(p);
		}
		if (i < P->top1_n)
			a1 += c[i];
		if (i < P->top10_n)
			a10 += c[i];
	}
	P->entropy_bits = total ? h + 0.0 : NAN;
	P->entropy_norm = !total ? NAN : n > 1 ? h / log2((double)n) : 0.0;
	P->top1_share = total ? (double)a1 / (double)total : NAN;
	P->top10_share = total ? (double)a10 / (double)total : NAN;
}

static double ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : NAN;
}

static void means(struct hb_tstats_part *P)
{
	P->prev_mean = ratio(P->prev_sum, P->prev_pairs);
	P->adj_mean = ratio(P->adj_sum, P->adj_pairs);
	for (uint32_t b = 1; b <= HB_TSTATS_MAX_BLOCK; b++)
		P->unique_mean[b] = ratio(P->block_unique[b], P->blocks[b]);
}

const struct hb_tstats_result *hb_tstats_finish(struct hb_tstats *s)
{
	struct hb_tstats_part *A = &s->res.overall;
	uint64_t *tmp = malloc((size_t)s->L * s->E * sizeof(*tmp));

	memset(A, 0, sizeof(*A));
	for (uint32_t l = 0; l < s->L; l++) {
		struct hb_tstats_part *P = &s->res.layers[l];
		A->records += P->records;
		A->prev_pairs += P->prev_pairs, A->prev_sum += P->prev_sum;
		A->adj_pairs += P->adj_pairs, A->adj_sum += P->adj_sum;
		for (uint32_t i = 0; i <= s->k; i++)
			A->prev_hist[i] += P->prev_hist[i], A->adj_hist[i] += P->adj_hist[i];
		for (uint32_t b = 1; b <= HB_TSTATS_MAX_BLOCK; b++)
			A->blocks[b] += P->blocks[b], A->block_unique[b] += P->block_unique[b];
		means(P);
		if (tmp) {
			memcpy(tmp, s->pop + (size_t)l * s->E, s->E * sizeof(*tmp));
			skew(P, tmp, s->E);
		}
	}
	means(A);
	if (tmp) {
		memcpy(tmp, s->pop, (size_t)s->L * s->E * sizeof(*tmp));
		skew(A, tmp, s->L * s->E);
	}
	free(tmp);
	return &s->res;
}

int hb_tstats_break_even(const struct hb_tstats_result *r, uint32_t block, double tau,
			 struct hb_tstats_breakeven *out, struct hb_error *err)
{
	if (block < 1 || block > HB_TSTATS_MAX_BLOCK || !(tau > 0) || tau > block)
		return hb_error_set(err, HB_ERR_INVALID, "tau",
				    "block %u must be 1..%u and tau %g in (0, block]", block, HB_TSTATS_MAX_BLOCK, tau);
	out->block = block;
	out->tau = tau;
	out->unique = r->overall.unique_mean[block];
	out->limit = (double)r->h.top_k * tau;
	out->ratio = out->unique / out->limit;
	out->saves = out->unique < out->limit;
	return HB_OK;
}
