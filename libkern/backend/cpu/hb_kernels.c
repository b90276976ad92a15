/*
 * hb_kernels.c: the CPU reference of the seam's weight-reading operations
 * (backend/hb_backend.h): row widening, matrix products over the pool, and
 * the SwiGLU expert built from them.
 */
#include "hb_base.h"
#include "codec/hb_affine4.h"
#include "hb_half.h"
#include "backend/hb_backend.h"
#include "math/hb_math.h"
#include "backend/simd/hb_simd.h"

#include <math.h>

int hb_backend_start(struct hb_error *err)
{
	return hb_kernel_select(err);
}

/* the device backend installed, or NULL for this reference (hb_backend.h) */
static const struct hb_device_ops *hb_dev_ops;

void hb_backend_set_device(const struct hb_device_ops *ops)
{
	hb_dev_ops = ops;
}

const struct hb_device_ops *hb_backend_device(void)
{
	return hb_dev_ops;
}

const char *hb_backend_name(void)
{
	static const char *const names[HB_KERNEL_NPATHS] = { "cpu/portable", "cpu/avx2", "cpu/avx512",
							     "cpu/avx512vbmi" };
	if (hb_dev_ops)
		return hb_dev_ops->name;
	return names[hb_kernel_path()];
}

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

/*
 * Products run on the canonical-order kernels of backend/simd/hb_simd.h (16 fused
 * multiply-add lanes and one fixed tree per output, on the vector path the
 * process chose): every output is computed whole by one job, so neither the
 * job partition nor the thread count nor the vector path changes a bit.
 * Jobs are ranges of rows, a multiple of the kernels' 4-row tile, each run
 * over all T tokens (a weight row is read once per chunk, not per token).
 */
#define ROW_TILE 4

struct mm_part {
	const struct hb_wmat *w;
	const float *x;
	float *y;
	uint64_t rows_per_job, jobs;
};

struct mm_ctx {
	struct mm_part part[HB_MM_GROUP_MAX]; /* one matrix, gate and up, or a group */
	size_t n, T;
};

static int mm_job(void *ctx, size_t job, unsigned worker)
{
	struct mm_ctx *m = ctx;
	const struct mm_part *p = m->part;
	uint64_t j = job, r0, r1;

	(void)worker;
	while (j >= p->jobs) /* the part the job is in */
		j -= p->jobs, p++;
	r0 = j * p->rows_per_job, r1 = r0 + p->rows_per_job;
	if (r1 > p->w->rows)
		r1 = p->w->rows;
	if (r0 < r1)
		hb_kern_rows(p->w, r0, r1, p->x, (size_t)p->w->cols, m->T, p->y, (size_t)p->w->rows);
	return HB_OK;
}

/*
 * A product of at most this many multiply-adds runs whole on the caller:
 * split, its parts take less than the pool's hand-off.  64 Ki is a decode
 * step's 128 KiB bf16 hyper-connection products (32 x 2048 and 2048 x 32
 * on the small bench model): split over two threads, each of a token's two
 * hyper-connection stages (8 layers) took 0.20 ms, serial 0.15 (hb-run's
 * decode, small bf16 model, two threads).
 */
#define SERIAL_MACS 65536

/* a few jobs per worker balance uneven rows; tiny matrices stay serial */
static void split(struct mm_part *p, const struct hb_wmat *w, const float *x, float *y, size_t T,
		  unsigned workers)
{
	uint64_t want = (uint64_t)workers * 4;

	p->w = w, p->x = x, p->y = y;
	if (workers < 2 || w->rows * w->cols * T <= SERIAL_MACS) {
		p->rows_per_job = w->rows, p->jobs = 1;
		return;
	}
	p->rows_per_job = (w->rows + want - 1) / want;
	p->rows_per_job = (p->rows_per_job + ROW_TILE - 1) / ROW_TILE * ROW_TILE;
	p->jobs = (w->rows + p->rows_per_job - 1) / p->rows_per_job;
}

static void run(struct hb_pool *pool, struct mm_ctx *m)
{
	size_t jobs = 0;

	for (size_t i = 0; i < m->n; i++)
		jobs += (size_t)m->part[i].jobs;

	if (jobs == 1 || !pool) {
		for (size_t j = 0; j < jobs; j++)
			mm_job(m, j, 0);
		return;
	}
	hb_pool_run(pool, jobs, mm_job, m);
}

void hb_matmul(struct hb_pool *pool, const struct hb_wmat *w, const float *x, size_t T,
	       float *y, float *scratch)
{
	struct mm_ctx m;

	(void)scratch; /* the kernels widen weights in registers */
	if (hb_dev_ops) {
		hb_dev_ops->matmul(w, x, T, y);
		return;
	}
	memset(&m, 0, sizeof(m));
	m.T = T, m.n = 1;
	split(&m.part[0], w, x, y, T, pool ? hb_pool_size(pool) : 1);
	run(pool, &m);
}

void hb_matmul_group(struct hb_pool *pool, const struct hb_mm *mm, size_t n, size_t T)
{
	struct mm_ctx m;

	if (hb_dev_ops || n > HB_MM_GROUP_MAX) {
		for (size_t i = 0; i < n; i++)
			hb_matmul(pool, mm[i].w, mm[i].x, T, mm[i].y, NULL);
		return;
	}
	memset(&m, 0, sizeof(m));
	m.T = T, m.n = n;
	for (size_t i = 0; i < n; i++)
		split(&m.part[i], mm[i].w, mm[i].x, mm[i].y, T, pool ? hb_pool_size(pool) : 1);
	run(pool, &m);
}

void hb_swiglu(struct hb_pool *pool, const struct hb_wmat *gate, const struct hb_wmat *up,
	       const struct hb_wmat *down, const float *x, size_t n, float *g, float *u, float *act,
	       float *out, float *scratch)
{
	size_t I = (size_t)gate->rows;
	unsigned workers = pool ? hb_pool_size(pool) : 1;
	struct mm_ctx m;

	if (hb_dev_ops) {
		hb_dev_ops->swiglu(gate, up, down, x, n, out);
		return;
	}
	/* gate and up in one pass over the pool (one wake-up, not two) */
	memset(&m, 0, sizeof(m));
	m.T = n, m.n = 2;
	split(&m.part[0], gate, x, g, n, workers);
	split(&m.part[1], up, x, u, n, workers);
	run(pool, &m);
	hb_kern_silu_mul(g, u, n * I, act);
	hb_matmul(pool, down, act, n, out, scratch);
}
