/*
 * hb_spec_oracle.c: the verifier-only oracle and its plain-decode
 * reference (see hb_spec_oracle.h).
 *
 * Owns the block schedule over a recorded future and the counting (an
 * observer of the verified chunks' routes and PLE rows); the verification,
 * acceptance and rollback are hb_spec_verify.c's and the session's.
 */
#include "hb_base.h"
#include "sampler/hb_sampler.h"
#include "spec/hb_spec_oracle.h"
#include "spec/hb_spec_verify.h"

#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double hb_spec_oracle_tau(const struct hb_spec_oracle_report *r)
{
	return r->chunks ? (double)r->tokens / (double)r->chunks : 0;
}

double hb_spec_oracle_u(const struct hb_spec_oracle_report *r)
{
	return r->chunks ? (double)r->unique_experts / ((double)r->chunks * r->layers) : 0;
}

double hb_spec_oracle_bytes_per_token(const struct hb_spec_oracle_report *r)
{
	return r->tokens ? (double)r->unique_experts * (double)r->record_bytes / (double)r->tokens : 0;
}

double hb_spec_oracle_bytes_ratio(const struct hb_spec_oracle_report *r)
{
	return r->tokens ? (double)r->unique_experts / ((double)r->tokens * r->layers * r->top_k) : 0;
}

bool hb_spec_oracle_break_even(const struct hb_spec_oracle_report *r)
{
	return hb_spec_oracle_u(r) < (double)r->top_k * hb_spec_oracle_tau(r);
}

/* ------------------------------------------------------------ counting */

/* The routes and PLE pages of the chunk being verified. */
struct count {
	const struct hb_model *m;
	uint32_t rows_per_page;
	uint8_t *seen;            /* [layers][experts] */
	uint64_t *pages;          /* PLE pages read by the chunk, with repeats */
	size_t n_pages, cap_pages;
	bool oom;
};

static void observe(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct count *c = ctx;
	const struct hb_qwen_config *cfg = &c->m->cfg;
	(void)pos;

	if (kind == HB_OBS_ROUTES && layer >= 0) {
		const int32_t *ids = data;
		for (size_t i = 0; i < n; i++)
			c->seen[(size_t)layer * cfg->num_experts + (size_t)ids[i]] = 1;
	} else if (kind == HB_OBS_PLE_ROWS && layer >= 0 && c->rows_per_page) {
		const int64_t *ids = data;
		uint64_t first = c->m->layers[layer].ple.first_row;
		for (size_t i = 0; i < n; i++) {
			if (c->n_pages == c->cap_pages) {
				size_t cap = c->cap_pages ? 2 * c->cap_pages : 256;
				uint64_t *p = realloc(c->pages, cap * sizeof(*p));
				if (!p) {
					c->oom = true;
					return;
				}
				c->pages = p, c->cap_pages = cap;
			}
			c->pages[c->n_pages++] = (first + (uint64_t)ids[i]) / c->rows_per_page;
		}
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Close the chunk: add its unions to the report and clear them. */
static void chunk_done(struct count *c, struct hb_spec_oracle_report *r)
{
	size_t E = (size_t)c->m->cfg.num_experts, L = (size_t)c->m->cfg.num_layers, distinct = 0;

	for (size_t i = 0; i < L * E; i++)
		r->unique_experts += c->seen[i];
	memset(c->seen, 0, L * E);
	qsort(c->pages, c->n_pages, sizeof(uint64_t), cmp_u64);
	for (size_t i = 0; i < c->n_pages; i++)
		distinct += !i || c->pages[i] != c->pages[i - 1];
	r->ple_pages += distinct;
	c->n_pages = 0;
}

/* ------------------------------------------------------------ the runs */

struct run {
	const struct hb_model *m;
	struct hb_session *s;
	struct hb_sampler greedy;
	struct count cnt;
	float *rows;              /* HB_SPEC_ORACLE_MAX_BLOCK rows */
};

static int32_t greedy_of(struct run *r, const float *row)
{
	return hb_sampler_next(&r->greedy, row, (size_t)r->m->vocab_semantic);
}

static int plain(struct run *r, int32_t pending, size_t nf, int32_t *tokens_out, float *logits_out,
		 struct hb_spec_oracle_report *rep, struct hb_error *err)
{
	size_t V = (size_t)r->m->vocab_physical;
	double t0 = now();
	int rc;

	for (size_t i = 0; i < nf; i++) {
		if ((rc = hb_session_forward(r->s, &pending, 1, r->rows, observe, &r->cnt, err)))
			return rc;
		chunk_done(&r->cnt, rep);
		tokens_out[i] = pending;
		if (logits_out)
			memcpy(logits_out + i * V, r->rows, V * sizeof(float));
		pending = greedy_of(r, r->rows);
		rep->chunks++;
		rep->tokens++;
	}
	rep->seconds = now() - t0;
	return HB_OK;
}

static int blocks(struct run *r, int32_t pending, const int32_t *future, size_t nf, uint32_t B,
		  int32_t *tokens_out, float *logits_out, struct hb_spec_oracle_report *rep, struct hb_error *err)
{
	size_t V = (size_t)r->m->vocab_physical;
	struct hb_spec_session ss;
	struct hb_spec_target t;
	struct hb_spec_outcome o;
	int rc;

	if ((rc = hb_spec_session_init(&ss, r->m, r->s, &t, err)))
		return rc;
	ss.observe = observe, ss.observe_ctx = &r->cnt;
	for (size_t i = 0; i < nf;) {
		size_t n = B - 1 < nf - i - 1 ? B - 1 : nf - i - 1;
		double t0 = now();
		if ((rc = hb_spec_verify_block(&t, pending, future + i + 1, n, &o, err)))
			break;
		rep->seconds += now() - t0;
		chunk_done(&r->cnt, rep);
		for (size_t k = 0; k < o.committed; k++) {
			tokens_out[i + k] = k ? future[i + k] : pending;
			if (logits_out)
				memcpy(logits_out + (i + k) * V, ss.logits + k * V, V * sizeof(float));
		}
		rep->chunks++;
		rep->proposed += n;
		rep->accepted += o.accepted;
		rep->rolled_back += n - o.accepted;
		rep->tokens += o.committed;
		i += o.committed;
		pending = o.bonus; /* the target's greedy token, plain decoding's rule */
	}
	hb_spec_session_release(&ss);
	return rc;
}

int hb_spec_oracle_run(const struct hb_model *m, struct hb_pool *pool, const int32_t *prompt, size_t np,
		       const int32_t *future, size_t nf, uint32_t B, int32_t *tokens_out, float *logits_out,
		       struct hb_spec_oracle_report *rep, struct hb_error *err)
{
	const struct hb_qwen_config *c = &m->cfg;
	struct run r = {.m = m};
	float *pre = NULL;
	int rc;

	memset(rep, 0, sizeof(*rep));
	rep->block = B, rep->layers = (uint32_t)c->num_layers, rep->top_k = (uint32_t)c->num_experts_per_tok;
	rep->record_bytes = m->em.record_bytes;
	if (!np || B > HB_SPEC_ORACLE_MAX_BLOCK)
		return hb_error_set(err, HB_ERR_INVALID, "verify_oracle", "a prompt and a block of 1..%u are needed",
				    HB_SPEC_ORACLE_MAX_BLOCK);
	r.cnt.m = m;
	r.cnt.rows_per_page = m->ple ? hb_ple_store_layout(m->ple)->rows_per_page : 0;
	r.cnt.seen = calloc((size_t)c->num_layers * (size_t)c->num_experts, 1);
	r.rows = malloc(HB_SPEC_ORACLE_MAX_BLOCK * (size_t)m->vocab_physical * sizeof(float));
	pre = malloc(np * (size_t)m->vocab_physical * sizeof(float));
	if (!r.cnt.seen || !r.rows || !pre) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "verify_oracle", "out of memory");
		goto out;
	}
	if ((rc = hb_sampler_init(&r.greedy, true, 1, 0, 1, 0, (size_t)m->vocab_semantic, err)) ||
	    (rc = hb_session_create(m, pool, np + nf + B + 1, &r.s, err)) ||
	    (rc = hb_session_forward(r.s, prompt, np, pre, NULL, NULL, err)))
		goto out;
	{
		int32_t pending = greedy_of(&r, pre + (np - 1) * (size_t)m->vocab_physical);
		rc = B ? blocks(&r, pending, future, nf, B, tokens_out, logits_out, rep, err)
		       : plain(&r, pending, nf, tokens_out, logits_out, rep, err);
	}
	if (!rc && r.cnt.oom)
		rc = hb_error_set(err, HB_ERR_NOMEM, "verify_oracle", "out of memory");
	if (!rc)
		hb_session_digest(r.s, rep->digest);
out:
	hb_session_free(r.s);
	hb_sampler_release(&r.greedy);
	free(r.cnt.seen), free(r.cnt.pages), free(r.rows), free(pre);
	return rc;
}
