/*
 * hb_kernels.c: the CPU reference of the seam's weight-reading operations
 * (backend/hb_backend.h): row widening, matrix products over the pool, and
 * the SwiGLU expert built from them.  Dot products are hb_dot's eight fixed
 * lanes (math/hb_math.h), so results do not depend on the thread count.
 */
#include "hb_base.h"
#include "codec/hb_affine4.h"
#include "hb_half.h"
#include "backend/hb_backend.h"
#include "math/hb_math.h"

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

void hb_swiglu(struct hb_pool *pool, const struct hb_wmat *gate, const struct hb_wmat *up,
	       const struct hb_wmat *down, const float *x, size_t n, float *g, float *u, float *act,
	       float *out, float *scratch)
{
	size_t I = (size_t)gate->rows;

	hb_matmul(pool, gate, x, n, g, scratch);
	hb_matmul(pool, up, x, n, u, scratch);
	for (size_t i = 0; i < n * I; i++)
		act[i] = hb_silu(g[i]) * u[i];
	hb_matmul(pool, down, act, n, out, scratch);
}
