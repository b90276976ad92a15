/*
 * hb_trace_cli.h: what hb-trace's front (cmd/hb-trace.c) and its subcommand
 * files share: the parsed command line, one entry point per subcommand, and
 * the output and setup helpers more than one subcommand uses.  The analyses
 * themselves are the engines of hb-trace/analysis/; these files parse,
 * drive the passes and print.  Private to hb-trace.
 */
#ifndef HB_TRACE_CLI_H
#define HB_TRACE_CLI_H

#include "hb_base.h"
#include "hb_cli.h"
#include "hb-trace/analysis/hb_trace_artifact.h"
#include "hb-trace/analysis/hb_trace_cache.h"
#include "hb-trace/analysis/hb_trace_input.h"
#include "hb-trace/analysis/hb_trace_prefetch.h"
#include "hb-trace/analysis/hb_trace_probe.h"
#include "hb-trace/analysis/hb_trace_stats.h"
#include "hb_json.h"
#include "trace/hb_trace.h"
#include "trace/hb_xstrace.h"

static const char *const prog = "hb-trace";

#define MAX_LIST 64

struct cli {
	int sub;
	const char *name;                  /* the subcommand */
	bool json, per_layer, have_tau[HB_TSTATS_MAX_BLOCK + 1];
	double tau[HB_TSTATS_MAX_BLOCK + 1];
	struct hb_tstats_opts st;
	const char *budget, *artifact, *probe_file, *timings, *out, *file;
	const char *stream_trace;          /* prefetch-sim --stream-trace F: the measured run */
	bool have_tokens, have_attn;
	uint32_t policies, predictors;
	uint64_t record_bytes, seed, threads, cache, first, count, read_bytes;
	double half_life, latency, bandwidth, layer_time, attn, verify_bw;
	uint64_t depth;
	bool have_latency, have_bandwidth, have_depth, have_layer_time, have_cache, have_verify;
	bool pipe_fifo;                    /* --pipe fifo: one transfer at a time */
	bool discipline_engine;            /* --discipline engine: hb-run's pool, no preemption */
	uint64_t verify_chunk;             /* --verify-chunk (have_verify_chunk: given) */
	bool have_verify_chunk;
	const char *const *paths;
	size_t npaths;
};

/* options.c: 0 to run c->name, 1 after -h or --version (printed), -1 after
 * a usage error (printed) */
int trace_parse(int argc, char **argv, struct cli *c);

/* the subcommands, one file each */
int trace_cat(const struct cli *c, struct hb_trace_set *s, struct hb_error *err);
int trace_stats(const struct cli *c, struct hb_trace_set *s, struct hb_error *err);
int trace_cache_sim(const struct cli *c, struct hb_trace_set *s, struct hb_error *err);
int trace_prefetch_sim(const struct cli *c, struct hb_trace_set *s, struct hb_error *err);
int trace_plot(struct cli *c, struct hb_trace_set *s, struct hb_error *err);
int trace_probe(const struct cli *c, struct hb_error *err);

/* stream.c: stream trace shards (hb-run --stream-trace), read alone */
bool trace_is_stream(const char *path);
int trace_stream_cat(const struct cli *c, struct hb_error *err);
int trace_stream_stats(const struct cli *c, struct hb_error *err);
int trace_stream_plot(const struct cli *c, struct hb_error *err);
/* the measured decode of a stream trace: its single-token chunks and steps */
struct trace_stream_model {
	struct hb_xst_header h;
	uint64_t decode_tokens, first_decode, exposed_ns, wall_ns;
	uint64_t wants, hits, joined, misses;
	uint64_t steps, compute_ns, before_router_ns; /* decode layer steps: compute = span less the wall wait */
	uint64_t wait_ns;                             /* their wall wait: ready_ns - routed_ns, summed */
	uint64_t reads, read_bytes, service_ns;
	double layer_time, attn_fraction;             /* compute per step; share before the router decides */
	/* the decode's reads as the engine delivered them (reads starting at
	 * or after the first decode chunk): bytes over the union of their
	 * service intervals, and the mean service time */
	uint64_t decode_begin, dec_reads, dec_bytes, dec_busy_ns, dec_service_ns;
	double delivered_bw;
	uint64_t *iv;                                 /* (start, ready) pairs while reading; freed */
	size_t niv, cap_iv;
};
int trace_stream_model(const struct cli *c, const char *path, struct trace_stream_model *m, struct hb_error *err);
/* every record of the stream trace at path, through fn */
int trace_stream_walk(const struct cli *c, const char *path, hb_xst_record_fn fn, void *ctx, struct hb_xst_header *h,
		      struct hb_error *err);
/* engine-reads.c: the predicted reads of a stream trace, each placed in the
 * layer step it was issued in (prefetch-sim's predictor engine); *out
 * is the caller's to free */
int trace_engine_reads(const struct cli *c, const char *path, struct hb_tpf_inject **out, size_t *n,
		       struct hb_error *err);

/* common.c */
void trace_jnum(cJSON *o, const char *key, double v);
void trace_print_json(cJSON *j);
void trace_header_json(cJSON *j, const struct hb_trace_header *h, uint64_t records, uint64_t tokens);
void trace_fnum(char *s, size_t n, double v, int prec);
/* record bytes: --record-bytes, or the artifact's (identity checked against the trace) */
struct trace_rb {
	const struct cli *c;
	struct hb_trace_artifact art;
	bool have_art;
};
int trace_record_bytes(struct trace_rb *r, const struct hb_trace_header *h, uint64_t *out, struct hb_error *err);
int trace_budgets(const char *list, const struct hb_trace_header *h, uint64_t rbytes, uint64_t *out, size_t *n,
		  struct hb_error *err);
int trace_peek_header(struct hb_trace_set *s, struct hb_error *err);


/* model.c: the storage and compute model of prefetch-sim and plot */
struct trace_model {
	struct hb_tstore_params storage;
	const char *storage_source; /* "given" or "probe" */
	uint64_t verify_ns;         /* --verify-bandwidth: a record's digest check, in each request's latency */
	struct hb_tprobe_result probe;
	double layer_time;
	uint64_t rbytes;
	bool have_measured;                    /* --stream-trace */
	struct trace_stream_model measured;
};
int trace_model_for(const struct cli *c, struct hb_trace_set *s, struct trace_model *m, struct hb_error *err);

/* passes that plot reuses */
int trace_stats_collect(const struct cli *c, struct hb_trace_set *s, struct hb_tstats **out, struct hb_error *err);
int trace_cache_run(const struct cli *c, struct hb_trace_set *s, uint64_t rbytes, bool per_layer, uint32_t policies,
		    struct hb_tcache **out, const struct hb_tcache_result **res, struct hb_error *err);
int trace_pf_run(const struct cli *c, struct hb_trace_set *s, const struct trace_model *m, enum hb_tpf_predictor pr,
		 hb_tpf_event_fn ev, void *ev_ctx, struct hb_tpf_result *out, struct hb_error *err);

#endif
