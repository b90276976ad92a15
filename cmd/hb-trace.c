/*
 * hb-trace: what route traces say about SSD reads (hebrus-trace(5) shards
 * from hb-run --dump-routes).  Subcommands cat, stats, cache-sim,
 * prefetch-sim, plot and probe; the analyses live in libstore/hb_trace_*,
 * this file parses options, drives the passes and prints.  Exit 0 done,
 * 1 a defective or mismatched trace, 2 usage, 3 I/O or system failure.
 */
#include "hb_base.h"
#include "hb_cli.h"
#include "hb_json.h"
#include "hb_parse.h"
#include "hb_publish.h"
#include "trace/hb_trace.h"
#include "hb-trace/analysis/hb_trace_artifact.h"
#include "hb-trace/analysis/hb_trace_cache.h"
#include "hb-trace/analysis/hb_trace_input.h"
#include "hb-trace/analysis/hb_trace_prefetch.h"
#include "hb-trace/analysis/hb_trace_probe.h"
#include "hb-trace/analysis/hb_trace_stats.h"
#include "hb-trace/analysis/hb_trace_svg.h"

#include <getopt.h>
#include <math.h>
#include <sys/stat.h>

static const char *const prog = "hb-trace";

static void usage(FILE *f)
{
	fputs(
		"usage: hb-trace cat [--json] TRACE...\n"
		"   or: hb-trace stats [--json] [--tau B=T,...] [--window N] [--sequences N] TRACE...\n"
		"   or: hb-trace cache-sim [--json] --budget LIST [--per-layer] [--policy LIST] [--artifact A | --record-bytes N] [OPTIONS] TRACE...\n"
		"   or: hb-trace prefetch-sim [--json] [--predictor LIST] (--artifact A | --record-bytes N) (--layer-time S | --timings FILE) [OPTIONS] TRACE...\n"
		"   or: hb-trace plot [--json] --out DIR [--predictor P] [--tokens FIRST:COUNT] (--artifact A | --record-bytes N) (--layer-time S | --timings FILE) [OPTIONS] TRACE...\n"
		"   or: hb-trace probe [--json] [--file F] [--read-bytes N]\n"
		"\n"
		"  TRACE                  a trace shard; - reads standard input\n"
		"  OPTIONS                cache-sim: --half-life --latency --bandwidth --threads --seed;\n"
		"                         prefetch-sim and plot: --attn-fraction --cache --latency --bandwidth\n"
		"                         --depth --probe-file; plot also --budget --per-layer --window --sequences\n"
		"  --json                 machine-readable output on stdout\n"
		"  --tau B=T,...          acceptance length T for block size B (break-even U_B < k*T)\n"
		"  --window N             stats: ring ordinals per sequence, a power of two (default 65536)\n"
		"  --sequences N          stats: live sequences kept (default 64)\n"
		"  --budget LIST          cache budgets: N records, N% of layers x experts, or bytes (KiB, MiB, GiB, KB, MB, GB)\n"
		"  --per-layer            one cache per layer of budget/layers records (default: one global cache)\n"
		"  --policy LIST          lru,lfu,lfu-decay,score,belady (default all)\n"
		"  --artifact A           the artifact the trace came from (record bytes; identity checked)\n"
		"  --record-bytes N       bytes per expert record\n"
		"  --half-life T          lfu-decay half-life in tokens (default 32)\n"
		"  --latency S            per-request latency in seconds\n"
		"  --bandwidth B          bytes per second\n"
		"  --depth N              storage queue depth\n"
		"  --probe-file F         measure the storage model on F (default: --artifact, else a temporary file)\n"
		"  --threads N            cache-sim: simulations in parallel (default 1)\n"
		"  --seed N               score policy's eviction sample (default 1)\n"
		"  --predictor LIST       none,prev,adjacent,oracle (default all; plot: oracle)\n"
		"  --layer-time S         compute seconds per layer step\n"
		"  --timings FILE         per-layer time from hb-run --json (decode seconds / (tokens - 1) / layers)\n"
		"  --attn-fraction F      share of a layer step before the router decides (default 0.5)\n"
		"  --cache N              prefetch-sim LRU cache in records (default layers x top_k)\n"
		"  --out DIR              plot: write overlap.svg, cache.svg, timeline.svg into DIR\n"
		"  --tokens FIRST:COUNT   plot: timeline window of token ordinals (default 0:4)\n"
		"  --file F               probe: the file to read (default a 64 MiB temporary file)\n"
		"  --read-bytes N         probe: bytes per bandwidth read (default 1 MiB)\n"
		"  -h, --help             this help\n"
		"      --version          versions of the tool and its libraries\n", f);
}

enum {
	OPT_JSON = 256, OPT_TAU, OPT_WINDOW, OPT_SEQUENCES, OPT_BUDGET, OPT_PER_LAYER, OPT_POLICY, OPT_ARTIFACT,
	OPT_RECORD_BYTES, OPT_HALF_LIFE, OPT_LATENCY, OPT_BANDWIDTH, OPT_DEPTH, OPT_PROBE_FILE, OPT_THREADS,
	OPT_SEED, OPT_PREDICTOR, OPT_LAYER_TIME, OPT_TIMINGS, OPT_ATTN, OPT_CACHE, OPT_OUT, OPT_TOKENS, OPT_FILE,
	OPT_READ_BYTES, OPT_VERSION
};

static const struct option long_opts[] = {
	{"json", no_argument, NULL, OPT_JSON},
	{"tau", required_argument, NULL, OPT_TAU},
	{"window", required_argument, NULL, OPT_WINDOW},
	{"sequences", required_argument, NULL, OPT_SEQUENCES},
	{"budget", required_argument, NULL, OPT_BUDGET},
	{"per-layer", no_argument, NULL, OPT_PER_LAYER},
	{"policy", required_argument, NULL, OPT_POLICY},
	{"artifact", required_argument, NULL, OPT_ARTIFACT},
	{"record-bytes", required_argument, NULL, OPT_RECORD_BYTES},
	{"half-life", required_argument, NULL, OPT_HALF_LIFE},
	{"latency", required_argument, NULL, OPT_LATENCY},
	{"bandwidth", required_argument, NULL, OPT_BANDWIDTH},
	{"depth", required_argument, NULL, OPT_DEPTH},
	{"probe-file", required_argument, NULL, OPT_PROBE_FILE},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"seed", required_argument, NULL, OPT_SEED},
	{"predictor", required_argument, NULL, OPT_PREDICTOR},
	{"layer-time", required_argument, NULL, OPT_LAYER_TIME},
	{"timings", required_argument, NULL, OPT_TIMINGS},
	{"attn-fraction", required_argument, NULL, OPT_ATTN},
	{"cache", required_argument, NULL, OPT_CACHE},
	{"out", required_argument, NULL, OPT_OUT},
	{"tokens", required_argument, NULL, OPT_TOKENS},
	{"file", required_argument, NULL, OPT_FILE},
	{"read-bytes", required_argument, NULL, OPT_READ_BYTES},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, OPT_VERSION},
	{NULL, 0, NULL, 0},
};

/* which options each subcommand takes */
static const struct {
	const char *name;
	const int *opts;
} subs[] = {
	{"cat", (const int[]){OPT_JSON, 0}},
	{"stats", (const int[]){OPT_JSON, OPT_TAU, OPT_WINDOW, OPT_SEQUENCES, 0}},
	{"cache-sim", (const int[]){OPT_JSON, OPT_BUDGET, OPT_PER_LAYER, OPT_POLICY, OPT_ARTIFACT, OPT_RECORD_BYTES,
				    OPT_HALF_LIFE, OPT_LATENCY, OPT_BANDWIDTH, OPT_THREADS, OPT_SEED, 0}},
	{"prefetch-sim", (const int[]){OPT_JSON, OPT_PREDICTOR, OPT_ARTIFACT, OPT_RECORD_BYTES, OPT_LATENCY,
				       OPT_BANDWIDTH, OPT_DEPTH, OPT_PROBE_FILE, OPT_LAYER_TIME, OPT_TIMINGS, OPT_ATTN,
				       OPT_CACHE, 0}},
	{"plot", (const int[]){OPT_JSON, OPT_OUT, OPT_BUDGET, OPT_PER_LAYER, OPT_PREDICTOR, OPT_TOKENS, OPT_ARTIFACT,
			       OPT_RECORD_BYTES, OPT_LATENCY, OPT_BANDWIDTH, OPT_DEPTH, OPT_PROBE_FILE, OPT_LAYER_TIME,
			       OPT_TIMINGS, OPT_ATTN, OPT_CACHE, OPT_WINDOW, OPT_SEQUENCES, 0}},
	{"probe", (const int[]){OPT_JSON, OPT_FILE, OPT_READ_BYTES, 0}},
};

#define MAX_LIST 64

struct cli {
	int sub;
	bool json, per_layer, have_tau[HB_TSTATS_MAX_BLOCK + 1];
	double tau[HB_TSTATS_MAX_BLOCK + 1];
	struct hb_tstats_opts st;
	const char *budget, *artifact, *probe_file, *timings, *out, *file;
	uint32_t policies, predictors;
	uint64_t record_bytes, seed, threads, cache, first, count, read_bytes;
	double half_life, latency, bandwidth, layer_time, attn;
	uint64_t depth;
	bool have_latency, have_bandwidth, have_depth, have_layer_time, have_cache;
	const char *const *paths;
	size_t npaths;
};

#define bad(...) (hb_cli_usage_error(prog, __VA_ARGS__), -1)

static int parse_list(char *s, uint32_t *mask, int (*name)(const char *, int *), const char *what)
{
	*mask = 0;
	for (char *save = NULL, *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int v;
		if (name(t, &v))
			return bad("unknown %s '%s'", what, t);
		*mask |= 1u << v;
	}
	return *mask ? 0 : bad("empty %s list", what);
}

static int policy_name(const char *s, int *v)
{
	enum hb_tcache_policy p;
	int rc = hb_tcache_policy_parse(s, &p);
	*v = (int)p;
	return rc;
}

static int predictor_name(const char *s, int *v)
{
	enum hb_tpf_predictor p;
	int rc = hb_tpf_predictor_parse(s, &p);
	*v = (int)p;
	return rc;
}

static int parse_tau(char *s, struct cli *c)
{
	for (char *save = NULL, *t = strtok_r(s, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		uint64_t b;
		double v;
		if (!eq)
			return bad("--tau wants B=T pairs, not '%s'", t);
		*eq = '\0';
		if (hb_parse_u64_range(t, 1, HB_TSTATS_MAX_BLOCK, &b) || hb_parse_double(eq + 1, &v) || !(v > 0) ||
		    v > (double)b)
			return bad("--tau: block 1..5 and 0 < T <= B, not '%s'", t);
		c->tau[b] = v, c->have_tau[b] = true;
	}
	return 0;
}

static int num(const char *s, double *v, const char *opt)
{
	if (hb_parse_double(s, v) || !(*v >= 0) || !isfinite(*v))
		return bad("%s wants a non-negative number, not '%s'", opt, s);
	return 0;
}

static int parse(int argc, char **argv, struct cli *c)
{
	int o;

	memset(c, 0, sizeof(*c));
	hb_tstats_opts_default(&c->st);
	c->policies = HB_TC_ALL;
	c->predictors = (1u << HB_TPF_PREDICTORS) - 1;
	c->half_life = 32;
	c->attn = 0.5;
	c->seed = 1;
	c->threads = 1;
	c->count = 4;
	if (argc < 2)
		return usage(stderr), -1;
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))
		return usage(stdout), 1;
	if (!strcmp(argv[1], "--version"))
		return hb_cli_version(prog), 1;
	c->sub = -1;
	for (size_t i = 0; i < HB_ARRAY_LEN(subs); i++)
		if (!strcmp(argv[1], subs[i].name))
			c->sub = (int)i;
	if (c->sub < 0 && argv[1][0] == '-')
		return bad("bad option '%s'", argv[1]);
	if (c->sub < 0)
		return bad("unknown subcommand '%s'", argv[1]);
	if (!strcmp(argv[1], "plot"))
		c->predictors = 1u << HB_TPF_ORACLE;
	optind = 2;
	opterr = 0;
	while ((o = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
		bool ok = o == 'h' || o == OPT_VERSION;
		uint64_t u;
		for (const int *p = subs[c->sub].opts; *p && !ok; p++)
			ok = *p == o;
		if (o == '?')
			return bad("bad option '%s'", argv[optind - 1]);
		if (o == ':')
			return bad("option '%s' needs an argument", argv[optind - 1]);
		if (!ok)
			return bad("this option does not apply to %s", subs[c->sub].name);
		switch (o) {
		case 'h': usage(stdout); return 1;
		case OPT_VERSION: hb_cli_version(prog); return 1;
		case OPT_JSON: c->json = true; break;
		case OPT_TAU: if (parse_tau(optarg, c)) return -1; break;
		case OPT_WINDOW:
			if (hb_parse_u64_range(optarg, 8, 1u << 30, &u) || (u & (u - 1)))
				return bad("--window wants a power of two >= 8, not '%s'", optarg);
			c->st.window = (uint32_t)u;
			break;
		case OPT_SEQUENCES:
			if (hb_parse_u64_range(optarg, 1, 1u << 20, &u))
				return bad("--sequences wants 1..1048576, not '%s'", optarg);
			c->st.max_sequences = (uint32_t)u;
			break;
		case OPT_BUDGET: c->budget = optarg; break;
		case OPT_PER_LAYER: c->per_layer = true; break;
		case OPT_POLICY: if (parse_list(optarg, &c->policies, policy_name, "policy")) return -1; break;
		case OPT_PREDICTOR:
			if (parse_list(optarg, &c->predictors, predictor_name, "predictor"))
				return -1;
			break;
		case OPT_ARTIFACT: c->artifact = optarg; break;
		case OPT_RECORD_BYTES:
			if (hb_parse_u64_range(optarg, 1, UINT64_MAX, &c->record_bytes))
				return bad("--record-bytes wants a positive integer, not '%s'", optarg);
			break;
		case OPT_HALF_LIFE: if (num(optarg, &c->half_life, "--half-life") || !(c->half_life > 0)) return bad("%s", "--half-life must be > 0"); break;
		case OPT_LATENCY: if (num(optarg, &c->latency, "--latency")) return -1; c->have_latency = true; break;
		case OPT_BANDWIDTH:
			if (num(optarg, &c->bandwidth, "--bandwidth") || !(c->bandwidth > 0))
				return bad("%s", "--bandwidth must be > 0");
			c->have_bandwidth = true;
			break;
		case OPT_DEPTH:
			if (hb_parse_u64_range(optarg, 1, 4096, &c->depth))
				return bad("--depth wants 1..4096, not '%s'", optarg);
			c->have_depth = true;
			break;
		case OPT_PROBE_FILE: c->probe_file = optarg; break;
		case OPT_THREADS:
			if (hb_parse_u64_range(optarg, 1, 1024, &c->threads))
				return bad("--threads wants 1..1024, not '%s'", optarg);
			break;
		case OPT_SEED: if (hb_parse_u64(optarg, &c->seed)) return bad("--seed wants an integer, not '%s'", optarg); break;
		case OPT_LAYER_TIME: if (num(optarg, &c->layer_time, "--layer-time")) return -1; c->have_layer_time = true; break;
		case OPT_TIMINGS: c->timings = optarg; break;
		case OPT_ATTN:
			if (num(optarg, &c->attn, "--attn-fraction") || c->attn > 1)
				return bad("%s", "--attn-fraction must be in [0, 1]");
			break;
		case OPT_CACHE:
			if (hb_parse_u64(optarg, &c->cache))
				return bad("--cache wants an integer, not '%s'", optarg);
			c->have_cache = true;
			break;
		case OPT_OUT: c->out = optarg; break;
		case OPT_TOKENS: {
			char *colon = strchr(optarg, ':');
			if (!colon)
				return bad("--tokens wants FIRST:COUNT, not '%s'", optarg);
			*colon = '\0';
			if (hb_parse_u64(optarg, &c->first) || hb_parse_u64_range(colon + 1, 1, 4096, &c->count))
				return bad("--tokens wants FIRST:COUNT with COUNT 1..4096, not '%s'", optarg);
			break;
		}
		case OPT_FILE: c->file = optarg; break;
		case OPT_READ_BYTES:
			if (hb_parse_u64_range(optarg, 1, 1ull << 30, &c->read_bytes))
				return bad("--read-bytes wants 1..1073741824, not '%s'", optarg);
			break;
		}
	}
	c->paths = (const char *const *)argv + optind;
	c->npaths = (size_t)(argc - optind);
	if (strcmp(subs[c->sub].name, "probe") && !c->npaths)
		return bad("%s needs at least one TRACE", subs[c->sub].name);
	if (!strcmp(subs[c->sub].name, "probe") && c->npaths)
		return bad("probe takes no TRACE ('%s')", c->paths[0]);
	if (c->artifact && c->record_bytes)
		return bad("%s", "--artifact and --record-bytes exclude each other");
	if (c->have_layer_time && c->timings)
		return bad("%s", "--layer-time and --timings exclude each other");
	if (!strcmp(subs[c->sub].name, "cache-sim") && !c->budget)
		return bad("%s", "cache-sim needs --budget");
	if (!strcmp(subs[c->sub].name, "plot") && !c->out)
		return bad("%s", "plot needs --out DIR");
	if (!strcmp(subs[c->sub].name, "plot") && (c->predictors & (c->predictors - 1)))
		return bad("%s", "plot draws one --predictor");
	return 0;
}

/* ------------------------------------------------------------ shared */

static void jnum(cJSON *o, const char *key, double v)
{
	if (isfinite(v))
		cJSON_AddNumberToObject(o, key, v);
	else
		cJSON_AddNullToObject(o, key);
}

static void print_json(cJSON *j)
{
	(void)hb_cli_print_json(prog, j); /* a failure is remembered for the exit status */
}

static void header_json(cJSON *j, const struct hb_trace_header *h, uint64_t records, uint64_t tokens)
{
	char a[65];
	hb_hex_encode(h->artifact, 32, a);
	hb_json_add_u64(j, "records", records);
	hb_json_add_u64(j, "tokens", tokens);
	hb_json_add_u64(j, "top_k", h->top_k);
	hb_json_add_u64(j, "layers", h->layers);
	hb_json_add_u64(j, "experts", h->experts);
	hb_json_add_str(j, "artifact", a);
}

/* record bytes: --record-bytes, or the artifact's (identity checked against the trace) */
struct rb {
	const struct cli *c;
	struct hb_trace_artifact art;
	bool have_art;
};

static int record_bytes_for(struct rb *r, const struct hb_trace_header *h, uint64_t *out, struct hb_error *err)
{
	int rc;
	*out = r->c->record_bytes;
	if (!r->c->artifact)
		return HB_OK;
	if (!r->have_art) {
		if ((rc = hb_trace_artifact_read(r->c->artifact, &r->art, err)))
			return rc;
		r->have_art = true;
	}
	if ((rc = hb_trace_artifact_check(&r->art, h, r->c->artifact, err)))
		return rc;
	*out = r->art.record_bytes;
	return HB_OK;
}

static double parse_unit(const char *u)
{
	static const struct { const char *s; double m; } units[] = {
		{"B", 1}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	};
	for (size_t i = 0; i < HB_ARRAY_LEN(units); i++)
		if (!strcmp(u, units[i].s))
			return units[i].m;
	return 0;
}

/* Budgets in records: N, N%, or bytes with a unit (needs record bytes). */
static int budgets_for(const char *list, const struct hb_trace_header *h, uint64_t rbytes, uint64_t *out,
		       size_t *n, struct hb_error *err)
{
	char buf[1024], *save = NULL;
	*n = 0;
	/* a list cut short would lose or change its last budget: refuse it */
	if (strlen(list) >= sizeof(buf))
		return hb_error_set(err, HB_ERR_INVALID, "--budget", "the list is longer than %zu bytes", sizeof(buf) - 1);
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *end = NULL;
		double v = strtod(t, &end), m;
		if (end == t || !(v >= 0) || !isfinite(v) || *n == MAX_LIST)
			return hb_error_set(err, HB_ERR_INVALID, "--budget", "'%s' is not a budget (or more than %d)", t, MAX_LIST);
		if (!*end) {
			if (v != floor(v))
				return hb_error_set(err, HB_ERR_INVALID, "--budget", "'%s': records are whole", t);
			out[(*n)++] = (uint64_t)v;
		} else if (!strcmp(end, "%")) {
			out[(*n)++] = (uint64_t)floor(v / 100.0 * h->layers * h->experts);
		} else if ((m = parse_unit(end)) > 0) {
			if (!rbytes)
				return hb_error_set(err, HB_ERR_INVALID, "--budget",
						    "'%s' is in bytes: give --artifact or --record-bytes", t);
			out[(*n)++] = (uint64_t)floor(v * m / (double)rbytes);
		} else {
			return hb_error_set(err, HB_ERR_INVALID, "--budget", "'%s': unknown unit '%s'", t, end);
		}
	}
	if (!*n)
		return hb_error_set(err, HB_ERR_INVALID, "--budget", "no budget given");
	return HB_OK;
}

/* The header, before any analysis: scan until the first record. */
static int stop_first(void *ctx, size_t shard, uint64_t index, const struct hb_trace_header *h,
		      const struct hb_route *r)
{
	return 1;
}

static int peek_header(struct hb_trace_set *s, struct hb_error *err)
{
	int rc = hb_trace_set_spool(s, err);
	if (rc)
		return rc;
	rc = hb_trace_set_scan(s, stop_first, NULL, NULL, err);
	return rc == 1 ? HB_OK : rc;
}

/* ------------------------------------------------------------ cat */

static int cat_one(void *ctx, size_t shard, uint64_t index, const struct hb_trace_header *h,
		   const struct hb_route *r)
{
	const struct cli *c = ctx;

	printf("{\"shard\":");
	/* shard names are the user's arguments: escape them as JSON */
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)c->paths[shard]; *p; p++)
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	printf("\",\"record\":%" PRIu64 ",\"sequence\":%" PRIu64 ",\"token\":%" PRIu64 ",\"layer\":%u,\"experts\":[",
	       index, r->sequence, r->ordinal, r->layer);
	for (uint32_t i = 0; i < h->top_k; i++)
		printf("%s%u", i ? "," : "", r->ids[i]);
	printf("],\"weights\":[");
	for (uint32_t i = 0; i < h->top_k; i++)
		if (isfinite(r->weights[i]))
			printf("%s%.9g", i ? "," : "", (double)r->weights[i]);
		else
			printf("%snull", i ? "," : "");
	if (r->lineage)
		printf("],\"lineage\":{\"proposal\":%" PRIu64 ",\"candidate\":%d,\"accepted\":%d}}\n", r->proposal,
		       r->candidate, r->accepted);
	else
		printf("],\"lineage\":null}\n");
	return 0;
}

static int run_cat(const struct cli *c, struct hb_trace_set *s, struct hb_error *err)
{
	return hb_trace_set_scan(s, cat_one, (void *)c, NULL, err);
}

/* ------------------------------------------------------------ stats */

struct stats_ctx {
	const struct cli *c;
	struct hb_tstats *st;
	struct hb_error *err;
};

static int stats_one(void *ctx, size_t shard, uint64_t index, const struct hb_trace_header *h,
		     const struct hb_route *r)
{
	struct stats_ctx *x = ctx;
	int rc;
	if (!x->st && (rc = hb_tstats_create(&x->st, h, &x->c->st, x->err)))
		return rc;
	return hb_tstats_add(x->st, r, x->c->paths[shard], index, x->err);
}

static int stats_collect(const struct cli *c, struct hb_trace_set *s, struct hb_tstats **out,
			 struct hb_error *err)
{
	struct stats_ctx x = { c, NULL, err };
	int rc = hb_trace_set_scan(s, stats_one, &x, NULL, err);
	if (!rc && !x.st)
		rc = hb_tstats_create(&x.st, &s->h, &c->st, err);
	if (rc) {
		hb_tstats_free(x.st);
		return rc;
	}
	*out = x.st;
	return HB_OK;
}

static cJSON *hist_json(const uint64_t *h, uint32_t k)
{
	cJSON *a = cJSON_CreateArray();
	for (uint32_t i = 0; i <= k; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)h[i]));
	return a;
}

static cJSON *part_json(const struct hb_tstats_part *P, uint32_t k)
{
	cJSON *o = cJSON_CreateObject(), *u = cJSON_CreateObject(), *b = cJSON_CreateObject();
	hb_json_add_u64(o, "records", P->records);
	hb_json_add_u64(o, "prev_pairs", P->prev_pairs);
	jnum(o, "prev_overlap_mean", P->prev_mean);
	cJSON_AddItemToObject(o, "prev_overlap_hist", hist_json(P->prev_hist, k));
	hb_json_add_u64(o, "adjacent_pairs", P->adj_pairs);
	jnum(o, "adjacent_overlap_mean", P->adj_mean);
	cJSON_AddItemToObject(o, "adjacent_overlap_hist", hist_json(P->adj_hist, k));
	for (uint32_t B = 1; B <= HB_TSTATS_MAX_BLOCK; B++) {
		char key[8];
		snprintf(key, sizeof(key), "%u", B);
		jnum(u, key, P->unique_mean[B]);
		hb_json_add_u64(b, key, P->blocks[B]);
	}
	cJSON_AddItemToObject(o, "unique_per_block", u);
	cJSON_AddItemToObject(o, "blocks", b);
	hb_json_add_u64(o, "uses", P->uses);
	hb_json_add_u64(o, "population", P->population);
	hb_json_add_u64(o, "used", P->used);
	jnum(o, "entropy_bits", P->entropy_bits);
	jnum(o, "entropy_normalized", P->entropy_norm);
	hb_json_add_u64(o, "top1_count", P->top1_n);
	jnum(o, "top1_share", P->top1_share);
	hb_json_add_u64(o, "top10_count", P->top10_n);
	jnum(o, "top10_share", P->top10_share);
	return o;
}

static void fnum(char *s, size_t n, double v, int prec)
{
	if (isfinite(v))
		snprintf(s, n, "%.*f", prec, v);
	else
		snprintf(s, n, "-");
}

static void part_line(const char *name, const struct hb_tstats_part *P)
{
	char a[16], b[16], u[HB_TSTATS_MAX_BLOCK + 1][16], e[16], t1[16], t10[16];
	fnum(a, sizeof(a), P->prev_mean, 3);
	fnum(b, sizeof(b), P->adj_mean, 3);
	for (uint32_t B = 1; B <= HB_TSTATS_MAX_BLOCK; B++)
		fnum(u[B], sizeof(u[B]), P->unique_mean[B], 2);
	fnum(e, sizeof(e), P->entropy_norm, 4);
	fnum(t1, sizeof(t1), P->top1_share, 4);
	fnum(t10, sizeof(t10), P->top10_share, 4);
	printf("%-6s %9" PRIu64 " %9s %9s %7s %7s %7s %7s %7s %8s %7s %7s\n", name, P->records, a, b, u[1], u[2], u[3],
	       u[4], u[5], e, t1, t10);
}

static int run_stats(const struct cli *c, struct hb_trace_set *s, struct hb_error *err)
{
	struct hb_tstats *st = NULL;
	const struct hb_tstats_result *R;
	int rc = stats_collect(c, s, &st, err);

	if (rc)
		return rc;
	R = hb_tstats_finish(st);
	if (c->json) {
		cJSON *j = cJSON_CreateObject(), *layers = cJSON_CreateArray(), *be = cJSON_CreateArray();
		header_json(j, &R->h, R->records, R->tokens);
		hb_json_add_u64(j, "sequences", R->sequences);
		cJSON_AddItemToObject(j, "overall", part_json(&R->overall, R->h.top_k));
		for (uint32_t l = 0; l < R->h.layers; l++)
			cJSON_AddItemToArray(layers, part_json(&R->layers[l], R->h.top_k));
		cJSON_AddItemToObject(j, "by_layer", layers);
		for (uint32_t B = 1; B <= HB_TSTATS_MAX_BLOCK; B++) {
			struct hb_tstats_breakeven e;
			cJSON *o;
			if (!c->have_tau[B] || hb_tstats_break_even(R, B, c->tau[B], &e, err))
				continue;
			o = cJSON_CreateObject();
			hb_json_add_u64(o, "block", B);
			jnum(o, "tau", e.tau);
			jnum(o, "unique", e.unique);
			jnum(o, "limit", e.limit);
			jnum(o, "ratio", e.ratio);
			hb_json_add_bool(o, "saves", e.saves);
			cJSON_AddItemToArray(be, o);
		}
		cJSON_AddItemToObject(j, "break_even", be);
		print_json(j);
	} else {
		printf("%" PRIu64 " records, %" PRIu64 " tokens, %" PRIu64 " sequences; top-%u of %u experts, %u layers\n",
		       R->records, R->tokens, R->sequences, R->h.top_k, R->h.experts, R->h.layers);
		printf("%-6s %9s %9s %9s %7s %7s %7s %7s %7s %8s %7s %7s\n", "layer", "records", "prev", "adjacent", "U1",
		       "U2", "U3", "U4", "U5", "H/Hmax", "top1%", "top10%");
		for (uint32_t l = 0; l < R->h.layers; l++) {
			char name[16];
			snprintf(name, sizeof(name), "%u", l);
			part_line(name, &R->layers[l]);
		}
		part_line("all", &R->overall);
		printf("previous-token overlap (overlap:pairs):");
		for (uint32_t i = 0; i <= R->h.top_k; i++)
			printf(" %u:%" PRIu64, i, R->overall.prev_hist[i]);
		printf("\nadjacent-layer overlap (overlap:pairs):");
		for (uint32_t i = 0; i <= R->h.top_k; i++)
			printf(" %u:%" PRIu64, i, R->overall.adj_hist[i]);
		printf("\npopularity over %u layer-expert pairs: entropy %.4f bits (%.4f of max); "
		       "the top %u (1%%) hold %.4f of selections, the top %u (10%%) hold %.4f\n",
		       R->overall.population, R->overall.entropy_bits, R->overall.entropy_norm, R->overall.top1_n,
		       R->overall.top1_share, R->overall.top10_n, R->overall.top10_share);
		for (uint32_t B = 1; B <= HB_TSTATS_MAX_BLOCK; B++) {
			struct hb_tstats_breakeven e;
			if (!c->have_tau[B] || hb_tstats_break_even(R, B, c->tau[B], &e, err))
				continue;
			printf("break-even B=%u tau=%g: U_B %.3f %s k*tau %.3f: %s (ratio %.4f)\n", B, e.tau, e.unique,
			       e.saves ? "<" : ">=", e.limit, e.saves ? "fewer routed bytes per token" : "no saving",
			       e.ratio);
		}
	}
	hb_tstats_free(st);
	return HB_OK;
}

/* ------------------------------------------------------------ cache-sim */

struct cache_ctx {
	struct hb_tcache *c;
	struct hb_error *err;
	bool second;
};

static int cache_one(void *ctx, size_t shard, uint64_t index, const struct hb_trace_header *h,
		     const struct hb_route *r)
{
	struct cache_ctx *x = ctx;
	return x->second ? hb_tcache_add_second(x->c, r, x->err) : hb_tcache_add(x->c, r, x->err);
}

static int cache_run(const struct cli *c, struct hb_trace_set *s, uint64_t rbytes, bool per_layer,
		     uint32_t policies, struct hb_tcache **out, const struct hb_tcache_result **res,
		     struct hb_error *err)
{
	struct hb_tcache_opts o;
	uint64_t budgets[MAX_LIST];
	struct cache_ctx x = { NULL, err, false };
	int rc;

	hb_tcache_opts_default(&o);
	if ((rc = budgets_for(c->budget, &s->h, rbytes, budgets, &o.nbudgets, err)))
		return rc;
	o.budgets = budgets;
	o.per_layer = per_layer;
	o.record_bytes = rbytes;
	o.policies = policies;
	o.half_life_tokens = c->half_life;
	if (c->have_latency)
		o.latency_s = c->latency;
	if (c->have_bandwidth)
		o.bandwidth = c->bandwidth;
	o.threads = (unsigned)c->threads;
	o.seed = c->seed;
	if ((rc = hb_tcache_create(&x.c, &s->h, &o, err)))
		return rc;
	if (!(rc = hb_trace_set_scan(s, cache_one, &x, NULL, err)) && hb_tcache_wants_second_pass(x.c) &&
	    !(rc = hb_tcache_begin_second(x.c, err))) {
		x.second = true;
		rc = hb_trace_set_scan(s, cache_one, &x, NULL, err);
	}
	if (!rc)
		rc = hb_tcache_finish(x.c, res, err);
	if (rc) {
		hb_tcache_free(x.c);
		return rc;
	}
	*out = x.c;
	return HB_OK;
}

static int run_cache(const struct cli *c, struct hb_trace_set *s, struct hb_error *err)
{
	struct rb r = { c, {0}, false };
	struct hb_tcache *tc = NULL;
	const struct hb_tcache_result *R;
	uint64_t rbytes;
	int rc;

	if ((rc = peek_header(s, err)) || (rc = record_bytes_for(&r, &s->h, &rbytes, err)) ||
	    (rc = cache_run(c, s, rbytes, c->per_layer, c->policies, &tc, &R, err)))
		return rc;
	if (c->json) {
		cJSON *j = cJSON_CreateObject(), *cells = cJSON_CreateArray();
		header_json(j, &s->h, R->records, R->tokens);
		hb_json_add_u64(j, "accesses", R->accesses);
		hb_json_add_str(j, "scope", c->per_layer ? "per-layer" : "global");
		if (rbytes)
			hb_json_add_u64(j, "record_bytes", rbytes);
		else
			cJSON_AddNullToObject(j, "record_bytes");
		for (size_t i = 0; i < R->ncells; i++) {
			const struct hb_tcache_cell *e = &R->cells[i];
			cJSON *o = cJSON_CreateObject();
			hb_json_add_str(o, "policy", hb_tcache_policy_name(e->policy));
			hb_json_add_u64(o, "budget_records", e->budget);
			if (rbytes)
				hb_json_add_u64(o, "budget_bytes", e->budget * rbytes);
			hb_json_add_u64(o, "records_per_cache", e->scope_budget);
			hb_json_add_u64(o, "hits", e->hits);
			hb_json_add_u64(o, "misses", e->misses);
			jnum(o, "hit_rate", e->hit_rate);
			jnum(o, "reads_per_token", e->misses_per_token);
			jnum(o, "bytes_per_token", e->bytes_per_token);
			cJSON_AddItemToArray(cells, o);
		}
		cJSON_AddItemToObject(j, "results", cells);
		print_json(j);
	} else {
		printf("%" PRIu64 " records, %" PRIu64 " tokens, %" PRIu64 " accesses; %s caches", R->records, R->tokens,
		       R->accesses, c->per_layer ? "per-layer" : "global");
		if (rbytes)
			printf(", %" PRIu64 " bytes per record", rbytes);
		printf("\n%-10s %10s %10s %8s %12s %16s\n", "policy", "budget", "per-cache", "hit", "reads/token",
		       "bytes/token");
		for (size_t i = 0; i < R->ncells; i++) {
			const struct hb_tcache_cell *e = &R->cells[i];
			char h[16], m[24], b[32];
			fnum(h, sizeof(h), e->hit_rate, 4);
			fnum(m, sizeof(m), e->misses_per_token, 3);
			fnum(b, sizeof(b), e->bytes_per_token, 0);
			printf("%-10s %10" PRIu64 " %10" PRIu64 " %8s %12s %16s\n", hb_tcache_policy_name(e->policy), e->budget,
			       e->scope_budget, h, m, b);
		}
	}
	hb_tcache_free(tc);
	return HB_OK;
}

/* ------------------------------------------------------------ prefetch-sim */

struct model {
	struct hb_tstore_params storage;
	const char *storage_source; /* "given" or "probe" */
	struct hb_tprobe_result probe;
	double layer_time;
	uint64_t rbytes;
};

static int layer_time_from_run(const char *path, uint32_t layers, double *out, struct hb_error *err)
{
	cJSON *j = NULL;
	double dec = 0;
	uint64_t gen = 0;
	int rc;

	if ((rc = hb_json_parse_file(path, 1u << 20, &j, err)) ||
	    (rc = hb_json_f64(j, "decode_seconds", path, &dec, err)) ||
	    (rc = hb_json_u64(j, "generated_tokens", path, &gen, err)))
		goto out;
	if (gen < 2 || !(dec >= 0)) {
		rc = hb_error_set(err, HB_ERR_INVALID, path,
				  "needs generated_tokens >= 2 and decode_seconds >= 0 (found %" PRIu64 ")", gen);
		goto out;
	}
	*out = dec / (double)(gen - 1) / layers;
out:
	cJSON_Delete(j);
	return rc;
}

static int model_for(const struct cli *c, struct hb_trace_set *s, struct model *m, struct hb_error *err)
{
	struct rb r = { c, {0}, false };
	int rc;

	memset(m, 0, sizeof(*m));
	if ((rc = peek_header(s, err)) || (rc = record_bytes_for(&r, &s->h, &m->rbytes, err)))
		return rc;
	if (!m->rbytes)
		return hb_error_set(err, HB_ERR_INVALID, "--record-bytes", "give --artifact or --record-bytes");
	if (c->timings) {
		if ((rc = layer_time_from_run(c->timings, s->h.layers, &m->layer_time, err)))
			return rc;
	} else if (c->have_layer_time) {
		m->layer_time = c->layer_time;
	} else {
		return hb_error_set(err, HB_ERR_INVALID, "--layer-time", "give --layer-time or --timings");
	}
	m->storage_source = "given";
	if (!c->have_latency || !c->have_bandwidth || !c->have_depth) {
		const char *f = c->probe_file ? c->probe_file : c->artifact;
		if ((rc = hb_tprobe_run(f, m->rbytes, &m->probe, err)))
			return rc;
		m->storage_source = "probe";
		m->storage.latency_ns = (uint64_t)llround(m->probe.latency_s * 1e9);
		m->storage.bandwidth = m->probe.best_bandwidth;
		m->storage.depth = m->probe.depth;
	}
	if (c->have_latency)
		m->storage.latency_ns = (uint64_t)llround(c->latency * 1e9);
	if (c->have_bandwidth)
		m->storage.bandwidth = c->bandwidth;
	if (c->have_depth)
		m->storage.depth = (uint32_t)c->depth;
	return HB_OK;
}

struct pf_ctx {
	struct hb_tpf *p;
	struct hb_error *err;
};

static int pf_one(void *ctx, size_t shard, uint64_t index, const struct hb_trace_header *h,
		  const struct hb_route *r)
{
	struct pf_ctx *x = ctx;
	return hb_tpf_add(x->p, r, x->err);
}

static int pf_run(const struct cli *c, struct hb_trace_set *s, const struct model *m, enum hb_tpf_predictor pr,
		  hb_tpf_event_fn ev, void *ev_ctx, struct hb_tpf_result *out, struct hb_error *err)
{
	struct hb_tpf_opts o;
	struct pf_ctx x = { NULL, err };
	int rc;

	hb_tpf_opts_default(&o);
	o.predictor = pr;
	o.storage = m->storage;
	o.record_bytes = m->rbytes;
	o.layer_time_s = m->layer_time;
	o.attn_fraction = c->attn;
	if (c->have_cache)
		o.cache_budget = c->cache;
	o.event = ev, o.event_ctx = ev_ctx;
	if ((rc = hb_tpf_create(&x.p, &s->h, &o, err)))
		return rc;
	if (!(rc = hb_trace_set_scan(s, pf_one, &x, NULL, err)))
		rc = hb_tpf_finish(x.p, out, err);
	hb_tpf_free(x.p);
	return rc;
}

static cJSON *model_json(const struct model *m, uint64_t cache)
{
	cJSON *o = cJSON_CreateObject();
	hb_json_add_str(o, "storage_source", m->storage_source);
	jnum(o, "latency_s", (double)m->storage.latency_ns / 1e9);
	jnum(o, "bandwidth", m->storage.bandwidth);
	hb_json_add_u64(o, "depth", m->storage.depth);
	if (!strcmp(m->storage_source, "probe"))
		hb_json_add_bool(o, "probe_direct", m->probe.direct);
	jnum(o, "layer_time_s", m->layer_time);
	hb_json_add_u64(o, "record_bytes", m->rbytes);
	hb_json_add_u64(o, "cache_records", cache);
	return o;
}

static int run_prefetch(const struct cli *c, struct hb_trace_set *s, struct hb_error *err)
{
	struct model m;
	cJSON *j = NULL, *arr = NULL;
	uint64_t cache;
	int rc;

	if ((rc = model_for(c, s, &m, err)))
		return rc;
	cache = c->have_cache ? c->cache : (uint64_t)s->h.layers * s->h.top_k;
	if (c->json) {
		j = cJSON_CreateObject();
		arr = cJSON_CreateArray();
		cJSON_AddItemToObject(j, "model", model_json(&m, cache));
	} else {
		printf("storage (%s): latency %.1f us, bandwidth %.1f MB/s, depth %u; compute %.3f ms per layer step "
		       "(attention %.2f); record %" PRIu64 " bytes; LRU cache %" PRIu64 " records\n",
		       m.storage_source, (double)m.storage.latency_ns / 1e3, m.storage.bandwidth / 1e6, m.storage.depth,
		       m.layer_time * 1e3, c->attn, m.rbytes, cache);
		printf("%-9s %8s %8s %8s %10s %8s %13s %13s\n", "predictor", "timely", "prefetch", "useful", "bytes/tok",
		       "amplif", "hidden", "wait/tok(ms)");
	}
	for (int p = 0; p < HB_TPF_PREDICTORS; p++) {
		struct hb_tpf_result R;
		if (!(c->predictors & (1u << p)))
			continue;
		if ((rc = pf_run(c, s, &m, (enum hb_tpf_predictor)p, NULL, NULL, &R, err)))
			break;
		if (j) {
			cJSON *o = cJSON_CreateObject();
			if (!cJSON_GetObjectItem(j, "tokens"))
				header_json(j, &s->h, R.steps, R.tokens);
			hb_json_add_str(o, "predictor", hb_tpf_predictor_name((enum hb_tpf_predictor)p));
			hb_json_add_u64(o, "exact", R.exact);
			hb_json_add_u64(o, "cache_hits", R.cache_hits);
			hb_json_add_u64(o, "prefetch_hits", R.staged_hits);
			hb_json_add_u64(o, "late", R.late);
			hb_json_add_u64(o, "exact_reads", R.exact_reads);
			hb_json_add_u64(o, "predicted_reads", R.predicted_reads);
			hb_json_add_u64(o, "predicted_consumed", R.predicted_consumed);
			hb_json_add_u64(o, "predicted_wasted", R.predicted_wasted);
			hb_json_add_u64(o, "exact_bytes", R.exact_bytes);
			hb_json_add_u64(o, "predicted_bytes", R.predicted_bytes);
			hb_json_add_u64(o, "consumed_bytes", R.consumed_bytes);
			jnum(o, "timely_recall", R.timely_recall);
			jnum(o, "prefetch_recall", R.prefetch_recall);
			jnum(o, "useful_prefetch_ratio", R.useful_ratio);
			jnum(o, "bytes_per_token", R.bytes_per_token);
			jnum(o, "read_amplification", R.read_amplification);
			jnum(o, "hidden_fraction", R.hidden_fraction);
			jnum(o, "exposed_wait_s", (double)R.exposed_ns / 1e9);
			jnum(o, "exact_io_s", (double)R.exact_io_ns / 1e9);
			jnum(o, "exposed_wait_per_token_s", R.exposed_per_token_s);
			jnum(o, "simulated_s", (double)R.end_ns / 1e9);
			cJSON_AddItemToArray(arr, o);
		} else {
			char t[16], pr[16], u[16], b[24], a[16], h[16], w[24];
			fnum(t, sizeof(t), R.timely_recall, 4);
			fnum(pr, sizeof(pr), R.prefetch_recall, 4);
			fnum(u, sizeof(u), R.useful_ratio, 4);
			fnum(b, sizeof(b), R.bytes_per_token, 0);
			fnum(a, sizeof(a), R.read_amplification, 3);
			fnum(h, sizeof(h), R.hidden_fraction, 4);
			fnum(w, sizeof(w), R.exposed_per_token_s * 1e3, 4);
			printf("%-9s %8s %8s %8s %10s %8s %13s %13s\n", hb_tpf_predictor_name((enum hb_tpf_predictor)p), t, pr,
			       u, b, a, h, w);
		}
	}
	if (j) {
		cJSON_AddItemToObject(j, "results", arr);
		if (!rc)
			print_json(j);
		else
			cJSON_Delete(j);
	}
	return rc;
}

/* ------------------------------------------------------------ plot */

static int write_svg(const char *dir, const char *name, char *text, size_t len, cJSON *files, struct hb_error *err)
{
	char path[4096];
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	/* a plot is published whole or not at all, like every output */
	rc = hb_publish_buf(path, text, len, HB_PUBLISH_REPLACE, err);
	free(text);
	if (rc)
		return rc;
	if (files)
		cJSON_AddItemToArray(files, cJSON_CreateString(path));
	else
		printf("wrote %s\n", path);
	return HB_OK;
}

static int run_plot(struct cli *c, struct hb_trace_set *s, struct hb_error *err)
{
	struct hb_tstats *st = NULL;
	struct hb_tcache *tc = NULL;
	const struct hb_tcache_result *CR;
	struct hb_tsvg_timeline *tl = NULL;
	struct hb_tpf_result PR;
	struct model m;
	cJSON *j = c->json ? cJSON_CreateObject() : NULL, *files = j ? cJSON_AddArrayToObject(j, "files") : NULL;
	char *text = NULL, title[200], budgets[256];
	size_t len = 0;
	int rc, pr = 0;
	struct stat sb;

	if (stat(c->out, &sb) || !S_ISDIR(sb.st_mode)) {
		cJSON_Delete(j);
		return hb_error_sys(err, errno ? errno : ENOTDIR, c->out, "cannot use as the output directory");
	}
	if ((rc = model_for(c, s, &m, err)))
		goto out;
	if ((rc = stats_collect(c, s, &st, err)) ||
	    (rc = hb_tsvg_overlap(hb_tstats_finish(st), &text, &len, err)) ||
	    (rc = write_svg(c->out, "overlap.svg", text, len, files, err)))
		goto out;
	if (!c->budget) { /* powers of two up to every record */
		size_t n = 0;
		budgets[0] = '\0';
		for (uint64_t b = s->h.top_k; b < (uint64_t)s->h.layers * s->h.experts && n < 40; b *= 2)
			n += (size_t)snprintf(budgets + n, sizeof(budgets) - n, "%s%" PRIu64, n ? "," : "", b);
		snprintf(budgets + n, sizeof(budgets) - n, "%s%" PRIu64, n ? "," : "", (uint64_t)s->h.layers * s->h.experts);
		c->budget = budgets;
	}
	if ((rc = cache_run(c, s, m.rbytes, c->per_layer, HB_TC_ALL, &tc, &CR, err)) ||
	    (rc = hb_tsvg_hitrate(CR, c->per_layer, m.rbytes, &text, &len, err)) ||
	    (rc = write_svg(c->out, "cache.svg", text, len, files, err)))
		goto out;
	while (!(c->predictors & (1u << pr)))
		pr++;
	snprintf(title, sizeof(title), "Prefetch timeline, predictor %s, tokens %" PRIu64 "-%" PRIu64,
		 hb_tpf_predictor_name((enum hb_tpf_predictor)pr), c->first, c->first + c->count - 1);
	if ((rc = hb_tsvg_timeline_create(&tl, c->first, c->count, err)) ||
	    (rc = pf_run(c, s, &m, (enum hb_tpf_predictor)pr, hb_tsvg_timeline_event, tl, &PR, err)) ||
	    (rc = hb_tsvg_timeline_render(tl, title, &text, &len, err)) ||
	    (rc = write_svg(c->out, "timeline.svg", text, len, files, err)))
		goto out;
	if (j) {
		print_json(j);
		j = NULL;
	}
out:
	cJSON_Delete(j);
	hb_tsvg_timeline_free(tl);
	hb_tcache_free(tc);
	hb_tstats_free(st);
	return rc;
}

/* ------------------------------------------------------------ probe */

static int run_probe(const struct cli *c, struct hb_error *err)
{
	struct hb_tprobe_result R;
	int rc = hb_tprobe_run(c->file, c->read_bytes, &R, err);

	if (rc)
		return rc;
	if (c->json) {
		cJSON *j = cJSON_CreateObject(), *a = cJSON_CreateArray();
		hb_json_add_str(j, "file", c->file ? c->file : "(temporary)");
		hb_json_add_u64(j, "file_bytes", R.file_bytes);
		hb_json_add_bool(j, "direct", R.direct);
		jnum(j, "latency_s", R.latency_s);
		hb_json_add_u64(j, "read_bytes", R.read_bytes);
		for (int d = 0; d < HB_TPROBE_DEPTHS; d++) {
			cJSON *o = cJSON_CreateObject();
			hb_json_add_u64(o, "depth", R.depths[d]);
			jnum(o, "bandwidth", R.bandwidth[d]);
			cJSON_AddItemToArray(a, o);
		}
		cJSON_AddItemToObject(j, "by_depth", a);
		jnum(j, "bandwidth", R.best_bandwidth);
		hb_json_add_u64(j, "depth", R.depth);
		print_json(j);
		return HB_OK;
	}
	printf("%s: %" PRIu64 " bytes, %s\n", c->file ? c->file : "temporary file", R.file_bytes,
	       R.direct ? "O_DIRECT" : "buffered (O_DIRECT refused: page-cache figures)");
	printf("latency %.1f us (median 4 KiB random read)\n", R.latency_s * 1e6);
	for (int d = 0; d < HB_TPROBE_DEPTHS; d++)
		printf("depth %2u: %.1f MB/s (%" PRIu64 "-byte random reads)\n", R.depths[d], R.bandwidth[d] / 1e6,
		       R.read_bytes);
	printf("model: --latency %.9f --bandwidth %.0f --depth %u\n", R.latency_s, R.best_bandwidth, R.depth);
	return HB_OK;
}

int main(int argc, char **argv)
{
	struct cli c;
	struct hb_trace_set s;
	struct hb_error err;
	const char *sub;
	int rc;

	rc = parse(argc, argv, &c);
	if (rc)
		return rc > 0 ? HB_EXIT_OK : HB_EXIT_USAGE;
	hb_error_clear(&err);
	sub = subs[c.sub].name;
	if (!strcmp(sub, "probe")) {
		rc = run_probe(&c, &err);
	} else if (!(rc = hb_trace_set_init(&s, c.paths, c.npaths, &err))) {
		if (!strcmp(sub, "cat"))
			rc = run_cat(&c, &s, &err);
		else if (!strcmp(sub, "stats"))
			rc = run_stats(&c, &s, &err);
		else if (!strcmp(sub, "cache-sim"))
			rc = run_cache(&c, &s, &err);
		else if (!strcmp(sub, "prefetch-sim"))
			rc = run_prefetch(&c, &s, &err);
		else
			rc = run_plot(&c, &s, &err);
		hb_trace_set_release(&s);
	}
	if (fflush(stdout) && !rc)
		rc = hb_error_sys(&err, errno, "stdout", "cannot write");
	if (rc) {
		hb_cli_error(prog, &err);
		return hb_cli_exit_for(rc);
	}
	return hb_cli_output_failed() ? HB_EXIT_SYSTEM : HB_EXIT_OK;
}
