/*
 * hb_stream_expert.c: weight views of a leased record (hb_stream_expert.h).
 */
#include "hb_base.h"
#include "hb_stream_expert.h"
#include "hb_stream_int.h"

int hb_xs_expert_views(const struct hb_xs *s, const struct hb_xs_lease *l, struct hb_wmat *gate,
		       struct hb_wmat *up, struct hb_wmat *down, struct hb_error *err)
{
	const struct hb_em_layer *ly;
	struct hb_wmat *w[HB_EM_ROLES] = {gate, up, down};
	enum hb_wtype type;

	if (!l->id || !l->record || l->layer >= s->layers)
		return hb_error_set(err, HB_ERR_INVALID, "expert_cache.lease", "the lease is not held");
	ly = &s->em.layers[l->layer];
	type = s->em.codec->id == HB_EM_CODEC_AFFINE4_G64 ? HB_W_AFFINE4_G64 : HB_W_BF16;
	for (int k = 0; k < HB_EM_ROLES; k++) {
		const struct hb_em_component *c = &ly->comp[k];
		w[k]->data = l->record + c->record_offset;
		w[k]->type = type;
		w[k]->cols = c->dim[0];
		w[k]->rows = c->dim[1];
		w[k]->row_bytes = c->expert_bytes / c->dim[1];
	}
	return HB_OK;
}
