/*
 * hb-run/generate.c: the run itself: the prompt as one prefill, then up
 * to -n tokens decoded one at a time through the cache, each sampled
 * (greedy by default) from the last row of logits, ending early at a stop
 * id of the artifact.
 */
#include "hb_base.h"
#include "hb_run_cli.h"

#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool is_stop(const struct hb_model *m, int32_t id)
{
	for (size_t i = 0; i < m->n_stop; i++)
		if ((uint32_t)id == m->stop_ids[i])
			return true;
	return false;
}

int run_generate(struct run *r, struct gen *g, struct hb_error *err)
{
	const struct cli *c = r->c;
	const struct hb_model *m = r->m;
	size_t np = g->np, ng;
	const float *last;
	int rc;

	g->gen = malloc((c->n + 1) * sizeof(int32_t));
	g->logits = malloc(np * (size_t)m->vocab_physical * sizeof(float));
	if (!g->gen || !g->logits)
		return hb_error_set(err, HB_ERR_NOMEM, "run", "out of memory");
	if ((rc = hb_pool_create((unsigned)c->threads, &g->pool, err)) ||
	    (rc = hb_session_create(m, g->pool, np + c->n + 1, &g->s, err)) ||
	    (rc = hb_sampler_init(&g->smp, !c->sampling, (float)c->temp, (uint32_t)c->top_k, (float)c->top_p, c->seed,
				  (size_t)m->vocab_semantic, err)))
		return rc;
	if ((rc = run_outputs_open(r, err)) || (rc = run_taps_open(r, g->pool, np, err)))
		return rc;
	/* routes and logits alone let a device run whole chunks (run_observe
	 * reads every kind for the predictors, the taps and the stream trace) */
	if (!r->learned_open && !r->taps_open && !r->xst)
		hb_session_observe_only(g->s, 1u << HB_OBS_ROUTES | 1u << HB_OBS_ROUTE_WEIGHTS | 1u << HB_OBS_LOGITS);
	/* the prompt's workspace and logits rows faulted in before the clock
	 * starts, and the mapped weights a CPU run reads (a device run uploads
	 * them): the prefill rate is the model's, not the page allocator's */
	if ((rc = hb_session_reserve(g->s, np, err)))
		return rc;
	memset(g->logits, 0, np * (size_t)m->vocab_physical * sizeof(float));
	hb_backend_cli_prefault(m, g->pool, c->no_prefault, c->json, &g->prefault);
	g->t0 = now();
	run_xst_chunk_begin(r, 0, np, false);
	/* only the last row is sampled from: the others' vocabulary projection
	 * runs only for --dump-logits, which writes every row */
	if (c->dump_logits)
		rc = hb_session_forward(g->s, g->prompt, np, g->logits, run_observe, r, err);
	else
		rc = hb_session_forward_last(g->s, g->prompt, np, g->logits + (np - 1) * (size_t)m->vocab_physical,
					     run_observe, r, err);
	if (rc)
		return rc;
	run_xst_chunk_end(r);
	if ((rc = run_taps_chunk(r, err)) || (rc = run_dump_logits(r, g->logits, np, err)))
		return rc;
	g->t1 = now();
	r->shadow.from_token = np; /* the shadow scores the decode steps' wants */
	if (m->xs) {
		if (!(g->xs_pre = malloc(sizeof(*g->xs_pre))))
			return hb_error_set(err, HB_ERR_NOMEM, "run", "out of memory");
		hb_xs_stats_get(m->xs, g->xs_pre);
	}
	last = g->logits + (np - 1) * (size_t)m->vocab_physical;
	for (ng = 0; ng < c->n; ng++) {
		int32_t next = hb_sampler_next(&g->smp, last, (size_t)m->vocab_semantic);
		if (next < 0)
			return hb_error_set(err, HB_ERR_INTERNAL, "sampler", "set up for fewer rows than %" PRIu64,
					    m->vocab_semantic);
		g->gen[ng] = next;
		if (is_stop(m, next) || ng + 1 == c->n) {
			ng++;
			break;
		}
		run_xst_chunk_begin(r, np + ng, 1, true);
		if ((rc = hb_session_forward(g->s, &next, 1, g->logits, run_observe, r, err)))
			return rc;
		run_xst_chunk_end(r);
		if ((rc = run_taps_chunk(r, err)) || (rc = run_dump_logits(r, g->logits, 1, err)))
			return rc;
		last = g->logits;
	}
	g->ng = ng;
	g->t2 = now();
	return HB_OK;
}

void run_gen_release(struct gen *g)
{
	hb_sampler_release(&g->smp);
	hb_session_free(g->s);
	hb_pool_destroy(g->pool);
	free(g->xs_pre);
}
