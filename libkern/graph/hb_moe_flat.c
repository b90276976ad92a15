/*
 * hb_moe_flat.c: one decode token's experts (resident, on the CPU) as two
 * batches of row ranges over the whole pool.
 *
 * Decode has one token and so k routed experts plus the shared one, each
 * three matrices.  Run as one job per expert (hb_layer_mix.c's expert jobs),
 * 11 equal jobs on 2 workers leave one worker idle through the last; split
 * per expert over the pool, every matrix is its own small batch.  Here the
 * gate and up rows of every expert are one batch of ranges, the SwiGLU
 * products follow, and the down rows of every expert are a second batch.
 *
 * Bits: every output row is still computed whole by hb_kern_rows, which
 * gives a row the same bits whatever range it is in, and the SwiGLU product
 * is hb_swiglu's; so the results equal those of the job-per-expert and the
 * serial runs, and the weighted sum after is unchanged (rank order).
 */
#include "hb_base.h"
#include "graph/hb_session_int.h"
#include "backend/simd/hb_simd.h"

/* about this many weight bytes a range: small enough that the last ranges
 * of a batch balance the workers, large enough that taking one is cheap */
#define FLAT_RANGE_BYTES (128u << 10)
#define FLAT_ROW_TILE 4

struct flat_mat {
	struct hb_wmat w;
	const float *x;
	float *y;
	uint64_t per, first; /* rows a range; the batch's first job index */
};

struct flat_batch {
	struct flat_mat *mat;
	size_t n, jobs;
};

static void flat_add(struct flat_batch *b, const struct hb_wmat *w, const float *x, float *y)
{
	struct flat_mat *p = &b->mat[b->n++];
	uint64_t per = FLAT_RANGE_BYTES / (w->row_bytes ? w->row_bytes : 1);

	per = (per + FLAT_ROW_TILE - 1) / FLAT_ROW_TILE * FLAT_ROW_TILE;
	if (per < FLAT_ROW_TILE)
		per = FLAT_ROW_TILE;
	p->w = *w, p->x = x, p->y = y, p->per = per, p->first = b->jobs;
	b->jobs += (w->rows + per - 1) / per;
}

static int flat_job(void *ctx, size_t job, unsigned worker)
{
	const struct flat_batch *b = ctx;
	size_t i = 0;

	(void)worker;
	while (i + 1 < b->n && b->mat[i + 1].first <= job)
		i++;
	const struct flat_mat *p = &b->mat[i];
	uint64_t r0 = (job - p->first) * p->per, r1 = r0 + p->per;
	if (r1 > p->w.rows)
		r1 = p->w.rows;
	hb_kern_rows(&p->w, r0, r1, p->x, (size_t)p->w.cols, 1, p->y, (size_t)p->w.rows);
	return HB_OK;
}

/* a session's buffers: k + 1 experts' gate and up outputs, views, ranges */
struct hb_moe_flat {
	size_t ld; /* floats between two outputs: the wider expert width */
	float *gu; /* [k + 1][2][ld] */
	struct hb_wmat *g, *u, *d; /* [k + 1] */
	float **out;               /* [k + 1] */
	struct flat_mat *mat;      /* [2 (k + 1)] */
};

struct hb_moe_flat *hb_moe_flat_new(const struct hb_qwen_config *c)
{
	size_t n = (size_t)c->num_experts_per_tok + 1;
	size_t I = (size_t)c->moe_intermediate_size, Is = (size_t)c->shared_expert_intermediate_size;
	struct hb_moe_flat *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->ld = I > Is ? I : Is;
	f->gu = malloc(n * 2 * f->ld * sizeof(float));
	f->g = calloc(3 * n, sizeof(*f->g));
	f->u = f->g ? f->g + n : NULL;
	f->d = f->g ? f->g + 2 * n : NULL;
	f->out = calloc(n, sizeof(*f->out));
	f->mat = calloc(2 * n, sizeof(*f->mat));
	if (!f->gu || !f->g || !f->out || !f->mat) {
		hb_moe_flat_free(f);
		return NULL;
	}
	return f;
}

void hb_moe_flat_free(struct hb_moe_flat *f)
{
	if (!f)
		return;
	free(f->gu), free(f->g), free(f->out), free(f->mat);
	free(f);
}

bool hb_moe_flat_fits(const struct hb_session *s, size_t T)
{
	return T == 1 && s->flat && hb_pool_size(s->pool) >= 2 && !s->m->xs && !hb_backend_device();
}

void hb_moe_flat(struct hb_session *s, uint32_t layer, size_t n)
{
	const struct hb_model *m = s->m;
	const struct hb_moe_weights *w = &m->layers[layer].moe;
	size_t H = (size_t)m->cfg.hidden_size, k = (size_t)m->cfg.num_experts_per_tok;
	struct hb_moe_flat *f = s->flat;
	struct hb_wmat *g = f->g, *u = f->u, *d = f->d;
	float **out = f->out;
	size_t ld = f->ld;
	struct flat_batch b = { f->mat, 0, 0 };

	/* expert i < n is s->xs_u[i], out into its rank's row; n is the shared one */
	for (size_t i = 0; i < n; i++) {
		hb_model_expert(m, layer, s->xs_u[i], &g[i], &u[i], &d[i]);
		for (size_t r = 0; r < k; r++)
			if (s->route_ids[r] == (int32_t)s->xs_u[i])
				out[i] = s->experts + r * H;
	}
	g[n] = w->shared_gate, u[n] = w->shared_up, d[n] = w->shared_down, out[n] = s->big2;
	for (size_t i = 0; i <= n; i++) {
		float *gi = f->gu + 2 * i * ld;
		flat_add(&b, &g[i], s->mixed, gi);
		flat_add(&b, &u[i], s->mixed, gi + ld);
	}
	hb_pool_run(s->pool, b.jobs, flat_job, &b);
	b.n = 0, b.jobs = 0;
	for (size_t i = 0; i <= n; i++) {
		float *gi = f->gu + 2 * i * ld, *ui = gi + ld;
		hb_kern_silu_mul(gi, ui, (size_t)g[i].rows, gi); /* hb_swiglu's product, in place */
		flat_add(&b, &d[i], gi, out[i]);
	}
	hb_pool_run(s->pool, b.jobs, flat_job, &b);
}
