/*
 * hb_spec_verify.h: the speculative-decoding protocol (AFN-020), without a
 * drafter: block verification against the target, the accepted prefix and
 * bonus token, rollback of the rejected suffix, cancellation of its
 * speculative expert tickets, and the golden replay of recorded steps
 * (libstore/trace/hb_spec.h) against a target.
 *
 * The target is an interface (struct hb_spec_target), so the same protocol
 * runs model-free (a scripted table in the tests) and on the model
 * (hb_spec_session_target: a session's verified chunks, hb_session_verify).
 * The target alone decides: it computes its greedy token after every input
 * of the chunk; the proposal only says what to compare with.  The
 * verifier mode is greedy by contract: a draft that declares any other
 * mode is refused at the gate (hb-admit --draft, draft-verifier).
 *
 * A block of n proposed tokens is verified as one chunk of n + 1 inputs:
 * the pending token (the previous bonus, not yet in the state) and the
 * proposal.  With next[i] the target's token after input i, the accepted
 * prefix is the longest a with proposal[i] == next[i] for i < a, the bonus
 * is next[a], and the first a + 1 inputs are committed; the rest is rolled
 * back by the target's transaction.  A verifier block of B inputs thus
 * carries B - 1 proposed tokens and commits between 1 and B tokens.
 */
#ifndef HB_SPEC_VERIFY_H
#define HB_SPEC_VERIFY_H

#include "hb_base.h"
#include "hb_err.h"
#include "graph/hb_session.h"
#include "sampler/hb_sampler.h"
#include "stream/hb_stream.h"
#include "trace/hb_spec.h"

/* Given the target's next token after each of the n inputs, how many to keep. */
typedef size_t (*hb_spec_keep_fn)(void *ctx, const int32_t *next, size_t n);

struct hb_spec_target {
	/* Run tokens[0..n) as one transaction at the target's frontier, call
	 * keep with the target's greedy next tokens, and publish exactly the
	 * kept prefix (nothing on failure).  *kept: what was published. */
	int (*verify)(void *ctx, const int32_t *tokens, size_t n, hb_spec_keep_fn keep, void *keep_ctx,
		      size_t *kept, struct hb_error *err);
	void *ctx;
};

struct hb_spec_outcome {
	uint32_t accepted;      /* proposed tokens accepted, 0..n */
	int32_t bonus;          /* the target's token after the accepted prefix */
	size_t committed;       /* inputs published: accepted + 1 */
	int32_t next[HB_SPEC_MAX_BLOCK + 1];
};

/* Verify proposal[0..n) after pending (n <= HB_SPEC_MAX_BLOCK; n == 0 is a
 * plain decode step). */
int hb_spec_verify_block(const struct hb_spec_target *t, int32_t pending, const int32_t *proposal, size_t n,
			 struct hb_spec_outcome *out, struct hb_error *err);

/* ------------------------------------------------------------ golden replay */

#define HB_SPEC_MAX_TICKETS 1024u

struct hb_spec_ticket {
	uint64_t position;      /* the proposed token's position */
	struct hb_xs_handle h;
	bool live;
};

struct hb_spec_replay {
	const struct hb_spec_target *t;
	struct hb_spec_expect expect;
	uint64_t frontier;      /* the position of the pending token */
	int32_t pending;
	struct hb_xs *xs;       /* the streaming runtime, or NULL */
	struct hb_spec_ticket tickets[HB_SPEC_MAX_TICKETS];
	size_t n_tickets;
	/* what the replay saw */
	uint64_t steps, zero, partial, full, accepted, committed;
	uint64_t routes, issued, cancelled, kept_tickets;
	int32_t *out;           /* optional: committed tokens, in order (cap out_cap) */
	size_t n_out, out_cap;
};

/* Start at frontier with pending (the target's greedy token after the
 * prompt); the shard's header is checked against expect first. */
void hb_spec_replay_init(struct hb_spec_replay *r, const struct hb_spec_target *t,
			 const struct hb_spec_expect *expect, uint64_t frontier, int32_t pending, struct hb_xs *xs);
int hb_spec_replay_header(struct hb_spec_replay *r, const struct hb_spec_header *h, struct hb_error *err);
/* A route sidecar record: checked (owner, generation, ticket), then each
 * predicted expert becomes a P2 prefetch ticket of the proposed position. */
int hb_spec_replay_route(struct hb_spec_replay *r, const struct hb_spec_route *rt, struct hb_error *err);
/*
 * A step: identity (spec-owner, -generation, -hidden, -capture), position
 * (spec-position), verification of the selected path, the record's
 * accepted prefix and bonus compared with the target's (spec-diverged:
 * the target then publishes nothing), then the rejected suffix's tickets
 * cancelled, each exactly once.
 */
int hb_spec_replay_step(struct hb_spec_replay *r, const struct hb_spec_step *s, struct hb_error *err);
/* hb_spec_read's callback over a replay (ctx: struct hb_spec_replay *);
 * the first record's header is checked.  The error goes to r->err. */
struct hb_spec_replay_read {
	struct hb_spec_replay *r;
	bool header_checked;
	struct hb_error err;
};
int hb_spec_replay_record(void *ctx, const struct hb_spec_header *h, const struct hb_spec_step *step,
			  const struct hb_spec_route *route);

/* ------------------------------------------------------------ on the model */

/* The target over a session: hb_session_verify, greedy over the sampleable
 * ids by the sampler's rule (the first maximum). */
struct hb_spec_session {
	struct hb_session *s;
	uint64_t vocab;         /* physical rows of a logits row */
	size_t semantic;        /* the ids greedy chooses among */
	struct hb_sampler greedy;
	float *logits;          /* (HB_SPEC_MAX_BLOCK + 1) rows of the vocabulary */
	hb_spec_keep_fn keep;   /* during a verify */
	void *keep_ctx;
	int32_t next[HB_SPEC_MAX_BLOCK + 1];
	/* optional observer of the verified chunk (routes for U_B) */
	hb_observe_fn observe;
	void *observe_ctx;
};
int hb_spec_session_init(struct hb_spec_session *ss, const struct hb_model *m, struct hb_session *s,
			 struct hb_spec_target *t, struct hb_error *err);
void hb_spec_session_release(struct hb_spec_session *ss);

#endif
