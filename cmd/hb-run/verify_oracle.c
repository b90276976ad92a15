/*
 * hb-run/verify_oracle.c: --verify-oracle FILE --block B, the verifier-only
 * oracle of AFN-019 Gate E (libkern/spec/hb_spec_oracle.h).
 *
 * FILE holds a recorded greedy decode's generated ids (hb-run's own output
 * line, or any ids separated by commas or white space) after PROMPT.  The
 * front runs plain decode of that future (one token a chunk), then the
 * oracle at block B, compares them (committed tokens, every logits row,
 * the state digest) and prints the report: one "key value" line each, or
 * one JSON object with --json.  Exit 0 when the oracle equals plain decode,
 * 1 when it does not, 3 when the run fails.
 */
#include "hb_base.h"
#include "hb_run_cli.h"
#include "hb_json.h"
#include "spec/hb_spec_oracle.h"

#include <math.h>

struct figures {
	const struct hb_spec_oracle_report *o, *p;
	bool exact, record;
};

static cJSON *report_json(const struct figures *f)
{
	const struct hb_spec_oracle_report *o = f->o, *p = f->p;
	cJSON *j = cJSON_CreateObject();
	double tau = hb_spec_oracle_tau(o);

	if (!j)
		return NULL;
	hb_json_add_u64(j, "block", o->block);
	hb_json_add_u64(j, "tokens", o->tokens);
	hb_json_add_u64(j, "chunks", o->chunks);
	hb_json_add_u64(j, "proposed", o->proposed);
	hb_json_add_u64(j, "accepted", o->accepted);
	hb_json_add_u64(j, "rolled_back", o->rolled_back);
	cJSON_AddNumberToObject(j, "tau", tau);
	cJSON_AddNumberToObject(j, "u_b", hb_spec_oracle_u(o));
	cJSON_AddNumberToObject(j, "break_even_u_b", (double)o->top_k * tau);
	hb_json_add_bool(j, "break_even", hb_spec_oracle_break_even(o));
	cJSON_AddNumberToObject(j, "routed_bytes_per_token", hb_spec_oracle_bytes_per_token(o));
	cJSON_AddNumberToObject(j, "routed_bytes_per_token_b1", hb_spec_oracle_bytes_per_token(p));
	cJSON_AddNumberToObject(j, "routed_bytes_ratio", hb_spec_oracle_bytes_ratio(o));
	cJSON_AddNumberToObject(j, "ple_pages_per_block", o->chunks ? (double)o->ple_pages / (double)o->chunks : 0);
	cJSON_AddNumberToObject(j, "ple_pages_per_token_b1", p->chunks ? (double)p->ple_pages / (double)p->chunks : 0);
	cJSON_AddNumberToObject(j, "verify_ms_per_token", o->tokens ? 1e3 * o->seconds / (double)o->tokens : 0);
	cJSON_AddNumberToObject(j, "plain_ms_per_token", p->tokens ? 1e3 * p->seconds / (double)p->tokens : 0);
	hb_json_add_bool(j, "record_is_greedy", f->record);
	hb_json_add_bool(j, "exact", f->exact);
	return j;
}

/* The JSON object as "key value" lines, in its order. */
static void report_lines(const cJSON *j)
{
	const cJSON *v;

	cJSON_ArrayForEach(v, j) {
		if (cJSON_IsBool(v))
			printf("%s %s\n", v->string, cJSON_IsTrue(v) ? "yes" : "no");
		else if (v->valuedouble >= 0 && v->valuedouble < 1e15 && v->valuedouble == floor(v->valuedouble))
			printf("%s %" PRIu64 "\n", v->string, (uint64_t)v->valuedouble);
		else
			printf("%s %.4f\n", v->string, v->valuedouble);
	}
}

int run_verify_oracle(const struct cli *c, const struct hb_model *m, const int32_t *prompt, size_t np)
{
	struct cli fc = {.tokens_file = c->verify_oracle};
	struct hb_spec_oracle_report po, oo;
	struct hb_pool *pool = NULL;
	struct hb_error err;
	int32_t *future = NULL, *pt = NULL, *ot = NULL;
	float *pl = NULL, *ol = NULL;
	size_t nf = 0, V = (size_t)m->vocab_physical;
	struct figures f = {&oo, &po, false, false};
	int rc, status = HB_EXIT_SYSTEM;
	cJSON *j = NULL;

	hb_error_clear(&err);
	if ((rc = run_read_tokens(&fc, &future, &nf, &err))) {
		hb_cli_error(prog, &err);
		return rc == HB_ERR_INVALID ? HB_EXIT_USAGE : HB_EXIT_SYSTEM;
	}
	if (!nf) {
		free(future);
		hb_cli_usage_error(prog, "%s records no generated token", c->verify_oracle);
		return HB_EXIT_USAGE;
	}
	pt = malloc(nf * sizeof(int32_t)), ot = malloc(nf * sizeof(int32_t));
	pl = malloc(nf * V * sizeof(float)), ol = malloc(nf * V * sizeof(float));
	if (!pt || !ot || !pl || !ol)
		rc = hb_error_set(&err, HB_ERR_NOMEM, "verify_oracle", "out of memory");
	else if (!(rc = hb_pool_create((unsigned)c->threads, &pool, &err)) &&
		 !(rc = hb_spec_oracle_run(m, pool, prompt, np, future, nf, 0, pt, pl, &po, &err)))
		rc = hb_spec_oracle_run(m, pool, prompt, np, future, nf, (uint32_t)c->block, ot, ol, &oo, &err);
	if (rc) {
		hb_cli_error(prog, &err);
		status = hb_cli_exit_for(rc);
		goto out;
	}
	f.exact = !memcmp(pt, ot, nf * sizeof(int32_t)) && !memcmp(pl, ol, nf * V * sizeof(float)) &&
		  !memcmp(po.digest, oo.digest, 32);
	f.record = !memcmp(pt, future, nf * sizeof(int32_t));
	if (!(j = report_json(&f))) {
		fprintf(stderr, "%s: out of memory\n", prog);
		goto out;
	}
	if (c->json) {
		if (hb_cli_print_json(prog, j)) {
			j = NULL; /* freed by hb_cli_print_json */
			goto out;
		}
		j = NULL;
	} else {
		report_lines(j);
	}
	if (!f.exact)
		fprintf(stderr, "%s: the oracle at block %" PRIu64 " differs from plain decode\n", prog, c->block);
	status = f.exact ? HB_EXIT_OK : HB_EXIT_NO;
out:
	cJSON_Delete(j);
	hb_pool_destroy(pool);
	free(future), free(pt), free(ot), free(pl), free(ol);
	return status;
}
