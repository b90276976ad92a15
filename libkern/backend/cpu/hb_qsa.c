/*
 * hb_qsa.c: the CPU reference of QSA's group selection and of attention
 * over gathered rows (backend/hb_backend.h).
 */
#include "hb_base.h"
#include "backend/hb_backend.h"
#include "math/hb_math.h"

#include <math.h>

/* a is a better group than b: higher score, or equal and earlier */
static bool better(const float *sc, int32_t a, int32_t b)
{
	return sc[a] > sc[b] || (sc[a] == sc[b] && a < b);
}

/* min-heap on `better`: the root is the worst kept group */
static void sift_down(const float *sc, int32_t *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, w = i;
		if (l < n && better(sc, h[w], h[l]))
			w = l;
		if (r < n && better(sc, h[w], h[r]))
			w = r;
		if (w == i)
			return;
		int32_t t = h[i];
		h[i] = h[w];
		h[w] = t;
		i = w;
	}
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

/* the scores of groups [g0, g1): sum over heads of relu(q_h . k_g) / sqrt(d) */
static void score_range(const float *iq, size_t heads, size_t dim, const float *pooled, uint64_t g0,
			uint64_t g1, float *scores)
{
	float scale = 1.0f / sqrtf((float)dim);

	for (uint64_t g = g0; g < g1; g++) {
		float sc = 0;
		for (size_t h = 0; h < heads; h++) {
			float d = hb_dot(iq + h * dim, pooled + g * dim, dim);
			sc += d > 0 ? d : 0;
		}
		scores[g] = sc * scale;
	}
}

/* membership from the scores, then the chronological emission */
static size_t choose(const float *scores, uint64_t groups, uint64_t keep, uint64_t ratio, uint64_t visible,
		     int32_t *heap, int32_t *rows)
{
	size_t n = 0, kept = 0;

	/* membership: the `keep` best by (score desc, group asc) */
	for (uint64_t g = 0; g < groups; g++) {
		if (kept < keep) {
			size_t i = kept++;
			heap[i] = (int32_t)g;
			while (i && better(scores, heap[(i - 1) / 2], heap[i])) {
				int32_t t = heap[i];
				heap[i] = heap[(i - 1) / 2];
				heap[(i - 1) / 2] = t;
				i = (i - 1) / 2;
			}
		} else if (better(scores, (int32_t)g, heap[0])) {
			heap[0] = (int32_t)g;
			sift_down(scores, heap, kept, 0);
		}
	}
	/* emission: chronological, groups expanded, then the raw tail */
	qsort(heap, kept, sizeof(int32_t), cmp_i32);
	for (size_t i = 0; i < kept; i++)
		for (uint64_t r = 0; r < ratio; r++)
			rows[n++] = heap[i] * (int32_t)ratio + (int32_t)r;
	for (uint64_t p = groups * ratio; p < visible; p++)
		rows[n++] = (int32_t)p;
	return n;
}

size_t hb_qsa_select(const float *iq, size_t heads, size_t dim, const float *pooled,
		     uint64_t groups, uint64_t keep, uint64_t ratio, uint64_t visible,
		     float *scores, int32_t *heap, int32_t *rows)
{
	const struct hb_device_ops *dev = hb_backend_device();

	if (dev)
		return dev->qsa_select(iq, heads, dim, pooled, groups, keep, ratio, visible, rows);
	score_range(iq, heads, dim, pooled, 0, groups, scores);
	return choose(scores, groups, keep, ratio, visible, heap, rows);
}

/*
 * The batch.  With at least 4 queries a worker, one job a query: its
 * scores, membership and emission back to back, its scores still in the
 * worker's cache when the heap reads them (scoring every query of a block
 * first and choosing after made the block's scores, 16 x 100 KiB at
 * 100,000 tokens, fall out of L2: 3x slower at the long test's widths).
 * With fewer (decode, small chunks), group scores in slices (query i's
 * slice s is job i * slices + s, slices the most any query needs; a slice
 * past a query's groups is an empty job), then one job per query for its
 * membership and emission.  A slice holds about 64 Ki multiply-adds, enough
 * to pay for a job and small enough that one long query feeds every
 * worker.
 */
struct sel_ctx {
	const struct hb_qsa_batch *b;
	uint64_t slice, slices;
};

static int score_job(void *ctx, size_t job, unsigned worker)
{
	const struct sel_ctx *c = ctx;
	const struct hb_qsa_batch *b = c->b;
	size_t i = job / c->slices;
	uint64_t g0 = (job % c->slices) * c->slice, g1 = g0 + c->slice;

	(void)worker;
	if (g1 > b->groups[i])
		g1 = b->groups[i];
	if (g0 < g1)
		score_range(b->iq + i * b->iq_ld, b->heads, b->dim, b->pooled, g0, g1, b->scores + i * b->scores_ld);
	return HB_OK;
}

static int select_job(void *ctx, size_t i, unsigned worker)
{
	const struct hb_qsa_batch *b = ((const struct sel_ctx *)ctx)->b;

	(void)worker;
	b->n[i] = hb_qsa_select(b->iq + i * b->iq_ld, b->heads, b->dim, b->pooled, b->groups[i], b->keep, b->ratio,
				b->visible[i], b->scores + i * b->scores_ld, b->heap + i * b->keep,
				b->rows + i * b->rows_ld);
	return HB_OK;
}

static int choose_job(void *ctx, size_t i, unsigned worker)
{
	const struct hb_qsa_batch *b = ((const struct sel_ctx *)ctx)->b;

	(void)worker;
	b->n[i] = choose(b->scores + i * b->scores_ld, b->groups[i], b->keep, b->ratio, b->visible[i],
			 b->heap + i * b->keep, b->rows + i * b->rows_ld);
	return HB_OK;
}

void hb_qsa_select_batch(struct hb_pool *pool, const struct hb_qsa_batch *b)
{
	struct sel_ctx c = { b, 1, 1 };
	uint64_t most = 0, per = (uint64_t)(b->heads * b->dim);
	const struct hb_device_ops *dev = hb_backend_device();

	if (dev && dev->qsa_select_batch) {
		dev->qsa_select_batch(b);
		return;
	}
	for (size_t i = 0; i < b->nq; i++)
		most = b->groups[i] > most ? b->groups[i] : most;
	/* a device backend takes each query whole, one after another */
	if (hb_backend_device() || !pool || hb_pool_size(pool) < 2 || most * per * b->nq < 8192) {
		for (size_t i = 0; i < b->nq; i++)
			select_job(&c, i, 0);
		return;
	}
	if (b->nq >= 4 * (size_t)hb_pool_size(pool)) {
		hb_pool_run(pool, b->nq, select_job, &c);
		return;
	}
	c.slice = per ? (65536 + per - 1) / per : most;
	c.slice = c.slice ? c.slice : 1;
	c.slices = most ? (most + c.slice - 1) / c.slice : 1;
	hb_pool_run(pool, b->nq * (size_t)c.slices, score_job, &c);
	hb_pool_run(pool, b->nq, choose_job, &c);
}

void hb_qsa_attend(const float *q, const float *K, const float *V, size_t stride, size_t offset,
		   size_t dim, float scale, const int32_t *rows, size_t n, float *probs, float *out)
{
	const struct hb_device_ops *dev = hb_backend_device();

	if (dev) {
		dev->qsa_attend(q, K, V, stride, offset, dim, scale, rows, n, out);
		return;
	}
	for (size_t i = 0; i < n; i++)
		probs[i] = hb_dot(q, K + (size_t)rows[i] * stride + offset, dim) * scale;
	hb_softmax(probs, n);
	/* out[j] = sum_i probs[i] v_i[j] in increasing i from +0, as the
	 * j-outer loop did; i outer reads each gathered row once, contiguously,
	 * and the j sums run side by side (vectorisable, each unchanged) */
	for (size_t j = 0; j < dim; j++)
		out[j] = 0;
	for (size_t i = 0; i < n; i++) {
		const float *v = V + (size_t)rows[i] * stride + offset;
		float p = probs[i];
		for (size_t j = 0; j < dim; j++)
			out[j] += p * v[j];
	}
}

static int attend_job(void *ctx, size_t job, unsigned worker)
{
	const struct hb_qsa_attn *a = ctx;
	size_t i = job / a->heads, h = job % a->heads;

	hb_qsa_attend(a->q + i * a->q_ld + h * a->qh_ld, a->K, a->V, a->stride, (h / a->per_kv) * a->dim, a->dim,
		      a->scale, a->rows + i * a->rows_ld, a->n[i], a->probs + (size_t)worker * a->probs_ld,
		      a->out + i * a->out_ld + h * a->dim);
	return HB_OK;
}

void hb_qsa_attend_batch(struct hb_pool *pool, const struct hb_qsa_attn *a)
{
	size_t jobs = a->nq * a->heads;
	const struct hb_device_ops *dev = hb_backend_device();

	if (dev && dev->qsa_attend_batch) {
		dev->qsa_attend_batch(a);
		return;
	}
	if (hb_backend_device() || !pool || hb_pool_size(pool) < 2) {
		for (size_t j = 0; j < jobs; j++)
			attend_job((void *)a, j, 0);
		return;
	}
	hb_pool_run(pool, jobs, attend_job, (void *)a);
}
