/*
 * hb_chat_json.c: the JSON side of chat rendering.
 *
 * Owns the strict reading of the conversation text and the rendering of
 * values the way the Python side of apply_chat_template does: json.dumps
 * for tojson and str() for Jinja's `| string`.  Both depend on the source
 * spelling of numbers (json.loads makes "1" an int and "1.0" a float), which
 * cJSON discards, so the literals are recovered by a second scan of the text
 * and tied to the tree in document order.  Does not own the template.
 */
#include "hb_chat_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hb_chat_str_put(struct hb_chat_str *s, const char *p, size_t n)
{
	if (s->rc || n == 0)
		return;
	if (n > SIZE_MAX / 4 - s->n) {
		s->rc = HB_ERR_OVERFLOW;
		return;
	}
	if (s->n + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 256;
		while (cap < s->n + n + 1)
			cap *= 2;
		char *q = realloc(s->p, cap);
		if (!q) {
			s->rc = HB_ERR_NOMEM;
			return;
		}
		s->p = q;
		s->cap = cap;
	}
	memcpy(s->p + s->n, p, n);
	s->n += n;
	s->p[s->n] = '\0';
}

void hb_chat_str_puts(struct hb_chat_str *s, const char *z)
{
	hb_chat_str_put(s, z, strlen(z));
}

void hb_chat_str_free(struct hb_chat_str *s)
{
	free(s->p);
	memset(s, 0, sizeof(*s));
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool json_number_ok(const char *p, size_t n)
{
	size_t i = 0;

	if (i < n && p[i] == '-')
		i++;
	if (i >= n)
		return false;
	if (p[i] == '0') {
		i++;
	} else if (p[i] >= '1' && p[i] <= '9') {
		while (i < n && p[i] >= '0' && p[i] <= '9')
			i++;
	} else {
		return false;
	}
	if (i < n && p[i] == '.') {
		size_t d = ++i;
		while (i < n && p[i] >= '0' && p[i] <= '9')
			i++;
		if (i == d)
			return false;
	}
	if (i < n && (p[i] == 'e' || p[i] == 'E')) {
		i++;
		if (i < n && (p[i] == '+' || p[i] == '-'))
			i++;
		size_t d = i;
		while (i < n && p[i] >= '0' && p[i] <= '9')
			i++;
		if (i == d)
			return false;
	}
	return i == n;
}

static bool utf8_ok(const unsigned char *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned c = p[i];
		size_t k;
		uint32_t cp, min;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			k = 1, cp = c & 0x1f, min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			k = 2, cp = c & 0x0f, min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			k = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return false;
		}
		if (k > n - i - 1)
			return false;
		for (size_t j = 1; j <= k; j++) {
			if ((p[i + j] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (p[i + j] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += k + 1;
	}
	return true;
}

/* Collect number literals outside strings; refuse "\u0000" (cJSON would
 * cut the string at the NUL, Python keeps it). */
static int scan_literals(const char *t, size_t len, struct hb_chat_doc *doc,
			 struct hb_error *err)
{
	size_t cap = 0;

	for (size_t i = 0; i < len;) {
		char c = t[i];
		if (c == '"') {
			for (i++; i < len && t[i] != '"'; i++) {
				if (t[i] != '\\')
					continue;
				if (i + 5 < len && t[i + 1] == 'u' &&
				    memcmp(t + i + 2, "0000", 4) == 0)
					return hb_error_diag(err, "chat-json", HB_ERR_FORMAT, "input",
							     true, i, "a string holds U+0000");
				i++;
			}
			i++;
		} else if (c == '-' || (c >= '0' && c <= '9')) {
			size_t s = i;
			while (i < len && strchr("+-0123456789.eE", t[i]) && t[i])
				i++;
			if (!json_number_ok(t + s, i - s))
				return hb_error_diag(err, "chat-json", HB_ERR_FORMAT, "input",
						     true, s, "not a JSON number: '%.*s'",
						     (int)(i - s > 40 ? 40 : i - s), t + s);
			if (doc->nlits == cap) {
				size_t nc = cap ? cap * 2 : 32;
				struct hb_chat_lit *q = realloc(doc->lits, nc * sizeof(*q));
				if (!q)
					return hb_error_set(err, HB_ERR_NOMEM, "input", "out of memory");
				doc->lits = q;
				cap = nc;
			}
			doc->lits[doc->nlits].p = t + s;
			doc->lits[doc->nlits].n = i - s;
			doc->nlits++;
		} else {
			i++;
		}
	}
	return HB_OK;
}

static int walk(cJSON *v, struct hb_chat_doc *doc, size_t *k, int depth,
		struct hb_error *err)
{
	if (depth > 512)
		return hb_error_diag(err, "chat-json", HB_ERR_FORMAT, "input", false, 0,
				     "nesting deeper than 512");
	if (cJSON_IsNumber(v)) {
		if (*k >= doc->nlits || *k > (size_t)INT32_MAX)
			return hb_error_diag(err, "chat-json", HB_ERR_INTERNAL, "input", false, 0,
					     "number literals out of step with the parse");
		v->valueint = (int)(*k)++;
	} else if (cJSON_IsString(v)) {
		if (!utf8_ok((const unsigned char *)v->valuestring, strlen(v->valuestring)))
			return hb_error_diag(err, "chat-json", HB_ERR_FORMAT, "input", false, 0,
					     "a string is not valid UTF-8");
	}
	for (cJSON *c = v->child; c; c = c->next) {
		if (cJSON_IsObject(v)) {
			if (!c->string || !utf8_ok((const unsigned char *)c->string, strlen(c->string)))
				return hb_error_diag(err, "chat-json", HB_ERR_FORMAT, "input", false, 0,
						     "a key is not valid UTF-8");
			for (cJSON *d = v->child; d != c; d = d->next)
				if (strcmp(d->string, c->string) == 0)
					return hb_error_diag(err, "chat-json", HB_ERR_FORMAT, "input",
							     false, 0, "duplicate key \"%.64s\"", c->string);
		}
		int rc = walk(c, doc, k, depth + 1, err);
		if (rc)
			return rc;
	}
	return HB_OK;
}

int hb_chat_doc_parse(const char *json, size_t len, struct hb_chat_doc *doc,
		      struct hb_error *err)
{
	const char *end = NULL;
	size_t k = 0;
	int rc;

	memset(doc, 0, sizeof(*doc));
	if (!json)
		return hb_error_set(err, HB_ERR_INVALID, "input", "no input");
	rc = scan_literals(json, len, doc, err);
	if (rc)
		goto fail;
	doc->root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
	if (!doc->root) {
		rc = hb_error_diag(err, "chat-json", HB_ERR_FORMAT, "input", false, 0,
				   "invalid JSON");
		goto fail;
	}
	for (const char *p = end; p && p < json + len; p++) {
		if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
			rc = hb_error_diag(err, "chat-json", HB_ERR_FORMAT, "input", true,
					   (uint64_t)(p - json), "trailing bytes after the JSON value");
			goto fail;
		}
	}
	rc = walk(doc->root, doc, &k, 0, err);
	if (!rc && k != doc->nlits)
		rc = hb_error_diag(err, "chat-json", HB_ERR_INTERNAL, "input", false, 0,
				   "number literals out of step with the parse");
	if (rc)
		goto fail;
	return HB_OK;
fail:
	hb_chat_doc_free(doc);
	return rc;
}

void hb_chat_doc_free(struct hb_chat_doc *doc)
{
	cJSON_Delete(doc->root);
	free(doc->lits);
	memset(doc, 0, sizeof(*doc));
}

/* Python float repr: shortest round-trip digits; exponent form when the
 * decimal point position is <= -4 or > 16 (CPython format_float_short). */
static void float_repr(double d, struct hb_chat_str *s)
{
	char buf[64], digits[32];
	int p, e, nd = 0, decpt;

	for (p = 0; p < 17; p++) {
		snprintf(buf, sizeof(buf), "%.*e", p, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	const char *q = buf;
	if (*q == '-')
		q++;
	for (; *q && *q != 'e'; q++)
		if (*q >= '0' && *q <= '9')
			digits[nd++] = *q;
	e = (int)strtol(q + 1, NULL, 10);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	decpt = e + 1;
	if (signbit(d))
		hb_chat_str_puts(s, "-");
	if (decpt <= -4 || decpt > 16) {
		hb_chat_str_put(s, digits, 1);
		if (nd > 1) {
			hb_chat_str_puts(s, ".");
			hb_chat_str_put(s, digits + 1, (size_t)nd - 1);
		}
		snprintf(buf, sizeof(buf), "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
		hb_chat_str_puts(s, buf);
	} else if (decpt <= 0) {
		hb_chat_str_puts(s, "0.");
		for (int i = 0; i < -decpt; i++)
			hb_chat_str_puts(s, "0");
		hb_chat_str_put(s, digits, (size_t)nd);
	} else if (decpt >= nd) {
		hb_chat_str_put(s, digits, (size_t)nd);
		for (int i = 0; i < decpt - nd; i++)
			hb_chat_str_puts(s, "0");
		hb_chat_str_puts(s, ".0");
	} else {
		hb_chat_str_put(s, digits, (size_t)decpt);
		hb_chat_str_puts(s, ".");
		hb_chat_str_put(s, digits + decpt, (size_t)(nd - decpt));
	}
}

/* json_mode: json.dumps spelling of inf ("Infinity"); else str() ("inf"). */
static void number(const struct hb_chat_doc *doc, const cJSON *v, bool json_mode,
		   struct hb_chat_str *s)
{
	const struct hb_chat_lit *l = &doc->lits[v->valueint];

	if (!memchr(l->p, '.', l->n) && !memchr(l->p, 'e', l->n) &&
	    !memchr(l->p, 'E', l->n)) {
		/* int(literal): exact at any size; "-0" is 0 */
		if (l->n == 2 && l->p[0] == '-' && l->p[1] == '0')
			hb_chat_str_puts(s, "0");
		else
			hb_chat_str_put(s, l->p, l->n);
		return;
	}
	char tmp[512];
	size_t n = l->n < sizeof(tmp) - 1 ? l->n : sizeof(tmp) - 1;
	memcpy(tmp, l->p, n);
	tmp[n] = '\0';
	double d = strtod(tmp, NULL);
	if (isinf(d)) {
		if (d < 0)
			hb_chat_str_puts(s, "-");
		hb_chat_str_puts(s, json_mode ? "Infinity" : "inf");
		return;
	}
	float_repr(d, s);
}

static void json_string(const char *z, struct hb_chat_str *s)
{
	const char *run = z;

	hb_chat_str_puts(s, "\"");
	for (const char *p = z; *p; p++) {
		unsigned char c = (unsigned char)*p;
		const char *esc = NULL;
		char u[8];
		if (c == '"')
			esc = "\\\"";
		else if (c == '\\')
			esc = "\\\\";
		else if (c == '\n')
			esc = "\\n";
		else if (c == '\r')
			esc = "\\r";
		else if (c == '\t')
			esc = "\\t";
		else if (c == '\b')
			esc = "\\b";
		else if (c == '\f')
			esc = "\\f";
		else if (c < 0x20) {
			snprintf(u, sizeof(u), "\\u%04x", c);
			esc = u;
		}
		if (esc) {
			hb_chat_str_put(s, run, (size_t)(p - run));
			hb_chat_str_puts(s, esc);
			run = p + 1;
		}
	}
	hb_chat_str_puts(s, run);
	hb_chat_str_puts(s, "\"");
}

static void tojson_rec(const struct hb_chat_doc *doc, const cJSON *v, bool json_mode,
		       struct hb_chat_str *s)
{
	if (cJSON_IsNull(v)) {
		hb_chat_str_puts(s, "null");
	} else if (cJSON_IsTrue(v)) {
		hb_chat_str_puts(s, "true");
	} else if (cJSON_IsFalse(v)) {
		hb_chat_str_puts(s, "false");
	} else if (cJSON_IsNumber(v)) {
		number(doc, v, json_mode, s);
	} else if (cJSON_IsString(v)) {
		json_string(v->valuestring, s);
	} else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
		bool obj = cJSON_IsObject(v);
		hb_chat_str_puts(s, obj ? "{" : "[");
		for (const cJSON *c = v->child; c; c = c->next) {
			if (c != v->child)
				hb_chat_str_puts(s, ", ");
			if (obj) {
				json_string(c->string, s);
				hb_chat_str_puts(s, ": ");
			}
			tojson_rec(doc, c, json_mode, s);
		}
		hb_chat_str_puts(s, obj ? "}" : "]");
	} else if (!s->rc) {
		s->rc = HB_ERR_INTERNAL;
	}
}

void hb_chat_tojson(const struct hb_chat_doc *doc, const cJSON *v,
		    struct hb_chat_str *s)
{
	tojson_rec(doc, v, true, s);
}

void hb_chat_pystr(const struct hb_chat_doc *doc, const cJSON *v,
		   struct hb_chat_str *s)
{
	if (cJSON_IsString(v))
		hb_chat_str_puts(s, v->valuestring);
	else if (cJSON_IsNull(v))
		hb_chat_str_puts(s, "None");
	else if (cJSON_IsTrue(v))
		hb_chat_str_puts(s, "True");
	else if (cJSON_IsFalse(v))
		hb_chat_str_puts(s, "False");
	else if (cJSON_IsNumber(v))
		number(doc, v, false, s);
	else if (!s->rc)
		s->rc = HB_ERR_INTERNAL; /* containers go through tojson */
}
