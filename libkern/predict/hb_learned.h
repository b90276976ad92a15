/*
 * hb_learned.h: AFN-021 Gate 5, shadow I/O: a predictor checkpoint
 * (libstore/predict) in the streaming runtime, and the accounting of what
 * any predictor's discardable reads did.
 *
 *   learned   at each layer's pre-attention tap (HB_OBS_PRE_ATTN, before
 *             its attention or GDN runs) the state is projected with the
 *             checkpoint's own seeded projection, scored, and the top_k
 *             best experts are hinted to the engine as P1 tickets for that
 *             token and layer (hb_xs_prefetch), confidence min(1, top_k x
 *             softmax).  The checkpoint is refused, field by field (the
 *             predictor- diagnostics of hb_predict.h), unless it was
 *             trained on features of this artifact, tokenizer digest,
 *             projection (seed, digest, widths, the pre-attention tap) and
 *             geometry (layers, experts, top-k), and, when the run names a
 *             thread, unless that thread is none it trained on.  The
 *             native router still selects every executed expert: a hint
 *             only moves bytes.
 *   shadow    an hb_xs_observe_fn that counts P0 starvation attempts (a
 *             P1/P2 read dispatched while a P0 read waited in the queue:
 *             the engine's discipline makes it 0) and keeps each completed
 *             predicted read; with the routes the session names (and when),
 *             it gives the predicted reads' deadline slack (the router's
 *             need time minus the read's ready time) and how many exact
 *             wants a prediction for their token had made ready in time.
 * Silent.
 */
#ifndef HB_LEARNED_H
#define HB_LEARNED_H

#include "hb_base.h"
#include "hb_err.h"
#include "graph/hb_model.h"
#include "graph/hb_session.h"
#include "predict/hb_predict.h"
#include "stream/hb_stream.h"

#include <cJSON.h>
#include <pthread.h>

struct hb_learned {
	struct hb_predictor p;
	struct hb_xs *xs;
	float *P, *x, *z, *scores;
	uint32_t *idx;
	uint32_t H, n;
	uint64_t hints, issued, rejected, compute_ns;
};

/* Load path and check it against m (text: the run's tokenizer/template
 * digest; thread: the run's thread when has_thread).  hints go to m->xs. */
int hb_learned_open(struct hb_learned *lp, const char *path, const struct hb_model *m, const uint8_t text[32],
		    bool has_thread, uint64_t thread, struct hb_error *err);
void hb_learned_observe(struct hb_learned *lp, enum hb_observe kind, int32_t layer, uint64_t pos,
			const void *data);
void hb_learned_release(struct hb_learned *lp);

struct hb_shadow_read {
	uint64_t token, ready_ns;
	uint32_t layer, expert;
};
struct hb_shadow_want {
	uint64_t token, need_ns;
	uint32_t layer, k;
	uint32_t ids[64];
};

struct hb_shadow {
	pthread_mutex_t mu;
	uint64_t queued_p0, starvation, dispatched_predicted;
	struct hb_shadow_read *reads;
	size_t n_reads, cap_reads;
	struct hb_shadow_want *wants;
	size_t n_wants, cap_wants;
	uint64_t from_token;       /* wants of earlier tokens (the prompt) are not scored */
	bool nomem;
};
void hb_shadow_init(struct hb_shadow *sh);
void hb_shadow_release(struct hb_shadow *sh);
/* The engine's observer (ctx: the struct hb_shadow). */
void hb_shadow_ticket(void *ctx, enum hb_xs_event ev, const struct hb_xs_ticket *t);
/* The session's routes event: token pos's top-k at layer, named now. */
void hb_shadow_route(struct hb_shadow *sh, uint32_t layer, uint64_t pos, const int32_t *ids, size_t k);
/* {"p0_starvation_attempts", "predicted_reads_completed", "wants_scored",
 * "wants_predicted", "wants_predicted_timely", "predicted_slack_min_ns",
 * "predicted_slack_mean_ns", "predicted_late"} as members of obj. */
int hb_shadow_json(struct hb_shadow *sh, cJSON *obj);

#endif
