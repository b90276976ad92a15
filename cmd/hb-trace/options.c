/*
 * hb-trace/options.c: hb-trace's command line: usage, the options each
 * subcommand takes, and their parsing into struct cli.
 */
#include "hb_base.h"
#include "hb_trace_cli.h"
#include "hb_parse.h"

#include <getopt.h>
#include <math.h>

static void usage(FILE *f)
{
	fputs(
		"usage: hb-trace cat [--json] TRACE...\n"
		"   or: hb-trace stats [--json] [--tau B=T,...] [--window N] [--sequences N] TRACE...\n"
		"   or: hb-trace cache-sim [--json] --budget LIST [--per-layer] [--policy LIST] [--artifact A | --record-bytes N] [OPTIONS] TRACE...\n"
		"   or: hb-trace prefetch-sim [--json] [--predictor LIST] (--artifact A | --record-bytes N) (--layer-time S | --timings FILE | --stream-trace F) [OPTIONS] TRACE...\n"
		"   or: hb-trace plot [--json] --out DIR [--predictor P] [--tokens FIRST:COUNT] (--artifact A | --record-bytes N) (--layer-time S | --timings FILE) [OPTIONS] TRACE...\n"
		"   or: hb-trace probe [--json] [--file F] [--read-bytes N]\n"
		"\n"
		"  TRACE                  a trace shard; - reads standard input; cat, stats and plot also read\n"
		"                         one stream trace file (hb-run --stream-trace) alone\n"
		"  OPTIONS                cache-sim: --half-life --latency --bandwidth --threads --seed;\n"
		"                         prefetch-sim and plot: --attn-fraction --cache --latency --bandwidth\n"
		"                         --depth --probe-file --verify-bandwidth; plot also --budget --per-layer\n"
		"                         --window --sequences\n"
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
		"  --predictor LIST       none,prev,adjacent,oracle,engine (default all, engine only with --stream-trace;\n"
		"                         plot: oracle); engine replays the predicted reads of the --stream-trace run\n"
		"  --layer-time S         compute seconds per layer step\n"
		"  --timings FILE         per-layer time from hb-run --json (decode seconds / (tokens - 1) / layers)\n"
		"  --attn-fraction F      share of a layer step before the router decides (default 0.5)\n"
		"  --verify-bandwidth B   bytes per second of a reader's SHA-256 check, after each read's transfer\n"
		"  --verify-chunk N       the reader hashes each N bytes as they arrive (default 524288, hb-run's readers):\n"
		"                         only the last chunk's check follows the transfer; 0: the whole record after it\n"
		"  --discipline D         priority (default: P0 preempts P1/P2 on slots and pipe) or engine (hb-run's\n"
		"                         readers: a started read runs to its end, P1/P2 leave one slot to P0, every\n"
		"                         transfer shares the pipe)\n"
		"  --pipe P               shared (default: the ready transfers of the highest class share the bandwidth,\n"
		"                         as a drive serves several reads; depth <= 16) or fifo (one at a time)\n"
		"  --stream-trace F       prefetch-sim: the measured run of TRACE (hb-run --stream-trace): its compute,\n"
		"                         cache slots and decode window, and its exposed wait beside the prediction\n"
		"  --cache N              prefetch-sim LRU cache in records (default layers x top_k)\n"
		"  --out DIR              plot: write overlap.svg, cache.svg, timeline.svg into DIR\n"
		"  --tokens FIRST:COUNT   plot: timeline window of token ordinals (default: the first 4 decode tokens)\n"
		"  --file F               probe: the file to read (default a 64 MiB temporary file)\n"
		"  --read-bytes N         probe: bytes per bandwidth read (default 1 MiB)\n"
		"  -h, --help             this help\n"
		"      --version          versions of the tool and its libraries\n", f);
}

enum {
	OPT_JSON = 256, OPT_TAU, OPT_WINDOW, OPT_SEQUENCES, OPT_BUDGET, OPT_PER_LAYER, OPT_POLICY, OPT_ARTIFACT,
	OPT_RECORD_BYTES, OPT_HALF_LIFE, OPT_LATENCY, OPT_BANDWIDTH, OPT_DEPTH, OPT_PROBE_FILE, OPT_THREADS,
	OPT_SEED, OPT_PREDICTOR, OPT_LAYER_TIME, OPT_TIMINGS, OPT_ATTN, OPT_CACHE, OPT_OUT, OPT_TOKENS, OPT_FILE,
	OPT_READ_BYTES, OPT_VERSION, OPT_STREAM_TRACE, OPT_VERIFY_BW, OPT_PIPE, OPT_VERIFY_CHUNK, OPT_DISCIPLINE
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
	{"stream-trace", required_argument, NULL, OPT_STREAM_TRACE},
	{"verify-bandwidth", required_argument, NULL, OPT_VERIFY_BW},
	{"pipe", required_argument, NULL, OPT_PIPE},
	{"verify-chunk", required_argument, NULL, OPT_VERIFY_CHUNK},
	{"discipline", required_argument, NULL, OPT_DISCIPLINE},
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
				       OPT_CACHE, OPT_STREAM_TRACE, OPT_VERIFY_BW, OPT_PIPE, OPT_VERIFY_CHUNK, OPT_DISCIPLINE, 0}},
	{"plot", (const int[]){OPT_JSON, OPT_OUT, OPT_BUDGET, OPT_PER_LAYER, OPT_PREDICTOR, OPT_TOKENS, OPT_ARTIFACT,
			       OPT_RECORD_BYTES, OPT_LATENCY, OPT_BANDWIDTH, OPT_DEPTH, OPT_PROBE_FILE, OPT_LAYER_TIME,
			       OPT_TIMINGS, OPT_ATTN, OPT_CACHE, OPT_WINDOW, OPT_SEQUENCES, OPT_VERIFY_BW, OPT_PIPE, OPT_VERIFY_CHUNK, OPT_DISCIPLINE, 0}},
	{"probe", (const int[]){OPT_JSON, OPT_FILE, OPT_READ_BYTES, 0}},
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

/* the options and operands that only make sense together or apart: 0, or
 * -1 after a usage error (printed) */
static int check_combinations(struct cli *c)
{
	if (strcmp(subs[c->sub].name, "probe") && !c->npaths)
		return bad("%s needs at least one TRACE", subs[c->sub].name);
	if (!strcmp(subs[c->sub].name, "probe") && c->npaths)
		return bad("probe takes no TRACE ('%s')", c->paths[0]);
	if (c->artifact && c->record_bytes)
		return bad("%s", "--artifact and --record-bytes exclude each other");
	if (c->stream_trace && (c->have_layer_time || c->timings))
		return bad("%s", "--stream-trace measures the layer time: it excludes --layer-time and --timings");
	if (c->have_verify_chunk && !c->have_verify)
		return bad("%s", "--verify-chunk sizes the check of --verify-bandwidth: give that too");
	if (c->discipline_engine && c->pipe_fifo)
		return bad("%s", "--discipline engine shares the pipe: it excludes --pipe fifo");
	if (!c->pipe_fifo && c->have_depth && c->depth > HB_TSTORE_MAX_SHARED)
		return bad("--pipe shared takes --depth up to %u (--pipe fifo takes more)", HB_TSTORE_MAX_SHARED);
	if (c->have_layer_time && c->timings)
		return bad("%s", "--layer-time and --timings exclude each other");
	if (!strcmp(subs[c->sub].name, "cache-sim") && !c->budget)
		return bad("%s", "cache-sim needs --budget");
	if (!strcmp(subs[c->sub].name, "plot") && !c->out)
		return bad("%s", "plot needs --out DIR");
	if (c->predictors == UINT32_MAX) /* all; engine where there is a stream trace */
		c->predictors = ((1u << HB_TPF_PREDICTORS) - 1) & ~(c->stream_trace ? 0u : 1u << HB_TPF_ENGINE);
	if ((c->predictors & (1u << HB_TPF_ENGINE)) && !c->stream_trace)
		return bad("%s", "--predictor engine replays a measured run's predicted reads: it needs --stream-trace");
	if (!strcmp(subs[c->sub].name, "plot") && (c->predictors & (c->predictors - 1)))
		return bad("%s", "plot draws one --predictor");
	return 0;
}

int trace_parse(int argc, char **argv, struct cli *c)
{
	int o;

	memset(c, 0, sizeof(*c));
	hb_tstats_opts_default(&c->st);
	c->policies = HB_TC_ALL;
	c->predictors = UINT32_MAX; /* the default: resolved after the options */
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
	c->name = subs[c->sub].name;
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
			c->have_attn = true;
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
			c->have_tokens = true;
			break;
		}
		case OPT_FILE: c->file = optarg; break;
		case OPT_STREAM_TRACE: c->stream_trace = optarg; break;
		case OPT_VERIFY_CHUNK:
			if (hb_parse_u64_range(optarg, 0, UINT64_MAX >> 1, &c->verify_chunk))
				return bad("--verify-chunk wants bytes (0: the whole record), not '%s'", optarg);
			c->have_verify_chunk = true;
			break;
		case OPT_DISCIPLINE:
			if (strcmp(optarg, "priority") && strcmp(optarg, "engine"))
				return bad("--discipline is priority or engine, not '%s'", optarg);
			c->discipline_engine = !strcmp(optarg, "engine");
			break;
		case OPT_PIPE:
			if (strcmp(optarg, "shared") && strcmp(optarg, "fifo"))
				return bad("--pipe is shared or fifo, not '%s'", optarg);
			c->pipe_fifo = !strcmp(optarg, "fifo");
			break;
		case OPT_VERIFY_BW:
			if (num(optarg, &c->verify_bw, "--verify-bandwidth") || !(c->verify_bw > 0))
				return bad("%s", "--verify-bandwidth must be > 0");
			c->have_verify = true;
			break;
		case OPT_READ_BYTES:
			if (hb_parse_u64_range(optarg, 1, 1ull << 30, &c->read_bytes))
				return bad("--read-bytes wants 1..1073741824, not '%s'", optarg);
			break;
		}
	}
	c->paths = (const char *const *)argv + optind;
	c->npaths = (size_t)(argc - optind);
	return check_combinations(c);
}
