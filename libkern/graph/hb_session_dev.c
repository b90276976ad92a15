/*
 * hb_session_dev.c: chunks handed whole to a device backend's graph
 * (hb_dev_chunk.h), where one is installed and takes them: one session's
 * (hb_session_forward) or several sessions' as one pass
 * (hb_session_forward_batch).
 *
 * What stays here: the PLE rows, read through the verified page API on the
 * host as the host graph reads them; the observations, made after the
 * device's run in the host graph's order for the kinds a device chunk
 * carries (routes and their weights; logits at publication); the counters.
 * A caller whose observer wants any other kind (hidden states, taps, QSA
 * selections, PLE rows) keeps the host graph, as does a streamed model
 * (its experts live only while leased) and a session with a test fault seam
 * (whose stages the device does not pass through).
 */
#include "hb_base.h"
#include "backend/hb_backend.h"
#include "hb_dev_chunk.h"
#include "hb_session_int.h"
#include "math/hb_math.h"

#include <stdlib.h>
#include <string.h>

#define DEV_KINDS (1u << HB_OBS_ROUTES | 1u << HB_OBS_ROUTE_WEIGHTS | 1u << HB_OBS_LOGITS)

void hb_session_observe_only(struct hb_session *s, uint32_t kinds)
{
	s->obs_kinds = kinds;
}

void hb_session_dev_free(struct hb_session *s)
{
	free(s->dev_layers), free(s->dev_emb), free(s->dev_ids), free(s->dev_w);
	s->dev_layers = NULL, s->dev_emb = NULL, s->dev_ids = NULL, s->dev_w = NULL;
	s->dev_T = 0;
}

/* buffers for chunks of up to T tokens (grown, never per token) */
static int dev_reserve(struct hb_session *s, size_t T, struct hb_error *err)
{
	const struct hb_qwen_config *c = &s->m->cfg;
	size_t L = (size_t)c->num_layers, k = (size_t)c->num_experts_per_tok, nple = 0;

	if (T <= s->dev_T)
		return HB_OK;
	for (size_t l = 0; l < L; l++)
		nple += s->m->layers[l].has_ple;
	hb_session_dev_free(s);
	s->dev_layers = calloc(L, sizeof(*s->dev_layers));
	s->dev_emb = malloc((nple * T * (size_t)c->ple_embed_dim + 1) * sizeof(float));
	s->dev_ids = malloc(L * T * k * sizeof(int32_t));
	s->dev_w = malloc(L * T * k * sizeof(float));
	if (!s->dev_layers || !s->dev_emb || !s->dev_ids || !s->dev_w) {
		hb_session_dev_free(s);
		return hb_error_set(err, HB_ERR_NOMEM, "session", "cannot allocate a %zu-token device chunk", T);
	}
	s->dev_T = T;
	return HB_OK;
}

static bool dev_wanted(const struct hb_session *s, hb_observe_fn obs)
{
	const struct hb_device_ops *dev = hb_backend_device();

	return dev && dev->chunk && !s->m->xs && !s->fault && (!obs || !(s->obs_kinds & ~DEV_KINDS));
}

/* s's open chunk as the device's descriptor, its PLE rows read */
static int marshal(struct hb_session *s, const int32_t *tokens, size_t T, struct hb_dev_chunk *dc,
		   struct hb_error *err)
{
	const struct hb_model *m = s->m;
	size_t L = (size_t)m->cfg.num_layers, P = (size_t)m->cfg.ple_embed_dim, e = 0;
	const struct hb_bank *pub = &s->bank[s->pub];
	int rc;

	if ((rc = dev_reserve(s, T, err)))
		return rc;
	for (size_t l = 0; l < L; l++) {
		struct hb_dev_layer *d = &s->dev_layers[l];
		memset(d, 0, sizeof(*d));
		d->gdn_conv_from = pub->gdn[l].conv, d->gdn_S_from = pub->gdn[l].S;
		d->gdn_conv = s->gdn[l].conv, d->gdn_S = s->gdn[l].S;
		d->ple_conv_from = pub->ple[l].conv, d->ple_conv = s->ple[l].conv;
		d->qsa_k = s->qsa[l].k, d->qsa_v = s->qsa[l].v, d->qsa_raw = s->qsa[l].raw;
		d->qsa_pooled = s->qsa[l].pooled;
		d->groups_from = pub->groups[l], d->groups = &s->groups[l];
	}
	/* the PLE rows, every PLE layer's, through the verified pages */
	for (uint32_t l = 0; l < L; l++)
		if (m->layers[l].has_ple) {
			if ((rc = hb_ple_rows(s, l, tokens, T, s->dev_emb + e * T * P, NULL, NULL, err)))
				return rc;
			e++;
		}
	s->dev_epoch = hb_session_new_epoch();
	s->dev_kept = !s->final_next;
	*dc = (struct hb_dev_chunk){ m, tokens, T, s->pos, s->base, s->cap, s->epoch, s->dev_epoch, s->dev_layers,
				     s->dev_emb, hb_expf_table, s->dev_kept, s->want_logits ? s->out_logits : NULL,
				     s->dev_ids, s->dev_w, false };
	return HB_OK;
}

/* after the device's run: the history, the observations and counters of
 * the host graph, in its order */
static void settle(struct hb_session *s, const int32_t *tokens, size_t T, hb_observe_fn obs, void *ctx, bool finite)
{
	const struct hb_qwen_config *c = &s->m->cfg;
	size_t L = (size_t)c->num_layers, k = (size_t)c->num_experts_per_tok;
	size_t ratio = (size_t)(c->qsa ? c->indexer_compress_ratio : 1);
	const struct hb_bank *pub = &s->bank[s->pub];

	for (uint32_t l = 0; l < L; l++)
		if (s->m->layers[l].has_ple)
			hb_ple_history(s, l, tokens, T);
	for (size_t l = 0; obs && l < L; l++)
		for (size_t t = 0; t < T; t++) {
			obs(ctx, HB_OBS_ROUTES, (int32_t)l, s->pos + t, s->dev_ids + (l * T + t) * k, k);
			obs(ctx, HB_OBS_ROUTE_WEIGHTS, (int32_t)l, s->pos + t, s->dev_w + (l * T + t) * k, k);
		}
	s->ctr.expert_evaluations += L * T * k;
	for (size_t l = 0; l < L; l++) {
		uint64_t groups = pub->groups[l];
		if (c->layer_kind[l] != HB_LAYER_SPARSE)
			continue;
		for (size_t t = 0; t < T; t++) {
			uint64_t visible = s->pos + t - s->base + 1, keep = c->indexer_budget / ratio;
			groups += visible % ratio == 0;
			s->ctr.qsa_groups_scored += groups;
			s->ctr.qsa_keys_attended += (groups < keep ? groups : keep) * ratio + (visible - groups * ratio);
		}
	}
	s->dev_finite = finite;
}

/*
 * Run the n sessions' open chunks on the device as one pass.  Returns
 * false when no device takes them (nothing changed: the caller runs the
 * host graph); else true with *rc the pass's result.  On success each
 * private bank, the caches' new rows and out_logits hold its chunk's
 * values, and dev_finite says whether every value the device kept to
 * itself was finite.
 */
bool hb_session_dev_chunks(struct hb_session *const *ss, size_t n, const int32_t *const *tokens, const size_t *T,
			   hb_observe_fn obs, void *const *ctx, int *rc, struct hb_error *err)
{
	struct hb_session_counters *was;
	struct hb_dev_chunk *dc;
	bool taken;

	for (size_t i = 0; i < n; i++)
		if (!dev_wanted(ss[i], obs))
			return false;
	dc = calloc(n, sizeof(*dc));
	was = calloc(n, sizeof(*was));
	if (!dc || !was) {
		free(dc), free(was);
		*rc = hb_error_set(err, HB_ERR_NOMEM, "session", "out of memory");
		return true;
	}
	*rc = HB_OK;
	for (size_t i = 0; i < n && !*rc; i++) {
		was[i] = ss[i]->ctr;
		*rc = marshal(ss[i], tokens[i], T[i], &dc[i], err);
	}
	taken = *rc || hb_backend_device()->chunk(dc, n);
	if (!taken) /* declined: the host graph reads the PLE rows again and counts them */
		for (size_t i = 0; i < n; i++)
			ss[i]->ctr = was[i];
	for (size_t i = 0; taken && !*rc && i < n; i++)
		settle(ss[i], tokens[i], T[i], obs, ctx ? ctx[i] : NULL, dc[i].finite);
	free(dc), free(was);
	return taken;
}
