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
	HB_OBS_PRE_ATTN,     /* float[H]: the hyper-connection input mix a layer's attention/GDN reads */
	HB_OBS_PRE_MOE,      /* float[H]: the mix after attention that the layer's router reads */
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
	uint64_t ple_pages_read;         /* the pages those rows lay on: a read and a SHA-256 each */
};

struct hb_session;

/*
 * The kinds of observation the caller's observer takes (bits 1 << kind),
 * every kind until it is called: a device backend runs a whole chunk only
 * when the observer takes no kind that such a chunk cannot give (it gives
 * routes, route weights and logits; hb_dev_chunk.h).  What the observer
 * sees of those kinds does not change.
 */
void hb_session_observe_only(struct hb_session *s, uint32_t kinds);

/*
 * The next chunk (hb_session_forward or a batch's) is the session's last:
 * its state after that chunk is never wanted (a replay's window ends), so
 * a device that runs the chunk does not copy the state back to the host.
 * Once that chunk is published the session is spent: forward, batches,
 * verify, rewind, fork and save refuse it ("session-spent"), its digest is
 * 32 bytes of 0xff (no state to digest), and reset makes it empty and
 * usable again.  A chunk that fails leaves the request for the next one.
 */
void hb_session_final(struct hb_session *s);
bool hb_session_spent(const struct hb_session *s);

/* max_tokens bounds the caches (allocated once, never per token). */
int hb_session_create(const struct hb_model *m, struct hb_pool *pool, uint64_t max_tokens,
		      struct hb_session **out, struct hb_error *err);
void hb_session_free(struct hb_session *s);
/* the max_tokens it was created with: a reset session takes any sequence
 * of at most this many tokens, with its caches and workspace already in */
uint64_t hb_session_capacity(const struct hb_session *s);

/*
 * Size the chunk workspace for chunks of up to T tokens (at most the
 * capacity) and write every page of it once, now: a chunk allocates what
 * it lacks itself, but then pays the allocation and the first touch of
 * each page inside its own run (the first prompt, timed by hb-run), and
 * learns of an allocation failure only there.  Changes no state and no
 * result; on HB_ERR_NOMEM the session is as it was, with no workspace.
 */
int hb_session_reserve(struct hb_session *s, size_t T, struct hb_error *err);

/*
 * Run tokens[0..T) as the next chunk of the sequence (AFN-010: one
 * transaction).  The chunk works on a private copy of every mutable owner
 * and publishes with one index flip only after every stage succeeded and
 * every published value is finite; on any failure the public state (its
 * digest), the frontier and the caller's logits buffer are exactly as
 * before.  logits (may be NULL) receives T rows of vocab_physical floats.
 */
int hb_session_forward(struct hb_session *s, const int32_t *tokens, size_t T, float *logits,
		       hb_observe_fn obs, void *obs_ctx, struct hb_error *err);

/*
 * hb_session_forward with the logits of the chunk's last position only,
 * into last (vocab_physical floats, not NULL): a prompt that only its
 * next token is sampled from does not pay the vocabulary projection of
 * every row.  The row is the one hb_session_forward gives (the products
 * give a row the same bits whatever the chunk's length), and observers see
 * HB_OBS_LOGITS for that position alone.
 */
int hb_session_forward_last(struct hb_session *s, const int32_t *tokens, size_t T, float *last,
			    hb_observe_fn obs, void *obs_ctx, struct hb_error *err);

/*
 * hb_session_forward for n distinct sessions of one model at once: session
 * i runs tokens[i][0..T[i]) (T[i] > 0) as its next chunk, into logits[i]
 * (logits or logits[i] NULL: none), observed by obs with obs_ctx[i].  A
 * device backend may run the n chunks as one pass, so that its products
 * see every sequence's rows together; each session's results, observations
 * and state are those hb_session_forward would give it.  One transaction:
 * on any failure no session publishes (each is as it was); on success all
 * do.  Refused: a session twice, another model, an empty chunk
 * (session-batch).
 */
int hb_session_forward_batch(struct hb_session *const *ss, size_t n, const int32_t *const *tokens,
			     const size_t *T, float *const *logits, hb_observe_fn obs, void *const *obs_ctx,
			     struct hb_error *err);

/*
 * A verified chunk (AFN-020: target verification of a speculative block).
 * tokens[0..T) run as one chunk on the private bank; decide(ctx, rows, T)
 * sees the chunk's T logits rows and returns how many tokens to keep
 * (0..T).  keep == T publishes the chunk exactly as hb_session_forward
 * would; keep < T rolls the rejected suffix back by discarding the chunk
 * whole (GDN and PLE states, QSA rows past the frontier, the PLE history)
 * and runs tokens[0..keep) as a chunk of their own, which equals having run
 * them alone (the partition invariance rewind relies on): a partial
 * acceptance costs that prefix twice.  logits receives the verified
 * chunk's T rows either way; *kept the tokens published.  obs sees the
 * verified chunk once.  On any failure nothing is published.
 */
typedef size_t (*hb_session_decide_fn)(void *ctx, const float *logits, size_t T);
int hb_session_verify(struct hb_session *s, const int32_t *tokens, size_t T, float *logits,
		      hb_session_decide_fn decide, void *decide_ctx, hb_observe_fn obs, void *obs_ctx,
		      size_t *kept, struct hb_error *err);

/* The next position a chunk will occupy (= base + tokens held). */
uint64_t hb_session_frontier(const struct hb_session *s);
const struct hb_session_counters *hb_session_counters(const struct hb_session *s);

/*
 * AFN-018: a sequence is one contiguous run of positions.  Its first
 * position is free (left padding, an evicted prefix): set it on an empty
 * session.  Every chunk then appends at the frontier; there is no way to
 * leave a hole.  A first position whose run of the session's capacity
 * would pass UINT64_MAX is refused (session-start-range): positions never
 * wrap.
 */
int hb_session_set_start(struct hb_session *s, uint64_t first_position, struct hb_error *err);

/* SHA-256 of every public state owner (frontier, GDN, QSA caches and
 * groups, PLE history and convolution state, the token run). */
void hb_session_digest(const struct hb_session *s, uint8_t out[32]);

/* Lifecycle.  Each builds a candidate privately and publishes it whole. */
int hb_session_reset(struct hb_session *s, struct hb_error *err);
/* Back to frontier `to` (base <= to <= frontier): replays the kept tokens
 * into a candidate, so rewind-then-replay equals never having gone further. */
int hb_session_rewind(struct hb_session *s, uint64_t to, struct hb_error *err);
int hb_session_fork(const struct hb_session *s, struct hb_session **copy, struct hb_error *err);
/* Serialise to a file (published atomically) carrying the artifact digest;
 * restore refuses another model's state ("session-model"). */
int hb_session_save(const struct hb_session *s, const char *path, struct hb_error *err);
int hb_session_restore(struct hb_session *s, const char *path, struct hb_error *err);

#endif
