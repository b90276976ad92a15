/*
 * hb_admit_vocab.c: the embedded tokenizer's id range for step 5, without
 * building its JSON tree when that is not needed.
 *
 * The rule (hb_admit.h hb_admit_tokenizer_vocab): parse tokenizer.json as
 * hb_json_parse does (cJSON, nothing but white space after the value); one
 * past the largest non-negative number among the members of the first
 * "model" member's first "vocab" member, and among the first "id" member of
 * each element of the first "added_tokens" member; a number counted there
 * that is not a whole number of at most 2^53 - 1 is refused (HB_ERR_FORMAT).
 *
 * Building the cJSON tree of the real tokenizer (4 MB, 248,077 ids) took
 * 85 ms of admission's 200 (measured), nearly all malloc and free.  So one
 * pass over the bytes checks a strict subset of JSON and reads the ids
 * where the rule looks for them; the tree is built only when the text
 * leaves that subset, and then it decides exactly as before.  The subset
 * is chosen so that cJSON 1.7.15 parses every text in it and gives the same
 * answer:
 *   - RFC 8259 syntax only: white space is space, tab, CR and LF; no other
 *     byte below 0x20 anywhere (cJSON skips any of them as white space and
 *     keeps them raw inside strings); no UTF-8 byte order mark (cJSON skips
 *     one); numbers in the RFC's grammar and at most 40 characters (cJSON
 *     reads at most 63 and otherwise accepts more, "01" and "+1" say);
 *     escapes \" \\ \/ \b \f \n \r \t and \uXXXX with four hex digits, none
 *     a UTF-16 surrogate (cJSON's pairing rules are its own);
 *   - nesting at most 500 deep (cJSON refuses past 1000);
 *   - the keys the rule compares ("model", "vocab", "added_tokens", "id",
 *     and every key beside them) without a backslash, since an escape could
 *     spell one of them;
 *   - an id that counts is an integer of at most 15 digits (exact in
 *     double; cJSON's value is strtod's), or -0, which cJSON's >= 0 keeps.
 * Bytes of 0x80 and above pass through strings untouched in both.
 */
#include "hb_base.h"
#include "hb_admit.h"
#include "hb_json.h"

#include <math.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define MAX_DEPTH 500
#define MAX_NUMBER 40

enum role {
	R_NONE,       /* syntax only */
	R_ROOT,       /* the document: looks for model and added_tokens */
	R_MODEL,      /* looks for vocab */
	R_VOCAB,      /* every member or element a candidate id */
	R_ADDED,      /* every element an added token */
	R_ADDED_ITEM, /* looks for id */
	R_ID,         /* a candidate id */
};

struct scan {
	const unsigned char *p, *end;
	int depth;
	uint64_t next;
};

static void ws(struct scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A string at s->p (the opening quote); its raw bytes between the quotes
 * in *k / *klen and whether it held an escape.  False: outside the subset. */
static bool string(struct scan *s, const unsigned char **k, size_t *klen, bool *escaped)
{
	const unsigned char *p = s->p + 1;

	*escaped = false;
	for (;;) {
#if defined(__SSE2__)
		/* skip sixteen bytes at a time to the next quote, backslash or
		 * control byte (the byte loop alone took 7 ms of the real
		 * tokenizer's 4 MB, measured) */
		const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
		const __m128i ctl = _mm_set1_epi8(0x1f);
		while (s->end - p >= 16) {
			__m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
			__m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)),
						   _mm_cmpeq_epi8(_mm_max_epu8(v, ctl), ctl));
			int m = _mm_movemask_epi8(hit);
			if (m) {
				p += __builtin_ctz((unsigned)m);
				break;
			}
			p += 16;
		}
#endif
		if (p >= s->end || *p < 0x20)
			return false;
		if (*p == '"')
			break;
		if (*p == '\\') {
			*escaped = true;
			if (p + 1 >= s->end)
				return false;
			switch (p[1]) {
			case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
				p += 2;
				continue;
			case 'u': {
				unsigned code = 0;
				if (s->end - p < 6)
					return false;
				for (int i = 2; i < 6; i++) {
					int h = hexval(p[i]);
					if (h < 0)
						return false;
					code = code << 4 | (unsigned)h;
				}
				if (code >= 0xd800 && code <= 0xdfff)
					return false;
				p += 6;
				continue;
			}
			default:
				return false;
			}
		}
		p++;
	}
	*k = s->p + 1;
	*klen = (size_t)(p - (s->p + 1));
	s->p = p + 1;
	return true;
}

/* A number in the RFC grammar; a candidate id updates next. */
static bool number(struct scan *s, bool candidate)
{
	const unsigned char *p = s->p;
	bool neg = false, frac = false;
	uint64_t v = 0;
	size_t nd = 0;

	if (p < s->end && *p == '-')
		neg = true, p++;
	if (p >= s->end || *p < '0' || *p > '9')
		return false;
	if (*p == '0') {
		p++, nd = 1;
	} else {
		/* the value matters only below 16 digits; more is refused for a
		 * candidate below, and v may wrap meanwhile unused */
		for (; p < s->end && *p >= '0' && *p <= '9'; p++, nd++)
			v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p < s->end && *p == '.') {
		frac = true, p++;
		if (p >= s->end || *p < '0' || *p > '9')
			return false;
		while (p < s->end && *p >= '0' && *p <= '9')
			p++;
	}
	if (p < s->end && (*p == 'e' || *p == 'E')) {
		frac = true, p++;
		if (p < s->end && (*p == '+' || *p == '-'))
			p++;
		if (p >= s->end || *p < '0' || *p > '9')
			return false;
		while (p < s->end && *p >= '0' && *p <= '9')
			p++;
	}
	if (p - s->p > MAX_NUMBER)
		return false;
	if (candidate) {
		if (frac || nd > 15)
			return false; /* strtod's rounding would decide */
		/* a negative id counts only as -0 (zero in double, and >= 0) */
		if ((!neg || v == 0) && v + 1 > s->next)
			s->next = v + 1;
	}
	s->p = p;
	return true;
}

static bool literal(struct scan *s, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n))
		return false;
	s->p += n;
	return true;
}

static bool key_is(const unsigned char *k, size_t n, const char *want)
{
	return n == strlen(want) && !memcmp(k, want, n);
}

static bool value(struct scan *s, enum role r);

/* The role of a member's value in an object of role r; first: the keys
 * already taken (1 model, 2 added_tokens or vocab or id). */
static bool object(struct scan *s, enum role r)
{
	bool seen_a = false, seen_b = false;

	s->p++;
	ws(s);
	if (s->p < s->end && *s->p == '}') {
		s->p++;
		return true;
	}
	for (;;) {
		const unsigned char *k;
		size_t kn;
		bool esc;
		enum role vr = R_NONE;

		if (s->p >= s->end || *s->p != '"' || !string(s, &k, &kn, &esc))
			return false;
		switch (r) {
		case R_ROOT:
			if (esc)
				return false;
			if (!seen_a && key_is(k, kn, "model"))
				vr = R_MODEL, seen_a = true;
			else if (!seen_b && key_is(k, kn, "added_tokens"))
				vr = R_ADDED, seen_b = true;
			break;
		case R_MODEL:
			if (esc)
				return false;
			if (!seen_a && key_is(k, kn, "vocab"))
				vr = R_VOCAB, seen_a = true;
			break;
		case R_VOCAB:
			vr = R_ID; /* token strings are not compared */
			break;
		case R_ADDED:
			vr = R_ADDED_ITEM;
			break;
		case R_ADDED_ITEM:
			if (esc)
				return false;
			if (!seen_a && key_is(k, kn, "id"))
				vr = R_ID, seen_a = true;
			break;
		default:
			break;
		}
		ws(s);
		if (s->p >= s->end || *s->p != ':')
			return false;
		s->p++;
		ws(s);
		if (!value(s, vr))
			return false;
		ws(s);
		if (s->p < s->end && *s->p == ',') {
			s->p++;
			ws(s);
			continue;
		}
		if (s->p < s->end && *s->p == '}') {
			s->p++;
			return true;
		}
		return false;
	}
}

static bool array(struct scan *s, enum role r)
{
	/* elements have no names: the only roles they keep are a vocab's
	 * candidates and added_tokens' items */
	enum role er = r == R_VOCAB ? R_ID : r == R_ADDED ? R_ADDED_ITEM : R_NONE;

	s->p++;
	ws(s);
	if (s->p < s->end && *s->p == ']') {
		s->p++;
		return true;
	}
	for (;;) {
		if (!value(s, er))
			return false;
		ws(s);
		if (s->p < s->end && *s->p == ',') {
			s->p++;
			ws(s);
			continue;
		}
		if (s->p < s->end && *s->p == ']') {
			s->p++;
			return true;
		}
		return false;
	}
}

static bool value(struct scan *s, enum role r)
{
	bool ok;

	if (s->p >= s->end)
		return false;
	switch (*s->p) {
	case '{':
	case '[':
		if (++s->depth > MAX_DEPTH)
			return false;
		/* a role that looks for named members finds none in an array,
		 * and a candidate id that is a container is no number */
		ok = *s->p == '{' ? object(s, r == R_ID ? R_NONE : r)
				  : array(s, r == R_ID || r == R_MODEL || r == R_ADDED_ITEM || r == R_ROOT
						     ? R_NONE : r);
		s->depth--;
		return ok;
	case '"': {
		const unsigned char *k;
		size_t n;
		bool esc;
		return string(s, &k, &n, &esc);
	}
	case 't':
		return literal(s, "true");
	case 'f':
		return literal(s, "false");
	case 'n':
		return literal(s, "null");
	default:
		return number(s, r == R_ID);
	}
}

/* The fast path: true when it decided (*next set). */
static bool scan_vocab(const char *json, size_t len, uint64_t *next)
{
	struct scan s = {(const unsigned char *)json, (const unsigned char *)json + len, 0, 0};

	ws(&s);
	if (!value(&s, R_ROOT))
		return false;
	ws(&s);
	if (s.p != s.end)
		return false;
	*next = s.next;
	return true;
}

/* A member the rule looks at: 0 when it does not count (not a number, or
 * negative), 1 when it does (*id), -1 when it cannot be an id: a fraction,
 * an infinity (cJSON reads 1e999 as one) or past 2^53 - 1, where the double
 * is not the integer written and the conversion to an integer would be
 * undefined past 2^64. */
static int candidate(const cJSON *item, uint64_t *id)
{
	double v;

	if (!cJSON_IsNumber(item) || !(item->valuedouble >= 0))
		return 0;
	v = item->valuedouble;
	if (!isfinite(v) || v != floor(v) || v > HB_JSON_MAX_EXACT_INT)
		return -1;
	*id = (uint64_t)v;
	return 1;
}

/* The rule on cJSON's tree: the reference, and what decides outside the
 * subset. */
int hb_admit_tokenizer_vocab_tree(const char *json, size_t len, uint64_t *out)
{
	cJSON *root = NULL, *item;
	const cJSON *vocab, *added;
	uint64_t next = 0, id = 0;
	int c, rc = HB_OK;

	if (hb_json_parse(json, len, "tokenizer.json", &root, NULL))
		return HB_ERR_FORMAT;
	vocab = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"), "vocab");
	added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
	cJSON_ArrayForEach(item, vocab) {
		if ((c = candidate(item, &id)) < 0)
			rc = HB_ERR_FORMAT;
		else if (c && id + 1 > next)
			next = id + 1;
	}
	cJSON_ArrayForEach(item, added) {
		if ((c = candidate(cJSON_GetObjectItemCaseSensitive(item, "id"), &id)) < 0)
			rc = HB_ERR_FORMAT;
		else if (c && id + 1 > next)
			next = id + 1;
	}
	cJSON_Delete(root);
	if (!rc)
		*out = next;
	return rc;
}

int hb_admit_tokenizer_vocab(const char *json, size_t len, uint64_t *next, bool *fast)
{
	bool f = scan_vocab(json, len, next);

	if (fast)
		*fast = f;
	return f ? HB_OK : hb_admit_tokenizer_vocab_tree(json, len, next);
}
