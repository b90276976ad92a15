/*
 * hb_chat.c: the Qwen3.6 chat template, written out in C.
 *
 * Owns the template's control flow (system merging, the last-query scan,
 * reasoning placement, tool calls and grouped tool responses, the generation
 * prompt) and the provenance of every emitted byte.  Template literals go
 * through tpl(), which marks each special-token atom inside them
 * TRUSTED_CONTROL and the rest DATA; caller text goes through data() and is
 * DATA whatever it spells.  Trust is never recovered from the bytes
 * afterwards (AFN-006).  The JSON side lives in hb_chat_json.c.
 *
 * The output is built in a private buffer and swapped into the caller's
 * struct only after everything succeeded, so a refusal leaves it untouched.
 */
#include "hb_chat_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HB_CHAT_DIAG_STR(e, s) s,
static const char *const diag_ids[] = { HB_CHAT_DIAG_LIST(HB_CHAT_DIAG_STR) };
#undef HB_CHAT_DIAG_STR

const char *hb_chat_diag_id(int diag)
{
	if (diag < 0 || diag >= HB_CHAT_DIAG_COUNT)
		return NULL;
	return diag_ids[diag];
}

/* The special-token atoms this template writes. */
static const char *const atoms[] = {
	"<|im_start|>", "<|im_end|>", "<think>", "</think>",
	"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
};

static const char tools_intro[] =
	"# Tools\n\nYou have access to the following functions:\n\n<tools>";
static const char tools_outro[] =
	"\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
	"<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n"
	"</parameter>\n<parameter=example_parameter_2>\nThis is the value for the second parameter\n"
	"that can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\n"
	"Reminder:\n- Function calls MUST follow the specified format: an inner <function=...></function> "
	"block must be nested within <tool_call></tool_call> XML tags\n- Required parameters MUST be "
	"specified\n- You may provide optional reasoning for your function call in natural language "
	"BEFORE the function call, but NOT after\n- If there is no function call available, answer the "
	"question like normal with your current knowledge and do not tell the user about function "
	"calls\n</IMPORTANT>";

struct sl {
	const char *p;
	size_t n;
};

struct builder {
	struct hb_chat_str s;
	struct hb_chat_segment *segs;
	size_t nsegs, cap;
};

static void emit(struct builder *b, const char *p, size_t n, enum hb_chat_kind kind)
{
	size_t off = b->s.n;

	if (n == 0 || b->s.rc)
		return;
	hb_chat_str_put(&b->s, p, n);
	if (b->s.rc)
		return;
	if (b->nsegs && b->segs[b->nsegs - 1].kind == kind) {
		b->segs[b->nsegs - 1].len += n;
		return;
	}
	if (b->nsegs == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 64;
		struct hb_chat_segment *q = realloc(b->segs, nc * sizeof(*q));
		if (!q) {
			b->s.rc = HB_ERR_NOMEM;
			return;
		}
		b->segs = q;
		b->cap = nc;
	}
	b->segs[b->nsegs].off = off;
	b->segs[b->nsegs].len = n;
	b->segs[b->nsegs].kind = kind;
	b->nsegs++;
}

static void data(struct builder *b, struct sl x)
{
	emit(b, x.p, x.n, HB_CHAT_DATA);
}

/* A template literal: atoms are control, everything else data. */
static void tpl(struct builder *b, const char *z)
{
	const char *run = z;

	for (const char *p = z; *p;) {
		size_t m = 0;
		if (*p == '<')
			for (size_t i = 0; i < HB_ARRAY_LEN(atoms) && !m; i++)
				if (strncmp(p, atoms[i], strlen(atoms[i])) == 0)
					m = strlen(atoms[i]);
		if (!m) {
			p++;
			continue;
		}
		emit(b, run, (size_t)(p - run), HB_CHAT_DATA);
		emit(b, p, m, HB_CHAT_TRUSTED_CONTROL);
		p += m;
		run = p;
	}
	emit(b, run, strlen(run), HB_CHAT_DATA);
}

/* ---- Python str semantics on UTF-8 slices ---- */

bool hb_chat_py_isspace(uint32_t c)
{
	return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 ||
	       c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
	       c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* Decode the code point starting at p (input is validated UTF-8). */
static size_t cp_at(const unsigned char *p, size_t n, uint32_t *cp)
{
	size_t k = p[0] < 0x80 ? 1 : p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 : 4;
	if (k > n)
		k = n;
	*cp = k == 1 ? p[0] : p[0] & (0x7f >> k);
	for (size_t i = 1; i < k; i++)
		*cp = (*cp << 6) | (p[i] & 0x3f);
	return k;
}

/* str.strip(): whole code points from both edges. */
static struct sl py_strip(struct sl x)
{
	const unsigned char *p = (const unsigned char *)x.p;
	uint32_t cp;
	size_t k;

	while (x.n && (k = cp_at(p, x.n, &cp)) && hb_chat_py_isspace(cp)) {
		p += k;
		x.n -= k;
	}
	x.p = (const char *)p;
	while (x.n) {
		size_t s = x.n - 1;
		while (s > 0 && (p[s] & 0xc0) == 0x80)
			s--;
		cp_at(p + s, x.n - s, &cp);
		if (!hb_chat_py_isspace(cp))
			break;
		x.n = s;
	}
	return x;
}

static const char *find(struct sl x, const char *z, bool last)
{
	size_t m = strlen(z);
	const char *hit = NULL;

	for (size_t i = 0; m <= x.n && i <= x.n - m; i++) {
		if (memcmp(x.p + i, z, m) == 0) {
			hit = x.p + i;
			if (!last)
				break;
		}
	}
	return hit;
}

static bool starts(struct sl x, const char *z)
{
	size_t m = strlen(z);
	return x.n >= m && memcmp(x.p, z, m) == 0;
}

static bool ends(struct sl x, const char *z)
{
	size_t m = strlen(z);
	return x.n >= m && memcmp(x.p + x.n - m, z, m) == 0;
}

static struct sl lstrip_nl(struct sl x)
{
	while (x.n && x.p[0] == '\n')
		x.p++, x.n--;
	return x;
}

static struct sl rstrip_nl(struct sl x)
{
	while (x.n && x.p[x.n - 1] == '\n')
		x.n--;
	return x;
}

static struct sl z2sl(const char *z)
{
	struct sl x = { z, strlen(z) };
	return x;
}

/* ---- the conversation ---- */

enum role { R_SYSTEM, R_USER, R_ASSISTANT, R_TOOL };

struct msg {
	const cJSON *obj;
	enum role role;
	struct hb_chat_str text;   /* render_content() */
	struct sl content;         /* its trim */
};

struct ctx {
	const struct hb_chat_doc *doc;
	struct msg *m;
	size_t n;
	const cJSON *tools;
	struct hb_error *err;
};

#define FIELD(buf, ...) snprintf(buf, sizeof(buf), __VA_ARGS__)

static int refuse_at(struct hb_error *err, int diag, int code, const char *field,
		     const char *what)
{
	return hb_error_diag(err, hb_chat_diag_id(diag), code, field, false, 0, "%s", what);
}

/* render_content(content, ...): string, null/absent, or a list of parts. */
static int render_content(struct ctx *c, size_t i)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->m[i].obj, "content");
	struct hb_chat_str *s = &c->m[i].text;
	char f[HB_ERROR_FIELD_MAX];

	if (!v || cJSON_IsNull(v))
		return HB_OK;
	if (cJSON_IsString(v)) {
		hb_chat_str_puts(s, v->valuestring);
		return s->rc;
	}
	if (!cJSON_IsArray(v)) {
		FIELD(f, "messages[%zu].content", i);
		return refuse_at(c->err, HB_CHAT_E_CONTENT, HB_ERR_CONTRACT, f,
				 "content must be a string, null or a list of parts "
				 "(the template raises 'Unexpected content type.')");
	}
	size_t k = 0;
	for (const cJSON *it = v->child; it; it = it->next, k++) {
		FIELD(f, "messages[%zu].content[%zu]", i, k);
		if (!cJSON_IsObject(it))
			return refuse_at(c->err, HB_CHAT_E_CONTENT_ITEM, HB_ERR_CONTRACT, f,
					 "a content part must be an object");
		const cJSON *ty = cJSON_GetObjectItemCaseSensitive(it, "type");
		const char *t = cJSON_IsString(ty) ? ty->valuestring : "";
		if (cJSON_GetObjectItemCaseSensitive(it, "image") ||
		    cJSON_GetObjectItemCaseSensitive(it, "image_url") ||
		    cJSON_GetObjectItemCaseSensitive(it, "video") ||
		    strcmp(t, "image") == 0 || strcmp(t, "video") == 0)
			return refuse_at(c->err, HB_CHAT_E_MEDIA, HB_ERR_UNSUPPORTED, f,
					 "structured media parts are refused: the artifact is text-only");
		const cJSON *tx = cJSON_GetObjectItemCaseSensitive(it, "text");
		if (!tx)
			return refuse_at(c->err, HB_CHAT_E_CONTENT_ITEM, HB_ERR_CONTRACT, f,
					 "a part with neither text nor media (the template raises "
					 "'Unexpected item type in content.')");
		if (!cJSON_IsString(tx)) {
			FIELD(f, "messages[%zu].content[%zu].text", i, k);
			return refuse_at(c->err, HB_CHAT_E_CONTENT_ITEM, HB_ERR_CONTRACT, f,
					 "text must be a string");
		}
		hb_chat_str_puts(s, tx->valuestring);
	}
	return s->rc;
}

static int load_messages(struct ctx *c, const cJSON *arr)
{
	char f[HB_ERROR_FIELD_MAX];
	size_t i = 0;

	for (const cJSON *v = arr->child; v; v = v->next, i++) {
		FIELD(f, "messages[%zu]", i);
		c->m[i].obj = v;
		if (!cJSON_IsObject(v))
			return refuse_at(c->err, HB_CHAT_E_MESSAGE, HB_ERR_CONTRACT, f,
					 "a message must be an object");
		const cJSON *r = cJSON_GetObjectItemCaseSensitive(v, "role");
		const char *rs = cJSON_IsString(r) ? r->valuestring : NULL;
		FIELD(f, "messages[%zu].role", i);
		if (rs && (!strcmp(rs, "system") || !strcmp(rs, "developer"))) {
			c->m[i].role = R_SYSTEM;
			if (!(i == 0 || (i == 1 && c->m[0].role == R_SYSTEM)))
				return refuse_at(c->err, HB_CHAT_E_SYSTEM_POSITION, HB_ERR_CONTRACT, f,
						 "a system or developer message after the leading two "
						 "(the template drops it silently)");
		} else if (rs && !strcmp(rs, "user")) {
			c->m[i].role = R_USER;
		} else if (rs && !strcmp(rs, "assistant")) {
			c->m[i].role = R_ASSISTANT;
		} else if (rs && !strcmp(rs, "tool")) {
			c->m[i].role = R_TOOL;
		} else {
			return refuse_at(c->err, HB_CHAT_E_ROLE, HB_ERR_CONTRACT, f,
					 "role must be system, developer, user, assistant or tool "
					 "(the template drops other messages silently)");
		}
		int rc = render_content(c, i);
		if (rc)
			return rc;
		c->m[i].content = py_strip((struct sl){ c->m[i].text.p ? c->m[i].text.p : "",
						      c->m[i].text.n });
	}
	return HB_OK;
}

static void render_tool_calls(struct ctx *c, struct builder *b, size_t i,
			      struct sl content, int *rc)
{
	const cJSON *tc = cJSON_GetObjectItemCaseSensitive(c->m[i].obj, "tool_calls");
	char f[HB_ERROR_FIELD_MAX];
	size_t k = 0;

	if (!tc || cJSON_IsNull(tc) || cJSON_IsFalse(tc))
		return;
	if (!cJSON_IsArray(tc)) {
		FIELD(f, "messages[%zu].tool_calls", i);
		*rc = refuse_at(c->err, HB_CHAT_E_TOOL_CALLS, HB_ERR_CONTRACT, f,
				"tool_calls must be a list");
		return;
	}
	for (const cJSON *call = tc->child; call; call = call->next, k++) {
		const cJSON *fn = call;
		const char *fpath = "";
		FIELD(f, "messages[%zu].tool_calls[%zu]", i, k);
		if (cJSON_IsObject(call) && cJSON_GetObjectItemCaseSensitive(call, "function")) {
			fn = cJSON_GetObjectItemCaseSensitive(call, "function");
			fpath = ".function";
		}
		const cJSON *name = cJSON_IsObject(fn) ? cJSON_GetObjectItemCaseSensitive(fn, "name") : NULL;
		if (!cJSON_IsString(name)) {
			FIELD(f, "messages[%zu].tool_calls[%zu]%s.name", i, k, fpath);
			*rc = refuse_at(c->err, HB_CHAT_E_TOOL_CALL, HB_ERR_CONTRACT, f,
					"a tool call needs a string name (the template raises)");
			return;
		}
		const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
		if (args && !cJSON_IsNull(args) && !cJSON_IsObject(args)) {
			FIELD(f, "messages[%zu].tool_calls[%zu]%s.arguments", i, k, fpath);
			*rc = refuse_at(c->err, HB_CHAT_E_TOOL_ARGUMENTS, HB_ERR_CONTRACT, f,
					"arguments must be an object (the template renders a string's "
					"parameters as nothing)");
			return;
		}
		if (k == 0)
			tpl(b, py_strip(content).n ? "\n\n<tool_call>\n<function=" : "<tool_call>\n<function=");
		else
			tpl(b, "\n<tool_call>\n<function=");
		data(b, z2sl(name->valuestring));
		tpl(b, ">\n");
		for (const cJSON *a = args && cJSON_IsObject(args) ? args->child : NULL; a; a = a->next) {
			struct hb_chat_str v = { 0 };
			tpl(b, "<parameter=");
			data(b, z2sl(a->string));
			tpl(b, ">\n");
			if (cJSON_IsObject(a) || cJSON_IsArray(a))
				hb_chat_tojson(c->doc, a, &v);
			else
				hb_chat_pystr(c->doc, a, &v);
			if (v.rc && !b->s.rc)
				b->s.rc = v.rc;
			data(b, (struct sl){ v.p, v.n });
			hb_chat_str_free(&v);
			tpl(b, "\n</parameter>\n");
		}
		tpl(b, "</function>\n</tool_call>");
	}
}

static int render(struct ctx *c, const struct hb_chat_opts *o, struct builder *b)
{
	size_t num_sys = 0, n = c->n;
	int rc = HB_OK;

	if (n >= 1 && c->m[0].role == R_SYSTEM)
		num_sys = (n >= 2 && c->m[1].role == R_SYSTEM) ? 2 : 1;
	bool have_sys = num_sys == 2 || (num_sys == 1 && c->m[0].content.n);

	if (c->tools && cJSON_IsArray(c->tools) && c->tools->child) {
		tpl(b, "<|im_start|>system\n");
		tpl(b, tools_intro);
		for (const cJSON *t = c->tools->child; t; t = t->next) {
			struct hb_chat_str v = { 0 };
			tpl(b, "\n");
			hb_chat_tojson(c->doc, t, &v);
			if (v.rc && !b->s.rc)
				b->s.rc = v.rc;
			data(b, (struct sl){ v.p, v.n });
			hb_chat_str_free(&v);
		}
		tpl(b, "\n</tools>");
		tpl(b, tools_outro);
		if (have_sys)
			tpl(b, "\n\n");
	} else if (have_sys) {
		tpl(b, "<|im_start|>system\n");
	}
	if (have_sys) {
		data(b, c->m[0].content);
		if (num_sys == 2) {
			tpl(b, "\n");
			data(b, c->m[1].content);
		}
	}
	if (have_sys || (c->tools && cJSON_IsArray(c->tools) && c->tools->child))
		tpl(b, "<|im_end|>\n");

	/* the last real user query (a user turn that is not a wrapped tool response) */
	size_t lqi = n - 1;
	for (size_t j = n; j-- > 0;) {
		if (c->m[j].role != R_USER)
			continue;
		struct sl x = c->m[j].content;
		if (!(starts(x, "<tool_response>") && ends(x, "</tool_response>"))) {
			lqi = j;
			break;
		}
	}

	for (size_t i = num_sys; i < n && !rc; i++) {
		struct msg *m = &c->m[i];
		struct sl content = m->content;
		if (m->role == R_USER) {
			tpl(b, "<|im_start|>user\n");
			data(b, content);
			tpl(b, "<|im_end|>\n");
		} else if (m->role == R_ASSISTANT) {
			const cJSON *rcj = cJSON_GetObjectItemCaseSensitive(m->obj, "reasoning_content");
			struct sl reason = { "", 0 };
			if (cJSON_IsString(rcj)) {
				reason = z2sl(rcj->valuestring);
			} else if (find(content, "</think>", false)) {
				const char *first = find(content, "</think>", false);
				const char *last = find(content, "</think>", true);
				struct sl head = rstrip_nl((struct sl){ content.p, (size_t)(first - content.p) });
				const char *open = find(head, "<think>", true);
				if (open)
					head = (struct sl){ open + 7, head.n - (size_t)(open + 7 - head.p) };
				reason = lstrip_nl(head);
				content = lstrip_nl((struct sl){ last + 8, content.n - (size_t)(last + 8 - content.p) });
			}
			reason = py_strip(reason);
			if (o->preserve_thinking || i > lqi) {
				tpl(b, "<|im_start|>assistant\n<think>\n");
				data(b, reason);
				tpl(b, "\n</think>\n\n");
			} else {
				tpl(b, "<|im_start|>assistant\n");
			}
			data(b, content);
			render_tool_calls(c, b, i, content, &rc);
			tpl(b, "<|im_end|>\n");
		} else if (m->role == R_TOOL) {
			if (i > 0 && c->m[i - 1].role != R_TOOL)
				tpl(b, "<|im_start|>user");
			tpl(b, "\n<tool_response>\n");
			data(b, content);
			tpl(b, "\n</tool_response>");
			if (i + 1 == n || c->m[i + 1].role != R_TOOL)
				tpl(b, "<|im_end|>\n");
		}
	}
	if (rc)
		return rc;
	if (o->add_generation_prompt) {
		tpl(b, "<|im_start|>assistant\n");
		tpl(b, o->enable_thinking ? "<think>\n" : "<think>\n\n</think>\n\n");
	}
	if (b->s.rc == HB_ERR_OVERFLOW)
		return refuse_at(c->err, HB_CHAT_E_LIMIT, HB_ERR_OVERFLOW, "output",
				 "the rendering would exceed SIZE_MAX/4 bytes");
	if (b->s.rc)
		return hb_error_set(c->err, b->s.rc, "output", "cannot build the rendering");
	return HB_OK;
}

void hb_chat_opts_default(struct hb_chat_opts *opts)
{
	opts->add_generation_prompt = true;
	opts->enable_thinking = true;
	opts->preserve_thinking = false;
}

int hb_chat_render_json(const char *json, size_t len, const struct hb_chat_opts *opts,
			struct hb_chat_render *out, struct hb_error *err)
{
	struct hb_chat_doc doc;
	struct builder b;
	struct ctx c;
	const cJSON *msgs;
	int rc;

	if (!opts || !out)
		return hb_error_set(err, HB_ERR_INVALID, "", "no options or output");
	memset(&b, 0, sizeof(b));
	memset(&c, 0, sizeof(c));
	c.err = err;
	rc = hb_chat_doc_parse(json, len, &doc, err);
	if (rc)
		return rc;
	c.doc = &doc;
	msgs = doc.root;
	if (cJSON_IsObject(doc.root)) {
		for (const cJSON *k = doc.root->child; k; k = k->next) {
			if (strcmp(k->string, "messages") && strcmp(k->string, "tools")) {
				rc = refuse_at(err, HB_CHAT_E_INPUT, HB_ERR_CONTRACT, k->string,
					       "unknown top-level key (expected messages, tools)");
				goto out;
			}
		}
		msgs = cJSON_GetObjectItemCaseSensitive(doc.root, "messages");
		c.tools = cJSON_GetObjectItemCaseSensitive(doc.root, "tools");
		if (c.tools && !cJSON_IsNull(c.tools) && !cJSON_IsArray(c.tools)) {
			rc = refuse_at(err, HB_CHAT_E_TOOLS, HB_ERR_CONTRACT, "tools",
				       "tools must be a list");
			goto out;
		}
	}
	if (!cJSON_IsArray(msgs)) {
		rc = refuse_at(err, HB_CHAT_E_INPUT, HB_ERR_CONTRACT, "messages",
			       "expected a list of messages (or {\"messages\": [...], \"tools\": [...]})");
		goto out;
	}
	c.n = (size_t)cJSON_GetArraySize(msgs);
	if (c.n == 0) {
		rc = refuse_at(err, HB_CHAT_E_EMPTY, HB_ERR_CONTRACT, "messages",
			       "no messages (the template raises 'No messages provided.')");
		goto out;
	}
	c.m = calloc(c.n, sizeof(*c.m));
	if (!c.m) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "messages", "out of memory");
		goto out;
	}
	rc = load_messages(&c, msgs);
	if (!rc)
		rc = render(&c, opts, &b);
	if (!rc && !b.s.p) {
		/* an empty rendering is still a NUL-terminated buffer */
		b.s.p = calloc(1, 1);
		if (!b.s.p)
			rc = hb_error_set(err, HB_ERR_NOMEM, "output", "out of memory");
	}
	if (!rc) {
		struct hb_chat_render r = { b.s.p, b.s.n, b.segs, b.nsegs };
		rc = hb_chat_render_check(&r, err);
		if (!rc) {
			hb_chat_render_release(out);
			*out = r;
			memset(&b, 0, sizeof(b));
		}
	}
out:
	for (size_t i = 0; c.m && i < c.n; i++)
		hb_chat_str_free(&c.m[i].text);
	free(c.m);
	hb_chat_str_free(&b.s);
	free(b.segs);
	hb_chat_doc_free(&doc);
	return rc;
}

int hb_chat_render_check(const struct hb_chat_render *r, struct hb_error *err)
{
	size_t at = 0;

	if (!r || (r->len && !r->bytes) || (r->nsegs && !r->segs))
		return hb_error_set(err, HB_ERR_INTERNAL, "segments", "missing buffers");
	for (size_t i = 0; i < r->nsegs; i++) {
		const struct hb_chat_segment *s = &r->segs[i];
		if (s->off != at || s->len == 0 || s->len > r->len - at ||
		    (s->kind != HB_CHAT_DATA && s->kind != HB_CHAT_TRUSTED_CONTROL) ||
		    (i && r->segs[i - 1].kind == s->kind))
			return hb_error_set_at(err, HB_ERR_INTERNAL, "segments", i,
					       "segment %zu breaks coverage", i);
		at += s->len;
	}
	if (at != r->len)
		return hb_error_set(err, HB_ERR_INTERNAL, "segments",
				    "segments cover %zu of %zu bytes", at, r->len);
	return HB_OK;
}

void hb_chat_render_release(struct hb_chat_render *r)
{
	if (!r)
		return;
	free(r->bytes);
	free(r->segs);
	memset(r, 0, sizeof(*r));
}
