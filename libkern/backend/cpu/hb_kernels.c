/*
 * hb_kernels.c: CPU kernels (see hb_kernels.h).  Dot products accumulate in
 * eight float lanes so the compiler can vectorise them; the summation order
 * is fixed, so results do not depend on the thread count.
 */
#include "hb_base.h"
#include "codec/hb_affine4.h"
#include "hb_half.h"
#include "hb_kernels.h"

#include <math.h>

void hb_wmat_row(const struct hb_wmat *w, uint64_t r, float *out)
{
	const uint8_t *p = (const uint8_t *)w->data + r * w->row_bytes;
	uint64_t n = w->cols;

	switch (w->type) {
	case HB_W_F32:
		memcpy(out, p, (size_t)n * 4);
		return;
	case HB_W_BF16:
		for (uint64_t i = 0; i < n; i++)
			out[i] = hb_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
		return;
	case HB_W_F16:
		for (uint64_t i = 0; i < n; i++)
			out[i] = hb_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
		return;
	case HB_W_AFFINE4_G64:
		/* a row that does not decode (a non-finite scale) becomes NaN, which
		 * the chunk's finite check refuses: never a stale row passed on */
		if (hb_affine4_decode(p, (size_t)w->row_bytes, 64, out, (size_t)n, "row", NULL))
			for (uint64_t i = 0; i < n; i++)
				out[i] = NAN;
		return;
	}
}

float hb_dot(const float *a, const float *b, size_t n)
{
	float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
	size_t i = 0;

	for (; i + 8 <= n; i += 8)
		for (int k = 0; k < 8; k++)
			acc[k] += a[i + (size_t)k] * b[i + (size_t)k];
	for (; i < n; i++)
		acc[i % 8] += a[i] * b[i];
	return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

void hb_matvec(const struct hb_wmat *w, const float *x, float *y, float *row)
{
	for (uint64_t r = 0; r < w->rows; r++) {
		if (w->type == HB_W_F32) {
			y[r] = hb_dot((const float *)((const uint8_t *)w->data + r * w->row_bytes), x, (size_t)w->cols);
			continue;
		}
		hb_wmat_row(w, r, row);
		y[r] = hb_dot(row, x, (size_t)w->cols);
	}
}

struct mm_ctx {
	const struct hb_wmat *w;
	const float *x;
	size_t T;
	float *y;
	float *scratch;
	uint64_t rows_per_job;
};

static int mm_job(void *ctx, size_t job, unsigned worker)
{
	struct mm_ctx *m = ctx;
	const struct hb_wmat *w = m->w;
	float *row = m->scratch + (size_t)worker * w->cols;
	uint64_t r0 = job * m->rows_per_job, r1 = r0 + m->rows_per_job;

	if (r1 > w->rows)
		r1 = w->rows;
	for (uint64_t r = r0; r < r1; r++) {
		const float *wr;
		if (w->type == HB_W_F32) {
			wr = (const float *)((const uint8_t *)w->data + r * w->row_bytes);
		} else {
			hb_wmat_row(w, r, row);
			wr = row;
		}
		for (size_t t = 0; t < m->T; t++)
			m->y[t * w->rows + r] = hb_dot(wr, m->x + t * w->cols, (size_t)w->cols);
	}
	return HB_OK;
}

void hb_matmul(struct hb_pool *pool, const struct hb_wmat *w, const float *x, size_t T,
	       float *y, float *scratch)
{
	struct mm_ctx m = { w, x, T, y, scratch, 0 };
	unsigned workers = hb_pool_size(pool);
	uint64_t jobs;

	/* a few jobs per worker balance uneven rows; tiny matrices stay serial */
	if (!pool || workers < 2 || w->rows * w->cols * T < 65536) {
		m.rows_per_job = w->rows;
		mm_job(&m, 0, 0);
		return;
	}
	jobs = (uint64_t)workers * 4;
	m.rows_per_job = (w->rows + jobs - 1) / jobs;
	if (!m.rows_per_job)
		m.rows_per_job = 1;
	hb_pool_run(pool, (size_t)((w->rows + m.rows_per_job - 1) / m.rows_per_job), mm_job, &m);
}

void hb_rmsnorm_zc(const float *x, const float *w, size_t n, size_t group, double eps, float *out)
{
	for (size_t g0 = 0; g0 < n; g0 += group) {
		float ss = 0;
		float inv;
		for (size_t i = 0; i < group; i++)
			ss += x[g0 + i] * x[g0 + i];
		inv = 1.0f / sqrtf(ss / (float)group + (float)eps);
		for (size_t i = 0; i < group; i++)
			out[g0 + i] = (x[g0 + i] * inv) * (1.0f + w[g0 + i]);
	}
}

void hb_rmsnorm_w(const float *x, const float *w, size_t n, double eps, float *out)
{
	float ss = 0, inv;

	for (size_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	inv = 1.0f / sqrtf(ss / (float)n + (float)eps);
	for (size_t i = 0; i < n; i++)
		out[i] = w[i] * (x[i] * inv);
}

void hb_l2norm(float *x, size_t n, double eps)
{
	float ss = 0, inv;

	for (size_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	inv = 1.0f / sqrtf(ss + (float)eps);
	for (size_t i = 0; i < n; i++)
		x[i] *= inv;
}

float hb_sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

float hb_silu(float x)
{
	return x * hb_sigmoid(x);
}

float hb_softplus(float x)
{
	return x > 20.0f ? x : log1pf(expf(x));
}

void hb_softmax(float *x, size_t n)
{
	float m = -INFINITY, s = 0;

	for (size_t i = 0; i < n; i++)
		m = x[i] > m ? x[i] : m;
	for (size_t i = 0; i < n; i++) {
		x[i] = expf(x[i] - m);
		s += x[i];
	}
	for (size_t i = 0; i < n; i++)
		x[i] /= s;
}
