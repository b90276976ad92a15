/*
 * hb_learned.c: the learned predictor's P1 hints and the shadow-I/O
 * accounting (hb_learned.h).
 */
#include "hb_base.h"
#include "hb_learned.h"
#include "hb_json.h"

#include <math.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int hb_learned_open(struct hb_learned *lp, const char *path, const struct hb_model *m, const uint8_t text[32],
		    bool has_thread, uint64_t thread, struct hb_error *err)
{
	const struct hb_qwen_config *q = &m->cfg;
	struct hb_feature_set run;
	int rc;

	memset(lp, 0, sizeof(*lp));
	if ((rc = hb_predictor_load(path, &lp->p, err)))
		return rc;
	/* the run as a feature set of no row (or one, its thread): what the
	 * predictor would see here, checked as hb-replay predict checks */
	memset(&run, 0, sizeof(run));
	memcpy(run.id.artifact, m->artifact_sha, 32);
	memcpy(run.id.text, text, 32);
	run.id.projection_seed = lp->p.id.projection_seed;
	run.id.width = lp->p.width, run.id.source_width = (uint32_t)q->hidden_size, run.id.layers = (uint32_t)q->num_layers;
	memcpy(run.id.split_id, lp->p.id.split_id, 32); /* a run is cut by no split */
	snprintf(run.id.split, sizeof(run.id.split), "runtime");
	snprintf(run.id.tap, sizeof(run.id.tap), "pre-attention-mix");
	run.n = has_thread, run.thread = &thread;
	lp->H = (uint32_t)q->hidden_size;
	if ((rc = hb_projection_make(run.id.projection_seed, lp->H, lp->p.width, &lp->P, run.id.projection, err)))
		goto fail;
	if (memcmp(run.id.projection, lp->p.id.projection, 32) && lp->p.width == run.id.width &&
	    lp->p.id.source_width == run.id.source_width) {
		rc = hb_error_diag(err, hb_predict_diag_id(HB_PDD_PREDICTOR_PROJECTION), HB_ERR_CONTRACT, "projection",
				   false, 0, "%s: the projection of seed %" PRIu64 " is not the one the predictor's digest "
				   "names", path, run.id.projection_seed);
		goto fail;
	}
	if ((rc = hb_predictor_check(&lp->p, &run, path, err)))
		goto fail;
	if (lp->p.experts != (uint32_t)q->num_experts || lp->p.top_k != (uint32_t)q->num_experts_per_tok) {
		rc = hb_error_diag(err, hb_predict_diag_id(HB_PDD_PREDICTOR_GEOMETRY), HB_ERR_CONTRACT, "experts", false,
				   0, "%s: %" PRIu32 " experts top-%" PRIu32 ", the model's %" PRIu32 " top-%" PRIu32, path,
				   lp->p.experts, lp->p.top_k, (uint32_t)q->num_experts, (uint32_t)q->num_experts_per_tok);
		goto fail;
	}
	lp->xs = m->xs;
	lp->n = lp->p.top_k < lp->p.experts ? lp->p.top_k : lp->p.experts;
	lp->x = malloc(lp->p.width * sizeof(float));
	lp->z = malloc(lp->p.rank * sizeof(float));
	lp->scores = malloc(lp->p.experts * sizeof(float));
	lp->idx = malloc(lp->p.experts * sizeof(uint32_t));
	if (!lp->x || !lp->z || !lp->scores || !lp->idx) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "predictor", "out of memory");
		goto fail;
	}
	return HB_OK;
fail:
	hb_learned_release(lp);
	return rc;
}

void hb_learned_observe(struct hb_learned *lp, enum hb_observe kind, int32_t layer, uint64_t pos,
			const void *data)
{
	uint64_t t0;
	double sum = 0, mx;

	if (kind != HB_OBS_PRE_ATTN || !lp->xs || layer < 0 || (uint32_t)layer >= lp->p.layers)
		return;
	t0 = now_ns();
	hb_projection_apply(lp->P, lp->H, lp->p.width, data, lp->x);
	hb_predictor_scores(&lp->p, lp->x, (uint32_t)layer, lp->z, lp->scores);
	hb_predict_top(lp->scores, lp->p.experts, lp->n, lp->idx);
	mx = lp->scores[lp->idx[0]];
	for (uint32_t e = 0; e < lp->p.experts; e++)
		sum += exp((double)lp->scores[e] - mx);
	for (uint32_t j = 0; j < lp->n; j++) {
		double c = (double)lp->p.top_k * exp((double)lp->scores[lp->idx[j]] - mx) / sum;
		struct hb_xs_hint h = {.layer = (uint32_t)layer, .expert = lp->idx[j], .prio = HB_XS_P1,
				       .confidence = c < 1 ? (float)c : 1.0f, .phase = HB_XS_PHASE_DECODE,
				       .token_pos = pos};
		int rc = hb_xs_prefetch(lp->xs, &h, NULL, NULL);
		lp->hints++;
		lp->issued += rc == HB_XS_PF_ISSUED;
		lp->rejected += rc == HB_XS_PF_REJECTED;
	}
	lp->compute_ns += now_ns() - t0;
}

void hb_learned_release(struct hb_learned *lp)
{
	hb_predictor_release(&lp->p);
	free(lp->P), free(lp->x), free(lp->z), free(lp->scores), free(lp->idx);
	lp->P = lp->x = lp->z = lp->scores = NULL;
	lp->idx = NULL;
}

/* ------------------------------------------------------------ shadow */

void hb_shadow_init(struct hb_shadow *sh)
{
	memset(sh, 0, sizeof(*sh));
	pthread_mutex_init(&sh->mu, NULL);
}

void hb_shadow_release(struct hb_shadow *sh)
{
	free(sh->reads);
	free(sh->wants);
	pthread_mutex_destroy(&sh->mu);
	sh->reads = NULL, sh->wants = NULL;
}

static void *grow(void *v, size_t *cap, size_t n, size_t size, bool *nomem)
{
	size_t c;
	void *g;

	if (n < *cap)
		return v;
	c = *cap ? 2 * *cap : 1024;
	if (!(g = realloc(v, c * size))) {
		*nomem = true;
		return v;
	}
	*cap = c;
	return g;
}

void hb_shadow_ticket(void *ctx, enum hb_xs_event ev, const struct hb_xs_ticket *t)
{
	struct hb_shadow *sh = ctx;

	pthread_mutex_lock(&sh->mu);
	if (ev == HB_XS_EV_ISSUE && t->prio == HB_XS_P0)
		sh->queued_p0++;
	else if (ev == HB_XS_EV_PROMOTE && t->state == HB_XS_T_QUEUED)
		sh->queued_p0++;
	else if (ev == HB_XS_EV_DISPATCH && t->prio == HB_XS_P0 && sh->queued_p0)
		sh->queued_p0--;
	else if (ev == HB_XS_EV_DISPATCH) {
		sh->dispatched_predicted++;
		sh->starvation += sh->queued_p0 > 0; /* a P0 read waited while this one took the depth */
	} else if (ev == HB_XS_EV_COMPLETE && !t->exact && t->state == HB_XS_T_DONE) {
		sh->reads = grow(sh->reads, &sh->cap_reads, sh->n_reads, sizeof(*sh->reads), &sh->nomem);
		if (sh->n_reads < sh->cap_reads)
			sh->reads[sh->n_reads++] = (struct hb_shadow_read){t->token_pos, t->ready_ns, t->layer, t->expert};
	}
	pthread_mutex_unlock(&sh->mu);
}

void hb_shadow_route(struct hb_shadow *sh, uint32_t layer, uint64_t pos, const int32_t *ids, size_t k)
{
	struct hb_shadow_want *w;

	pthread_mutex_lock(&sh->mu);
	sh->wants = grow(sh->wants, &sh->cap_wants, sh->n_wants, sizeof(*sh->wants), &sh->nomem);
	if (sh->n_wants < sh->cap_wants) {
		w = &sh->wants[sh->n_wants++];
		w->token = pos, w->layer = layer, w->need_ns = now_ns();
		w->k = k < 64 ? (uint32_t)k : 64;
		for (uint32_t j = 0; j < w->k; j++)
			w->ids[j] = (uint32_t)ids[j];
	}
	pthread_mutex_unlock(&sh->mu);
}

static int cmp_read(const void *a, const void *b)
{
	const struct hb_shadow_read *x = a, *y = b;
	if (x->token != y->token)
		return x->token < y->token ? -1 : 1;
	if (x->layer != y->layer)
		return x->layer < y->layer ? -1 : 1;
	if (x->expert != y->expert)
		return x->expert < y->expert ? -1 : 1;
	return x->ready_ns < y->ready_ns ? -1 : x->ready_ns > y->ready_ns;
}

int hb_shadow_json(struct hb_shadow *sh, cJSON *obj)
{
	uint64_t scored = 0, predicted = 0, timely = 0, late = 0;
	int64_t smin = INT64_MAX;
	double ssum = 0;
	int rc;

	pthread_mutex_lock(&sh->mu);
	if (sh->n_reads)
		qsort(sh->reads, sh->n_reads, sizeof(*sh->reads), cmp_read);
	for (size_t i = 0; i < sh->n_wants; i++) {
		const struct hb_shadow_want *w = &sh->wants[i];
		if (w->token < sh->from_token)
			continue;
		for (uint32_t j = 0; j < w->k; j++) {
			struct hb_shadow_read key = {w->token, 0, w->layer, w->ids[j]};
			const struct hb_shadow_read *r;
			size_t lo = 0, hi = sh->n_reads;
			scored++;
			while (lo < hi) { /* the first read of (token, layer, expert) */
				size_t mid = (lo + hi) / 2;
				if (cmp_read(&sh->reads[mid], &key) < 0)
					lo = mid + 1;
				else
					hi = mid;
			}
			r = lo < sh->n_reads ? &sh->reads[lo] : NULL;
			if (!r || r->token != w->token || r->layer != w->layer || r->expert != w->ids[j])
				continue;
			predicted++;
			{
				int64_t slack = (int64_t)(w->need_ns - r->ready_ns);
				timely += slack >= 0;
				late += slack < 0;
				smin = slack < smin ? slack : smin;
				ssum += (double)slack;
			}
		}
	}
	pthread_mutex_unlock(&sh->mu);
	if ((rc = hb_json_add_u64(obj, "p0_starvation_attempts", sh->starvation)) ||
	    (rc = hb_json_add_u64(obj, "predicted_dispatched", sh->dispatched_predicted)) ||
	    (rc = hb_json_add_u64(obj, "predicted_reads_completed", sh->n_reads)) ||
	    (rc = hb_json_add_u64(obj, "wants_scored", scored)) || (rc = hb_json_add_u64(obj, "wants_predicted", predicted)) ||
	    (rc = hb_json_add_u64(obj, "wants_predicted_timely", timely)) ||
	    (rc = hb_json_add_u64(obj, "predicted_late", late)))
		return rc;
	if (predicted) {
		cJSON_AddNumberToObject(obj, "predicted_slack_min_ns", (double)smin);
		cJSON_AddNumberToObject(obj, "predicted_slack_mean_ns", ssum / (double)predicted);
	} else {
		cJSON_AddNullToObject(obj, "predicted_slack_min_ns");
		cJSON_AddNullToObject(obj, "predicted_slack_mean_ns");
	}
	return sh->nomem ? HB_ERR_NOMEM : HB_OK;
}
