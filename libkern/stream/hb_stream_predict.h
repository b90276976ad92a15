/*
 * hb_stream_predict.h: the predictors that feed P1/P2 (AFN-019 H2), as
 * hints only: they choose which bytes move early, never which experts run
 * (the native router's top-k always executes; tests/unit/test_stream_expert.c
 * shows the output does not change with predictions on).
 *
 *   none          no hints.
 *   previous      the previous token's same-layer route (the zero-training
 *                 control of AFN-019's ladder, step 1): when token t's
 *                 router has chosen layer L's experts, they are hinted as P2
 *                 for token t + 1's layer L.
 *   router-ahead  layer L+1's router applied to layer L's post-attention
 *                 hidden state (step 2): the caller (the graph) computes
 *                 those probabilities with hb_matmul and softmax, since only
 *                 it has the state; this file turns them into P1 hints, the
 *                 most probable first, with the probability as confidence.
 * The graph wiring is described in hb_stream.h.
 */
#ifndef HB_STREAM_PREDICT_H
#define HB_STREAM_PREDICT_H

#include "hb_base.h"
#include "hb_err.h"
#include "hb_stream.h"

enum hb_xs_predictor { HB_XS_PRED_NONE = 0, HB_XS_PRED_PREV_TOKEN = 1, HB_XS_PRED_ROUTER_AHEAD = 2 };

/* "none", "previous", "router-ahead" (field "predictor" on refusal). */
int hb_xs_predictor_parse(const char *name, enum hb_xs_predictor *out, struct hb_error *err);
const char *hb_xs_predictor_name(enum hb_xs_predictor p);

/* The last route of every layer: layers x k ids, -1 until recorded. */
struct hb_xs_prev {
	uint32_t layers, k;
	int32_t *ids;
};
int hb_xs_prev_init(struct hb_xs_prev *p, uint32_t layers, uint32_t k, struct hb_error *err);
void hb_xs_prev_release(struct hb_xs_prev *p);
/* Token t's route at layer (k ids, rank order): hint it as P2 for token t + 1,
 * then keep it.  Returns the hints issued (HB_XS_PF_ISSUED or JOINED). */
size_t hb_xs_prev_route(struct hb_xs *s, struct hb_xs_prev *p, uint32_t layer, uint64_t token,
			const int32_t *ids);

/*
 * Router-ahead: probs[0..experts) is layer's router distribution computed
 * early; hint its n most probable experts (ties to the lower id) whose
 * probability is at least min_conf, as P1 for token, confidence = the
 * probability.  Returns the hints issued or joined.
 */
size_t hb_xs_router_ahead(struct hb_xs *s, uint32_t layer, uint64_t token, const float *probs,
			  uint32_t experts, uint32_t n, float min_conf);

#endif
