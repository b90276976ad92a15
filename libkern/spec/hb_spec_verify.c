/*
 * hb_spec_verify.c: block verification and the golden replay (see
 * hb_spec_verify.h).
 *
 * Owns the acceptance rule and the order of a step (identity, position,
 * verification, comparison, cancellation); the state's rollback is the
 * target's transaction (hb_session_verify on the model), never a copy made
 * here.  Silent.
 */
#include "hb_base.h"
#include "spec/hb_spec_verify.h"

/* ------------------------------------------------------------ one block */

struct accept {
	const int32_t *proposal;
	size_t n;
	struct hb_spec_outcome *out;
	const struct hb_spec_step *record; /* replay: what the record says, or NULL */
	bool diverged;
};

static size_t accept_prefix(void *ctx, const int32_t *next, size_t n)
{
	struct accept *a = ctx;
	uint32_t k = 0;

	memcpy(a->out->next, next, n * sizeof(int32_t));
	while (k < a->n && a->proposal[k] == next[k])
		k++;
	a->out->accepted = k;
	a->out->bonus = next[k];
	/* a record the target contradicts publishes nothing */
	if (a->record && (k != a->record->accepted || next[k] != a->record->bonus)) {
		a->diverged = true;
		return 0;
	}
	return (size_t)k + 1;
}

static int verify(const struct hb_spec_target *t, int32_t pending, const int32_t *proposal, size_t n,
		  const struct hb_spec_step *record, struct hb_spec_outcome *out, bool *diverged, struct hb_error *err)
{
	int32_t chunk[HB_SPEC_MAX_BLOCK + 1];
	struct accept a = {proposal, n, out, record, false};
	size_t kept = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (n > HB_SPEC_MAX_BLOCK)
		return hb_error_set(err, HB_ERR_INVALID, "spec.block", "%zu proposed tokens, at most %u", n,
				    HB_SPEC_MAX_BLOCK);
	chunk[0] = pending;
	memcpy(chunk + 1, proposal, n * sizeof(int32_t));
	if ((rc = t->verify(t->ctx, chunk, n + 1, accept_prefix, &a, &kept, err)))
		return rc;
	*diverged = a.diverged;
	if (a.diverged)
		return kept ? hb_error_set(err, HB_ERR_INTERNAL, "spec.block", "the target kept a refused block")
			    : HB_OK;
	if (kept != (size_t)out->accepted + 1)
		return hb_error_set(err, HB_ERR_INTERNAL, "spec.block", "the target kept %zu of %u inputs", kept,
				    out->accepted + 1);
	out->committed = kept;
	return HB_OK;
}

int hb_spec_verify_block(const struct hb_spec_target *t, int32_t pending, const int32_t *proposal, size_t n,
			 struct hb_spec_outcome *out, struct hb_error *err)
{
	bool diverged;
	return verify(t, pending, proposal, n, NULL, out, &diverged, err);
}

/* ------------------------------------------------------------ golden replay */

void hb_spec_replay_init(struct hb_spec_replay *r, const struct hb_spec_target *t,
			 const struct hb_spec_expect *expect, uint64_t frontier, int32_t pending, struct hb_xs *xs)
{
	int32_t *out = r->out;
	size_t cap = r->out_cap;

	memset(r, 0, sizeof(*r));
	r->t = t, r->expect = *expect, r->frontier = frontier, r->pending = pending, r->xs = xs;
	r->out = out, r->out_cap = cap;
}

int hb_spec_replay_header(struct hb_spec_replay *r, const struct hb_spec_header *h, struct hb_error *err)
{
	return hb_spec_check_header(h, &r->expect, err);
}

int hb_spec_replay_route(struct hb_spec_replay *r, const struct hb_spec_route *rt, struct hb_error *err)
{
	int rc;

	if ((rc = hb_spec_check_route(rt, &r->expect, err)))
		return rc;
	r->routes++;
	for (uint32_t i = 0; r->xs && i < rt->n_pred; i++) {
		struct hb_xs_hint hint = {.layer = rt->layer, .expert = rt->pred[i], .prio = HB_XS_P2,
					  .confidence = rt->confidence[i], .owner = rt->ticket_owner,
					  .owner_gen = rt->ticket_generation, .token_pos = rt->position,
					  .token_mask = 1};
		struct hb_spec_ticket *tk;
		int oc;

		if (r->n_tickets == HB_SPEC_MAX_TICKETS)
			return hb_error_set(err, HB_ERR_INVALID, "route", "more than %u live tickets",
					    HB_SPEC_MAX_TICKETS);
		tk = &r->tickets[r->n_tickets];
		if ((oc = hb_xs_prefetch(r->xs, &hint, &tk->h, err)) < 0)
			return oc;
		if (oc == HB_XS_PF_ISSUED) {
			tk->position = rt->position, tk->live = true;
			r->n_tickets++, r->issued++;
		}
	}
	return HB_OK;
}

/* After a step committed [frontier, frontier + committed): the tickets of
 * the rejected suffix are cancelled (exactly once each); those of kept
 * positions stay and become ordinary cache entries. */
static int settle_tickets(struct hb_spec_replay *r, uint64_t first_rejected, uint64_t block_end,
			  struct hb_error *err)
{
	size_t w = 0;
	int rc;

	for (size_t i = 0; i < r->n_tickets; i++) {
		struct hb_spec_ticket *tk = &r->tickets[i];
		if (tk->position >= block_end) {
			r->tickets[w++] = *tk; /* a later block's prediction */
			continue;
		}
		if (tk->position >= first_rejected) {
			if ((rc = hb_xs_cancel(r->xs, &tk->h, err)) && rc != HB_ERR_INVALID)
				return rc;
			/* HB_ERR_INVALID: its read completed before the verdict; it is
			 * an ordinary cache entry and nothing publishes from it */
			if (!rc)
				r->cancelled++;
			hb_error_clear(err);
		} else {
			r->kept_tickets++;
		}
	}
	r->n_tickets = w;
	return HB_OK;
}

int hb_spec_replay_step(struct hb_spec_replay *r, const struct hb_spec_step *s, struct hb_error *err)
{
	int32_t path[HB_SPEC_MAX_BLOCK];
	struct hb_spec_outcome o;
	bool diverged;
	int rc;

	if ((rc = hb_spec_check_step(s, &r->expect, err)))
		return rc;
	if (s->position != r->frontier)
		return hb_error_diag(err, hb_spec_diag_id(HB_SPD_POSITION), HB_ERR_CONTRACT, "step.position", false, 0,
				     "position %" PRIu64 ", the verifier's frontier is %" PRIu64, s->position,
				     r->frontier);
	for (uint32_t i = 0; i < s->block; i++)
		path[i] = hb_spec_path_token(s, i);
	if ((rc = verify(r->t, r->pending, path, s->block, s, &o, &diverged, err)))
		return rc;
	if (diverged)
		return hb_error_diag(err, hb_spec_diag_id(HB_SPD_DIVERGED), HB_ERR_CONTRACT,
				     o.accepted != s->accepted ? "step.accepted" : "step.bonus", false, 0,
				     "the target accepts %u and gives bonus %d at position %" PRIu64 "; the record says "
				     "%u and %d", o.accepted, o.bonus, s->position, s->accepted, s->bonus);
	for (size_t i = 0; r->out && i < o.committed && r->n_out < r->out_cap; i++)
		r->out[r->n_out++] = i ? path[i - 1] : r->pending;
	if (r->xs && (rc = settle_tickets(r, r->frontier + 1 + o.accepted, r->frontier + 1 + s->block, err)))
		return rc;
	r->steps++;
	r->accepted += o.accepted;
	r->committed += o.committed;
	if (!o.accepted)
		r->zero++;
	else if (o.accepted == s->block)
		r->full++;
	else
		r->partial++;
	r->frontier += o.committed;
	r->pending = o.bonus;
	return HB_OK;
}

int hb_spec_replay_record(void *ctx, const struct hb_spec_header *h, const struct hb_spec_step *step,
			  const struct hb_spec_route *route)
{
	struct hb_spec_replay_read *rr = ctx;

	if (!rr->header_checked) {
		if (hb_spec_replay_header(rr->r, h, &rr->err))
			return 1;
		rr->header_checked = true;
	}
	if (step ? hb_spec_replay_step(rr->r, step, &rr->err) : hb_spec_replay_route(rr->r, route, &rr->err))
		return 1;
	return 0;
}

/* ------------------------------------------------------------ on the model */

static size_t session_decide(void *ctx, const float *logits, size_t T)
{
	struct hb_spec_session *ss = ctx;

	/* greedy over the sampleable ids, by the sampler's own rule (the
	 * first maximum), so that verification chooses what plain decoding
	 * chooses */
	for (size_t t = 0; t < T; t++)
		ss->next[t] = hb_sampler_next(&ss->greedy, logits + t * ss->vocab, ss->semantic);
	return ss->keep(ss->keep_ctx, ss->next, T);
}

static int session_verify(void *ctx, const int32_t *tokens, size_t n, hb_spec_keep_fn keep, void *keep_ctx,
			  size_t *kept, struct hb_error *err)
{
	struct hb_spec_session *ss = ctx;

	ss->keep = keep, ss->keep_ctx = keep_ctx;
	return hb_session_verify(ss->s, tokens, n, ss->logits, session_decide, ss, ss->observe, ss->observe_ctx,
				 kept, err);
}

int hb_spec_session_init(struct hb_spec_session *ss, const struct hb_model *m, struct hb_session *s,
			 struct hb_spec_target *t, struct hb_error *err)
{
	int rc;

	memset(ss, 0, sizeof(*ss));
	ss->s = s;
	ss->vocab = m->vocab_physical;
	ss->semantic = (size_t)m->vocab_semantic;
	if ((rc = hb_sampler_init(&ss->greedy, true, 1, 0, 1, 0, ss->semantic, err)))
		return rc;
	ss->logits = malloc((HB_SPEC_MAX_BLOCK + 1) * (size_t)m->vocab_physical * sizeof(float));
	if (!ss->logits)
		return hb_error_set(err, HB_ERR_NOMEM, "spec", "out of memory");
	t->verify = session_verify;
	t->ctx = ss;
	return HB_OK;
}

void hb_spec_session_release(struct hb_spec_session *ss)
{
	free(ss->logits);
	ss->logits = NULL;
	hb_sampler_release(&ss->greedy);
}
