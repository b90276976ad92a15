/*
 * hb_trace_cache_sim.c: the replacement policies of hb_trace_cache.h.
 *
 * Keys are dense (layer x experts + expert), so every per-key field is an
 * array and nothing is hashed.  LRU is a doubly linked list (O(1));
 * LFU, LFU-decay and Belady are binary min-heaps on (priority, last use);
 * the score policy's priority changes with time, so it keeps an unordered
 * resident list and evaluates the exact minimum when the cache holds at
 * most 64 records, else the minimum of 16 residents drawn with a seeded
 * generator (the Redis approximation; deterministic for a given seed).
 */
#include "hb_base.h"
#include "hb_trace_cache_int.h"

#include <math.h>

#define NIL UINT32_MAX
#define SCORE_EXACT 64u
#define SCORE_SAMPLE 16u

int hb_tc_sim_init(struct hb_tc_sim *s, enum hb_tcache_policy p, uint64_t budget,
		   const struct hb_trace_header *h, const struct hb_tcache_opts *o)
{
	size_t keys = (size_t)h->layers * h->experts;

	memset(s, 0, sizeof(*s));
	s->policy = p;
	s->scopes = o->per_layer ? h->layers : 1;
	s->keys_per_scope = o->per_layer ? h->experts : (uint32_t)keys;
	s->cap = budget / s->scopes;
	if (s->cap > s->keys_per_scope)
		s->cap = s->keys_per_scope; /* more room than keys: the same cache */
	s->half_life = o->half_life_tokens * h->top_k * (o->per_layer ? 1.0 : (double)h->layers);
	s->stall_per_byte = o->record_bytes ? (o->latency_s + (double)o->record_bytes / o->bandwidth) /
						      (double)o->record_bytes
					    : 1.0;
	s->rng = o->seed * 2654435761u + 0x9e3779b97f4a7c15u;
	s->pos = malloc(keys * sizeof(*s->pos));
	s->pri = calloc(keys, sizeof(*s->pri));
	s->tie = calloc(keys, sizeof(*s->tie));
	s->cnt = calloc(keys, sizeof(*s->cnt));
	s->prev = malloc(keys * sizeof(*s->prev));
	s->next = malloc(keys * sizeof(*s->next));
	s->heap = malloc(((size_t)s->scopes * s->cap + 1) * sizeof(*s->heap));
	s->size = calloc(s->scopes, sizeof(*s->size));
	s->clock = calloc(s->scopes, sizeof(*s->clock));
	s->head = malloc(s->scopes * sizeof(*s->head));
	s->tail = malloc(s->scopes * sizeof(*s->tail));
	if (!s->pos || !s->pri || !s->tie || !s->cnt || !s->prev || !s->next || !s->heap || !s->size ||
	    !s->clock || !s->head || !s->tail) {
		hb_tc_sim_release(s);
		return HB_ERR_NOMEM;
	}
	for (size_t i = 0; i < keys; i++)
		s->pos[i] = -1, s->tie[i] = HB_TC_NEVER;
	for (uint32_t i = 0; i < s->scopes; i++)
		s->head[i] = s->tail[i] = NIL;
	return HB_OK;
}

void hb_tc_sim_release(struct hb_tc_sim *s)
{
	free(s->pos), free(s->pri), free(s->tie), free(s->cnt), free(s->prev), free(s->next);
	free(s->heap), free(s->size), free(s->clock), free(s->head), free(s->tail);
	memset(s, 0, sizeof(*s));
}

/* ------------------------------------------------------------ lru */

static void lru_unlink(struct hb_tc_sim *s, uint32_t sc, uint32_t x)
{
	if (s->prev[x] != NIL)
		s->next[s->prev[x]] = s->next[x];
	else
		s->head[sc] = s->next[x];
	if (s->next[x] != NIL)
		s->prev[s->next[x]] = s->prev[x];
	else
		s->tail[sc] = s->prev[x];
}

static void lru_push(struct hb_tc_sim *s, uint32_t sc, uint32_t x)
{
	s->prev[x] = NIL;
	s->next[x] = s->head[sc];
	if (s->head[sc] != NIL)
		s->prev[s->head[sc]] = x;
	s->head[sc] = x;
	if (s->tail[sc] == NIL)
		s->tail[sc] = x;
}

static void lru_access(struct hb_tc_sim *s, uint32_t x, uint32_t sc)
{
	if (s->pos[x] >= 0) {
		s->hits++;
		if (s->head[sc] != x) {
			lru_unlink(s, sc, x);
			lru_push(s, sc, x);
		}
		return;
	}
	if (!s->cap)
		return;
	if (s->size[sc] == s->cap) {
		uint32_t v = s->tail[sc];
		lru_unlink(s, sc, v);
		s->pos[v] = -1;
		s->size[sc]--;
	}
	lru_push(s, sc, x);
	s->pos[x] = 0;
	s->size[sc]++;
}

/* ------------------------------------------------------------ heap */

static bool less(const struct hb_tc_sim *s, uint32_t a, uint32_t b)
{
	return s->pri[a] < s->pri[b] || (s->pri[a] == s->pri[b] && s->tie[a] < s->tie[b]);
}

static void heap_set(struct hb_tc_sim *s, uint32_t *h, uint64_t i, uint32_t x)
{
	h[i] = x;
	s->pos[x] = (int32_t)i;
}

static void sift_up(struct hb_tc_sim *s, uint32_t *h, uint64_t i)
{
	uint32_t x = h[i];
	while (i > 0) {
		uint64_t p = (i - 1) / 2;
		if (!less(s, x, h[p]))
			break;
		heap_set(s, h, i, h[p]);
		i = p;
	}
	heap_set(s, h, i, x);
}

static void sift_down(struct hb_tc_sim *s, uint32_t *h, uint64_t n, uint64_t i)
{
	uint32_t x = h[i];
	for (;;) {
		uint64_t c = 2 * i + 1;
		if (c >= n)
			break;
		if (c + 1 < n && less(s, h[c + 1], h[c]))
			c++;
		if (!less(s, h[c], x))
			break;
		heap_set(s, h, i, h[c]);
		i = c;
	}
	heap_set(s, h, i, x);
}

static void heap_update(struct hb_tc_sim *s, uint32_t *h, uint64_t n, uint32_t x)
{
	uint64_t i = (uint64_t)s->pos[x];
	sift_up(s, h, i);
	sift_down(s, h, n, (uint64_t)s->pos[x]);
}

/* Insert x (priority already set), evicting the minimum when full. */
static void heap_insert(struct hb_tc_sim *s, uint32_t sc, uint32_t x)
{
	uint32_t *h = s->heap + (size_t)sc * s->cap;
	if (s->size[sc] == s->cap) {
		s->pos[h[0]] = -1;
		heap_set(s, h, 0, x);
		sift_down(s, h, s->size[sc], 0);
		return;
	}
	heap_set(s, h, s->size[sc], x);
	sift_up(s, h, s->size[sc]++);
}

static void heap_access(struct hb_tc_sim *s, uint32_t x, uint32_t sc, uint64_t nu)
{
	uint32_t *h = s->heap + (size_t)sc * s->cap;
	uint64_t t = s->clock[sc];
	bool hit = s->pos[x] >= 0;

	switch (s->policy) {
	case HB_TC_LFU:
		s->cnt[x] += 1;
		s->pri[x] = s->cnt[x];
		break;
	case HB_TC_LFU_DECAY: {
		/* cnt is log2 of the decayed count at the last use; rank by
		 * log2 D(t_last) + t_last / h, which orders residents as D(now) does */
		double d = s->tie[x] == HB_TC_NEVER ? 0.0
			   : exp2(s->cnt[x] - ((double)(t - s->tie[x])) / s->half_life);
		s->cnt[x] = log2(d + 1.0);
		s->pri[x] = s->cnt[x] + (double)t / s->half_life;
		break;
	}
	case HB_TC_BELADY:
		s->pri[x] = nu == HB_TC_NEVER ? -INFINITY : -(double)nu;
		break;
	default:
		break;
	}
	s->tie[x] = t;
	if (hit) {
		s->hits++;
		heap_update(s, h, s->size[sc], x);
		return;
	}
	if (!s->cap)
		return;
	/* Belady: bypass when the newcomer's next use is the farthest */
	if (s->policy == HB_TC_BELADY && s->size[sc] == s->cap && !(s->pri[x] > s->pri[h[0]]))
		return;
	heap_insert(s, sc, x);
}

/* ------------------------------------------------------------ score */

static uint64_t rnd(struct hb_tc_sim *s)
{
	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	return s->rng;
}

/*
 * score = P(use before eviction) x stall per byte, with
 * P = 1 - exp(-cap / max(mean gap, age)) (hb-trace(1) SCORE POLICY).
 * Every record of one store has the same bytes and latency, so stall per
 * byte is one constant and the lowest score is the largest effective gap
 * max(mean gap, age): comparing gaps avoids an exp per candidate and
 * orders exactly as the score does.
 */
static double eff_gap(const struct hb_tc_sim *s, uint32_t x, uint64_t t)
{
	double age = (double)(t - s->tie[x]);
	return s->cnt[x] > age ? s->cnt[x] : age;
}

static void score_access(struct hb_tc_sim *s, uint32_t x, uint32_t sc)
{
	uint32_t *h = s->heap + (size_t)sc * s->cap;
	uint64_t t = s->clock[sc];

	/* EWMA (1/8) of the reuse gap in scope accesses; first gap: the
	 * scope's key count, the gap of uniform routing */
	if (s->tie[x] == HB_TC_NEVER)
		s->cnt[x] = (double)s->keys_per_scope;
	else
		s->cnt[x] += ((double)(t - s->tie[x]) - s->cnt[x]) / 8.0;
	s->tie[x] = t;
	if (s->pos[x] >= 0) {
		s->hits++;
		return;
	}
	if (!s->cap)
		return;
	if (s->size[sc] == s->cap) {
		uint64_t n = s->size[sc], best = 0, draws = n <= SCORE_EXACT ? n : SCORE_SAMPLE;
		double bg = -1;
		for (uint64_t d = 0; d < draws; d++) {
			uint64_t i = n <= SCORE_EXACT ? d : rnd(s) % n;
			double g = eff_gap(s, h[i], t);
			if (g > bg || (g == bg && s->tie[h[i]] < s->tie[h[best]]))
				bg = g, best = i;
		}
		s->pos[h[best]] = -1;
		heap_set(s, h, best, x);
		return;
	}
	heap_set(s, h, s->size[sc]++, x);
}

void hb_tc_sim_access(struct hb_tc_sim *s, uint32_t key, uint32_t scope, uint64_t nu)
{
	s->accesses++;
	switch (s->policy) {
	case HB_TC_LRU:
		lru_access(s, key, scope);
		break;
	case HB_TC_SCORE:
		score_access(s, key, scope);
		break;
	default:
		heap_access(s, key, scope, nu);
		break;
	}
	s->clock[scope]++;
}
