/*
 * hb-replay/engine.c: the CPU reference session (libkern/graph/hb_session)
 * as the labeller's struct hb_replay_engine: begin opens a session for a
 * sequence, forward runs a chunk as prefill and hands each position's
 * routes (and, with --capture-hidden, the chosen layers' outputs) to the
 * labeller's callbacks.
 */
#include "hb_base.h"
#include "hb_replay_cli.h"

static void observe(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct replay_eng *e = ctx;

	if (e->rc)
		return;
	if (kind == HB_OBS_ROUTES) {
		e->k = n < 64 ? n : 64;
		memcpy(e->ids, data, e->k * sizeof(int32_t));
	} else if (kind == HB_OBS_ROUTE_WEIGHTS) {
		e->rc = e->emit(e->emit_ctx, (uint32_t)layer, pos, e->ids, data, e->k);
	} else if (kind == HB_OBS_HIDDEN && e->hidden && layer >= 0) {
		e->rc = e->hidden(e->emit_ctx, (uint32_t)layer, pos, data, n);
	} else if ((kind == HB_OBS_PRE_ATTN || kind == HB_OBS_PRE_MOE) && e->taps) {
		hb_taps_observe(e->taps, kind, layer, pos, data);
	}
}

/* what observe takes (a device runs whole chunks only for routes alone) */
static uint32_t eng_kinds(const struct replay_eng *e, bool hidden)
{
	uint32_t k = 1u << HB_OBS_ROUTES | 1u << HB_OBS_ROUTE_WEIGHTS;

	if (hidden)
		k |= 1u << HB_OBS_HIDDEN;
	if (e->taps)
		k |= 1u << HB_OBS_PRE_ATTN | 1u << HB_OBS_PRE_MOE;
	return k;
}

int replay_eng_begin(void *ctx, uint64_t max_tokens, struct hb_error *err)
{
	struct replay_eng *e = ctx;

	e->left = max_tokens;
	return replay_session_fit(&e->s, e->m, e->pool, max_tokens, err);
}

int replay_session_fit(struct hb_session **s, const struct hb_model *m, struct hb_pool *pool, uint64_t max_tokens,
		       struct hb_error *err)
{
	/* the last sequence's session, reset, when it is large enough: its
	 * caches and chunk workspace are already faulted in, where a new
	 * session's would be faulted in again by its first chunks (a replay
	 * of many short transcripts paid that for every one).  Replay never
	 * sets a first position, so a reset session starts at 0 as a new one
	 * does. */
	if (*s && hb_session_capacity(*s) >= max_tokens)
		return hb_session_reset(*s, err);
	hb_session_free(*s);
	*s = NULL;
	return hb_session_create(m, pool, max_tokens, s, err);
}

int replay_eng_prepare(struct replay_eng *e, const struct hb_transcripts *ts, const struct cli *c,
		       struct hb_error *err)
{
	uint64_t longest = 0;
	int rc;

	for (size_t i = (size_t)c->shard_i; i < ts->n; i += (size_t)c->shard_n)
		if (ts->t[i].n_tokens > longest)
			longest = ts->t[i].n_tokens;
	if (!longest)
		return HB_OK;
	if ((rc = replay_eng_begin(e, longest, err)))
		return rc;
	if (c->backend != HB_BACKEND_CPU) /* a device run's chunks use the device's memory */
		return HB_OK;
	return hb_session_reserve(e->s, c->chunk < longest ? (size_t)c->chunk : (size_t)longest, err);
}

/* the transcript's last chunk: its state after it is never read (a
 * device then leaves it where it is: hb_session_final) */
static void note_chunk(struct replay_eng *e, size_t n)
{
	if (n >= e->left)
		hb_session_final(e->s);
	e->left = n >= e->left ? 0 : e->left - n;
}

int replay_eng_forward(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit, void *emit_ctx,
		       struct hb_error *err)
{
	struct replay_eng *e = ctx;
	int rc;

	e->emit = emit;
	e->hidden = NULL;
	e->emit_ctx = emit_ctx;
	e->rc = 0;
	hb_session_observe_only(e->s, eng_kinds(e, false));
	note_chunk(e, n);
	rc = hb_session_forward(e->s, tokens, n, NULL, observe, e, err);
	if (!rc && e->rc)
		rc = hb_error_set(err, HB_ERR_INTERNAL, "labels", "a route could not be recorded");
	if (!rc && e->taps)
		rc = hb_taps_chunk_done(e->taps, err);
	return rc;
}

int replay_eng_forward_hidden(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit,
			      hb_replay_hidden_fn hidden, void *emit_ctx, struct hb_error *err)
{
	struct replay_eng *e = ctx;
	int rc;

	e->emit = emit;
	e->hidden = hidden;
	e->emit_ctx = emit_ctx;
	e->rc = 0;
	hb_session_observe_only(e->s, eng_kinds(e, true));
	note_chunk(e, n);
	rc = hb_session_forward(e->s, tokens, n, NULL, observe, e, err);
	e->hidden = NULL;
	if (!rc && e->rc)
		rc = hb_error_set(err, HB_ERR_INTERNAL, "labels", "a route or hidden state could not be recorded");
	if (!rc && e->taps)
		rc = hb_taps_chunk_done(e->taps, err);
	return rc;
}
