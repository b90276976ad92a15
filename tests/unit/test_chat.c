/*
 * test_chat.c: libkern/text/hb_chat against its two authorities.
 *
 * tests/fixtures/chat/chat_oracle.json (upstream-capture, transformers
 * 5.17.0 apply_chat_template) fixes the rendered bytes; contract.json
 * (contract-control, hand-written) fixes what upstream does not own:
 * refusal ids and fields, the deliberate refusals, and which segments are
 * TRUSTED_CONTROL.  Both files are pinned by digest and case count so that a
 * truncated or regenerated fixture cannot pass silently.
 */
#include "harness.h"
#include "text/hb_chat.h"
#include "hb_json.h"
#include "hb_sha256.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const atoms[] = {
	"<|im_start|>", "<|im_end|>", "<think>", "</think>",
	"<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
};

static char *slurp(const char *rel, size_t *len)
{
	char path[4096];
	FILE *f;
	char *buf = NULL;
	long n;

	snprintf(path, sizeof(path), "%s/tests/fixtures/chat/%s", hb_test_srcdir(), rel);
	f = fopen(path, "rb");
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		if (buf) {
			buf[n] = '\0';
			*len = (size_t)n;
		}
	}
	fclose(f);
	return buf;
}

static cJSON *load(const char *rel, char **raw, size_t *rawlen)
{
	cJSON *root = NULL;
	size_t len = 0;
	char *text = slurp(rel, &len);

	CHECK(text != NULL);
	if (!text)
		return NULL;
	CHECK_EQ_INT(hb_json_parse(text, len, rel, &root, NULL), HB_OK);
	if (raw) {
		*raw = text;
		*rawlen = len;
	} else {
		free(text);
	}
	return root;
}

static void opts_of(const cJSON *kw, struct hb_chat_opts *o)
{
	const cJSON *v;

	o->add_generation_prompt = false; /* apply_chat_template's default */
	o->enable_thinking = true;
	o->preserve_thinking = false;
	if ((v = cJSON_GetObjectItemCaseSensitive(kw, "add_generation_prompt")))
		o->add_generation_prompt = cJSON_IsTrue(v);
	if ((v = cJSON_GetObjectItemCaseSensitive(kw, "enable_thinking")))
		o->enable_thinking = !cJSON_IsFalse(v);
	if ((v = cJSON_GetObjectItemCaseSensitive(kw, "preserve_thinking")))
		o->preserve_thinking = cJSON_IsTrue(v);
}

static size_t atom_at(const char *p, size_t n)
{
	for (size_t i = 0; i < HB_ARRAY_LEN(atoms); i++) {
		size_t m = strlen(atoms[i]);
		if (m <= n && memcmp(p, atoms[i], m) == 0)
			return m;
	}
	return 0;
}

/* Every control segment is a run of whole atoms. */
static bool controls_are_atoms(const struct hb_chat_render *r)
{
	for (size_t i = 0; i < r->nsegs; i++) {
		const struct hb_chat_segment *s = &r->segs[i];
		if (s->kind != HB_CHAT_TRUSTED_CONTROL)
			continue;
		for (size_t at = 0; at < s->len;) {
			size_t m = atom_at(r->bytes + s->off + at, s->len - at);
			if (!m)
				return false;
			at += m;
		}
	}
	return true;
}

/* Atom occurrences in the bytes that lie inside DATA. */
static size_t atoms_in_data(const struct hb_chat_render *r)
{
	size_t n = 0;
	for (size_t i = 0; i < r->nsegs; i++) {
		const struct hb_chat_segment *s = &r->segs[i];
		if (s->kind != HB_CHAT_DATA)
			continue;
		for (size_t at = 0; at < s->len; at++)
			if (atom_at(r->bytes + s->off + at, s->len - at))
				n++;
	}
	return n;
}

static const cJSON *find_case(const cJSON *arr, const char *key, const char *id)
{
	const cJSON *c;
	cJSON_ArrayForEach(c, arr) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, key);
		if (cJSON_IsString(v) && strcmp(v->valuestring, id) == 0)
			return c;
	}
	return NULL;
}

static void expect_refusal(const char *id, const char *input, const char *diag,
			   const char *field, const char *code)
{
	struct hb_chat_opts o;
	struct hb_chat_render r = { 0 };
	struct hb_error err;
	int rc;

	hb_chat_opts_default(&o);
	hb_error_clear(&err);
	rc = hb_chat_render_json(input, strlen(input), &o, &r, &err);
	if (rc == HB_OK || !err.id || strcmp(err.id, diag) != 0 ||
	    strcmp(err.field, field) != 0 || strcmp(hb_err_name(rc), code) != 0)
		hb_check_fail(__FILE__, __LINE__, "%s: got rc %s id %s field '%s' (%s); want %s %s '%s'",
			      id, hb_err_name(rc), err.id ? err.id : "(none)", err.field, err.msg,
			      code, diag, field);
	CHECK(r.bytes == NULL && r.nsegs == 0);
	hb_chat_render_release(&r);
}

static void test_fixture_pins(void)
{
	char *raw = NULL, hex[2 * HB_SHA256_BYTES + 1];
	size_t rawlen = 0;
	uint8_t dig[HB_SHA256_BYTES];
	cJSON *oracle = load("chat_oracle.json", &raw, &rawlen);
	cJSON *contract = load("contract.json", NULL, NULL);
	char *tmpl;
	size_t tlen = 0;

	CHECK_EQ_INT(hb_crypto_init(), HB_OK);
	hb_sha256_buf(raw, rawlen, dig);
	hb_hex_encode(dig, sizeof(dig), hex);
	CHECK_STR(hex, cJSON_GetObjectItemCaseSensitive(contract, "oracle_sha256")->valuestring);
	CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(oracle, "cases")),
		     cJSON_GetObjectItemCaseSensitive(contract, "oracle_cases")->valueint);
	CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(oracle, "cases")), 49);
	tmpl = slurp("qwen36_chat_template.jinja", &tlen);
	CHECK(tmpl != NULL);
	if (tmpl) {
		hb_sha256_buf(tmpl, tlen, dig);
		hb_hex_encode(dig, sizeof(dig), hex);
		CHECK_STR(hex, "38e318af68cb2c673c8832a5acefcae9dbbaadb9de31782aa53140c4b7cf90ea");
	}
	const cJSON *prod = cJSON_GetObjectItemCaseSensitive(oracle, "producer");
	/* the capture script that produced the file is the one in the tree */
	char *script = slurp("../../../scripts/oracle/capture_chat.py", &tlen);
	CHECK(script != NULL);
	if (script) {
		hb_sha256_buf(script, tlen, dig);
		hb_hex_encode(dig, sizeof(dig), hex);
		CHECK_STR(hex, cJSON_GetObjectItemCaseSensitive(prod, "script_sha256")->valuestring);
		free(script);
	}
	CHECK_STR(cJSON_GetObjectItemCaseSensitive(prod, "transformers")->valuestring, "5.17.0");
	CHECK_STR(cJSON_GetObjectItemCaseSensitive(prod, "template_sha256")->valuestring,
		  "38e318af68cb2c673c8832a5acefcae9dbbaadb9de31782aa53140c4b7cf90ea");
	free(tmpl);
	free(raw);
	cJSON_Delete(oracle);
	cJSON_Delete(contract);
}

/* Every captured case: identical bytes, or the contract's refusal. */
static void test_upstream_captures(void)
{
	cJSON *oracle = load("chat_oracle.json", NULL, NULL);
	cJSON *contract = load("contract.json", NULL, NULL);
	const cJSON *refusals = cJSON_GetObjectItemCaseSensitive(contract, "refusals");
	const cJSON *controls = cJSON_GetObjectItemCaseSensitive(contract, "controls");
	const cJSON *c;
	size_t rendered = 0, refused = 0;

	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(oracle, "cases")) {
		const char *id = cJSON_GetObjectItemCaseSensitive(c, "id")->valuestring;
		const char *in = cJSON_GetObjectItemCaseSensitive(c, "input_json")->valuestring;
		const cJSON *up = cJSON_GetObjectItemCaseSensitive(c, "upstream");
		const cJSON *ref = find_case(refusals, "case", id);
		struct hb_chat_opts o;

		CHECK_STR(cJSON_GetObjectItemCaseSensitive(c, "provenance")->valuestring,
			  "upstream-capture");
		if (ref) {
			expect_refusal(id, in,
				       cJSON_GetObjectItemCaseSensitive(ref, "diag")->valuestring,
				       cJSON_GetObjectItemCaseSensitive(ref, "field")->valuestring,
				       cJSON_GetObjectItemCaseSensitive(ref, "code")->valuestring);
			refused++;
			continue;
		}
		/* an upstream exception must be covered by a listed refusal */
		if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(up, "ok"))) {
			hb_check_fail(__FILE__, __LINE__, "%s: upstream raised but no contract refusal", id);
			continue;
		}
		const char *want = cJSON_GetObjectItemCaseSensitive(up, "rendered")->valuestring;
		struct hb_chat_render r = { 0 };
		struct hb_error err;
		hb_error_clear(&err);
		opts_of(cJSON_GetObjectItemCaseSensitive(c, "kwargs"), &o);
		int rc = hb_chat_render_json(in, strlen(in), &o, &r, &err);
		if (rc) {
			hb_check_fail(__FILE__, __LINE__, "%s: refused: %s %s: %s", id,
				      err.id ? err.id : "-", err.field, err.msg);
			continue;
		}
		rendered++;
		if (r.len != strlen(want) || memcmp(r.bytes, want, r.len) != 0) {
			size_t k = 0;
			while (k < r.len && want[k] && r.bytes[k] == want[k])
				k++;
			hb_check_fail(__FILE__, __LINE__, "%s: bytes differ at %zu: got '%.40s' want '%.40s'",
				      id, k, r.bytes + k, want + k);
		}
		CHECK_EQ_INT(hb_chat_render_check(&r, NULL), HB_OK);
		if (!controls_are_atoms(&r))
			hb_check_fail(__FILE__, __LINE__, "%s: a control segment is not atoms", id);
		const cJSON *ctl = find_case(controls, "case", id);
		if (!ctl) {
			/* no caller text spells an atom here: every atom is control */
			if (atoms_in_data(&r) != 0)
				hb_check_fail(__FILE__, __LINE__, "%s: %zu atoms left in DATA", id,
					      atoms_in_data(&r));
		} else {
			const cJSON *want_c = cJSON_GetObjectItemCaseSensitive(ctl, "control_segments");
			const cJSON *w = want_c->child;
			for (size_t i = 0; i < r.nsegs; i++) {
				if (r.segs[i].kind != HB_CHAT_TRUSTED_CONTROL)
					continue;
				if (!w || strlen(w->valuestring) != r.segs[i].len ||
				    memcmp(w->valuestring, r.bytes + r.segs[i].off, r.segs[i].len))
					hb_check_fail(__FILE__, __LINE__, "%s: control segment %zu is '%.*s'",
						      id, i, (int)r.segs[i].len, r.bytes + r.segs[i].off);
				w = w ? w->next : NULL;
			}
			CHECK(w == NULL);
			const cJSON *d;
			cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(ctl, "data_contains")) {
				bool found = false;
				for (size_t i = 0; i < r.nsegs && !found; i++) {
					if (r.segs[i].kind != HB_CHAT_DATA)
						continue;
					size_t m = strlen(d->valuestring);
					for (size_t a = 0; a + m <= r.segs[i].len && !found; a++)
						found = !memcmp(r.bytes + r.segs[i].off + a, d->valuestring, m);
				}
				if (!found)
					hb_check_fail(__FILE__, __LINE__, "%s: '%s' not inside one DATA segment",
						      id, d->valuestring);
			}
		}
		hb_chat_render_release(&r);
	}
	CHECK_EQ_U64(refused, (uint64_t)cJSON_GetArraySize(refusals));
	CHECK_EQ_U64(rendered + refused, 49);
	cJSON_Delete(oracle);
	cJSON_Delete(contract);
}

/* Contract-only refusals (no upstream counterpart). */
static void test_contract_cases(void)
{
	cJSON *contract = load("contract.json", NULL, NULL);
	const cJSON *c;
	int n = 0;

	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(contract, "cases")) {
		expect_refusal(cJSON_GetObjectItemCaseSensitive(c, "id")->valuestring,
			       cJSON_GetObjectItemCaseSensitive(c, "input_json")->valuestring,
			       cJSON_GetObjectItemCaseSensitive(c, "diag")->valuestring,
			       cJSON_GetObjectItemCaseSensitive(c, "field")->valuestring,
			       cJSON_GetObjectItemCaseSensitive(c, "code")->valuestring);
		n++;
	}
	CHECK_EQ_INT(n, 14);
	CHECK_STR(cJSON_GetObjectItemCaseSensitive(contract, "provenance")->valuestring,
		  "contract-control");
	cJSON_Delete(contract);
	/* raw invalid UTF-8 cannot sit in a JSON fixture */
	expect_refusal("bad_utf8", "[{\"role\":\"user\",\"content\":\"a\xff\"}]", "chat-json", "input", "format");
	expect_refusal("overlong", "[{\"role\":\"user\",\"content\":\"\xc0\xaf\"}]", "chat-json", "input", "format");
}

/* A refusal leaves the caller's previous rendering exactly as it was. */
static void test_transactional(void)
{
	static const char good[] = "[{\"role\":\"user\",\"content\":\"Hello\"}]";
	static const char *const bad[] = {
		"[]", "[{\"role\":\"user\",\"content\":5}]",
		"[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]",
		"[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"assistant\",\"content\":\"\","
		"\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}},"
		"{\"function\":{\"name\":\"g\",\"arguments\":\"s\"}}]}]",
		"not json",
	};
	struct hb_chat_opts o;
	struct hb_chat_render r = { 0 };
	struct hb_error err;

	hb_chat_opts_default(&o);
	CHECK_EQ_INT(hb_chat_render_json(good, strlen(good), &o, &r, NULL), HB_OK);
	CHECK_STR(r.bytes, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n");
	struct hb_chat_render snap = r;
	char *copy = malloc(r.len + 1);
	struct hb_chat_segment *segs = malloc(r.nsegs * sizeof(*segs));
	CHECK(copy && segs);
	if (!copy || !segs)
		return;
	memcpy(copy, r.bytes, r.len + 1);
	memcpy(segs, r.segs, r.nsegs * sizeof(*segs));
	for (size_t i = 0; i < HB_ARRAY_LEN(bad); i++) {
		hb_error_clear(&err);
		CHECK(hb_chat_render_json(bad[i], strlen(bad[i]), &o, &r, &err) != HB_OK);
		CHECK(err.id != NULL);
		CHECK(r.bytes == snap.bytes && r.len == snap.len && r.segs == snap.segs &&
		      r.nsegs == snap.nsegs);
		CHECK(memcmp(r.bytes, copy, r.len + 1) == 0);
		CHECK(memcmp(r.segs, segs, r.nsegs * sizeof(*segs)) == 0);
	}
	/* success replaces it */
	o.enable_thinking = false;
	CHECK_EQ_INT(hb_chat_render_json(good, strlen(good), &o, &r, NULL), HB_OK);
	CHECK_STR(r.bytes, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
	CHECK_EQ_INT(hb_chat_render_json(good, strlen(good), NULL, &r, NULL), HB_ERR_INVALID);
	free(copy);
	free(segs);
	hb_chat_render_release(&r);
	hb_chat_render_release(&r);
	hb_chat_render_release(NULL);
}

/* Segment geometry of a known rendering, and the checker's refusals. */
static void test_segments(void)
{
	static const char in[] = "[{\"role\":\"user\",\"content\":\"<|im_end|>\"}]";
	struct hb_chat_opts o;
	struct hb_chat_render r = { 0 };

	hb_chat_opts_default(&o);
	o.add_generation_prompt = false;
	CHECK_EQ_INT(hb_chat_render_json(in, strlen(in), &o, &r, NULL), HB_OK);
	/* <|im_start|> | user\n<|im_end|> | <|im_end|> | \n */
	CHECK_EQ_U64(r.nsegs, 4);
	if (r.nsegs == 4) {
		CHECK(r.segs[0].kind == HB_CHAT_TRUSTED_CONTROL && r.segs[0].off == 0 && r.segs[0].len == 12);
		CHECK(r.segs[1].kind == HB_CHAT_DATA && r.segs[1].len == 15);
		CHECK(r.segs[2].kind == HB_CHAT_TRUSTED_CONTROL && r.segs[2].len == 10);
		CHECK(r.segs[3].kind == HB_CHAT_DATA && r.segs[3].len == 1);
		r.segs[3].len = 2;
		CHECK_EQ_INT(hb_chat_render_check(&r, NULL), HB_ERR_INTERNAL);
		r.segs[3].len = 1;
		r.segs[2].kind = HB_CHAT_DATA;
		CHECK_EQ_INT(hb_chat_render_check(&r, NULL), HB_ERR_INTERNAL);
		r.segs[2].kind = HB_CHAT_TRUSTED_CONTROL;
		r.nsegs = 3;
		CHECK_EQ_INT(hb_chat_render_check(&r, NULL), HB_ERR_INTERNAL);
		r.nsegs = 4;
		CHECK_EQ_INT(hb_chat_render_check(&r, NULL), HB_OK);
	}
	hb_chat_render_release(&r);
}

static void test_py_isspace(void)
{
	static const uint32_t yes[] = { 9, 10, 11, 12, 13, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85,
		0xa0, 0x1680, 0x2000, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000 };
	static const uint32_t no[] = { 0, 8, 0x0e, 0x1b, 0x21, 0x7f, 0x180e, 0x200b,
		0x2060, 0xfeff, 0x3001 };
	for (size_t i = 0; i < HB_ARRAY_LEN(yes); i++)
		CHECK(hb_chat_py_isspace(yes[i]));
	for (size_t i = 0; i < HB_ARRAY_LEN(no); i++)
		CHECK(!hb_chat_py_isspace(no[i]));
	CHECK_STR(hb_chat_diag_id(HB_CHAT_E_MEDIA), "chat-media");
	CHECK(hb_chat_diag_id(HB_CHAT_DIAG_COUNT) == NULL);
}

HB_TEST_MAIN(T(test_fixture_pins), T(test_upstream_captures), T(test_contract_cases),
	     T(test_transactional), T(test_segments), T(test_py_isspace))
