/*
 * hb-run/prompt.c: the prompt.  Token ids from --tokens or --tokens-file;
 * or text (-p, --chat) through the artifact's own tokenizer.json (hb_tok)
 * and, for --chat, the native Qwen3.6 template (hb_chat), which hb_text
 * joins so that only template atoms become control ids (AFN-006).  Also
 * what shows a text prompt: the --print-tokens table, its JSON members,
 * and the generated ids as text.
 */
#include "hb_base.h"
#include "hb_run_cli.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_parse.h"
#include "hb_sha256.h"
#include "text/hb_unicode.h"

/* The template hb_chat renders natively (tests/fixtures/chat/, hb_chat.h):
 * --chat refuses an artifact whose chat template is another. */
#define QWEN36_TEMPLATE_SHA256 "38e318af68cb2c673c8832a5acefcae9dbbaadb9de31782aa53140c4b7cf90ea"

/* The whole of file path ("-": standard input), NUL-terminated. */
static int read_input(const char *path, char **text, size_t *len, struct hb_error *err)
{
	return hb_read_file(path, 64u << 20, text, len, err); /* "-": standard input */
}

/* The ids of --tokens or of the --tokens-file text (hb_parse_id_list). */
static int read_ids(const char *text, size_t len, const char *field, const char *want, int32_t **ids, size_t *n,
		    struct hb_error *err)
{
	size_t at = 0;
	int rc = hb_parse_id_list(text, len, ids, n, &at);

	if (rc == HB_ERR_NOMEM)
		return hb_error_diag(err, "run-tokens", rc, field, false, 0, "out of memory holding the prompt ids");
	if (rc)
		return hb_error_diag(err, "run-tokens", rc, field, true, at, "expected %s", want);
	return HB_OK;
}

int run_read_tokens(const struct cli *c, int32_t **ids, size_t *n, struct hb_error *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	if (c->tokens)
		return read_ids(c->tokens, strlen(c->tokens), "--tokens", "comma-separated token ids", ids, n, err);
	if ((rc = read_input(c->tokens_file, &text, &len, err)))
		return rc;
	rc = read_ids(text, len, c->tokens_file, "token ids separated by commas or white space", ids, n, err);
	free(text);
	return rc;
}

void run_text_release(struct text *t)
{
	hb_chat_render_release(&t->render);
	hb_tok_free(t->tok);
	hb_text_tokens_release(&t->toks);
}

int run_render_chat(const struct cli *c, struct hb_chat_render *r, struct hb_error *err)
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
int run_print_table(FILE *f, const struct text *t, struct hb_error *err)
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
void run_json_prompt(cJSON *j, const struct cli *c, const struct text *t)
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
int run_gen_text(const struct text *t, const int32_t *ids, size_t n, char **out, struct hb_error *err)
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
int run_text_prompt(const struct cli *c, const struct hb_model *m, struct text *t)
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
		if (c->print_tokens && !c->json && (rc = run_print_table(stdout, t, &err)))
			goto refused;
		if (c->json) {
			cJSON *j = cJSON_CreateObject();
			char *text = NULL;
			size_t len = 0;
			hb_json_add_u64(j, "prompt_tokens", t->toks.n);
			run_json_prompt(j, c, t);
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
