/*
 * hb_sampler.c: masking, greedy and seeded top-k / top-p sampling.
 */
#include "hb_base.h"
#include "hb_sampler.h"

#include <math.h>

int hb_sampler_init(struct hb_sampler *s, bool greedy, float temperature, uint32_t top_k,
		    float top_p, uint64_t seed, size_t semantic, struct hb_error *err)
{
	memset(s, 0, sizeof(*s));
	if (!greedy && (!(temperature > 0) || !isfinite(temperature)))
		return hb_error_set(err, HB_ERR_INVALID, "temperature", "must be a positive finite number");
	if (!greedy && (!(top_p > 0) || top_p > 1))
		return hb_error_set(err, HB_ERR_INVALID, "top_p", "must be in (0, 1]");
	s->greedy = greedy;
	s->temperature = temperature;
	s->top_k = top_k;
	s->top_p = top_p;
	s->state = seed;
	if (!greedy) {
		s->probs = malloc(semantic * sizeof(float));
		s->order = malloc(semantic * sizeof(int32_t));
		if (!s->probs || !s->order) {
			hb_sampler_release(s);
			return hb_error_set(err, HB_ERR_NOMEM, "sampler", "out of memory");
		}
		s->cap = semantic;
	}
	return HB_OK;
}

void hb_sampler_release(struct hb_sampler *s)
{
	free(s->probs);
	free(s->order);
	s->probs = NULL;
	s->order = NULL;
}

/* splitmix64 -> a double in [0, 1) with 53 random bits */
static double uniform(uint64_t *st)
{
	uint64_t x = (*st += 0x9E3779B97F4A7C15ull);
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	x ^= x >> 31;
	return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

static int cmp_desc(const void *a, const void *b, void *ctx)
{
	const float *p = ctx;
	float x = p[*(const int32_t *)a], y = p[*(const int32_t *)b];
	if (x != y)
		return x > y ? -1 : 1;
	return *(const int32_t *)a - *(const int32_t *)b; /* ties: lower id first */
}

int32_t hb_sampler_next(struct hb_sampler *s, const float *logits, size_t semantic)
{
	size_t n = semantic, keep;
	double total = 0, acc = 0, r;
	float m;

	/* rows [semantic, physical) are never looked at: masked by construction */
	/* a sampler set up for fewer rows refuses rather than turning greedy */
	if (!s->greedy && n > s->cap)
		return -1;
	if (s->greedy) {
		size_t best = 0;
		for (size_t i = 1; i < n; i++)
			if (logits[i] > logits[best])
				best = i;
		return (int32_t)best;
	}
	m = -INFINITY;
	for (size_t i = 0; i < n; i++)
		m = logits[i] > m ? logits[i] : m;
	for (size_t i = 0; i < n; i++) {
		s->probs[i] = expf((logits[i] - m) / s->temperature);
		s->order[i] = (int32_t)i;
	}
	qsort_r(s->order, n, sizeof(int32_t), cmp_desc, s->probs);
	keep = s->top_k && s->top_k < n ? s->top_k : n;
	for (size_t i = 0; i < keep; i++)
		total += s->probs[s->order[i]];
	/* nucleus: the smallest prefix whose mass reaches top_p */
	if (s->top_p < 1) {
		double mass = 0;
		size_t j = 0;
		while (j < keep) {
			mass += s->probs[s->order[j++]] / total;
			if (mass >= s->top_p)
				break;
		}
		keep = j;
		total = 0;
		for (size_t i = 0; i < keep; i++)
			total += s->probs[s->order[i]];
	}
	r = uniform(&s->state) * total;
	for (size_t i = 0; i < keep; i++) {
		acc += s->probs[s->order[i]];
		if (r < acc)
			return s->order[i];
	}
	return s->order[keep - 1];
}
