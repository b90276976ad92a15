/*
 * qsa_ref.c: test-only QSA references (see qsa_ref.h).  Written the obvious
 * way on purpose: a full sort, a full softmax.
 */
#include "hb_base.h"
#include "math/hb_math.h"
#include "qsa_ref.h"

#include <math.h>

struct scored {
	float s;
	int32_t g;
};

static int by_score(const void *a, const void *b)
{
	const struct scored *x = a, *y = b;
	if (x->s != y->s)
		return x->s > y->s ? -1 : 1;
	return (x->g > y->g) - (x->g < y->g);
}

static int by_index(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

size_t qsa_ref_select(const float *scores, uint64_t groups, uint64_t keep, uint64_t ratio,
		      uint64_t visible, int32_t *rows)
{
	struct scored *all = malloc((size_t)(groups ? groups : 1) * sizeof(*all));
	int32_t *chosen = malloc((size_t)(keep ? keep : 1) * sizeof(int32_t));
	size_t n = 0, k = (size_t)(groups < keep ? groups : keep);

	for (uint64_t g = 0; g < groups; g++)
		all[g] = (struct scored){scores[g], (int32_t)g};
	qsort(all, (size_t)groups, sizeof(*all), by_score);
	for (size_t i = 0; i < k; i++)
		chosen[i] = all[i].g;
	qsort(chosen, k, sizeof(int32_t), by_index);
	for (size_t i = 0; i < k; i++)
		for (uint64_t r = 0; r < ratio; r++)
			rows[n++] = chosen[i] * (int32_t)ratio + (int32_t)r;
	for (uint64_t p = groups * ratio; p < visible; p++)
		rows[n++] = (int32_t)p;
	free(all);
	free(chosen);
	return n;
}

int qsa_ref_dense(const float *q, const float *K, const float *V, size_t stride, size_t offset,
		  size_t dim, float scale, uint64_t visible, float *out)
{
	float *p;

	if (visible > QSA_DENSE_MAX_KEYS)
		return -1; /* the oracle's domain ends here (AFN-011) */
	p = malloc((size_t)(visible ? visible : 1) * sizeof(float));
	for (uint64_t i = 0; i < visible; i++)
		p[i] = hb_dot(q, K + i * stride + offset, dim) * scale;
	hb_softmax(p, (size_t)visible);
	for (size_t j = 0; j < dim; j++) {
		float acc = 0;
		for (uint64_t i = 0; i < visible; i++)
			acc += p[i] * V[i * stride + offset + j];
		out[j] = acc;
	}
	free(p);
	return 0;
}
