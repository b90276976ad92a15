/*
 * Unit tests: the committed upstream oracle fixtures are intact and their
 * provenance labels (AFN-014) are the ones the rule table gives.
 *
 * This is the C side of the offline fixture check; scripts/oracle/
 * check_fixtures.py is the Python side and also re-derives every `derived`
 * array, which this file does not.  Both read the same two committed files:
 *
 *   tests/fixtures/MANIFESTS.sha256          the sha256 of every oracle
 *       manifest.json, of the rule table and of the chat / tokenizer / codec
 *       oracle files; every upstream manifest must be listed.
 *   tests/fixtures/upstream/PROVENANCE.rules  name pattern -> the one label
 *       an array may carry (first match wins, no match is refused).
 *
 * Cases: every array exists with prod(shape) * sizeof(dtype) bytes and its
 * manifest's SHA-256, and no oracle file is unlisted (fixtures_are_intact);
 * every pinned file has its pinned digest (manifests_are_pinned); every label
 * is the rule table's and every cross-check names the upstream-capture it is
 * the xc/ twin of (labels_follow_the_rule_table); every cross-check agrees
 * with that array within its atol, skip_rows honoured and counted against
 * the capture's tie statistics (cross_checks_agree).  A fixture edited by
 * hand, truncated, relabelled, or pushed beyond a cross-check's atol fails,
 * with the array's name in the message; tests/cli/fixtures.bats shows each.
 *
 * The fixture root is $HB_SRCDIR/tests/fixtures, so the Bats file can point
 * this binary at a mutated copy.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_sha256.h"

#include <dirent.h>
#include <fnmatch.h>
#include <math.h>
#include <unistd.h>

#define UP "upstream-capture"
#define XC "independent-cross-check"
#define DV "derived"

static const char *const provenance_classes[] = {
	UP, XC, "contract-control", DV,
};

/* ------------------------------------------------------------ files */

static bool file_digest(const char *path, char got[HB_SHA256_HEX])
{
	char *data = NULL;
	size_t len = 0;
	uint8_t d[HB_SHA256_BYTES];

	if (hb_read_file(path, 256u << 20, &data, &len, NULL))
		return false;
	hb_sha256_buf(data, len, d);
	free(data);
	hb_hex_encode(d, sizeof(d), got);
	return true;
}

static bool file_digest_is(const char *path, const char *hex)
{
	char got[HB_SHA256_HEX];

	return file_digest(path, got) && strcmp(got, hex) == 0;
}

static uint64_t file_size_of(const char *path)
{
	char *data = NULL;
	size_t len = 0;

	if (hb_read_file(path, 256u << 20, &data, &len, NULL))
		return UINT64_MAX;
	free(data);
	return len;
}

static unsigned dtype_size(const char *dtype)
{
	if (!strcmp(dtype, "f32") || !strcmp(dtype, "i32"))
		return 4;
	if (!strcmp(dtype, "i64"))
		return 8;
	return 0;
}

static const char *fixtures_root(void)
{
	static char root[4096];

	snprintf(root, sizeof(root), "%s/tests/fixtures", hb_test_srcdir());
	return root;
}

/* ------------------------------------------------------------ fixture sets */

#define MAX_SETS 16

struct set {
	char name[256];
	char dir[4400];    /* <root>/upstream/<name> */
	char oracle[4500]; /* .../oracle */
	cJSON *m;
};

/* Every upstream/<name>/oracle/manifest.json, parsed; returns the count. */
static int open_sets(struct set *sets)
{
	char up[4200], path[4600];
	DIR *d;
	struct dirent *e;
	int n = 0;

	snprintf(up, sizeof(up), "%s/upstream", fixtures_root());
	d = opendir(up);
	CHECK(d != NULL);
	if (!d)
		return 0;
	while ((e = readdir(d)) && n < MAX_SETS) {
		struct set *s = &sets[n];

		if (e->d_name[0] == '.')
			continue;
		snprintf(s->name, sizeof(s->name), "%s", e->d_name);
		snprintf(s->dir, sizeof(s->dir), "%s/%s", up, e->d_name);
		snprintf(s->oracle, sizeof(s->oracle), "%s/oracle", s->dir);
		snprintf(path, sizeof(path), "%s/manifest.json", s->oracle);
		if (access(path, F_OK) != 0)
			continue;
		s->m = NULL;
		if (hb_json_parse_file(path, 64u << 20, &s->m, NULL) != HB_OK) {
			hb_check_fail(__FILE__, __LINE__, "%s: manifest.json is not JSON", s->name);
			continue;
		}
		n++;
	}
	closedir(d);
	return n;
}

static void close_sets(struct set *sets, int n)
{
	for (int i = 0; i < n; i++)
		cJSON_Delete(sets[i].m);
}

static const char *str_of(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *array_named(const cJSON *m, const char *name)
{
	const cJSON *a;

	cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(m, "arrays")) {
		const char *n = str_of(a, "name");
		if (n && !strcmp(n, name))
			return a;
	}
	return NULL;
}

/* cJSON keeps the first of two equal keys and Python's json the last, so a
 * manifest entry with "provenance" twice would read differently to the two
 * checkers: refuse it. */
static bool has_duplicate_key(const cJSON *obj)
{
	const cJSON *a, *b;

	for (a = obj->child; a; a = a->next)
		for (b = a->next; b; b = b->next)
			if (a->string && b->string && !strcmp(a->string, b->string))
				return true;
	return false;
}

/* ------------------------------------------------------------ intact */

struct counts {
	unsigned arrays;
	unsigned by_class[4];
};

static void check_array(const struct set *s, const cJSON *a, struct counts *c)
{
	const char *name = NULL, *file = NULL, *dtype = NULL, *sha = NULL, *prov = NULL;
	const cJSON *shape = cJSON_GetObjectItemCaseSensitive(a, "shape"), *dim;
	uint64_t elems = 1;
	char path[4800], want_file[512];
	int cls = -1;

	CHECK_EQ_INT(hb_json_str(a, "name", "name", &name, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_str(a, "file", "file", &file, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_str(a, "dtype", "dtype", &dtype, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_str(a, "sha256", "sha256", &sha, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_str(a, "provenance", "provenance", &prov, NULL), HB_OK);
	if (!name || !file || !dtype || !sha || !prov)
		return;
	for (size_t i = 0; i < HB_ARRAY_LEN(provenance_classes); i++)
		if (!strcmp(prov, provenance_classes[i]))
			cls = (int)i;
	if (cls < 0)
		hb_check_fail(__FILE__, __LINE__, "%s: %s: unknown provenance '%s'", s->name, name, prov);
	else
		c->by_class[cls]++;
	snprintf(want_file, sizeof(want_file), "%s.bin", name);
	for (char *p = want_file; *p; p++)
		if (*p == '/')
			*p = '.';
	if (strcmp(file, want_file))
		hb_check_fail(__FILE__, __LINE__, "%s: %s: file '%s' is not the name with / -> . plus .bin",
			      s->name, name, file);
	CHECK(dtype_size(dtype) != 0);
	CHECK(cJSON_IsArray(shape));
	cJSON_ArrayForEach(dim, shape) {
		uint64_t d = 0;
		CHECK_EQ_INT(hb_json_item_u64(dim, "shape", &d, NULL), HB_OK);
		elems *= d;
	}
	snprintf(path, sizeof(path), "%s/%s", s->oracle, file);
	if (file_size_of(path) != elems * dtype_size(dtype))
		hb_check_fail(__FILE__, __LINE__, "%s: %s: %s has %" PRIu64 " bytes, shape says %" PRIu64,
			      s->name, name, file, file_size_of(path), elems * dtype_size(dtype));
	else if (!file_digest_is(path, sha))
		hb_check_fail(__FILE__, __LINE__, "%s: %s: %s sha256 differs from the manifest",
			      s->name, name, file);
	c->arrays++;
}

static void check_checkpoint(const struct set *s)
{
	const cJSON *ck = cJSON_GetObjectItemCaseSensitive(s->m, "checkpoint");
	const cJSON *files = cJSON_GetObjectItemCaseSensitive(ck, "files"), *f;
	char path[4800];
	unsigned n = 0;

	CHECK(cJSON_IsObject(files));
	cJSON_ArrayForEach(f, files) {
		snprintf(path, sizeof(path), "%s/checkpoint/%s", s->dir, f->string);
		if (!cJSON_IsString(f) || !file_digest_is(path, f->valuestring))
			hb_check_fail(__FILE__, __LINE__, "%s: digest differs", path);
		n++;
	}
	CHECK(n >= 2); /* at least config.json and one safetensors file */
}

/* Every file in oracle/ is the manifest or an array it lists. */
static void check_no_unlisted(const struct set *s)
{
	DIR *d = opendir(s->oracle);
	struct dirent *e;

	CHECK(d != NULL);
	if (!d)
		return;
	while ((e = readdir(d))) {
		const cJSON *a;
		bool listed = !strcmp(e->d_name, "manifest.json");

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(s->m, "arrays")) {
			const char *f = str_of(a, "file");
			if (f && !strcmp(f, e->d_name))
				listed = true;
		}
		if (!listed)
			hb_check_fail(__FILE__, __LINE__, "%s: oracle/%s is not listed in the manifest",
				      s->name, e->d_name);
	}
	closedir(d);
}

static void fixtures_are_intact(void)
{
	struct set sets[MAX_SETS];
	int n = open_sets(sets);
	unsigned checked = 0;

	for (int i = 0; i < n; i++) {
		const cJSON *arrays = cJSON_GetObjectItemCaseSensitive(sets[i].m, "arrays"), *a;
		const char *schema = NULL;
		struct counts c;

		memset(&c, 0, sizeof(c));
		CHECK_EQ_INT(hb_json_str(sets[i].m, "schema", "schema", &schema, NULL), HB_OK);
		CHECK_STR(schema, "hebrus-oracle-v1");
		CHECK(cJSON_IsArray(arrays));
		cJSON_ArrayForEach(a, arrays)
			check_array(&sets[i], a, &c);
		check_checkpoint(&sets[i]);
		check_no_unlisted(&sets[i]);
		if (cJSON_GetObjectItemCaseSensitive(sets[i].m, "derived_from")) {
			/* A converter input derived from an oracle set (packed or
			 * FP8 re-encodings) may carry no upstream capture, but must
			 * not claim one either. */
			CHECK_EQ_INT(c.by_class[0], 0);
		} else {
			/* An oracle set that captured nothing from upstream is no
			 * oracle. */
			CHECK(c.by_class[0] > 0);
			checked++;
		}
	}
	close_sets(sets, n);
	/* The foundation issue asks for at least two upstream checkpoints. */
	CHECK(checked >= 2);
}

/* ------------------------------------------------------------ the pin */

#define MAX_PINS 64

static void manifests_are_pinned(void)
{
	char path[4400], *text = NULL, *line, *next;
	char pinned[MAX_PINS][512];
	size_t len = 0;
	unsigned npins = 0, lineno = 0;
	struct set sets[MAX_SETS];
	int n;

	snprintf(path, sizeof(path), "%s/MANIFESTS.sha256", fixtures_root());
	CHECK_EQ_INT(hb_read_file(path, 1u << 20, &text, &len, NULL), HB_OK);
	if (!text)
		return;
	for (line = text; line < text + len; line = next) {
		char *nl = memchr(line, '\n', (size_t)(text + len - line)), file[4800];
		const char *rel;
		size_t l;

		next = nl ? nl + 1 : text + len;
		l = (size_t)((nl ? nl : text + len) - line);
		lineno++;
		/* sha256sum format: 64 lowercase hex digits, two spaces, a path
		 * relative to tests/fixtures that does not climb out of it */
		if (l < 67 || l - 66 >= sizeof(pinned[0]) || line[64] != ' ' || line[65] != ' ' ||
		    strspn(line, "0123456789abcdef") != 64 || line[66] == '/' ||
		    memmem(line + 66, l - 66, "..", 2)) {
			hb_check_fail(__FILE__, __LINE__, "MANIFESTS.sha256:%u: not '<sha256>  <relative path>'",
				      lineno);
			continue;
		}
		line[64] = '\0';
		memcpy(pinned[npins], line + 66, l - 66);
		pinned[npins][l - 66] = '\0';
		rel = pinned[npins];
		for (unsigned j = 0; j < npins; j++)
			if (!strcmp(pinned[j], rel))
				hb_check_fail(__FILE__, __LINE__, "MANIFESTS.sha256: %s pinned twice", rel);
		snprintf(file, sizeof(file), "%s/%s", fixtures_root(), rel);
		if (access(file, F_OK) != 0)
			hb_check_fail(__FILE__, __LINE__, "%s: pinned in MANIFESTS.sha256 but missing", rel);
		else if (!file_digest_is(file, line))
			hb_check_fail(__FILE__, __LINE__,
				      "%s: sha256 differs from the pin in MANIFESTS.sha256", rel);
		if (npins + 1 < MAX_PINS)
			npins++;
		else
			hb_check_fail(__FILE__, __LINE__, "MANIFESTS.sha256: more than %d lines", MAX_PINS - 1);
	}
	free(text);
	/* what must be pinned: the rule table and every upstream manifest */
	n = open_sets(sets);
	for (int i = -1; i < n; i++) {
		char want[512];
		bool found = false;

		if (i < 0)
			snprintf(want, sizeof(want), "upstream/PROVENANCE.rules");
		else
			snprintf(want, sizeof(want), "upstream/%s/oracle/manifest.json", sets[i].name);
		for (unsigned j = 0; j < npins; j++)
			found = found || !strcmp(pinned[j], want);
		if (!found)
			hb_check_fail(__FILE__, __LINE__, "%s: not pinned in MANIFESTS.sha256", want);
	}
	close_sets(sets, n);
	/* 4 manifests + the rules + the chat, tokenizer and codec oracle files */
	CHECK(npins >= (unsigned)n + 1);
}

/* ------------------------------------------------------------ the rules */

#define MAX_RULES 256

struct rule {
	char pattern[128];
	char label[32];
	unsigned line;
};

/* Only literal [A-Za-z0-9_/.-], `*` and `[a-b]` ranges: the subset on which
 * fnmatch(3) and Python's fnmatch (check_fixtures.py) agree. */
static bool plain_glob(const char *p)
{
	while (*p) {
		if (p[0] == '[') {
			if (!p[1] || !p[2] || !p[3] || !p[4] || p[2] != '-' || p[4] != ']' ||
			    !strchr("0123456789abcdefghijklmnopqrstuvwxyz", p[1]) ||
			    !strchr("0123456789abcdefghijklmnopqrstuvwxyz", p[3]))
				return false;
			p += 5;
			continue;
		}
		if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_/.*-", *p))
			return false;
		p++;
	}
	return true;
}

static unsigned load_rules(struct rule *rules)
{
	char path[4400], *text = NULL, *line, *next;
	size_t len = 0;
	unsigned n = 0, lineno = 0;

	snprintf(path, sizeof(path), "%s/upstream/PROVENANCE.rules", fixtures_root());
	CHECK_EQ_INT(hb_read_file(path, 1u << 20, &text, &len, NULL), HB_OK);
	if (!text)
		return 0;
	for (line = text; line < text + len; line = next) {
		char *nl = memchr(line, '\n', (size_t)(text + len - line)), *hash;
		char pat[256], label[64], extra[8];
		int got;
		bool known = false;

		next = nl ? nl + 1 : text + len;
		if (nl)
			*nl = '\0';
		lineno++;
		if ((hash = strchr(line, '#')))
			*hash = '\0';
		got = sscanf(line, "%255s %63s %7s", pat, label, extra);
		if (got <= 0)
			continue;
		for (size_t i = 0; i < HB_ARRAY_LEN(provenance_classes); i++)
			known = known || (got >= 2 && !strcmp(label, provenance_classes[i]));
		if (got != 2 || !known || !plain_glob(pat) || strlen(pat) >= sizeof(rules[0].pattern) ||
		    n == MAX_RULES) {
			hb_check_fail(__FILE__, __LINE__,
				      "PROVENANCE.rules:%u: not 'PATTERN LABEL' with a known label and a plain glob",
				      lineno);
			continue;
		}
		snprintf(rules[n].pattern, sizeof(rules[n].pattern), "%s", pat);
		snprintf(rules[n].label, sizeof(rules[n].label), "%s", label);
		rules[n].line = lineno;
		n++;
	}
	free(text);
	return n;
}

static const struct rule *rule_for(const struct rule *rules, unsigned n, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (fnmatch(rules[i].pattern, name, 0) == 0)
			return &rules[i];
	return NULL;
}

/* The array an xc/ name is the twin of: the first "/xc/" becomes "/". */
static void xc_twin(const char *name, char *out, size_t cap)
{
	const char *x = strstr(name, "/xc/");

	if (!x) {
		snprintf(out, cap, "%s", name);
		return;
	}
	snprintf(out, cap, "%.*s%s", (int)(x - name), name, x + 3);
}

static void labels_follow_the_rule_table(void)
{
	static struct rule rules[MAX_RULES];
	unsigned nrules = load_rules(rules), labelled = 0, xcs = 0;
	struct set sets[MAX_SETS];
	int n = open_sets(sets);

	CHECK(nrules > 0);
	for (int i = 0; i < n; i++) {
		const cJSON *a;

		cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(sets[i].m, "arrays")) {
			const char *name = str_of(a, "name"), *prov = str_of(a, "provenance");
			const char *checks = str_of(a, "checks");
			const struct rule *r;
			char twin[512];

			if (!name || !prov) {
				hb_check_fail(__FILE__, __LINE__, "%s: an array without name or provenance",
					      sets[i].name);
				continue;
			}
			if (has_duplicate_key(a))
				hb_check_fail(__FILE__, __LINE__, "%s: %s: a key appears twice in its entry",
					      sets[i].name, name);
			r = rule_for(rules, nrules, name);
			if (!r)
				hb_check_fail(__FILE__, __LINE__, "%s: %s: no rule in PROVENANCE.rules matches",
					      sets[i].name, name);
			else if (strcmp(r->label, prov))
				hb_check_fail(__FILE__, __LINE__,
					      "%s: %s: labelled '%s', but rule '%s' (PROVENANCE.rules:%u) requires '%s'",
					      sets[i].name, name, prov, r->pattern, r->line, r->label);
			else
				labelled++;
			if (strcmp(prov, XC)) {
				if (cJSON_GetObjectItemCaseSensitive(a, "checks"))
					hb_check_fail(__FILE__, __LINE__,
						      "%s: %s: names an array it checks but is labelled '%s'",
						      sets[i].name, name, prov);
				continue;
			}
			xcs++;
			if (!checks) {
				hb_check_fail(__FILE__, __LINE__,
					      "%s: %s: an independent-cross-check that names no array it checks",
					      sets[i].name, name);
				continue;
			}
			xc_twin(name, twin, sizeof(twin));
			if (strcmp(twin, checks))
				hb_check_fail(__FILE__, __LINE__, "%s: %s: checks %s, which is not its xc/ twin %s",
					      sets[i].name, name, checks, twin);
			else if (!array_named(sets[i].m, checks) ||
				 !str_of(array_named(sets[i].m, checks), "provenance") ||
				 strcmp(str_of(array_named(sets[i].m, checks), "provenance"), UP))
				hb_check_fail(__FILE__, __LINE__,
					      "%s: %s: checks %s, which is not an upstream-capture",
					      sets[i].name, name, checks);
		}
	}
	close_sets(sets, n);
	CHECK(labelled > 0);
	CHECK(xcs > 0);
}

/* ------------------------------------------------------------ cross-checks */

struct arr {
	char *data;
	size_t n; /* elements */
	uint64_t rows;
	bool f32;
	bool i64;
};

static bool load_arr(const struct set *s, const cJSON *a, struct arr *out)
{
	const char *file = str_of(a, "file"), *dtype = str_of(a, "dtype");
	const cJSON *shape = cJSON_GetObjectItemCaseSensitive(a, "shape"), *d;
	char path[4800];
	size_t len = 0;
	uint64_t elems = 1;
	bool first = true;

	memset(out, 0, sizeof(*out));
	if (!file || !dtype || !dtype_size(dtype) || !cJSON_IsArray(shape))
		return false;
	out->rows = 1;
	cJSON_ArrayForEach(d, shape) {
		uint64_t v = 0;
		if (hb_json_item_u64(d, "shape", &v, NULL))
			return false;
		if (first)
			out->rows = v;
		first = false;
		elems *= v;
	}
	snprintf(path, sizeof(path), "%s/%s", s->oracle, file);
	if (hb_read_file(path, 256u << 20, &out->data, &len, NULL))
		return false;
	out->f32 = !strcmp(dtype, "f32");
	out->i64 = !strcmp(dtype, "i64");
	out->n = len / dtype_size(dtype);
	if (out->n != elems) {
		free(out->data);
		out->data = NULL;
		return false;
	}
	return true;
}

/* Element i, decoded from little-endian bytes whatever the host is. */
static double arr_get(const struct arr *a, size_t i)
{
	const uint8_t *p = (const uint8_t *)a->data + i * (a->i64 ? 8 : 4);
	uint64_t v = 0;

	for (int b = a->i64 ? 7 : 3; b >= 0; b--)
		v = v << 8 | p[b];
	if (a->f32) {
		uint32_t u = (uint32_t)v;
		float f;
		memcpy(&f, &u, sizeof(f));
		return f;
	}
	if (a->i64)
		return (double)(int64_t)v;
	return (double)(int32_t)(uint32_t)v;
}

/* The tie-dependent row count the capture recorded for the tie array named
 * (pre|dec)/pN/qsa/tie/Lxx in stats.pN.(prefill|decode), or -1. */
static long recorded_ties(const cJSON *m, const char *tie)
{
	char prompt[16], layer[8], prefix[64];
	const char *group;
	const cJSON *a, *list;
	int idx = 0;

	if (sscanf(tie, "%*[a-z]/%15[p0-9]/qsa/tie/%7s", prompt, layer) != 2)
		return -1;
	group = !strncmp(tie, "pre/", 4) ? "prefill" : !strncmp(tie, "dec/", 4) ? "decode" : NULL;
	if (!group)
		return -1;
	snprintf(prefix, sizeof(prefix), "%.3s/%s/qsa/tie/", tie, prompt);
	/* stats lists the sparse layers in ascending order */
	cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(m, "arrays")) {
		const char *n = str_of(a, "name");
		if (n && !strncmp(n, prefix, strlen(prefix)) && strcmp(n + strlen(prefix), layer) < 0)
			idx++;
	}
	list = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(
			cJSON_GetObjectItemCaseSensitive(m, "stats"), prompt), group),
		"qsa_rows_with_tie_dependent_set");
	if (!cJSON_IsArray(list) || idx >= cJSON_GetArraySize(list) ||
	    !cJSON_IsNumber(cJSON_GetArrayItem(list, idx)))
		return -1;
	return (long)cJSON_GetArrayItem(list, idx)->valuedouble;
}

struct xc_tally {
	unsigned arrays;
	uint64_t elems;
	unsigned skipped;
};

static void compare_xc(const struct set *s, const cJSON *a, struct xc_tally *t)
{
	const char *name = str_of(a, "name"), *checks = str_of(a, "checks");
	const cJSON *ref = checks ? array_named(s->m, checks) : NULL;
	const cJSON *sr = cJSON_GetObjectItemCaseSensitive(a, "skip_rows");
	const cJSON *atol_j = cJSON_GetObjectItemCaseSensitive(a, "atol");
	struct arr x, y, tie;
	double atol = cJSON_IsNumber(atol_j) ? atol_j->valuedouble : 0.0, worst = 0.0;
	uint64_t bad = 0, width, skipped = 0;
	int64_t mask = 0;

	if (!ref) {
		hb_check_fail(__FILE__, __LINE__, "%s: %s: checks unknown array %s", s->name, name,
			      checks ? checks : "(none)");
		return;
	}
	if (!load_arr(s, a, &x) || !load_arr(s, ref, &y)) {
		hb_check_fail(__FILE__, __LINE__, "%s: %s: cannot load it or %s", s->name, name, checks);
		free(x.data);
		return;
	}
	memset(&tie, 0, sizeof(tie));
	if (x.n != y.n || x.rows != y.rows || x.f32 != y.f32 || x.i64 != y.i64 || !x.rows) {
		hb_check_fail(__FILE__, __LINE__, "%s: %s: shape/dtype differs from %s", s->name, name, checks);
		goto out;
	}
	if (!isfinite(atol) || atol < 0 || (!x.f32 && atol != 0)) {
		hb_check_fail(__FILE__, __LINE__, "%s: %s: atol %g (integers compare exactly)", s->name, name, atol);
		goto out;
	}
	if (sr) {
		const char *tn = str_of(sr, "array");
		const cJSON *ta = tn ? array_named(s->m, tn) : NULL;
		long want;

		if (!ta || hb_json_i64(sr, "mask", "skip_rows.mask", &mask, NULL) || mask <= 0 ||
		    !str_of(ta, "provenance") || strcmp(str_of(ta, "provenance"), DV) ||
		    !load_arr(s, ta, &tie) || tie.n != x.rows) {
			hb_check_fail(__FILE__, __LINE__, "%s: %s: skip_rows unusable", s->name, name);
			goto out;
		}
		for (uint64_t r = 0; r < x.rows; r++)
			skipped += ((int64_t)arr_get(&tie, r) & mask) != 0;
		want = (mask & 2) ? -2 : recorded_ties(s->m, tn);
		if (want == -1)
			hb_check_fail(__FILE__, __LINE__, "%s: %s: no tie count in stats for %s", s->name, name, tn);
		else if (want >= 0 && (uint64_t)want != skipped)
			hb_check_fail(__FILE__, __LINE__,
				      "%s: %s: skips %" PRIu64 " rows; the capture recorded %ld tie-dependent rows",
				      s->name, name, skipped, want);
		if (skipped >= x.rows) {
			hb_check_fail(__FILE__, __LINE__, "%s: %s: skip_rows leaves no row to compare", s->name, name);
			goto out;
		}
	}
	width = x.n / x.rows;
	for (uint64_t r = 0; r < x.rows; r++) {
		if (tie.data && ((int64_t)arr_get(&tie, r) & mask))
			continue;
		for (uint64_t i = r * width; i < (r + 1) * width; i++) {
			double d = fabs(arr_get(&x, i) - arr_get(&y, i));
			worst = hb_test_max_nan(worst, d);
			if (!(d <= atol))
				bad++;
		}
		t->elems += width;
	}
	t->arrays++;
	t->skipped += (unsigned)skipped;
	if (bad)
		hb_check_fail(__FILE__, __LINE__,
			      "%s: %s: disagrees with %s in %" PRIu64 " elements (max |diff| %.9g > atol %g)",
			      s->name, name, checks, bad, worst, atol);
out:
	free(x.data);
	free(y.data);
	free(tie.data);
}

static void cross_checks_agree(void)
{
	struct set sets[MAX_SETS];
	int n = open_sets(sets);
	struct xc_tally t = { 0, 0, 0 };

	for (int i = 0; i < n; i++) {
		const cJSON *a;

		cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(sets[i].m, "arrays")) {
			const char *prov = str_of(a, "provenance"), *checks = str_of(a, "checks");
			char twin[512];

			/* one that checks anything but its xc/ twin is reported by
			 * labels_follow_the_rule_table, not compared */
			xc_twin(str_of(a, "name") ? str_of(a, "name") : "", twin, sizeof(twin));
			if (prov && !strcmp(prov, XC) && checks && !strcmp(checks, twin))
				compare_xc(&sets[i], a, &t);
		}
	}
	close_sets(sets, n);
	/* tests/cli/fixtures.bats holds this line to check_fixtures.py's count */
	printf("# cross-checks: %u arrays, %" PRIu64 " elements compared, %u rows skipped (ties)\n",
	       t.arrays, t.elems, t.skipped);
	CHECK(t.arrays > 0);
	CHECK(t.elems > 0);
}

HB_TEST_MAIN(T(fixtures_are_intact), T(manifests_are_pinned), T(labels_follow_the_rule_table),
	     T(cross_checks_agree))
