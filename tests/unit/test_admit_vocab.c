/*
 * Unit tests: hb_admit_tokenizer_vocab, admission's id range of an
 * embedded tokenizer.json, against a reference written here on cJSON's tree
 * (the rule as admission applied it before the one-pass reader existed):
 * named edge cases of the rule and of JSON, a generated tokenizer of the
 * real vocabulary's size, and thousands of one-byte mutations of a small
 * one, each compared in result and value.  The one-pass reader must decide
 * the clean tokenizers itself (fast), and any text it does not take must
 * still get the reference's answer.
 */
#include "hb_base.h"
#include "harness.h"
#include "admit/hb_admit.h"
#include "hb_json.h"

#include <math.h>

/* The reference, written out again: a counted number is a whole number of
 * at most 2^53 - 1 or the text is refused. */
static int counted(const cJSON *item, uint64_t *next)
{
	if (!cJSON_IsNumber(item) || item->valuedouble < 0 || item->valuedouble != item->valuedouble)
		return 0;
	if (item->valuedouble > 9007199254740991.0 || item->valuedouble != floor(item->valuedouble))
		return -1; /* also an infinity: inf > 2^53 - 1 */
	if ((uint64_t)item->valuedouble + 1 > *next)
		*next = (uint64_t)item->valuedouble + 1;
	return 0;
}

/* The reference: parse with hb_json_parse, then the rule on the tree. */
static int reference(const char *json, size_t len, uint64_t *out)
{
	cJSON *root = NULL, *item;
	const cJSON *vocab, *added;
	uint64_t next = 0;
	int bad = 0;

	if (hb_json_parse(json, len, "t", &root, NULL))
		return HB_ERR_FORMAT;
	vocab = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"), "vocab");
	added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
	cJSON_ArrayForEach(item, vocab)
		bad |= counted(item, &next);
	cJSON_ArrayForEach(item, added)
		bad |= counted(cJSON_GetObjectItemCaseSensitive(item, "id"), &next);
	cJSON_Delete(root);
	if (bad)
		return HB_ERR_FORMAT;
	*out = next;
	return HB_OK;
}

/* Same answer as the reference; returns whether the one-pass reader took it. */
static bool agrees(const char *json, size_t len, const char *what)
{
	uint64_t a = 7, b = 7;
	bool fast = false;
	int ra = hb_admit_tokenizer_vocab(json, len, &a, &fast), rb = reference(json, len, &b);

	if (ra != rb || (!ra && a != b))
		hb_check_fail(__FILE__, __LINE__, "[%s] got rc %d next %" PRIu64 ", the reference rc %d next %" PRIu64,
			      what, ra, a, rb, b);
	if (fast && ra)
		hb_check_fail(__FILE__, __LINE__, "[%s] the one-pass reader took a text that does not parse", what);
	return fast;
}

static void named_cases(void)
{
	static const struct {
		const char *json;
		int rc;
		uint64_t next;
		int fast; /* 1 taken in one pass (rc, next as stated), 0 through the
			   * tree (the reference's answer), -1 either */
	} cases[] = {
		{"{\"model\":{\"vocab\":{\"a\":0,\"b\":5,\"c\":2}}}", 0, 6, 1},
		{"{\"model\":{\"vocab\":{\"a\":0}},\"added_tokens\":[{\"id\":9},{\"id\":3}]}", 0, 10, 1},
		{"{}", 0, 0, 1},
		{"[]", 0, 0, 1},
		{" \t\r\n{\"model\":{\"vocab\":[1,2,40]}} \n", 0, 41, 1},           /* a vocab array counts too */
		{"{\"added_tokens\":{\"x\":{\"id\":12},\"y\":{\"id\":4}}}", 0, 13, 1}, /* an object of tokens too */
		{"{\"model\":{\"vocab\":{\"a\":1}},\"model\":{\"vocab\":{\"a\":99}}}", 0, 2, 1}, /* the first model */
		{"{\"model\":{\"vocab\":{\"a\":1},\"vocab\":{\"a\":99}}}", 0, 2, 1},     /* the first vocab */
		{"{\"added_tokens\":[{\"id\":1,\"id\":50}]}", 0, 2, 1},                 /* the first id */
		{"{\"added_tokens\":[[{\"id\":70}],{\"x\":{\"id\":80}}]}", 0, 0, 1},   /* ids only one level down */
		{"{\"model\":[{\"vocab\":{\"a\":3}}]}", 0, 0, 1},                       /* model an array: no vocab */
		{"{\"model\":{\"vocab\":{\"a\":\"5\",\"b\":null,\"c\":true,\"d\":[7],\"e\":{\"f\":8}}}}", 0, 0, 1},
		{"{\"model\":{\"vocab\":{\"a\":-3,\"b\":-0}}}", 0, 1, 1},              /* -0 >= 0 in double */
		{"{\"model\":{\"vocab\":{\"\\u0120the\":4,\"\\n\\\"\\\\\\/\\b\\f\\r\\t\":6}}}", 0, 7, 1},
		{"{\"model\":{\"vocab\":{\"\xc3\xa9\":2}}}", 0, 3, 1},                 /* UTF-8 passes through */
		{"{\"model\":{\"vocab\":{\"a\":999999999999999}}}", 0, 1000000000000000ull, 1},
		{"{\"model\":{\"vocab\":{\"a\":1.5e0,\"b\":2}}}", HB_ERR_FORMAT, 0, 0}, /* a fraction is no id */
		{"{\"model\":{\"vocab\":{\"a\":2.0e0,\"b\":1}}}", 0, 3, 0},            /* a whole number spelt so */
		{"{\"model\":{\"vocab\":{\"a\":-2.5}}}", 0, 0, 0},                       /* negative: not counted */
		{"{\"model\":{\"vocab\":{\"a\":9007199254740991}}}", 0, 9007199254740992ull, 0},
		{"{\"model\":{\"vocab\":{\"a\":9007199254740992}}}", HB_ERR_FORMAT, 0, 0}, /* not exact past 2^53 - 1 */
		{"{\"model\":{\"vocab\":{\"a\":12345678901234567}}}", HB_ERR_FORMAT, 0, 0},
		{"{\"added_tokens\":[{\"id\":1e300}]}", HB_ERR_FORMAT, 0, 0},               /* past 2^64: was undefined */
		{"{\"model\":{\"vocab\":{\"a\":1e999}}}", HB_ERR_FORMAT, 0, 0},          /* cJSON reads infinity */
		{"{\"model\":{\"vocab\":{\"a\":1}},\"dropout\":1.25e-3}", 0, 2, 1},   /* numbers elsewhere: syntax only */
		{"{\"mod\\u0065l\":{\"vocab\":{\"a\":4}}}", 0, 5, 0},                   /* an escaped key: the tree */
		{"\xef\xbb\xbf{\"model\":{\"vocab\":{\"a\":4}}}", 0, 5, 0},           /* cJSON skips a BOM */
		{"{\"model\":{\"vocab\":{\"a\":4}}}\x01", HB_ERR_FORMAT, 0, 0},       /* not white space after */
		{"{\"model\":{\"vocab\":{\"a\x01\":4}}}", 0, 5, 0},                   /* a raw control byte */
		{"{\"model\":{\"vocab\":{\"a\":01}}}", 0, 0, 0},                       /* cJSON's own number rules */
		{"{\"model\":{\"vocab\":{\"a\":+1}}}", 0, 0, 0},
		{"{\"model\":{\"vocab\":{\"\\ud83d\\ude00\":2}}}", 0, 3, 0},          /* a surrogate pair */
		{"{\"model\":{\"vocab\":{\"\\udc00\":2}}}", 0, 0, 0},                  /* a lone low surrogate */
		{"{\"model\":", HB_ERR_FORMAT, 0, 0},
		{"", HB_ERR_FORMAT, 0, 0},
		{"{\"model\":{}} {}", HB_ERR_FORMAT, 0, 0},                             /* a second value */
		{"{\"model\":{\"vocab\":{\"a\":1,}}}", HB_ERR_FORMAT, 0, 0},           /* a trailing comma */
		{"{\"model\":{\"vocab\":{\"a\":1}}", HB_ERR_FORMAT, 0, 0},
		{"{\"model\":{\"vocab\":{\"a\":\"\\x\"}}}", HB_ERR_FORMAT, 0, 0},      /* an unknown escape */
		{"{\"model\":{\"vocab\":{\"a\":tru}}}", HB_ERR_FORMAT, 0, 0},
		{"{\"model\":{\"vocab\":{\"a\":1e}}}", HB_ERR_FORMAT, 0, -1},
	};
	int fast_wrong = 0;

	for (size_t i = 0; i < HB_ARRAY_LEN(cases); i++) {
		uint64_t next = 12345;
		bool fast;
		int rc = hb_admit_tokenizer_vocab(cases[i].json, strlen(cases[i].json), &next, &fast);
		char what[32];
		snprintf(what, sizeof(what), "case %zu", i);
		/* what the table states: the rule's value where the one-pass
		 * reader decides, and refusals; the rest is the tree's to say */
		if (cases[i].fast == 1 || cases[i].rc)
			CHECK_EQ_INT(rc, cases[i].rc);
		if (cases[i].fast == 1 && !rc && next != cases[i].next)
			hb_check_fail(__FILE__, __LINE__, "[%s] next %" PRIu64 ", want %" PRIu64, what, next,
				      cases[i].next);
		if (cases[i].fast >= 0 && fast != (cases[i].fast == 1)) {
			printf("# case %zu: fast %d, want %d\n", i, fast, cases[i].fast);
			fast_wrong++;
		}
		agrees(cases[i].json, strlen(cases[i].json), what);
	}
	CHECK_EQ_INT(fast_wrong, 0);
	/* nesting: 400 levels in one pass, 700 through the tree, 1100 refused */
	for (int depth = 400; depth <= 1100; depth += 300) {
		size_t cap = (size_t)depth * 2 + 64, n = 0;
		char *t = malloc(cap);
		bool fast;
		if (!t)
			break;
		n += (size_t)snprintf(t, cap, "{\"model\":{\"vocab\":");
		for (int d = 0; d < depth; d++)
			t[n++] = '[';
		for (int d = 0; d < depth; d++)
			t[n++] = ']';
		n += (size_t)snprintf(t + n, cap - n, "}}");
		fast = agrees(t, n, "nesting");
		CHECK(fast == (depth <= 500));
		free(t);
	}
}

/* A tokenizer shaped like the real one: n vocab entries with escaped keys,
 * merges, added tokens, other members with numbers. */
static char *tokenizer(uint64_t n, size_t *len)
{
	size_t cap = (size_t)n * 48 + 4096, at = 0;
	char *t = malloc(cap);

	if (!t)
		return NULL;
	at += (size_t)snprintf(t + at, cap - at, "{\"version\":\"1.0\",\"truncation\":null,\"added_tokens\":[");
	for (uint64_t i = 0; i < 33; i++)
		at += (size_t)snprintf(t + at, cap - at, "%s{\"id\":%" PRIu64 ",\"content\":\"<|x%" PRIu64 "|>\",\"special\":true,\"lstrip\":false}",
				       i ? "," : "", n + i, i);
	at += (size_t)snprintf(t + at, cap - at, "],\"model\":{\"type\":\"BPE\",\"dropout\":null,\"fuse_unk\":false,\"vocab\":{");
	for (uint64_t i = 0; i < n; i++)
		at += (size_t)snprintf(t + at, cap - at, "%s\"\\u0120t%" PRIx64 "\\\"q\":%" PRIu64, i ? "," : "", i, i);
	at += (size_t)snprintf(t + at, cap - at, "},\"merges\":[");
	for (uint64_t i = 0; i < n / 8; i++)
		at += (size_t)snprintf(t + at, cap - at, "%s[\"a%" PRIu64 "\",\"b\"]", i ? "," : "", i);
	at += (size_t)snprintf(t + at, cap - at, "]},\"decoder\":{\"type\":\"ByteLevel\",\"trim_offsets\":-1.5e+2}}\n");
	*len = at;
	return t;
}

static void real_size_in_one_pass(void)
{
	size_t len = 0;
	char *t = tokenizer(248044, &len);
	uint64_t next = 0;
	bool fast = false;

	CHECK(t != NULL);
	if (!t)
		return;
	CHECK(len > 3000000);
	CHECK_EQ_INT(hb_admit_tokenizer_vocab(t, len, &next, &fast), HB_OK);
	CHECK(fast);
	CHECK_EQ_U64(next, 248077);
	CHECK(agrees(t, len, "real size"));
	free(t);
}

/* Every one-byte change of a small tokenizer, at every position, to a few
 * bytes that matter to JSON: the same answer as the reference each time. */
static void mutations_agree(void)
{
	static const char subst[] = {'"', '\\', '{', '}', '[', ']', ',', ':', '0', '9', '-', 'e', '.',
				     ' ', '\x01', 'u', 'd', 'x', '\0'};
	size_t len = 0;
	char *t = tokenizer(6, &len), *m;
	unsigned fast = 0, total = 0;

	CHECK(t != NULL);
	m = malloc(len + 1);
	if (!t || !m) {
		free(t);
		free(m);
		return;
	}
	for (size_t i = 0; i < len; i++) {
		for (size_t k = 0; k < sizeof(subst); k++) {
			char what[48];
			memcpy(m, t, len);
			m[i] = subst[k];
			snprintf(what, sizeof(what), "byte %zu -> 0x%02x", i, (unsigned char)subst[k]);
			fast += agrees(m, len, what);
			total++;
		}
		/* and with the byte deleted */
		memcpy(m, t, i);
		memcpy(m + i, t + i + 1, len - i - 1);
		fast += agrees(m, len - 1, "deleted");
		total++;
	}
	printf("# %u mutations agree with the reference, %u of them decided in one pass\n", total, fast);
	CHECK(total > 10000);
	CHECK(fast > 0 && fast < total);
	free(t);
	free(m);
}

HB_TEST_MAIN(T(named_cases), T(real_size_in_one_pass), T(mutations_agree))
