/*
 * hb_spec_oracle.h: the verifier-only oracle (AFN-019 Gate E).
 *
 * The exact future tokens of a recorded greedy decode are fed to the block
 * verifier as proposals, B inputs a chunk (the pending token and the next
 * B - 1 recorded tokens): perfect acceptance when the target agrees with
 * its own record, zero draft cost.  Each chunk is one verified transaction
 * (hb_session_verify): the accepted prefix and the bonus are committed, the
 * rest rolled back.  What it measures bounds what any drafter could gain:
 * tokens per verify (tau), the unique routed experts per layer of a block
 * (U_B, counted over every input the verifier computed, rejected ones
 * too), routed bytes per committed token against autoregressive top-k, PLE
 * pages a block reads, and verify time.  The same function with B = 1
 * through hb_session_forward is plain decode, the reference the oracle must
 * equal bit for bit: committed tokens, logits rows and state digest.
 * Silent; measures wall time (CLOCK_MONOTONIC) and never asserts one.
 */
#ifndef HB_SPEC_ORACLE_H
#define HB_SPEC_ORACLE_H

#include "hb_base.h"
#include "hb_err.h"
#include "graph/hb_model.h"
#include "graph/hb_session.h"
#include "hb_pool.h"

#define HB_SPEC_ORACLE_MAX_BLOCK 16u

struct hb_spec_oracle_report {
	uint32_t block;            /* B: inputs per verified chunk; 0 for plain decode */
	uint32_t layers, top_k;
	uint64_t record_bytes;     /* one routed expert's ExpertMajor record */
	uint64_t tokens;           /* recorded future tokens committed */
	uint64_t chunks;           /* verified chunks (plain: one per token) */
	uint64_t proposed, accepted, rolled_back;
	uint64_t unique_experts;   /* sum over chunks and layers of the union */
	uint64_t ple_pages;        /* sum over chunks of the distinct PLE pages */
	double seconds;            /* the verified chunks' (plain: the decode steps') wall time */
	uint8_t digest[32];        /* the session after the last commit */
};

/* The derived figures of a report. */
double hb_spec_oracle_tau(const struct hb_spec_oracle_report *r);       /* committed per chunk */
double hb_spec_oracle_u(const struct hb_spec_oracle_report *r);         /* U_B */
double hb_spec_oracle_bytes_per_token(const struct hb_spec_oracle_report *r);
double hb_spec_oracle_bytes_ratio(const struct hb_spec_oracle_report *r); /* against top-k a token */
bool hb_spec_oracle_break_even(const struct hb_spec_oracle_report *r);  /* U_B < top_k * tau */

/*
 * Prefill prompt[0..np), then commit future[0..nf) (future[0] is the first
 * generated token): B >= 1 verifies blocks of B inputs, B == 0 is plain
 * decode (one hb_session_forward a token).  tokens_out receives the nf
 * committed tokens (what the target chose: equal to future exactly when the
 * record is this target's greedy decode), logits_out (may be NULL) the nf
 * rows of vocab_physical floats that follow each committed token.
 */
int hb_spec_oracle_run(const struct hb_model *m, struct hb_pool *pool, const int32_t *prompt, size_t np,
		       const int32_t *future, size_t nf, uint32_t B, int32_t *tokens_out, float *logits_out,
		       struct hb_spec_oracle_report *rep, struct hb_error *err);

#endif
