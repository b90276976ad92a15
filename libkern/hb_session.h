/*
 * hb_session.h: one sequence's state and the Qwen4Exp forward pass.
 *
 * A session owns everything a sequence accumulates: the frontier, every
 * Gated DeltaNet convolution and recurrent state, every QSA key/value and
 * raw index-key cache with its pooled groups, and the PLE n-gram history
 * and dilated-convolution state.  hb_session_forward runs T tokens as one
 * causal chunk (T == 1 is a decode step); the arithmetic per token is the
 * same whatever T is.
 *
 * Observers see what upstream's oracle records (hidden states, routes, QSA
 * selections, PLE rows, logits) as they are computed.
 */
#ifndef HB_SESSION_H
#define HB_SESSION_H

#include "hb_base.h"
#include "hb_err.h"
#include "hb_model.h"
#include "hb_pool.h"

enum hb_observe {
	HB_OBS_HIDDEN = 1,   /* float[hc*H]: a layer's output streams */
	HB_OBS_ROUTES,       /* int32 ids[k] in rank order (n = k) */
	HB_OBS_ROUTE_WEIGHTS,/* float weights[k], renormalised, aligned with the ids */
	HB_OBS_QSA,          /* int32 selected token positions (n = count), chronological */
	HB_OBS_PLE_ROWS,     /* int64 row ids inside the layer's table (n = heads) */
	HB_OBS_LOGITS,       /* float[vocab_physical] */
};

/* layer: decoder layer (0-based) or -1; pos: absolute position of the token. */
typedef void (*hb_observe_fn)(void *ctx, enum hb_observe kind, int32_t layer,
			      uint64_t pos, const void *data, size_t n);

struct hb_session_counters {
	uint64_t tokens;
	uint64_t qsa_keys_attended;      /* selected rows gathered, all queries */
	uint64_t qsa_groups_scored;
	uint64_t dense_mask_bytes;       /* must stay 0: no dense q x k mask (AFN-016) */
	uint64_t expert_evaluations;
	uint64_t ple_rows_read;
};

struct hb_session;

/* max_tokens bounds the caches (allocated once, never per token). */
int hb_session_create(const struct hb_model *m, struct hb_pool *pool, uint64_t max_tokens,
		      struct hb_session **out, struct hb_error *err);
void hb_session_free(struct hb_session *s);

/*
 * Run tokens[0..T) as the next chunk of the sequence.  logits (may be NULL)
 * receives T rows of vocab_physical floats.  Inputs are checked before
 * any state changes (a token outside the vocabulary, the context full:
 * the session is untouched).  A failure after that (a PLE page that does
 * not verify) POISONS the session: every later call fails with
 * "session-poisoned" until it is freed; whole-chunk transactions that
 * publish only complete chunks are the state issue's work (AFN-010).
 */
int hb_session_forward(struct hb_session *s, const int32_t *tokens, size_t T, float *logits,
		       hb_observe_fn obs, void *obs_ctx, struct hb_error *err);

uint64_t hb_session_frontier(const struct hb_session *s);
const struct hb_session_counters *hb_session_counters(const struct hb_session *s);

#endif
