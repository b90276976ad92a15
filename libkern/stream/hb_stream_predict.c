/*
 * hb_stream_predict.c: previous-route and router-ahead hints (hb_stream_predict.h).
 */
#include "hb_base.h"
#include "hb_stream_predict.h"

#include <math.h>

static const char *const names[] = {"none", "previous", "router-ahead"};

int hb_xs_predictor_parse(const char *name, enum hb_xs_predictor *out, struct hb_error *err)
{
	for (size_t i = 0; i < HB_ARRAY_LEN(names); i++)
		if (!strcmp(name, names[i])) {
			*out = (enum hb_xs_predictor)i;
			return HB_OK;
		}
	return hb_error_set(err, HB_ERR_INVALID, "predictor",
			    "'%s' is not a predictor (none, previous, router-ahead)", name);
}

const char *hb_xs_predictor_name(enum hb_xs_predictor p)
{
	return (unsigned)p < HB_ARRAY_LEN(names) ? names[p] : "unknown";
}

int hb_xs_prev_init(struct hb_xs_prev *p, uint32_t layers, uint32_t k, struct hb_error *err)
{
	p->layers = layers;
	p->k = k;
	p->ids = malloc((size_t)layers * k * sizeof(*p->ids));
	if (!p->ids)
		return hb_error_set(err, HB_ERR_NOMEM, "predictor", "out of memory");
	for (size_t i = 0; i < (size_t)layers * k; i++)
		p->ids[i] = -1;
	return HB_OK;
}

void hb_xs_prev_release(struct hb_xs_prev *p)
{
	free(p->ids);
	p->ids = NULL;
}

static bool issued(int rc)
{
	return rc == HB_XS_PF_ISSUED || rc == HB_XS_PF_JOINED;
}

size_t hb_xs_prev_route(struct hb_xs *s, struct hb_xs_prev *p, uint32_t layer, uint64_t token,
			const int32_t *ids)
{
	size_t n = 0;

	if (layer >= p->layers)
		return 0;
	for (uint32_t r = 0; r < p->k; r++) {
		struct hb_xs_hint h = {.layer = layer, .prio = HB_XS_P2, .token_pos = token + 1,
				       .phase = HB_XS_PHASE_DECODE};
		if (ids[r] < 0)
			continue;
		h.expert = (uint32_t)ids[r];
		/* rank r of k: a plain prior, not a calibrated probability */
		h.confidence = (float)(p->k - r) / (float)(p->k + 1);
		n += issued(hb_xs_prefetch(s, &h, NULL, NULL));
	}
	memcpy(p->ids + (size_t)layer * p->k, ids, p->k * sizeof(*ids));
	return n;
}

size_t hb_xs_router_ahead(struct hb_xs *s, uint32_t layer, uint64_t token, const float *probs,
			  uint32_t experts, uint32_t n, float min_conf)
{
	uint64_t taken[HB_EM_MAX_EXPERTS / 64] = {0};
	size_t hinted = 0;

	if (experts > HB_EM_MAX_EXPERTS)
		return 0;
	for (uint32_t r = 0; r < n && r < experts; r++) {
		int32_t best = -1;
		struct hb_xs_hint h = {.layer = layer, .prio = HB_XS_P1, .token_pos = token,
				       .phase = HB_XS_PHASE_DECODE};
		for (uint32_t e = 0; e < experts; e++)
			if (!(taken[e / 64] >> (e % 64) & 1) && isfinite(probs[e]) &&
			    (best < 0 || probs[e] > probs[best]))
				best = (int32_t)e;
		if (best < 0 || !(probs[best] >= min_conf))
			break;
		taken[best / 64] |= 1ull << (best % 64);
		h.expert = (uint32_t)best;
		h.confidence = probs[best] > 1 ? 1 : probs[best];
		hinted += issued(hb_xs_prefetch(s, &h, NULL, NULL));
	}
	return hinted;
}
