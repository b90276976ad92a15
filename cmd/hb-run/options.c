/*
 * hb-run/options.c: hb-run's command line: usage, the options, and their
 * parsing into struct cli, with the combinations refused before anything
 * is read.
 */
#include "hb_base.h"
#include "hb_run_cli.h"
#include "hb_parse.h"

#include <getopt.h>

static void usage(FILE *f)
{
	fprintf(f,
		"usage: hb-run -m ARTIFACT PROMPT [-n N] [--greedy | --temp T --top-p P --top-k K --seed S] [--threads N] [--backend B] [--weights W] [--no-prefault] [CACHE] [--dump-logits F] [--dump-routes F] [TRACE-ID...] [CAPTURE...] [--json]\n"
		"   or: hb-run -m ARTIFACT (-p TEXT | --chat F [--no-think]) --tokenize-only [--print-tokens] [--json]\n"
		"   or: hb-run -m ARTIFACT --chat F [--no-think] --render-only\n"
		"   or: hb-run -m ARTIFACT PROMPT --verify-oracle FILE --block B [--threads N] [--json] [-q]\n"
		"\n"
		"  PROMPT is one of --tokens IDS, --tokens-file F, -p TEXT, --chat F [--no-think]\n"
		"  TRACE-ID is any of --sequence ID, --owner NAME, --thread NAME, --generation N\n"
		"  CACHE is --expert-cache SIZE [--expert-predict P] [--expert-evict E] [--prefill-extent M] [--stream-trace F]\n"
		"  CAPTURE is any of --features DIR, --router-ahead DIR, --deadlines F (with --feature-width N,\n"
		"          --feature-seed S, --split-file F, --split-name NAME)\n"
		"  -m, --model ARTIFACT   the artifact (admitted first)\n"
		"  --tokens IDS           prompt token ids, comma-separated\n"
		"  --tokens-file F        prompt token ids from F (commas or white space; - for stdin)\n"
		"  -p TEXT                prompt text, tokenized as data (the output is text)\n"
		"  --chat F               chat messages (JSON, hebrus-chat(5)) from F; - for stdin\n"
		"  --no-think             render --chat with thinking disabled\n"
		"  --tokenize-only        print the prompt ids and exit (no model run)\n"
		"  --render-only          print the rendered --chat bytes and exit\n"
		"  --print-tokens         list each prompt id with its provenance first\n"
		"  -n N                   tokens to generate (default 16)\n"
		"  --greedy               take the most likely token (the default)\n"
		"  --temp T               sample with temperature T\n"
		"  --top-p P              nucleus mass (default 1)\n"
		"  --top-k K              keep the K most likely tokens (default all)\n"
		"  --seed S               the sampler's seed (default 0)\n"
		"  --threads N            worker threads (default: all CPUs)\n"
		"  --backend B            cpu (the reference, default) or cuda (an NVIDIA GPU)\n"
		"  --weights W            read (the artifact read into this process's memory at start; the\n"
		"                         default on the cpu backend with the experts resident) or map (used\n"
		"                         in place from the page cache: the default otherwise)\n"
		"  --no-prefault          leave the weights' pages to be touched as the run first needs them\n"
		"                         (by default a CPU run touches them once before the prompt's clock)\n"
		"  --expert-cache SIZE    routed experts streamed from the artifact into a cache of SIZE:\n"
		"                         bytes (K, M, G suffixes), N%% of the expert store, or all (resident, the default)\n"
		"  --expert-predict P     what reads experts early: none, previous, router-ahead (default),\n"
		"                         router-ahead:W (its W most probable), learned:CHECKPOINT (a predictor\n"
		"                         checkpoint of hb-replay train)\n"
		"  --expert-evict E       cache eviction: lru, score (default)\n"
		"  --prefill-extent M     prefill layers read as sequential extents: off (default), auto, always\n"
		"  --stream-trace F       the streaming engine's records per chunk, layer step and read (hebrus-trace(5))\n"
		"  --dump-logits F        float32 rows, one per evaluated position\n"
		"  --dump-routes F        route trace shard (hebrus-trace(5)); - for stdout\n"
		"  --sequence ID          the sequence id recorded in route traces (default 0)\n"
		"  --owner NAME           the owner recorded in route traces: an integer or a name (default 0)\n"
		"  --thread NAME          the thread recorded in route traces: an integer or a name (default none)\n"
		"  --generation N         the owner's generation recorded in route traces (default 0)\n"
		"  --features DIR         capture the projected pre-attention mix of every position and layer\n"
		"  --feature-width N      the projection's width (default 128)\n"
		"  --feature-seed S       the projection's seed (default 0)\n"
		"  --split-file F         the split.json whose SHA-256 is the features' split id\n"
		"  --split-name NAME      the features' split (default runtime)\n"
		"  --router-ahead DIR     capture router-ahead's predictions in DIR/predictions.hbtrace\n"
		"  --deadlines F          capture when each layer's states and exact need existed (JSON)\n"
		"  --verify-oracle FILE   verify FILE's recorded greedy future B tokens a chunk (AFN-019 Gate E)\n"
		"  --block B              the oracle's verifier block, 1..16 inputs a chunk\n"
		"  --json                 print a JSON record instead of the id or text line\n"
		"  -q, --quiet            do not state the profile on stderr\n"
		"  -h, --help             this help\n"
		"      --version          versions of the tool and its libraries\n");
}

enum { OPT_TOKENS = 256, OPT_TOKENS_FILE, OPT_GREEDY, OPT_TEMP, OPT_TOP_P, OPT_TOP_K, OPT_SEED,
       OPT_THREADS, OPT_DUMP_LOGITS, OPT_DUMP_ROUTES, OPT_SEQUENCE, OPT_JSON, OPT_VERSION, OPT_CHAT,
       OPT_NO_THINK, OPT_TOKENIZE_ONLY, OPT_RENDER_ONLY, OPT_PRINT_TOKENS, OPT_OWNER, OPT_THREAD,
       OPT_GENERATION, OPT_BACKEND, OPT_VERIFY_ORACLE, OPT_BLOCK, OPT_XS_CACHE, OPT_XS_PREDICT, OPT_XS_EVICT,
       OPT_XS_EXTENT,
       OPT_FEATURES, OPT_FWIDTH, OPT_FSEED, OPT_SPLIT_FILE, OPT_SPLIT_NAME, OPT_AHEAD, OPT_DEADLINES,
       OPT_STREAM_TRACE, OPT_NO_PREFAULT, OPT_WEIGHTS };

/* --weights W: 0, or -1 after a usage error */
static int weights_option(struct cli *c, const char *arg)
{
	if (hb_weights_parse(arg, &c->weights_asked))
		return hb_cli_usage_error(prog, "--weights takes read or map, not '%s'", arg), -1;
	c->weights_set = true;
	return 0;
}

/* the weights mode the run takes (hb_weights_resolve): 0, or -1 after a
 * usage error; a run that only tokenizes or renders reads no weight */
static int resolve_weights(struct cli *c)
{
	struct hb_error err;

	if (c->weights_set && (c->tokenize_only || c->render_only))
		return hb_cli_usage_error(prog, "%s runs no model: it excludes --weights",
					  c->tokenize_only ? "--tokenize-only" : "--render-only"), -1;
	hb_error_clear(&err);
	if (hb_weights_resolve(c->backend, c->xs.cache, c->weights_set ? &c->weights_asked : NULL, &c->weights, &err))
		return hb_cli_usage_error(prog, "%s: %s", err.field, err.msg), -1;
	if (c->tokenize_only || c->render_only)
		c->weights = HB_WEIGHTS_MAP;
	return 0;
}

static const struct option long_opts[] = {
	{"model", required_argument, NULL, 'm'},
	{"tokens", required_argument, NULL, OPT_TOKENS},
	{"tokens-file", required_argument, NULL, OPT_TOKENS_FILE},
	{"greedy", no_argument, NULL, OPT_GREEDY},
	{"temp", required_argument, NULL, OPT_TEMP},
	{"top-p", required_argument, NULL, OPT_TOP_P},
	{"top-k", required_argument, NULL, OPT_TOP_K},
	{"seed", required_argument, NULL, OPT_SEED},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"backend", required_argument, NULL, OPT_BACKEND},
	{"no-prefault", no_argument, NULL, OPT_NO_PREFAULT},
	{"weights", required_argument, NULL, OPT_WEIGHTS},
	{"expert-cache", required_argument, NULL, OPT_XS_CACHE},
	{"expert-predict", required_argument, NULL, OPT_XS_PREDICT},
	{"expert-evict", required_argument, NULL, OPT_XS_EVICT},
	{"prefill-extent", required_argument, NULL, OPT_XS_EXTENT},
	{"stream-trace", required_argument, NULL, OPT_STREAM_TRACE},
	{"dump-logits", required_argument, NULL, OPT_DUMP_LOGITS},
	{"dump-routes", required_argument, NULL, OPT_DUMP_ROUTES},
	{"sequence", required_argument, NULL, OPT_SEQUENCE},
	{"owner", required_argument, NULL, OPT_OWNER},
	{"thread", required_argument, NULL, OPT_THREAD},
	{"generation", required_argument, NULL, OPT_GENERATION},
	{"features", required_argument, NULL, OPT_FEATURES},
	{"feature-width", required_argument, NULL, OPT_FWIDTH},
	{"feature-seed", required_argument, NULL, OPT_FSEED},
	{"split-file", required_argument, NULL, OPT_SPLIT_FILE},
	{"split-name", required_argument, NULL, OPT_SPLIT_NAME},
	{"router-ahead", required_argument, NULL, OPT_AHEAD},
	{"deadlines", required_argument, NULL, OPT_DEADLINES},
	{"verify-oracle", required_argument, NULL, OPT_VERIFY_ORACLE},
	{"block", required_argument, NULL, OPT_BLOCK},
	{"json", no_argument, NULL, OPT_JSON},
	{"chat", required_argument, NULL, OPT_CHAT},
	{"no-think", no_argument, NULL, OPT_NO_THINK},
	{"tokenize-only", no_argument, NULL, OPT_TOKENIZE_ONLY},
	{"render-only", no_argument, NULL, OPT_RENDER_ONLY},
	{"print-tokens", no_argument, NULL, OPT_PRINT_TOKENS},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, OPT_VERSION},
	{NULL, 0, NULL, 0},
};

/* the capture options (AFN-021 Gate 4); 0, or -1 after a usage error */
static int capture_option(int opt, const char *arg, struct cli *c)
{
	switch (opt) {
	case OPT_FEATURES: c->features = arg; break;
	case OPT_FWIDTH:
		if (hb_parse_u64_range(arg, 1, 4096, &c->feature_width))
			return hb_cli_usage_error(prog, "--feature-width takes 1..4096, not '%s'", arg), -1;
		break;
	case OPT_FSEED:
		if (hb_parse_u64(arg, &c->feature_seed))
			return hb_cli_usage_error(prog, "--feature-seed takes an unsigned integer, not '%s'", arg), -1;
		break;
	case OPT_SPLIT_FILE: c->split_file = arg; break;
	case OPT_SPLIT_NAME:
		if (!hb_taps_split_name_ok(arg))
			return hb_cli_usage_error(prog, "--split-name takes 1 to 23 of [a-z0-9_-], not '%s'", arg), -1;
		c->split_name = arg;
		break;
	case OPT_AHEAD: c->router_ahead = arg; break;
	default: c->deadlines = arg; break;
	}
	return 0;
}

static int check_capture(const struct cli *c)
{
	if ((c->split_file || c->split_name || c->feature_seed || c->feature_width != 128) && !c->features)
		return hb_cli_usage_error(prog, "--feature-width, --feature-seed and --split-* need --features"), -1;
	if ((c->features || c->router_ahead || c->deadlines) &&
	    (c->verify_oracle || c->tokenize_only || c->render_only))
		return hb_cli_usage_error(prog, "--features, --router-ahead and --deadlines capture a decode: they "
					  "exclude --verify-oracle, --tokenize-only and --render-only"), -1;
	if (c->xs.learned && c->verify_oracle)
		return hb_cli_usage_error(prog, "--expert-predict learned: is for decoding, not --verify-oracle"), -1;
	return 0;
}

int run_parse(int argc, char **argv, struct cli *c)
{
	int opt;

	memset(c, 0, sizeof(*c));
	c->n = 16;
	c->top_p = 1.0;
	c->feature_width = 128;
	hb_cli_xs_init(&c->xs);
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":m:n:p:qh", long_opts, NULL)) != -1) {
		switch (opt) {
		case 'm': c->model = optarg; break;
		case 'n':
			if (hb_parse_u64_range(optarg, 0, 1u << 20, &c->n))
				return hb_cli_usage_error(prog, "-n takes 0..1048576, not '%s'", optarg), -1;
			break;
		case OPT_TOKENS: c->tokens = optarg; break;
		case 'p': c->text = optarg; break;
		case OPT_CHAT: c->chat = optarg; break;
		case OPT_NO_THINK: c->no_think = true; break;
		case OPT_NO_PREFAULT: c->no_prefault = true; break;
		case OPT_TOKENIZE_ONLY: c->tokenize_only = true; break;
		case OPT_RENDER_ONLY: c->render_only = true; break;
		case OPT_PRINT_TOKENS: c->print_tokens = true; break;
		case OPT_TOKENS_FILE: c->tokens_file = optarg; break;
		case OPT_GREEDY: c->greedy_flag = true; break;
		case OPT_TEMP:
			if (hb_parse_double(optarg, &c->temp) || !(c->temp > 0))
				return hb_cli_usage_error(prog, "--temp takes a positive number, not '%s'", optarg), -1;
			c->sampling = true;
			break;
		case OPT_TOP_P:
			if (hb_parse_double(optarg, &c->top_p) || !(c->top_p > 0) || c->top_p > 1)
				return hb_cli_usage_error(prog, "--top-p takes a number in (0, 1], not '%s'", optarg), -1;
			c->sampling = true;
			break;
		case OPT_TOP_K:
			if (hb_parse_u64_range(optarg, 1, UINT32_MAX, &c->top_k))
				return hb_cli_usage_error(prog, "--top-k takes a positive count, not '%s'", optarg), -1;
			c->sampling = true;
			break;
		case OPT_SEED:
			if (hb_parse_u64(optarg, &c->seed))
				return hb_cli_usage_error(prog, "--seed takes an unsigned integer, not '%s'", optarg), -1;
			break;
		case OPT_BACKEND:
			if (hb_backend_parse(optarg, &c->backend))
				return hb_cli_usage_error(prog, "--backend takes cpu or cuda, not '%s'", optarg), -1;
			break;
		case OPT_WEIGHTS:
			if (weights_option(c, optarg))
				return -1;
			break;
		case OPT_THREADS:
			if (hb_parse_u64_range(optarg, 1, 1024, &c->threads))
				return hb_cli_usage_error(prog, "--threads takes 1..1024, not '%s'", optarg), -1;
			break;
		case OPT_XS_CACHE:
		case OPT_XS_PREDICT:
		case OPT_XS_EVICT:
		case OPT_XS_EXTENT:
			if (hb_cli_xs_option(prog, &c->xs, (enum hb_cli_xs_opt)(opt - OPT_XS_CACHE), optarg))
				return -1;
			break;
		case OPT_FEATURES: case OPT_FWIDTH: case OPT_FSEED: case OPT_SPLIT_FILE: case OPT_SPLIT_NAME:
		case OPT_AHEAD: case OPT_DEADLINES:
			if (capture_option(opt, optarg, c))
				return -1;
			break;
		case OPT_DUMP_LOGITS: c->dump_logits = optarg; break;
		case OPT_STREAM_TRACE: c->stream_trace = optarg; break;
		case OPT_DUMP_ROUTES: c->dump_routes = optarg; break;
		case OPT_SEQUENCE:
			if (hb_parse_u64(optarg, &c->sequence))
				return hb_cli_usage_error(prog, "--sequence takes an unsigned integer, not '%s'", optarg), -1;
			break;
		case OPT_OWNER:
		case OPT_THREAD:
			/* the mapping transcripts use (hb_trace_name_id), so that a
			 * capture and the replay of its transcript agree */
			if (hb_trace_name_id(optarg, strlen(optarg), opt == OPT_OWNER ? &c->owner : &c->thread))
				return hb_cli_usage_error(prog, "%s takes an unsigned integer or a name of 1..%u bytes "
							  "without control characters, not '%s'",
							  opt == OPT_OWNER ? "--owner" : "--thread", HB_TRACE_NAME_MAX,
							  optarg), -1;
			c->has_thread |= opt == OPT_THREAD;
			break;
		case OPT_GENERATION:
			if (hb_parse_u64_range(optarg, 0, UINT32_MAX, &c->generation))
				return hb_cli_usage_error(prog, "--generation takes 0..4294967295, not '%s'", optarg), -1;
			break;
		case OPT_VERIFY_ORACLE: c->verify_oracle = optarg; break;
		case OPT_BLOCK:
			if (hb_parse_u64_range(optarg, 1, 16, &c->block))
				return hb_cli_usage_error(prog, "--block takes 1..16, not '%s'", optarg), -1;
			break;
		case OPT_JSON: c->json = true; break;
		case 'q': c->quiet = true; break;
		case 'h': usage(stdout); exit(HB_EXIT_OK);
		case OPT_VERSION: hb_cli_version(prog); exit(HB_EXIT_OK);
		case ':':
		default:
			return hb_cli_getopt_error(prog, opt, argv);
		}
	}
	if (optind != argc)
		return hb_cli_usage_error(prog, "unexpected argument '%s'", argv[optind]), -1;
	if (!c->model)
		return hb_cli_usage_error(prog, "-m ARTIFACT is required"), -1;
	if (!!c->tokens + !!c->tokens_file + !!c->text + !!c->chat != 1)
		return hb_cli_usage_error(prog, "give exactly one of --tokens, --tokens-file, -p and --chat"), -1;
	if (c->no_think && !c->chat)
		return hb_cli_usage_error(prog, "--no-think needs --chat"), -1;
	if (c->render_only && !c->chat)
		return hb_cli_usage_error(prog, "--render-only needs --chat"), -1;
	if (c->render_only && (c->tokenize_only || c->print_tokens || c->json))
		return hb_cli_usage_error(prog, "--render-only excludes --tokenize-only, --print-tokens and --json"), -1;
	if ((c->tokenize_only || c->print_tokens) && !c->text && !c->chat)
		return hb_cli_usage_error(prog, "%s needs -p or --chat", c->tokenize_only ? "--tokenize-only" : "--print-tokens"), -1;
	if ((c->tokenize_only || c->render_only) && (c->dump_logits || c->dump_routes))
		return hb_cli_usage_error(prog, "%s runs no model: it excludes --dump-logits and --dump-routes",
					  c->tokenize_only ? "--tokenize-only" : "--render-only"), -1;
	if (!c->verify_oracle != !c->block)
		return hb_cli_usage_error(prog, "--verify-oracle and --block go together"), -1;
	if (c->verify_oracle && (c->sampling || c->dump_logits || c->dump_routes || c->tokenize_only ||
				 c->render_only || c->print_tokens))
		return hb_cli_usage_error(prog, "--verify-oracle verifies greedy decoding: it excludes sampling, "
					  "the dumps, --tokenize-only, --render-only and --print-tokens"), -1;
	if (hb_cli_xs_check(prog, &c->xs) || check_capture(c))
		return -1;
	if (c->stream_trace && !c->xs.cache)
		return hb_cli_usage_error(prog, "--stream-trace needs --expert-cache SIZE other than all (it records the streaming engine)"), -1;
	if (c->stream_trace && (c->verify_oracle || c->tokenize_only || c->render_only || !strcmp(c->stream_trace, "-")))
		return hb_cli_usage_error(prog, "--stream-trace needs a file and a plain run (not --verify-oracle, "
					  "--tokenize-only or --render-only)"), -1;
	if (resolve_weights(c))
		return -1;
	if (c->greedy_flag && c->sampling)
		return hb_cli_usage_error(prog, "--greedy excludes --temp, --top-p and --top-k"), -1;
	if (c->sampling && !(c->temp > 0))
		c->temp = 1.0;
	if (c->dump_logits && !strcmp(c->dump_logits, "-"))
		return hb_cli_usage_error(prog, "--dump-logits needs a file (stdout carries the ids)"), -1;
	if (c->dump_routes && !strcmp(c->dump_routes, "-") && c->json)
		return hb_cli_usage_error(prog, "--dump-routes - and --json both want stdout"), -1;
	if (c->dump_routes && !strcmp(c->dump_routes, "-") && c->print_tokens)
		return hb_cli_usage_error(prog, "--dump-routes - and --print-tokens both want stdout"), -1;
	return 0;
}
