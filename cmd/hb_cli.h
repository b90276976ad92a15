/*
 * hb_cli.h: what every hb-* front end shares: the diagnostic line format,
 * the exit-status convention and --version output.  Only cmd/ prints.
 *
 * A diagnostic is one line on stderr, lowercase, never translated, because
 * scripts parse it:  PROG: ID: field.path: message
 * (the id and field parts are omitted when the error has none).
 */
#ifndef HB_CLI_H
#define HB_CLI_H

#include "hb_base.h"
#include "hb_err.h"

#include "graph/hb_model.h"

#include <cJSON.h>

/* Exit statuses shared by the binaries (each man page lists its own). */
enum {
	HB_EXIT_OK = 0,
	HB_EXIT_NO = 1,       /* the answer is no: rejected, contract broken */
	HB_EXIT_USAGE = 2,
	HB_EXIT_SYSTEM = 3,   /* I/O or system failure */
};

void hb_cli_error(const char *prog, const struct hb_error *err);
/* "PROG: message" for usage problems, then "try 'PROG --help'". */
void hb_cli_usage_error(const char *prog, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The diagnostic for getopt_long's ':' (missing argument) and '?' (unknown
 * option) answers, as every binary words them; returns -1 to pass on. */
int hb_cli_getopt_error(const char *prog, int opt, char **argv);
/*
 * Render j (pretty) to stdout and free it.  A rendering that fails (out of
 * memory; j NULL counts as such) is reported on stderr and remembered:
 * returns HB_EXIT_OK or HB_EXIT_SYSTEM, and hb_cli_output_failed() says so
 * later, so a binary never exits 0 without the JSON it promised.
 */
int hb_cli_print_json(const char *prog, cJSON *j);
bool hb_cli_output_failed(void);
/* Map an error code to HB_EXIT_NO / HB_EXIT_USAGE / HB_EXIT_SYSTEM. */
int hb_cli_exit_for(int code);
void hb_cli_version(const char *prog);

/*
 * --expert-cache SIZE, --expert-predict P, --expert-evict P, --prefill-extent
 * M (off, auto, always: AFN-019 H5): the routed
 * experts streamed under a fixed budget (AFN-019), shared by hb-run and
 * hb-replay label.  The value forms are checked while parsing (a usage
 * error naming the option); the budget against the store once the model
 * is loaded (hb_cli_xs_apply).
 */
struct hb_cli_xs {
	const char *cache;          /* NULL: all (resident) */
	enum hb_xs_predictor pred;  /* default router-ahead */
	uint32_t ahead_width;       /* router-ahead:W (0: the model's top-k) */
	enum hb_xs_policy evict;    /* default score */
	enum hb_xs_extent extent;   /* --prefill-extent, default off */
	bool pred_set, evict_set, extent_set;
	const char *learned;        /* learned:CKPT (hb-run): the graph predicts nothing, the checkpoint does */
	hb_xs_observe_fn observe;   /* the engine's ticket observer (hb-run: shadow accounting, --stream-trace), or NULL */
	void *observe_ctx;
};
void hb_cli_xs_init(struct hb_cli_xs *x);
/* which option arg belongs to (a front numbers its three getopt codes in
 * this order); 0, or -1 after a usage error (printed) */
enum hb_cli_xs_opt { HB_CLI_XS_CACHE = 0, HB_CLI_XS_PREDICT = 1, HB_CLI_XS_EVICT = 2, HB_CLI_XS_EXTENT = 3 };
int hb_cli_xs_option(const char *prog, struct hb_cli_xs *x, enum hb_cli_xs_opt which, const char *arg);
/* after parsing: a predictor or policy without streaming does nothing, and
 * is refused; 0 or -1 (printed) */
int hb_cli_xs_check(const char *prog, const struct hb_cli_xs *x);
/* after loading: hb_model_stream; HB_EXIT_OK, or the exit status after the
 * diagnostic (field "--expert-cache") is printed */
int hb_cli_xs_apply(const char *prog, struct hb_model *m, const struct hb_cli_xs *x);
/* --json's "expert_cache" member: {"mode": "all"}, or the engine's
 * configuration, counters and AFN-019 metrics; with since (a snapshot
 * taken after hb-run's prefill), also "expert_cache_decode", the same of
 * the decode steps alone; 0 or HB_ERR_NOMEM */
int hb_cli_xs_json(cJSON *j, const struct hb_model *m, const struct hb_xs_stats *since);

#endif
