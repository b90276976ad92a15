/*
 * qsa_ref.c: test-only QSA references (see qsa_ref.h).  Written the obvious
 * way on purpose: plain double loops, a full sort, a two-pass softmax.  No
 * libkern function is called, so an error shared by the implementation and
 * its oracle cannot cancel out.  Allocation failures fail closed: a
 * selection of 0 rows, an attention output of NaN.
 */
#include "hb_base.h"
#include "qsa_ref.h"

#include <math.h>

void qsa_ref_scores(const float *iq, size_t heads, size_t dim, const float *pooled,
		    uint64_t groups, double *scores, double *abs_out)
{
	double scale = 1.0 / sqrt((double)dim);

	for (uint64_t g = 0; g < groups; g++) {
		const float *k = pooled + g * dim;
		double s = 0, a = 0;
		for (size_t h = 0; h < heads; h++) {
			const float *q = iq + h * dim;
			double d = 0;
			for (size_t i = 0; i < dim; i++) {
				d += (double)q[i] * (double)k[i];
				a += fabs((double)q[i] * (double)k[i]);
			}
			s += d > 0 ? d : 0; /* ReLU per head, then the head sum */
		}
		scores[g] = s * scale;
		if (abs_out)
			abs_out[g] = a * scale;
	}
}

struct scored {
	double s;
	int32_t g;
};

/* (score descending, group ascending): the membership order of AFN-017 */
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

size_t qsa_ref_select_d(const double *scores, uint64_t groups, uint64_t keep, uint64_t ratio,
			uint64_t visible, int32_t *rows)
{
	struct scored *all = malloc((size_t)(groups ? groups : 1) * sizeof(*all));
	int32_t *chosen = malloc((size_t)(keep ? keep : 1) * sizeof(int32_t));
	size_t n = 0, k = (size_t)(groups < keep ? groups : keep);

	if (!all || !chosen) {
		free(all);
		free(chosen);
		return 0;
	}
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

size_t qsa_ref_select(const float *scores, uint64_t groups, uint64_t keep, uint64_t ratio,
		      uint64_t visible, int32_t *rows)
{
	double *d = malloc((size_t)(groups ? groups : 1) * sizeof(double));
	size_t n;

	if (!d)
		return 0;
	for (uint64_t g = 0; g < groups; g++)
		d[g] = (double)scores[g]; /* exact: the order and the ties are the float ones */
	n = qsa_ref_select_d(d, groups, keep, ratio, visible, rows);
	free(d);
	return n;
}

void qsa_ref_attend(const float *q, const float *K, const float *V, size_t stride, size_t offset,
		    size_t dim, float scale, const int32_t *rows, size_t n, float *out)
{
	double *p = malloc((n ? n : 1) * sizeof(double)), m = -INFINITY, sum = 0;

	if (!p) {
		for (size_t j = 0; j < dim; j++)
			out[j] = NAN;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const float *k = K + (size_t)rows[i] * stride + offset;
		double d = 0;
		for (size_t j = 0; j < dim; j++)
			d += (double)q[j] * (double)k[j];
		p[i] = d * (double)scale;
		m = p[i] > m ? p[i] : m;
	}
	for (size_t i = 0; i < n; i++) {
		p[i] = exp(p[i] - m);
		sum += p[i];
	}
	for (size_t j = 0; j < dim; j++) {
		double acc = 0;
		for (size_t i = 0; i < n; i++)
			acc += p[i] * (double)V[(size_t)rows[i] * stride + offset + j];
		out[j] = (float)(acc / sum);
	}
	free(p);
}

int qsa_ref_dense(const float *q, const float *K, const float *V, size_t stride, size_t offset,
		  size_t dim, float scale, uint64_t visible, float *out)
{
	int32_t *rows;

	if (visible > QSA_DENSE_MAX_KEYS)
		return -1; /* the oracle's domain ends here (AFN-011) */
	rows = malloc((size_t)(visible ? visible : 1) * sizeof(int32_t));
	if (!rows) {
		for (size_t j = 0; j < dim; j++)
			out[j] = NAN;
		return 0;
	}
	for (uint64_t i = 0; i < visible; i++)
		rows[i] = (int32_t)i;
	qsa_ref_attend(q, K, V, stride, offset, dim, scale, rows, (size_t)visible, out);
	free(rows);
	return 0;
}
