/*
 * hb-replay: decode replayed as prefill (AFN-021).  A thin front over
 * libstore/hb_replay.h: parses a subcommand's options, wires the CPU
 * reference session (libkern/hb_session) into the labeller as its engine,
 * prints summaries and maps results to exit statuses.  Replay makes
 * training labels; it never makes evidence about decode latency, cache
 * state or runtime parity beyond what `parity` checks.
 */
#include "hb_base.h"
#include "hb_cli.h"
#include "hb_json.h"
#include "graph/hb_model.h"
#include "hb_parse.h"
#include "hb_pool.h"
#include "hb_publish.h"
#include "hb-replay/dataset/hb_replay.h"
#include "hb_sha256.h"
#include "graph/hb_session.h"

#include <errno.h>
#include <getopt.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *const prog = "hb-replay";

static void usage(FILE *f)
{
	fprintf(f,
		"usage: hb-replay label -m ARTIFACT -o OUTDIR [--shard I/N] [--chunk N] [--max-shard-bytes B] [--text-digest HEX] [--capture-hidden LAYERS] [--threads N] [--json] TRANSCRIPTS.jsonl\n"
		"   or: hb-replay parity [--weight-tol X] [--json] LABELS TRACE...\n"
		"   or: hb-replay split [--seed S] [--validation F] [--temporal F] [--window N] [--stride N] -o DIR TRANSCRIPTS.jsonl\n"
		"   or: hb-replay merge [--transcripts F] LABELDIR...\n"
		"   or: hb-replay eval --train LABELS [--k LIST] [--predictions F]... [--seed S] -o DIR HELDOUT\n"
		"\n"
		"  -m, --model ARTIFACT   label: the artifact (admitted first)\n"
		"  -o, --output DIR       label: shard directory; split, eval: output directory\n"
		"  --shard I/N            label: transcripts whose index modulo N is I (default 0/1)\n"
		"  --chunk N              label: positions per prefill forward (default 256)\n"
		"  --max-shard-bytes B    label: bound on one shard file (default 67108864)\n"
		"  --text-digest HEX      label: tokenizer+template SHA-256 recorded in shards\n"
		"  --capture-hidden LAYERS   label: also keep these layers' outputs (comma-separated indices)\n"
		"  --capture-positions N  label: sampled positions per sequence (default 8)\n"
		"  --threads N            label: worker threads (default: all CPUs)\n"
		"  --weight-tol X         parity: largest |weight difference| accepted (default 1e-4)\n"
		"  --seed S               split: the owner hash seed; eval: the random baseline's (default 0)\n"
		"  --validation F         split: fraction of remaining owners for validation (default 0.1)\n"
		"  --temporal F           split: newest fraction of owners held out (default 0.1)\n"
		"  --window N             split: cut windows of N tokens (default: whole transcripts)\n"
		"  --stride N             split: window stride (default: the window)\n"
		"  --transcripts F        merge: also prove every transcript is covered\n"
		"  --train LABELS         eval: train-split labels (the frequency baseline)\n"
		"  --k LIST               eval: candidate budgets, comma-separated (default 10,16,20,32)\n"
		"  --predictions F        eval: a predictor's candidates as a trace shard (repeatable)\n"
		"  --json                 print a JSON record instead of the summary line\n"
		"  -q, --quiet            label: no progress on stderr\n"
		"  -h, --help             this help\n"
		"      --version          versions of the tool and its libraries\n");
}

enum { OPT_SHARD = 256, OPT_CHUNK, OPT_MAXB, OPT_TEXT, OPT_THREADS, OPT_TOL, OPT_SEED, OPT_VAL, OPT_TEMPORAL,
       OPT_WINDOW, OPT_STRIDE, OPT_TRANSCRIPTS, OPT_TRAIN, OPT_K, OPT_PRED, OPT_JSON, OPT_VERSION,
       OPT_CAPTURE, OPT_CAPTURE_POS };

static const struct option long_opts[] = {
	{"model", required_argument, NULL, 'm'},
	{"output", required_argument, NULL, 'o'},
	{"shard", required_argument, NULL, OPT_SHARD},
	{"chunk", required_argument, NULL, OPT_CHUNK},
	{"max-shard-bytes", required_argument, NULL, OPT_MAXB},
	{"text-digest", required_argument, NULL, OPT_TEXT},
	{"capture-hidden", required_argument, NULL, OPT_CAPTURE},
	{"capture-positions", required_argument, NULL, OPT_CAPTURE_POS},
	{"threads", required_argument, NULL, OPT_THREADS},
	{"weight-tol", required_argument, NULL, OPT_TOL},
	{"seed", required_argument, NULL, OPT_SEED},
	{"validation", required_argument, NULL, OPT_VAL},
	{"temporal", required_argument, NULL, OPT_TEMPORAL},
	{"window", required_argument, NULL, OPT_WINDOW},
	{"stride", required_argument, NULL, OPT_STRIDE},
	{"transcripts", required_argument, NULL, OPT_TRANSCRIPTS},
	{"train", required_argument, NULL, OPT_TRAIN},
	{"k", required_argument, NULL, OPT_K},
	{"predictions", required_argument, NULL, OPT_PRED},
	{"json", no_argument, NULL, OPT_JSON},
	{"quiet", no_argument, NULL, 'q'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, OPT_VERSION},
	{NULL, 0, NULL, 0},
};

struct cli {
	const char *sub, *model, *out, *transcripts, *train;
	const char *pred[16];
	size_t n_pred;
	uint64_t budgets[16];
	size_t n_budgets;
	uint64_t shard_i, shard_n, chunk, max_bytes, threads, seed, window, stride;
	double tol, validation, temporal;
	uint8_t text[32];
	uint32_t capture[HB_REPLAY_CAPTURE_MAX];
	size_t n_capture;
	uint64_t capture_positions;
	bool json, quiet;
	char **args;
	int n_args;
};

static int parse_fraction(const char *s, double *v)
{
	return hb_parse_double(s, v) || !(*v >= 0) || *v > 1;
}

static int parse_budgets(const char *s, struct cli *c)
{
	c->n_budgets = 0;
	while (*s) {
		char buf[24];
		size_t n = strcspn(s, ",");
		uint64_t v;
		if (!n || n >= sizeof(buf) || c->n_budgets == HB_ARRAY_LEN(c->budgets))
			return -1;
		memcpy(buf, s, n);
		buf[n] = '\0';
		if (hb_parse_u64_range(buf, 1, 1u << 20, &v) || (c->n_budgets && v <= c->budgets[c->n_budgets - 1]))
			return -1;
		c->budgets[c->n_budgets++] = v;
		s += n;
		if (*s == ',' && !*++s)
			return -1;
	}
	return c->n_budgets ? 0 : -1;
}

/* LAYERS: comma-separated layer indices.  Only the syntax is checked here;
 * the labeller refuses a duplicate or a layer the model lacks
 * (replay-capture), since only it knows the model. */
static int parse_layers(const char *s, struct cli *c)
{
	c->n_capture = 0;
	while (*s) {
		char buf[24];
		size_t n = strcspn(s, ",");
		uint64_t v;
		if (!n || n >= sizeof(buf) || c->n_capture == HB_ARRAY_LEN(c->capture))
			return -1;
		memcpy(buf, s, n);
		buf[n] = '\0';
		if (hb_parse_u64_range(buf, 0, UINT32_MAX, &v))
			return -1;
		c->capture[c->n_capture++] = (uint32_t)v;
		s += n;
		if (*s == ',' && !*++s)
			return -1;
	}
	return c->n_capture ? 0 : -1;
}

static int parse(int argc, char **argv, struct cli *c)
{
	int opt;

	memset(c, 0, sizeof(*c));
	c->shard_n = 1;
	c->chunk = 256;
	c->max_bytes = UINT64_C(64) << 20;
	c->tol = 1e-4;
	c->validation = 0.1;
	c->temporal = 0.1;
	c->budgets[0] = 10, c->budgets[1] = 16, c->budgets[2] = 20, c->budgets[3] = 32;
	c->n_budgets = 4;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":m:o:qh", long_opts, NULL)) != -1) {
		switch (opt) {
		case 'm': c->model = optarg; break;
		case 'o': c->out = optarg; break;
		case OPT_SHARD: {
			const char *slash = strchr(optarg, '/');
			char a[24];
			size_t n = slash ? (size_t)(slash - optarg) : 0;
			if (!slash || !n || n >= sizeof(a))
				goto bad_shard;
			memcpy(a, optarg, n);
			a[n] = '\0';
			if (hb_parse_u64_range(slash + 1, 1, 9999, &c->shard_n) ||
			    hb_parse_u64_range(a, 0, c->shard_n - 1, &c->shard_i))
				goto bad_shard;
			break;
		bad_shard:
			return hb_cli_usage_error(prog, "--shard takes I/N with 0 <= I < N <= 9999, not '%s'", optarg), -1;
		}
		case OPT_CHUNK:
			if (hb_parse_u64_range(optarg, 1, 1u << 20, &c->chunk))
				return hb_cli_usage_error(prog, "--chunk takes 1..1048576, not '%s'", optarg), -1;
			break;
		case OPT_MAXB:
			if (hb_parse_u64_range(optarg, 1, UINT64_C(1) << 40, &c->max_bytes))
				return hb_cli_usage_error(prog, "--max-shard-bytes takes a positive size, not '%s'", optarg), -1;
			break;
		case OPT_TEXT:
			if (strlen(optarg) != 64 || hb_hex_decode(optarg, c->text, 32))
				return hb_cli_usage_error(prog, "--text-digest takes 64 hex digits, not '%s'", optarg), -1;
			break;
		case OPT_CAPTURE:
			if (parse_layers(optarg, c))
				return hb_cli_usage_error(prog, "--capture-hidden takes comma-separated layer indices, not '%s'",
							  optarg), -1;
			break;
		case OPT_CAPTURE_POS:
			if (hb_parse_u64_range(optarg, 1, 1u << 20, &c->capture_positions))
				return hb_cli_usage_error(prog, "--capture-positions takes 1..1048576, not '%s'", optarg), -1;
			break;
		case OPT_THREADS:
			if (hb_parse_u64_range(optarg, 1, 1024, &c->threads))
				return hb_cli_usage_error(prog, "--threads takes 1..1024, not '%s'", optarg), -1;
			break;
		case OPT_TOL:
			if (hb_parse_double(optarg, &c->tol) || !(c->tol >= 0))
				return hb_cli_usage_error(prog, "--weight-tol takes a non-negative number, not '%s'", optarg), -1;
			break;
		case OPT_SEED:
			if (hb_parse_u64(optarg, &c->seed))
				return hb_cli_usage_error(prog, "--seed takes an unsigned integer, not '%s'", optarg), -1;
			break;
		case OPT_VAL:
			if (parse_fraction(optarg, &c->validation))
				return hb_cli_usage_error(prog, "--validation takes a number in [0, 1], not '%s'", optarg), -1;
			break;
		case OPT_TEMPORAL:
			if (parse_fraction(optarg, &c->temporal))
				return hb_cli_usage_error(prog, "--temporal takes a number in [0, 1], not '%s'", optarg), -1;
			break;
		case OPT_WINDOW:
			if (hb_parse_u64_range(optarg, 1, UINT32_MAX, &c->window))
				return hb_cli_usage_error(prog, "--window takes a positive count, not '%s'", optarg), -1;
			break;
		case OPT_STRIDE:
			if (hb_parse_u64_range(optarg, 1, UINT32_MAX, &c->stride))
				return hb_cli_usage_error(prog, "--stride takes a positive count, not '%s'", optarg), -1;
			break;
		case OPT_TRANSCRIPTS: c->transcripts = optarg; break;
		case OPT_TRAIN: c->train = optarg; break;
		case OPT_PRED:
			if (c->n_pred == HB_ARRAY_LEN(c->pred))
				return hb_cli_usage_error(prog, "at most %zu --predictions", HB_ARRAY_LEN(c->pred)), -1;
			c->pred[c->n_pred++] = optarg;
			break;
		case OPT_K:
			if (parse_budgets(optarg, c))
				return hb_cli_usage_error(prog, "--k takes up to 16 ascending positive counts, not '%s'", optarg), -1;
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
	if (optind >= argc)
		return hb_cli_usage_error(prog, "a subcommand is required (label, parity, split, merge, eval)"), -1;
	c->sub = argv[optind];
	c->args = argv + optind + 1;
	c->n_args = argc - optind - 1;
	if (!strcmp(c->sub, "label")) {
		if (!c->model || !c->out)
			return hb_cli_usage_error(prog, "label needs -m ARTIFACT and -o OUTDIR"), -1;
		if (c->n_args != 1)
			return hb_cli_usage_error(prog, "label takes one TRANSCRIPTS.jsonl"), -1;
		if (c->capture_positions && !c->n_capture)
			return hb_cli_usage_error(prog, "--capture-positions needs --capture-hidden"), -1;
	} else if (!strcmp(c->sub, "parity")) {
		if (c->n_args < 2)
			return hb_cli_usage_error(prog, "parity takes LABELS and at least one TRACE"), -1;
	} else if (!strcmp(c->sub, "split")) {
		if (!c->out || c->n_args != 1)
			return hb_cli_usage_error(prog, "split needs -o DIR and one TRANSCRIPTS.jsonl"), -1;
		if (c->stride && !c->window)
			return hb_cli_usage_error(prog, "--stride needs --window"), -1;
	} else if (!strcmp(c->sub, "merge")) {
		if (c->n_args < 1)
			return hb_cli_usage_error(prog, "merge takes at least one LABELDIR"), -1;
	} else if (!strcmp(c->sub, "eval")) {
		if (!c->train || !c->out || c->n_args != 1)
			return hb_cli_usage_error(prog, "eval needs --train LABELS, -o DIR and one HELDOUT"), -1;
	} else {
		return hb_cli_usage_error(prog, "unknown subcommand '%s'", c->sub), -1;
	}
	return 0;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int emit_json(cJSON *j)
{
	return hb_cli_print_json(prog, j);
}

/* ------------------------------------------------------------ label */

struct engine {
	const struct hb_model *m;
	struct hb_pool *pool;
	struct hb_session *s;
	hb_replay_emit_fn emit;
	hb_replay_hidden_fn hidden;
	void *emit_ctx;
	int32_t ids[64];
	size_t k;
	int rc;
};

static void observe(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct engine *e = ctx;

	if (e->rc)
		return;
	if (kind == HB_OBS_ROUTES) {
		e->k = n < 64 ? n : 64;
		memcpy(e->ids, data, e->k * sizeof(int32_t));
	} else if (kind == HB_OBS_ROUTE_WEIGHTS) {
		e->rc = e->emit(e->emit_ctx, (uint32_t)layer, pos, e->ids, data, e->k);
	} else if (kind == HB_OBS_HIDDEN && e->hidden && layer >= 0) {
		e->rc = e->hidden(e->emit_ctx, (uint32_t)layer, pos, data, n);
	}
}

static int eng_begin(void *ctx, uint64_t max_tokens, struct hb_error *err)
{
	struct engine *e = ctx;

	hb_session_free(e->s);
	e->s = NULL;
	return hb_session_create(e->m, e->pool, max_tokens, &e->s, err);
}

static int eng_forward(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit, void *emit_ctx,
		       struct hb_error *err)
{
	struct engine *e = ctx;
	int rc;

	e->emit = emit;
	e->hidden = NULL;
	e->emit_ctx = emit_ctx;
	e->rc = 0;
	rc = hb_session_forward(e->s, tokens, n, NULL, observe, e, err);
	if (!rc && e->rc)
		rc = hb_error_set(err, HB_ERR_INTERNAL, "labels", "a route could not be recorded");
	return rc;
}

static int eng_forward_hidden(void *ctx, const int32_t *tokens, size_t n, hb_replay_emit_fn emit,
			      hb_replay_hidden_fn hidden, void *emit_ctx, struct hb_error *err)
{
	struct engine *e = ctx;
	int rc;

	e->emit = emit;
	e->hidden = hidden;
	e->emit_ctx = emit_ctx;
	e->rc = 0;
	rc = hb_session_forward(e->s, tokens, n, NULL, observe, e, err);
	e->hidden = NULL;
	if (!rc && e->rc)
		rc = hb_error_set(err, HB_ERR_INTERNAL, "labels", "a route or hidden state could not be recorded");
	return rc;
}

static int cmd_label(const struct cli *c)
{
	struct hb_error err;
	struct hb_model *m = NULL;
	struct engine eng;
	struct hb_replay_engine re;
	struct hb_label_config cfg;
	struct hb_label_stats st;
	struct hb_transcripts ts = {0};
	double t0, dt;
	int rc;

	hb_error_clear(&err);
	memset(&eng, 0, sizeof(eng));
	if ((rc = hb_transcripts_load(c->args[0], &ts, &err)))
		goto fail;
	if ((rc = hb_model_load(c->model, &m, &err))) {
		hb_cli_error(prog, &err);
		hb_transcripts_release(&ts);
		return err.id && strcmp(err.id, "gguf-io") ? HB_EXIT_NO : HB_EXIT_SYSTEM;
	}
	eng.m = m;
	if ((rc = hb_pool_create((unsigned)c->threads, &eng.pool, &err)))
		goto fail;
	memset(&re, 0, sizeof(re));
	re.top_k = (uint32_t)m->cfg.num_experts_per_tok;
	re.layers = (uint32_t)m->cfg.num_layers;
	re.experts = (uint32_t)m->cfg.num_experts;
	re.vocab = m->vocab_semantic;
	memcpy(re.artifact, m->artifact_sha, 32);
	re.ctx = &eng;
	re.begin = eng_begin;
	re.forward = eng_forward;
	re.hc = (uint32_t)m->cfg.hc_count;
	re.hidden = (uint32_t)m->cfg.hidden_size;
	re.forward_hidden = eng_forward_hidden;
	memset(&cfg, 0, sizeof(cfg));
	cfg.outdir = c->out;
	cfg.shard_index = (uint32_t)c->shard_i;
	cfg.shard_count = (uint32_t)c->shard_n;
	cfg.max_shard_bytes = c->max_bytes;
	cfg.chunk_tokens = c->chunk;
	memcpy(cfg.text, c->text, 32);
	cfg.capture = c->capture;
	cfg.n_capture = c->n_capture;
	cfg.capture_positions = c->capture_positions ? c->capture_positions : 8;
	t0 = now();
	rc = hb_label_run(&ts, &re, &cfg, &st, &err);
	dt = now() - t0;
	if (rc)
		goto fail;
	if (c->json) {
		cJSON *j = cJSON_CreateObject();
		hb_json_add_u64(j, "sequences", st.sequences);
		hb_json_add_u64(j, "positions", st.positions);
		hb_json_add_u64(j, "positions_skipped", st.positions_skipped);
		hb_json_add_u64(j, "records", st.records);
		hb_json_add_u64(j, "shards_written", st.shards_written);
		hb_json_add_u64(j, "shards_kept", st.shards_kept);
		hb_json_add_u64(j, "partial_discarded", st.partial_discarded);
		hb_json_add_u64(j, "hidden_samples", st.hidden_samples);
		cJSON_AddNumberToObject(j, "seconds", dt);
		cJSON_AddNumberToObject(j, "positions_per_second", dt > 0 ? (double)st.positions / dt : 0);
		cJSON_AddNumberToObject(j, "records_per_second", dt > 0 ? (double)st.records / dt : 0);
		emit_json(j);
	} else {
		printf("labelled %" PRIu64 " sequences, %" PRIu64 " positions, %" PRIu64 " records: %" PRIu64
		       " shards written, %" PRIu64 " kept, %" PRIu64 " partial discarded\n",
		       st.sequences, st.positions, st.records, st.shards_written, st.shards_kept, st.partial_discarded);
		if (c->n_capture)
			printf("captured the hidden states of %zu layers at %" PRIu64 " positions\n", c->n_capture,
			       st.hidden_samples);
	}
	hb_session_free(eng.s);
	hb_pool_destroy(eng.pool);
	hb_model_free(m);
	hb_transcripts_release(&ts);
	return HB_EXIT_OK;
fail:
	hb_cli_error(prog, &err);
	hb_session_free(eng.s);
	hb_pool_destroy(eng.pool);
	hb_model_free(m);
	hb_transcripts_release(&ts);
	return hb_cli_exit_for(rc);
}

/* ------------------------------------------------------------ parity */

static int cmd_parity(const struct cli *c)
{
	struct hb_error err;
	struct hb_parity_stats st;
	int rc;

	hb_error_clear(&err);
	rc = hb_parity_run((const char *const *)c->args, 1, (const char *const *)c->args + 1, (size_t)c->n_args - 1,
			   c->tol, &st, &err);
	if (rc && !st.failures) {
		hb_cli_error(prog, &err);
		return hb_cli_exit_for(rc);
	}
	if (c->json) {
		cJSON *j = cJSON_CreateObject();
		hb_json_add_bool(j, "parity", rc == 0);
		hb_json_add_u64(j, "label_records", st.label_records);
		hb_json_add_u64(j, "trace_records", st.trace_records);
		hb_json_add_u64(j, "checked", st.checked);
		hb_json_add_u64(j, "unchecked_labels", st.unchecked_labels);
		hb_json_add_u64(j, "sequences", st.sequences);
		hb_json_add_u64(j, "failures", st.failures);
		cJSON_AddNumberToObject(j, "max_weight_diff", st.max_weight_diff);
		emit_json(j);
	}
	if (rc) {
		hb_cli_error(prog, &err);
		if (st.failures > 1)
			fprintf(stderr, "%s: %" PRIu64 " failing records in all\n", prog, st.failures);
		return HB_EXIT_NO;
	}
	if (!c->json)
		printf("parity: %" PRIu64 " decode records match their labels exactly (%" PRIu64
		       " labels not in any trace), max |weight difference| %.3g\n",
		       st.checked, st.unchecked_labels, st.max_weight_diff);
	return HB_EXIT_OK;
}

/* ------------------------------------------------------------ split */

struct split_out {
	struct hb_publish pub[HB_SPLIT_COUNT];
	bool open[HB_SPLIT_COUNT];
};

static int split_emit(void *ctx, int split, const struct hb_transcript *w, struct hb_error *err)
{
	struct split_out *o = ctx;
	char *line = hb_transcript_render(w);
	int rc;

	if (!line)
		return hb_error_set(err, HB_ERR_NOMEM, "split", "out of memory");
	rc = hb_publish_write(&o->pub[split], line, strlen(line), err);
	if (!rc)
		rc = hb_publish_write(&o->pub[split], "\n", 1, err);
	free(line);
	return rc;
}

static int cmd_split(const struct cli *c)
{
	struct hb_error err;
	struct hb_transcripts ts = {0};
	struct hb_split_config cfg;
	struct hb_split_result res;
	struct split_out o;
	cJSON *j = NULL, *splits;
	char path[4096], *text = NULL;
	size_t len = 0;
	int rc;

	hb_error_clear(&err);
	memset(&o, 0, sizeof(o));
	memset(&res, 0, sizeof(res));
	if ((rc = hb_transcripts_load(c->args[0], &ts, &err)))
		goto fail;
	if (mkdir(c->out, 0777) && errno != EEXIST) {
		rc = hb_error_sys(&err, errno, c->out, "cannot create the output directory");
		goto fail;
	}
	for (int s = 0; s < HB_SPLIT_COUNT; s++) {
		snprintf(path, sizeof(path), "%s/%s.jsonl", c->out, hb_split_name(s));
		if ((rc = hb_publish_begin(&o.pub[s], path, HB_PUBLISH_REPLACE, &err)))
			goto fail;
		o.open[s] = true;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.seed = c->seed;
	cfg.validation_fraction = c->validation;
	cfg.temporal_fraction = c->temporal;
	cfg.window = c->window;
	cfg.stride = c->stride;
	if ((rc = hb_split_run(&ts, &cfg, split_emit, &o, &res, &err)))
		goto fail;
	if (res.owner_overlap || res.thread_overlap) {
		rc = hb_error_set(&err, HB_ERR_INTERNAL, "split", "%" PRIu64 " owners and %" PRIu64
				  " threads appear in two splits", res.owner_overlap, res.thread_overlap);
		goto fail;
	}
	j = cJSON_CreateObject();
	hb_json_add_str(j, "format", "hebrus-replay-split/1");
	hb_json_add_u64(j, "seed", c->seed);
	cJSON_AddNumberToObject(j, "validation_fraction", c->validation);
	cJSON_AddNumberToObject(j, "temporal_fraction", c->temporal);
	hb_json_add_u64(j, "window", c->window);
	hb_json_add_u64(j, "stride", c->stride ? c->stride : c->window);
	splits = cJSON_AddObjectToObject(j, "splits");
	for (int s = 0; s < HB_SPLIT_COUNT; s++) {
		cJSON *x = cJSON_AddObjectToObject(splits, hb_split_name(s));
		const struct hb_split_counts *k = &res.counts[s];
		hb_json_add_u64(x, "owners", k->owners);
		hb_json_add_u64(x, "threads", k->threads);
		hb_json_add_u64(x, "transcripts", k->transcripts);
		hb_json_add_u64(x, "windows", k->windows);
		hb_json_add_u64(x, "tokens", k->tokens);
		hb_json_add_u64(x, "duplicates_dropped", k->duplicates_dropped);
	}
	hb_json_add_u64(j, "owners_in_two_splits", res.owner_overlap);
	hb_json_add_u64(j, "threads_in_two_splits", res.thread_overlap);
	if ((rc = hb_json_render(j, true, &text, &len, &err)))
		goto fail;
	for (int s = 0; s < HB_SPLIT_COUNT; s++) {
		o.open[s] = false;
		if ((rc = hb_publish_commit(&o.pub[s], NULL, NULL, &err)))
			goto fail;
	}
	snprintf(path, sizeof(path), "%s/split.json", c->out);
	if ((rc = hb_publish_buf(path, text, len, HB_PUBLISH_REPLACE, &err)))
		goto fail;
	fwrite(text, 1, len, stdout);
	free(text);
	cJSON_Delete(j);
	hb_split_result_release(&res);
	hb_transcripts_release(&ts);
	return HB_EXIT_OK;
fail:
	hb_cli_error(prog, &err);
	for (int s = 0; s < HB_SPLIT_COUNT; s++)
		if (o.open[s])
			hb_publish_abort(&o.pub[s]);
	free(text);
	cJSON_Delete(j);
	hb_split_result_release(&res);
	hb_transcripts_release(&ts);
	return hb_cli_exit_for(rc);
}

/* ------------------------------------------------------------ merge */

static int cmd_merge(const struct cli *c)
{
	struct hb_error err;
	struct hb_transcripts ts = {0};
	struct hb_merge_stats st;
	char *report = NULL;
	int rc;

	hb_error_clear(&err);
	if (c->transcripts && (rc = hb_transcripts_load(c->transcripts, &ts, &err))) {
		hb_cli_error(prog, &err);
		return hb_cli_exit_for(rc);
	}
	rc = hb_merge_run((const char *const *)c->args, (size_t)c->n_args, c->transcripts ? &ts : NULL, &report, &st,
			  &err);
	if (report)
		fputs(report, stdout);
	free(report);
	hb_transcripts_release(&ts);
	if (rc) {
		hb_cli_error(prog, &err);
		return hb_cli_exit_for(rc);
	}
	return HB_EXIT_OK;
}

/* ------------------------------------------------------------ eval */

static int publish_text(const char *path, const char *text, struct hb_error *err)
{
	return hb_publish_buf(path, text, strlen(text), HB_PUBLISH_REPLACE, err);
}

static int cmd_eval(const struct cli *c)
{
	struct hb_error err;
	char *json = NULL, *svg = NULL, path[4096];
	int rc;

	hb_error_clear(&err);
	rc = hb_eval_run(c->train, c->args[0], c->pred, c->n_pred, c->budgets, c->n_budgets, c->seed, &json, &svg,
			 &err);
	if (!rc && mkdir(c->out, 0777) && errno != EEXIST)
		rc = hb_error_sys(&err, errno, c->out, "cannot create the output directory");
	if (!rc) {
		snprintf(path, sizeof(path), "%s/eval.json", c->out);
		rc = publish_text(path, json, &err);
	}
	if (!rc) {
		snprintf(path, sizeof(path), "%s/eval.svg", c->out);
		rc = publish_text(path, svg, &err);
	}
	if (!rc)
		fputs(json, stdout);
	free(json);
	free(svg);
	if (rc) {
		hb_cli_error(prog, &err);
		return hb_cli_exit_for(rc);
	}
	return HB_EXIT_OK;
}

int main(int argc, char **argv)
{
	struct cli c;
	int status;

	if (parse(argc, argv, &c))
		return HB_EXIT_USAGE;
	{
		struct hb_error err;
		hb_error_clear(&err);
		if (hb_crypto_start(&err)) {
			hb_cli_error(prog, &err);
			return hb_cli_exit_for(err.code);
		}
	}
	if (!strcmp(c.sub, "label"))
		status = cmd_label(&c);
	else if (!strcmp(c.sub, "parity"))
		status = cmd_parity(&c);
	else if (!strcmp(c.sub, "split"))
		status = cmd_split(&c);
	else if (!strcmp(c.sub, "merge"))
		status = cmd_merge(&c);
	else if (!strcmp(c.sub, "eval"))
		status = cmd_eval(&c);
	else
		status = HB_EXIT_USAGE;
	if (fflush(stdout) != 0 || hb_cli_output_failed())
		status = HB_EXIT_SYSTEM;
	return status;
}
