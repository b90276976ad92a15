/*
 * hb-run: the CPU reference runner.  Admits and loads the artifact
 * (libkern/hb_model, refusing what hb-admit refuses), runs the prompt as one
 * prefill, then decodes N tokens one at a time through the cache, and
 * prints the generated ids, or their text when the prompt was text.  It
 * executes any admitted artifact and states its profile and status word; it
 * never calls an artifact supported.
 *
 * A text prompt (-p, --chat) goes through the artifact's own tokenizer.json
 * (hb_tok) and, for --chat, the native Qwen3.6 template (hb_chat); hb_text
 * joins them so that only template atoms become control ids (AFN-006).
 */
#include "hb_base.h"
#include "text/hb_chat.h"
#include "backend/hb_backend.h"
#include "hb_cli.h"
#include "hb_io.h"
#include "hb_json.h"
#include "graph/hb_model.h"
#include "hb_parse.h"
#include "hb_pool.h"
#include "hb_publish.h"
#include "sampler/hb_sampler.h"
#include "graph/hb_session.h"
#include "hb_sha256.h"
#include "text/hb_text.h"
#include "text/hb_tok.h"
#include "trace/hb_trace.h"
#include "text/hb_unicode.h"

#include <fcntl.h>
#include <getopt.h>
#include <time.h>
#include <unistd.h>

static const char *const prog = "hb-run";

/* The template hb_chat renders natively (tests/fixtures/chat/, hb_chat.h):
 * --chat refuses an artifact whose chat template is another. */
#define QWEN36_TEMPLATE_SHA256 "38e318af68cb2c673c8832a5acefcae9dbbaadb9de31782aa53140c4b7cf90ea"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: hb-run -m ARTIFACT PROMPT [-n N] [--greedy | --temp T --top-p P --top-k K --seed S] [--threads N] [--dump-logits F] [--dump-routes F] [TRACE-ID...] [--print-tokens] [--json] [-q]\n"
		"   or: hb-run -m ARTIFACT (-p TEXT | --chat F [--no-think]) --tokenize-only [--print-tokens] [--json]\n"
		"   or: hb-run -m ARTIFACT --chat F [--no-think] --render-only\n"
		"\n"
		"  PROMPT is one of --tokens IDS, --tokens-file F, -p TEXT, --chat F [--no-think]\n"
		"  TRACE-ID is any of --sequence ID, --owner NAME, --thread NAME, --generation N\n"
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
		"  --dump-logits F        float32 rows, one per evaluated position\n"
		"  --dump-routes F        route trace shard (hebrus-trace(5)); - for stdout\n"
		"  --sequence ID          the sequence id recorded in route traces (default 0)\n"
		"  --owner NAME           the owner recorded in route traces: an integer or a name (default 0)\n"
		"  --thread NAME          the thread recorded in route traces: an integer or a name (default none)\n"
		"  --generation N         the owner's generation recorded in route traces (default 0)\n"
		"  --json                 print a JSON record instead of the id or text line\n"
		"  -q, --quiet            do not state the profile on stderr\n"
		"  -h, --help             this help\n"
		"      --version          versions of the tool and its libraries\n");
}

enum { OPT_TOKENS = 256, OPT_TOKENS_FILE, OPT_GREEDY, OPT_TEMP, OPT_TOP_P, OPT_TOP_K, OPT_SEED,
       OPT_THREADS, OPT_DUMP_LOGITS, OPT_DUMP_ROUTES, OPT_SEQUENCE, OPT_JSON, OPT_VERSION, OPT_CHAT,
       OPT_NO_THINK, OPT_TOKENIZE_ONLY, OPT_RENDER_ONLY, OPT_PRINT_TOKENS, OPT_OWNER, OPT_THREAD,
       OPT_GENERATION };

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
	{"dump-logits", required_argument, NULL, OPT_DUMP_LOGITS},
	{"dump-routes", required_argument, NULL, OPT_DUMP_ROUTES},
	{"sequence", required_argument, NULL, OPT_SEQUENCE},
	{"owner", required_argument, NULL, OPT_OWNER},
	{"thread", required_argument, NULL, OPT_THREAD},
	{"generation", required_argument, NULL, OPT_GENERATION},
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

struct cli {
	const char *model, *tokens, *tokens_file, *dump_logits, *dump_routes;
	const char *text, *chat;          /* -p TEXT, --chat F */
	uint64_t n, top_k, seed, threads, sequence;
	uint64_t owner, thread, generation; /* route trace header (hebrus-trace(5)) */
	bool has_thread;
	double temp, top_p;
	bool sampling, greedy_flag, json, quiet;
	bool no_think, tokenize_only, render_only, print_tokens;
};

/* Parse "1,2, 3" or white-space separated ids; refuses anything else. */
static int parse_ids(const char *text, int32_t **out, size_t *n)
{
	size_t cap = 64, len = 0;
	int32_t *v = malloc(cap * sizeof(int32_t));
	const char *p = text;

	if (!v)
		return -1;
	for (;;) {
		char buf[24];
		size_t k = 0;
		uint64_t id;
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		if (!*p)
			break;
		while (*p >= '0' && *p <= '9' && k + 1 < sizeof(buf))
			buf[k++] = *p++;
		buf[k] = '\0';
		if (!k || hb_parse_u64(buf, &id) || id > INT32_MAX)
			goto bad;
		if (len == cap) {
			int32_t *g = realloc(v, 2 * cap * sizeof(int32_t));
			if (!g)
				goto bad;
			v = g;
			cap *= 2;
		}
		v[len++] = (int32_t)id;
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		if (*p == ',')
			p++;
		else if (*p && !(*p >= '0' && *p <= '9'))
			goto bad;
	}
	if (!len)
		goto bad;
	*out = v;
	*n = len;
	return 0;
bad:
	free(v);
	return -1;
}

static int parse(int argc, char **argv, struct cli *c)
{
	int opt;

	memset(c, 0, sizeof(*c));
	c->n = 16;
	c->top_p = 1.0;
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
		case OPT_THREADS:
			if (hb_parse_u64_range(optarg, 1, 1024, &c->threads))
				return hb_cli_usage_error(prog, "--threads takes 1..1024, not '%s'", optarg), -1;
			break;
		case OPT_DUMP_LOGITS: c->dump_logits = optarg; break;
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

/* ------------------------------------------------------------ outputs */

struct run {
	const struct cli *c;
	const struct hb_model *m;
	struct hb_trace_writer *trace;
	struct hb_route pending;
	int trace_rc;
	struct hb_error trace_err;
	struct hb_publish logits, routes;
	bool logits_open, routes_open;
};

static void observe(void *ctx, enum hb_observe kind, int32_t layer, uint64_t pos, const void *data, size_t n)
{
	struct run *r = ctx;

	if (!r->trace || r->trace_rc)
		return;
	if (kind == HB_OBS_ROUTES) {
		memset(&r->pending, 0, sizeof(r->pending));
		r->pending.sequence = r->c->sequence;
		r->pending.ordinal = pos;
		r->pending.layer = (uint32_t)layer;
		for (size_t i = 0; i < n && i < HB_TRACE_MAX_TOPK; i++)
			r->pending.ids[i] = (uint32_t)((const int32_t *)data)[i];
	} else if (kind == HB_OBS_ROUTE_WEIGHTS) {
		memcpy(r->pending.weights, data, n * sizeof(float));
		r->trace_rc = hb_trace_write(r->trace, &r->pending, &r->trace_err);
	}
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The whole of file path ("-": standard input), NUL-terminated. */
static int read_input(const char *path, char **text, size_t *len, struct hb_error *err)
{
	return hb_read_file(path, 64u << 20, text, len, err); /* "-": standard input */
}

static int read_tokens(const struct cli *c, int32_t **ids, size_t *n, struct hb_error *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc = HB_OK;

	if (c->tokens) {
		if (parse_ids(c->tokens, ids, n))
			return hb_error_diag(err, "run-tokens", HB_ERR_INVALID, "--tokens", false, 0,
					     "expected comma-separated token ids");
		return HB_OK;
	}
	if ((rc = read_input(c->tokens_file, &text, &len, err)))
		return rc;
	if (parse_ids(text, ids, n))
		rc = hb_error_diag(err, "run-tokens", HB_ERR_INVALID, c->tokens_file, false, 0,
				   "expected token ids separated by commas or white space");
	free(text);
	return rc;
}

/* ------------------------------------------------------- text prompts */

/* A text prompt: the rendering (--chat), the tokenizer, the ids. */
struct text {
	struct hb_chat_render render;
	struct hb_tok *tok;
	struct hb_text_tokens toks;
};

static void text_release(struct text *t)
{
	hb_chat_render_release(&t->render);
	hb_tok_free(t->tok);
	hb_text_tokens_release(&t->toks);
}

static int render_chat(const struct cli *c, struct hb_chat_render *r, struct hb_error *err)
{
	struct hb_chat_opts o;
	char *json = NULL;
	size_t len = 0;
	int rc;

	if ((rc = read_input(c->chat, &json, &len, err)))
		return rc;
	hb_chat_opts_default(&o); /* add_generation_prompt, enable_thinking */
	o.enable_thinking = !c->no_think;
	rc = hb_chat_render_json(json, len, &o, r, err);
	free(json);
	return rc;
}

/* --chat renders Qwen3.6 natively: the artifact must carry that template. */
static int check_template(const struct hb_model *m, struct hb_error *err)
{
	uint8_t d[HB_SHA256_BYTES];
	char hex[2 * HB_SHA256_BYTES + 1];

	if (!m->chat_template)
		return hb_error_diag(err, "run-chat-template", HB_ERR_UNSUPPORTED, "tokenizer.chat_template", false, 0,
				     "the artifact embeds no chat template; --chat needs the Qwen3.6 one");
	hb_sha256_buf(m->chat_template, m->chat_template_len, d);
	hb_hex_encode(d, sizeof(d), hex);
	if (strcmp(hex, QWEN36_TEMPLATE_SHA256))
		return hb_error_diag(err, "run-chat-template", HB_ERR_UNSUPPORTED, "tokenizer.chat_template", false, 0,
				     "the chat template (sha256 %s) is not the Qwen3.6 template hb-run renders", hex);
	return HB_OK;
}

static int load_tokenizer(const struct hb_model *m, struct hb_tok **tok, struct hb_error *err)
{
	if (!m->tokenizer_json)
		return hb_error_diag(err, "run-no-tokenizer", HB_ERR_UNSUPPORTED, "tokenizer.huggingface.json", false, 0,
				     "the artifact embeds no tokenizer; -p and --chat need one (give --tokens)");
	return hb_tok_load(m->tokenizer_json, m->tokenizer_json_len, tok, err);
}

/* How an id looks: its bytes, shown by the lossy policy (hb_unicode.h). */
static char *id_text(const struct hb_tok *tok, int32_t id)
{
	size_t n = 0, len = 0;
	const uint8_t *b = hb_tok_id_bytes(tok, id, &n);
	uint8_t *out = NULL;

	if (hb_utf8_lossy(b ? b : (const uint8_t *)"", b ? n : 0, &out, &len, NULL))
		return NULL;
	return (char *)out;
}

/* --print-tokens lines: ID TAB PROVENANCE TAB JSON-STRING, one per id. */
static int print_table(FILE *f, const struct text *t, struct hb_error *err)
{
	for (size_t i = 0; i < t->toks.n; i++) {
		char *s = id_text(t->tok, t->toks.ids[i]), *q = NULL;
		cJSON *j = s ? cJSON_CreateString(s) : NULL;
		free(s);
		if (!j || !(q = cJSON_PrintUnformatted(j))) {
			cJSON_Delete(j);
			return hb_error_set(err, HB_ERR_NOMEM, "tokens", "out of memory");
		}
		fprintf(f, "%d\t%s\t%s\n", t->toks.ids[i], hb_text_prov_name(t->toks.prov[i]), q);
		cJSON_free(q);
		cJSON_Delete(j);
	}
	return HB_OK;
}

/* JSON members of a text prompt: prompt_ids, and with --print-tokens
 * "prompt": [{"id", "provenance", "text"}...]. */
static void json_prompt(cJSON *j, const struct cli *c, const struct text *t)
{
	cJSON *ids = cJSON_AddArrayToObject(j, "prompt_ids"), *list = NULL;

	for (size_t i = 0; i < t->toks.n; i++)
		cJSON_AddItemToArray(ids, cJSON_CreateNumber(t->toks.ids[i]));
	if (!c->print_tokens)
		return;
	list = cJSON_AddArrayToObject(j, "prompt");
	for (size_t i = 0; i < t->toks.n; i++) {
		cJSON *o = cJSON_CreateObject();
		char *s = id_text(t->tok, t->toks.ids[i]);
		cJSON_AddNumberToObject(o, "id", t->toks.ids[i]);
		hb_json_add_str(o, "provenance", hb_text_prov_name(t->toks.prov[i]));
		hb_json_add_str(o, "text", s ? s : "");
		free(s);
		cJSON_AddItemToArray(list, o);
	}
}

/* The generated ids as display text (lossy), malloc'd. */
static int gen_text(const struct text *t, const int32_t *ids, size_t n, char **out, struct hb_error *err)
{
	uint8_t *bytes = NULL, *shown = NULL;
	size_t len = 0, slen = 0;
	int rc = hb_tok_decode(t->tok, ids, n, 0, &bytes, &len, err);

	if (!rc)
		rc = hb_utf8_lossy(bytes, len, &shown, &slen, err);
	free(bytes);
	*out = (char *)shown;
	return rc;
}

/*
 * Turn -p/--chat into ids (t->toks), or finish --render-only and
 * --tokenize-only here.  Returns -1 to go on and run the model, otherwise
 * the exit status (the diagnostic printed).
 */
static int text_prompt(const struct cli *c, const struct hb_model *m, struct text *t)
{
	struct hb_error err;
	int rc;

	hb_error_clear(&err);
	if (c->chat && (rc = check_template(m, &err)))
		goto refused;
	if (c->render_only) {
		fwrite(t->render.bytes, 1, t->render.len, stdout);
		return HB_EXIT_OK;
	}
	if ((rc = load_tokenizer(m, &t->tok, &err)))
		goto refused;
	rc = c->chat ? hb_text_encode_chat(t->tok, &t->render, &t->toks, &err)
		     : hb_text_encode_plain(t->tok, (const uint8_t *)c->text, strlen(c->text), &t->toks, &err);
	if (rc) {
		/* the caller's text (utf8-invalid) is a usage error; a template atom
		 * the tokenizer lacks (text-control) is the artifact's */
		hb_cli_error(prog, &err);
		return rc == HB_ERR_NOMEM || rc == HB_ERR_IO ? HB_EXIT_SYSTEM
		       : err.id && !strcmp(err.id, "utf8-invalid") ? HB_EXIT_USAGE : HB_EXIT_NO;
	}
	if (c->tokenize_only) {
		if (c->print_tokens && !c->json && (rc = print_table(stdout, t, &err)))
			goto refused;
		if (c->json) {
			cJSON *j = cJSON_CreateObject();
			char *text = NULL;
			size_t len = 0;
			hb_json_add_u64(j, "prompt_tokens", t->toks.n);
			json_prompt(j, c, t);
			if ((rc = hb_json_render(j, true, &text, &len, &err)) == HB_OK)
				fwrite(text, 1, len, stdout);
			free(text);
			cJSON_Delete(j);
			if (rc)
				goto refused;
		} else {
			for (size_t i = 0; i < t->toks.n; i++)
				printf("%s%d", i ? "," : "", t->toks.ids[i]);
			printf("\n");
		}
		return HB_EXIT_OK;
	}
	if (!t->toks.n) {
		hb_error_diag(&err, "run-prompt-empty", HB_ERR_INVALID, c->chat ? "--chat" : "-p", false, 0,
			      "the prompt encodes to no tokens");
		goto refused;
	}
	return -1;
refused:
	hb_cli_error(prog, &err);
	return hb_cli_exit_for(err.code);
}

static bool is_stop(const struct hb_model *m, int32_t id)
{
	for (size_t i = 0; i < m->n_stop; i++)
		if ((uint32_t)id == m->stop_ids[i])
			return true;
	return false;
}

static int open_trace(struct run *r, struct hb_error *err)
{
	struct hb_trace_header h;
	int fd = STDOUT_FILENO;

	memset(&h, 0, sizeof(h));
	h.top_k = (uint32_t)r->m->cfg.num_experts_per_tok;
	h.layers = (uint32_t)r->m->cfg.num_layers;
	h.experts = (uint32_t)r->m->cfg.num_experts;
	memcpy(h.artifact, r->m->artifact_sha, 32);
	h.owner = r->c->owner;
	h.generation = (uint32_t)r->c->generation;
	h.has_thread = r->c->has_thread;
	h.thread = r->c->thread;
	/* a file is published whole or not at all, like --dump-logits; a
	 * reader of stdout sees the chunk CRCs and a missing end instead */
	if (strcmp(r->c->dump_routes, "-")) {
		int rc = hb_publish_begin(&r->routes, r->c->dump_routes, HB_PUBLISH_REPLACE, err);
		if (rc)
			return rc;
		r->routes_open = true;
		fd = r->routes.fd;
	}
	return hb_trace_writer_open(&r->trace, fd, r->c->dump_routes, &h, 4096, err);
}

int main(int argc, char **argv)
{
	struct cli c;
	struct run r;
	struct hb_error err;
	struct hb_model *m = NULL;
	struct hb_pool *pool = NULL;
	struct hb_session *s = NULL;
	struct hb_sampler smp;
	struct text tx;
	int32_t *prompt = NULL, *gen = NULL;
	size_t np = 0, ng = 0;
	float *logits = NULL;
	char *shown = NULL; /* the generated text, for a text prompt */
	double t0, t1, t2;
	int rc, status = HB_EXIT_OK;

	if (parse(argc, argv, &c))
		return HB_EXIT_USAGE;
	memset(&r, 0, sizeof(r));
	memset(&smp, 0, sizeof(smp));
	memset(&tx, 0, sizeof(tx));
	r.c = &c;
	hb_error_clear(&err);
	if ((c.tokens || c.tokens_file) && (rc = read_tokens(&c, &prompt, &np, &err))) {
		hb_cli_error(prog, &err);
		return rc == HB_ERR_INVALID ? HB_EXIT_USAGE : HB_EXIT_SYSTEM;
	}
	/* a conversation that does not render is the caller's: exit 2 */
	if (c.chat && (rc = render_chat(&c, &tx.render, &err))) {
		hb_cli_error(prog, &err);
		return rc == HB_ERR_IO || rc == HB_ERR_NOMEM || rc == HB_ERR_NOTFOUND ? HB_EXIT_SYSTEM : HB_EXIT_USAGE;
	}
	rc = hb_model_load(c.model, &m, &err);
	if (rc) {
		/* the same diagnostic and exit status hb-admit gives: a refusal
		 * carries a diagnostic id (1); a file that cannot be opened, read
		 * or mapped, or memory, is a system failure (3), whatever the
		 * error code (a missing file is HB_ERR_NOTFOUND, not a refusal) */
		hb_cli_error(prog, &err);
		free(prompt);
		text_release(&tx);
		return err.id && strcmp(err.id, "gguf-io") ? HB_EXIT_NO : HB_EXIT_SYSTEM;
	}
	r.m = m;
	if (!c.quiet)
		fprintf(stderr, "%s: artifact profile %s, status %s (runtime_supported false)\n", prog,
			m->profile, m->status);
	if (c.text || c.chat) {
		int st = text_prompt(&c, m, &tx);
		if (st >= 0) {
			status = st;
			goto out;
		}
		prompt = tx.toks.ids; /* owned by tx */
		np = tx.toks.n;
	}
	gen = malloc((c.n + 1) * sizeof(int32_t));
	logits = malloc(np * (size_t)m->vocab_physical * sizeof(float));
	if (!gen || !logits) {
		rc = hb_error_set(&err, HB_ERR_NOMEM, "run", "out of memory");
		goto fail;
	}
	if ((rc = hb_pool_create((unsigned)c.threads, &pool, &err)) ||
	    (rc = hb_session_create(m, pool, np + c.n + 1, &s, &err)) ||
	    (rc = hb_sampler_init(&smp, !c.sampling, (float)c.temp, (uint32_t)c.top_k, (float)c.top_p, c.seed,
				  (size_t)m->vocab_semantic, &err)))
		goto fail;
	if (c.dump_routes && (rc = open_trace(&r, &err)))
		goto fail;
	if (c.dump_logits) {
		if ((rc = hb_publish_begin(&r.logits, c.dump_logits, HB_PUBLISH_REPLACE, &err)))
			goto fail;
		r.logits_open = true;
	}
	t0 = now();
	if ((rc = hb_session_forward(s, prompt, np, logits, observe, &r, &err)))
		goto fail;
	if (r.logits_open &&
	    (rc = hb_publish_write(&r.logits, logits, np * (size_t)m->vocab_physical * sizeof(float), &err)))
		goto fail;
	t1 = now();
	{
		const float *last = logits + (np - 1) * (size_t)m->vocab_physical;
		for (ng = 0; ng < c.n; ng++) {
			int32_t next = hb_sampler_next(&smp, last, (size_t)m->vocab_semantic);
			if (next < 0) {
				rc = hb_error_set(&err, HB_ERR_INTERNAL, "sampler", "set up for fewer rows than %" PRIu64,
						  m->vocab_semantic);
				goto fail;
			}
			gen[ng] = next;
			if (is_stop(m, next) || ng + 1 == c.n) {
				ng++;
				break;
			}
			if ((rc = hb_session_forward(s, &next, 1, logits, observe, &r, &err)))
				goto fail;
			if (r.logits_open &&
			    (rc = hb_publish_write(&r.logits, logits, (size_t)m->vocab_physical * sizeof(float), &err)))
				goto fail;
			last = logits;
		}
	}
	t2 = now();
	if (r.trace_rc) {
		err = r.trace_err;
		rc = r.trace_rc;
		goto fail;
	}
	if (r.trace && (rc = hb_trace_writer_close(r.trace, &err))) {
		r.trace = NULL;
		goto fail;
	}
	r.trace = NULL;
	if (r.routes_open) {
		r.routes_open = false;
		if ((rc = hb_publish_commit(&r.routes, NULL, NULL, &err)))
			goto fail;
	}
	if (r.logits_open) {
		r.logits_open = false;
		if ((rc = hb_publish_commit(&r.logits, NULL, NULL, &err)))
			goto fail;
	}
	if (tx.tok && (rc = gen_text(&tx, gen, ng, &shown, &err)))
		goto fail;
	if (c.json) {
		cJSON *j = cJSON_CreateObject(), *ids = cJSON_AddArrayToObject(j, "ids");
		const struct hb_session_counters *k = hb_session_counters(s);
		for (size_t i = 0; i < ng; i++)
			cJSON_AddItemToArray(ids, cJSON_CreateNumber(gen[i]));
		hb_json_add_str(j, "profile", m->profile);
		hb_json_add_str(j, "status", m->status);
		hb_json_add_bool(j, "runtime_supported", false);
		hb_json_add_u64(j, "prompt_tokens", np);
		hb_json_add_u64(j, "generated_tokens", ng);
		cJSON_AddNumberToObject(j, "prefill_seconds", t1 - t0);
		cJSON_AddNumberToObject(j, "decode_seconds", t2 - t1);
		cJSON_AddNumberToObject(j, "prefill_tokens_per_second", (double)np / (t1 - t0));
		cJSON_AddStringToObject(j, "backend", hb_backend_name());
		if (ng > 1)
			cJSON_AddNumberToObject(j, "decode_tokens_per_second", (double)(ng - 1) / (t2 - t1));
		hb_json_add_u64(j, "expert_evaluations", k->expert_evaluations);
		hb_json_add_u64(j, "ple_rows_read", k->ple_rows_read);
		hb_json_add_u64(j, "qsa_keys_attended", k->qsa_keys_attended);
		hb_json_add_u64(j, "qsa_groups_scored", k->qsa_groups_scored);
		hb_json_add_u64(j, "dense_mask_bytes", k->dense_mask_bytes);
		if (tx.tok) {
			hb_json_add_str(j, "text", shown);
			json_prompt(j, &c, &tx);
		}
		if (hb_cli_print_json(prog, j))
			status = HB_EXIT_SYSTEM;
	} else {
		/* with --dump-routes - stdout carries the trace: the ids go to stderr */
		FILE *f = c.dump_routes && !strcmp(c.dump_routes, "-") ? stderr : stdout;
		/* the table only now, so that a failed run prints nothing */
		if (c.print_tokens && (rc = print_table(f, &tx, &err)))
			goto fail;
		if (tx.tok) {
			fputs(shown, f);
		} else {
			for (size_t i = 0; i < ng; i++)
				fprintf(f, "%s%d", i ? "," : "", gen[i]);
		}
		fprintf(f, "\n");
	}
	goto out;
fail:
	hb_cli_error(prog, &err);
	status = hb_cli_exit_for(rc);
out:
	if (r.trace) {
		struct hb_error ignored;
		hb_trace_writer_close(r.trace, &ignored);
	}
	if (r.logits_open)
		hb_publish_abort(&r.logits);
	if (r.routes_open)
		hb_publish_abort(&r.routes);
	hb_sampler_release(&smp);
	hb_session_free(s);
	hb_pool_destroy(pool);
	hb_model_free(m);
	if (prompt != tx.toks.ids)
		free(prompt);
	text_release(&tx);
	free(gen), free(logits), free(shown);
	if (fflush(stdout) != 0)
		status = HB_EXIT_SYSTEM;
	return status;
}
