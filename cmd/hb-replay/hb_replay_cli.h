/*
 * hb_replay_cli.h: what hb-replay's front (cmd/hb-replay.c) and its
 * subcommand files share: the parsed command line, one entry point per
 * subcommand, the engine that adapts the CPU reference session to
 * struct hb_replay_engine, and the JSON output more than one subcommand
 * uses.  The data side itself is the engine of hb-replay/dataset/; these
 * files parse, drive it and print.  Private to hb-replay.
 */
#ifndef HB_REPLAY_CLI_H
#define HB_REPLAY_CLI_H

#include "hb_base.h"
#include "hb_cli.h"
#include "hb_backend_cli.h"
#include "graph/hb_model.h"
#include "graph/hb_session.h"
#include "hb-replay/dataset/hb_replay.h"
#include "hb-replay/dataset/hb_replay_train.h"
#include "hb_pool.h"
#include "predict/hb_taps.h"

static const char *const prog = "hb-replay";

#define HB_REPLAY_DEADLINE_MAX 4096u

struct cli {
	const char *sub, *model, *out, *transcripts, *train;
	const char *pred[16], *pred_name[16];
	char pred_name_buf[16][64];       /* the NAMEs of NAME=F */
	uint8_t avail[16];
	size_t n_pred;
	/* eval's Gate 4 (eval.c) */
	const char *deadlines[64], *validation_eval;
	size_t n_deadlines;
	double read_ns;
	bool avail_given;
	uint64_t hints;                   /* shadow --hints */
	uint64_t budgets[16];
	size_t n_budgets;
	uint64_t shard_i, shard_n, chunk, max_bytes, threads, seed, window, stride;
	double tol, validation, temporal, ftol;
	bool has_ftol;
	uint8_t text[32];
	uint32_t capture[HB_REPLAY_CAPTURE_MAX];
	size_t n_capture;
	uint64_t capture_positions;
	uint64_t together;                /* label --together: transcripts a batch (1: one at a time) */
	bool json, quiet, has_seed, has_threads;
	enum hb_backend_choice backend;   /* label --backend */
	bool no_prefault;                 /* label --no-prefault */
	enum hb_weights_mode weights;     /* label: the mode it takes (hb_weights_resolve) */
	enum hb_weights_mode weights_asked; /* label --weights, where weights_set */
	bool weights_set;
	/* plant, train, predict (train.c) */
	const char *predictor;
	struct hb_plant_config plant;
	struct hb_train_config train_cfg;
	double deadline[HB_REPLAY_DEADLINE_MAX];
	/* label's captures for the predictors (features.c) */
	const char *features, *router_ahead, *split_file, *split_name;
	uint64_t feature_width, feature_seed;
	struct hb_cli_xs xs;      /* label: --expert-cache, --expert-predict, --expert-evict */
	bool xs_given;
	char **args;
	int n_args;
};

/* options.c: 0 to run c->sub; nonzero after a usage error (printed).  -h
 * and --version print and exit 0 there. */
int replay_parse(int argc, char **argv, struct cli *c);

/* eval.c: --predictions (pred true) and, in options.c's order from
 * --available (which 1..4), eval's Gate 4 options; 0 or -1 (printed) */
int replay_parse_eval_option(int which, bool pred, const char *arg, struct cli *c);

/* the subcommands, one file each; each returns the exit status */
int replay_label(const struct cli *c);
int replay_parity(const struct cli *c);
int replay_split(const struct cli *c);
int replay_merge(const struct cli *c);
int replay_eval(const struct cli *c);
int replay_plant(const struct cli *c);
int replay_train(const struct cli *c);
int replay_predict(const struct cli *c);
int replay_shadow(const struct cli *c);
/* train.c: the options of plant, train and predict (which: the option's
 * index from --sequences on, in options.c's order) and their arguments;
 * 0, or -1 after a usage error (printed) */
void replay_train_option_defaults(struct cli *c);
int replay_parse_train_option(int which, const char *arg, struct cli *c);
int replay_check_train_args(struct cli *c);

/* features.c: label's feature set and router-ahead predictions
 * (libkern/predict/hb_taps.h), fed by the engine's observer (hb-replay(1)
 * FEATURES, ROUTER-AHEAD) */
int replay_taps_open(struct hb_taps *tp, const struct cli *c, const struct hb_model *m, struct hb_pool *pool,
		     struct hb_error *err);
/* OUTDIR holds no label shard (captures do not resume): else HB_ERR_INVALID */
int replay_taps_check_fresh(const char *outdir, struct hb_error *err);
int replay_taps_sequence(void *ctx, const struct hb_transcript *t, struct hb_error *err);

/* engine.c: the CPU reference session as label's struct hb_replay_engine
 * (its begin, forward and forward_hidden, with ctx a struct replay_eng) */
struct replay_eng {
	struct hb_taps *taps;              /* NULL: no capture beyond labels */
	const struct hb_model *m;
	struct hb_pool *pool;
	struct hb_session *s;
	uint64_t left;                     /* the transcript's tokens not yet run */
	hb_replay_emit_fn emit;
	hb_replay_hidden_fn hidden;
	void *emit_ctx;
	int32_t ids[64];
	size_t k;
	int rc;
};
int replay_eng_begin(void *ctx, uint64_t max_tokens, struct hb_error *err);
/* *s reset when it holds max_tokens, else a new session in its place (a
 * transcript's session; the --together slots' too) */
int replay_session_fit(struct hb_session **s, const struct hb_model *m, struct hb_pool *pool, uint64_t max_tokens,
		       struct hb_error *err);
/* Before the clock: the session for the longest of this shard's
 * transcripts (shard i of n takes those at i, i + n, ...), and on the CPU
 * its workspace for a chunk, faulted in, as hb-run reserves its prompt's;
 * begin then reuses it. */
int replay_eng_prepare(struct replay_eng *e, const struct hb_transcripts *ts, const struct cli *c,
		       struct hb_error *err);
int replay_eng_forward(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit, void *emit_ctx,
		       struct hb_error *err);
int replay_eng_forward_hidden(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit,
			      hb_replay_hidden_fn hidden, void *emit_ctx, struct hb_error *err);

/* together.c: label --together N, the engine that runs N transcripts as
 * one batch and hands their routes out in the labeller's order (plan,
 * begin_transcript and forward of struct hb_replay_engine) */
struct ahead;
struct replay_together {
	const struct hb_model *m;
	struct hb_pool *pool;
	size_t slots;                      /* N */
	uint32_t layers, k;
	struct ahead *slot;                /* [slots]: the transcripts run ahead */
	struct hb_session **ss;            /* [slots] */
	const struct hb_transcript **order; /* plan */
	size_t n_order, next;              /* order[next] runs next */
	uint64_t chunk;
	size_t n_slots, cur;               /* slots holding routes; the one being read */
	uint64_t pos;                      /* its next position */
};
int replay_together_init(struct replay_together *g, const struct hb_model *m, struct hb_pool *pool, size_t slots,
			 struct hb_error *err);
void replay_together_free(struct replay_together *g);
int replay_together_plan(void *ctx, const struct hb_transcript *const *order, size_t n, uint64_t chunk_tokens,
			 struct hb_error *err);
int replay_together_begin(void *ctx, const struct hb_transcript *t, struct hb_error *err);
int replay_together_forward(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit, void *emit_ctx,
			    struct hb_error *err);

/* common.c */
int replay_emit_json(cJSON *j);

#endif
