/*
 * hb_run_cli.h: what hb-run's front (cmd/hb-run.c) and its files share:
 * the parsed command line, the prompt (token ids, or text through the
 * artifact's tokenizer and template), the run's outputs (route trace and
 * logits dumps), the generation state, and the final report.  The model
 * itself is libkern's; these files parse, drive it and print.  Private to
 * hb-run.
 */
#ifndef HB_RUN_CLI_H
#define HB_RUN_CLI_H

#include "hb_base.h"
#include "hb_cli.h"
#include "hb_backend_cli.h"
#include "graph/hb_model.h"
#include "graph/hb_session.h"
#include "hb_pool.h"
#include "hb_publish.h"
#include "sampler/hb_sampler.h"
#include "text/hb_chat.h"
#include "text/hb_text.h"
#include "text/hb_tok.h"
#include "trace/hb_trace.h"
#include "predict/hb_learned.h"
#include "predict/hb_taps.h"

static const char *const prog = "hb-run";

struct cli {
	const char *model, *tokens, *tokens_file, *dump_logits, *dump_routes;
	const char *stream_trace;         /* --stream-trace F (hebrus-trace(5) STREAM TRACE) */
	const char *text, *chat;          /* -p TEXT, --chat F */
	uint64_t n, top_k, seed, threads, sequence;
	uint64_t owner, thread, generation; /* route trace header (hebrus-trace(5)) */
	bool has_thread;
	double temp, top_p;
	bool sampling, greedy_flag, json, quiet;
	bool no_think, tokenize_only, render_only, print_tokens;
	bool no_prefault;           /* --no-prefault: no hb_model_prefault before the clock */
	enum hb_backend_choice backend;   /* --backend */
	enum hb_weights_mode weights;     /* the mode the run takes (hb_weights_resolve) */
	enum hb_weights_mode weights_asked; /* --weights, where weights_set */
	bool weights_set;
	const char *verify_oracle;        /* --verify-oracle FILE */
	uint64_t block;                   /* --block B */
	struct hb_cli_xs xs;              /* --expert-cache, --expert-predict, --expert-evict */
	/* the decode capture for the predictors (AFN-021 Gate 4, outputs.c) */
	const char *features, *router_ahead, *deadlines, *split_file, *split_name;
	uint64_t feature_width, feature_seed;
};

/* options.c: 0 to run; nonzero after a usage error (printed).  -h and
 * --version print and exit 0 there. */
int run_parse(int argc, char **argv, struct cli *c);

/* prompt.c: the prompt.  A text prompt: the rendering (--chat), the
 * tokenizer, the ids. */
struct text {
	struct hb_chat_render render;
	struct hb_tok *tok;
	struct hb_text_tokens toks;
};
void run_text_release(struct text *t);
/* --tokens or --tokens-file into ids (malloc'd) */
int run_read_tokens(const struct cli *c, int32_t **ids, size_t *n, struct hb_error *err);
/* --chat F rendered by the native Qwen3.6 template */
int run_render_chat(const struct cli *c, struct hb_chat_render *r, struct hb_error *err);
/*
 * Turn -p/--chat into ids (t->toks), or finish --render-only and
 * --tokenize-only there.  Returns -1 to go on and run the model, otherwise
 * the exit status (the diagnostic printed).
 */
int run_text_prompt(const struct cli *c, const struct hb_model *m, struct text *t);
/* --print-tokens lines: ID TAB PROVENANCE TAB JSON-STRING, one per id */
int run_print_table(FILE *f, const struct text *t, struct hb_error *err);
/* JSON members of a text prompt: prompt_ids, and with --print-tokens "prompt" */
void run_json_prompt(cJSON *j, const struct cli *c, const struct text *t);
/* the generated ids as display text (lossy), malloc'd */
int run_gen_text(const struct text *t, const int32_t *ids, size_t n, char **out, struct hb_error *err);

/* outputs.c: the route trace (--dump-routes) and logits (--dump-logits)
 * dumps, fed by run_observe and run_dump_logits during the run */
struct run {
	const struct cli *c;
	const struct hb_model *m;
	struct hb_trace_writer *trace;
	struct hb_route pending;
	int trace_rc;
	struct hb_error trace_err;
	struct hb_publish logits, routes;
	bool logits_open, routes_open;
	/* --features, --router-ahead, --deadlines; learned:CKPT; the shadow
	 * accounting of a streamed run */
	struct hb_taps taps;
	struct hb_learned learned;
	struct hb_shadow shadow;
	bool taps_open, learned_open, shadow_on;
	struct xst_run *xst;              /* --stream-trace (stream_trace.c) */
};
/* after the model loads, before it streams: the shadow observer */
void run_shadow_setup(struct run *r, struct cli *c);
/* After the shadow and stream-trace setups: the engine's one ticket
 * observer, feeding whichever of them is on. */
void run_engine_observer(struct run *r, struct cli *c);
/* after it streams: learned:CKPT loaded and checked (HB_OK or the refusal) */
int run_learned_open(struct run *r, struct hb_error *err);
/* the taps, once the session and prompt exist */
int run_taps_open(struct run *r, struct hb_pool *pool, size_t np, struct hb_error *err);
/* after each chunk */
int run_taps_chunk(struct run *r, struct hb_error *err);
/* --json's "shadow" member */
int run_shadow_json(struct run *r, cJSON *j);
void run_observe(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n);
/* begin the dumps the command line asks for */
int run_outputs_open(struct run *r, struct hb_error *err);
/* rows logits rows of the model's physical vocabulary, when --dump-logits */
int run_dump_logits(struct run *r, const float *logits, size_t rows, struct hb_error *err);
/* after the run: a trace write that failed, else close and publish both */
int run_outputs_commit(struct run *r, struct hb_error *err);
/* what is still open (after a failure, or the learned predictor after
 * any run): closed, its publication aborted */
void run_outputs_abort(struct run *r);

/* stream_trace.c: --stream-trace F.  setup before the engine opens (its
 * reads arrive through run_engine_observer as run_xst_ticket), open after, chunk_begin/end
 * around every forward chunk, observe from run_observe, commit after the
 * run (publishes F whole), free after the model (the engine) is freed. */
int run_xst_setup(struct run *r, struct hb_error *err);
void run_xst_ticket(struct xst_run *x, enum hb_xs_event ev, const struct hb_xs_ticket *t);
int run_xst_open(struct run *r, struct hb_error *err);
void run_xst_chunk_begin(struct run *r, uint64_t first, size_t tokens, bool decode);
void run_xst_chunk_end(struct run *r);
void run_xst_observe(struct run *r, enum hb_observe kind, int32_t layer, uint64_t pos);
int run_xst_commit(struct run *r, struct hb_error *err);
void run_xst_free(struct run *r);

/* generate.c: one prefill of the prompt, then decoding */
struct gen {
	struct hb_pool *pool;
	struct hb_session *s;
	struct hb_sampler smp;
	int32_t *prompt, *gen;      /* prompt ids (np), generated ids (ng) */
	size_t np, ng;
	float *logits;
	double t0, t1, t2;          /* start, prefill done, decode done */
	struct hb_prefault_report prefault; /* hb_model_prefault before t0 */
	struct hb_xs_stats *xs_pre; /* --expert-cache: the counters after the prefill */
	struct run *run;
};
int run_generate(struct run *r, struct gen *g, struct hb_error *err);
/* the sampler, session and pool */
void run_gen_release(struct gen *g);

/* report.c: the ids or text on stdout (stderr with --dump-routes -), or
 * the JSON record; *status becomes 3 when that record cannot be printed */
int run_report(const struct cli *c, const struct hb_model *m, const struct text *tx, const struct gen *g,
	       int *status, struct hb_error *err);

/* verify_oracle.c: --verify-oracle FILE --block B after the prompt: plain
 * decode of FILE's recorded future, then the verifier-only oracle, their
 * comparison and the report.  Returns the exit status (the diagnostic
 * printed): 0 exact, 1 when the oracle differs from plain decode. */
int run_verify_oracle(const struct cli *c, const struct hb_model *m, const int32_t *prompt, size_t np);

#endif
