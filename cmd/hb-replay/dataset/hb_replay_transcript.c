/*
 * hb_replay_transcript.c: the transcript JSON-lines schema (hb-replay(1)).
 *
 * Owns parsing, the cross-line checks (unique sequence ids, one owner per
 * thread, no two names on one id) and rendering a transcript back to one
 * line.  Owners and threads are integers or names; both become 64-bit ids
 * through hb_trace_name_id, the function hb-run's --owner and --thread use
 * too, so that a capture and the replay of its transcript agree.  Strict on purpose:
 * an unknown key is refused with its field path rather than ignored, since
 * a misspelt "thread" would otherwise silently merge threads and leak them
 * across splits (AFN-021 "thread leakage inflates scores").
 */
#include "hb_replay.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_sha256.h"

#include <unistd.h>

static const char *const diag_ids[] = {
#define HB_REPLAY_ID_(sym, id, meaning) id,
	HB_REPLAY_DIAGS(HB_REPLAY_ID_)
#undef HB_REPLAY_ID_
};

const char *hb_replay_diag_id(enum hb_replay_diag d)
{
	return (unsigned)d < HB_RPD_COUNT ? diag_ids[d] : NULL;
}

#define ID(sym) diag_ids[HB_RPD_##sym]

static int field_u64(const cJSON *o, const char *key, bool need, uint64_t max, uint64_t *v, bool *present,
		     const char *path, struct hb_error *err)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	char f[HB_ERROR_FIELD_MAX];

	snprintf(f, sizeof(f), "%s.%s", path, key);
	if (present)
		*present = it != NULL;
	if (!it) {
		if (need)
			return hb_error_diag(err, ID(FIELD), HB_ERR_FORMAT, f, false, 0, "required field is missing");
		return HB_OK;
	}
	if (!cJSON_IsNumber(it) || hb_json_item_u64(it, f, v, NULL) || *v > max)
		return hb_error_diag(err, ID(FIELD), HB_ERR_FORMAT, f, false, 0,
				     "expected an unsigned integer no larger than %" PRIu64, max);
	return HB_OK;
}

/* An owner or thread: an unsigned integer (its own id) or a name, whose id
 * hb_trace_name_id gives; the name is kept as given. */
static int field_id(const cJSON *o, const char *key, uint64_t *id, char **name, const char *path,
		    struct hb_error *err)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
	char f[HB_ERROR_FIELD_MAX];

	snprintf(f, sizeof(f), "%s.%s", path, key);
	*name = NULL;
	if (!it)
		return hb_error_diag(err, ID(FIELD), HB_ERR_FORMAT, f, false, 0, "required field is missing");
	if (cJSON_IsString(it) && !hb_trace_name_id(it->valuestring, strlen(it->valuestring), id)) {
		if (!(*name = strdup(it->valuestring)))
			return hb_error_set(err, HB_ERR_NOMEM, f, "out of memory");
		return HB_OK;
	}
	/* JSON integers stop at 2^53 (hb_json), below 2^63: their own ids */
	if (!cJSON_IsString(it) && cJSON_IsNumber(it) && !hb_json_item_u64(it, f, id, NULL))
		return HB_OK;
	return hb_error_diag(err, ID(FIELD), HB_ERR_FORMAT, f, false, 0,
			     "expected an unsigned integer or a name of 1..%u bytes without control characters",
			     HB_TRACE_NAME_MAX);
}

/* Does the line escape a NUL character (an odd run of backslashes, then
 * u0000)?  cJSON would cut the string there without a word, so that two
 * different names could become one. */
static bool escapes_nul(const char *p, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t j = i;
		if (p[i] != '\\') {
			i++;
			continue;
		}
		while (j < n && p[j] == '\\')
			j++;
		if ((j - i) % 2 && n - j >= 5 && !memcmp(p + j, "u0000", 5))
			return true;
		i = j;
	}
	return false;
}

static int parse_bounds(const cJSON *a, struct hb_transcript *t, const char *path, struct hb_error *err)
{
	char f[HB_ERROR_FIELD_MAX];
	size_t i = 0;
	const cJSON *b;

	if (!cJSON_IsArray(a))
		return hb_error_diag(err, ID(FIELD), HB_ERR_FORMAT, path, false, 0, "expected an array");
	t->n_bounds = (size_t)cJSON_GetArraySize(a);
	t->bounds = calloc(t->n_bounds ? t->n_bounds : 1, sizeof(*t->bounds));
	if (!t->bounds)
		return hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
	cJSON_ArrayForEach(b, a) {
		const cJSON *k;
		const cJSON *role;
		snprintf(f, sizeof(f), "%s[%zu]", path, i);
		if (!cJSON_IsObject(b))
			return hb_error_diag(err, ID(FIELD), HB_ERR_FORMAT, f, false, 0, "expected an object");
		cJSON_ArrayForEach(k, b) {
			if (strcmp(k->string, "at") && strcmp(k->string, "role")) {
				char g[HB_ERROR_FIELD_MAX];
				snprintf(g, sizeof(g), "%s.%s", f, k->string);
				return hb_error_diag(err, ID(KEY), HB_ERR_FORMAT, g, false, 0, "unknown key");
			}
		}
		if (field_u64(b, "at", true, t->n_tokens, &t->bounds[i].at, NULL, f, err))
			return HB_ERR_FORMAT;
		if (i && t->bounds[i].at <= t->bounds[i - 1].at)
			return hb_error_diag(err, ID(FIELD), HB_ERR_FORMAT, f, false, 0,
					     "boundaries must be strictly increasing");
		role = cJSON_GetObjectItemCaseSensitive(b, "role");
		if (!cJSON_IsString(role) || !role->valuestring[0] ||
		    strlen(role->valuestring) >= HB_REPLAY_ROLE_MAX) {
			char g[HB_ERROR_FIELD_MAX];
			snprintf(g, sizeof(g), "%s.role", f);
			return hb_error_diag(err, ID(FIELD), HB_ERR_FORMAT, g, false, 0,
					     "expected a string of 1..%d bytes", HB_REPLAY_ROLE_MAX - 1);
		}
		memcpy(t->bounds[i].role, role->valuestring, strlen(role->valuestring) + 1);
		i++;
	}
	return HB_OK;
}

static int parse_line(const cJSON *o, struct hb_transcript *t, uint64_t index, struct hb_error *err)
{
	static const char *const keys[] = {"owner", "thread", "turn", "tokens", "sequence", "generation",
					   "time", "runtime", "boundaries", "window"};
	char path[48], f[HB_ERROR_FIELD_MAX];
	const cJSON *k, *toks, *it;
	uint64_t v;
	bool present;
	size_t i = 0;

	snprintf(path, sizeof(path), "line[%" PRIu64 "]", t->line);
	if (!cJSON_IsObject(o))
		return hb_error_diag(err, ID(JSON), HB_ERR_FORMAT, path, false, 0, "expected a JSON object");
	cJSON_ArrayForEach(k, o) {
		bool known = false;
		for (size_t j = 0; j < HB_ARRAY_LEN(keys); j++)
			known |= !strcmp(k->string, keys[j]);
		if (!known) {
			snprintf(f, sizeof(f), "%s.%s", path, k->string);
			return hb_error_diag(err, ID(KEY), HB_ERR_FORMAT, f, false, 0, "unknown key");
		}
	}
	if (field_id(o, "owner", &t->owner, &t->owner_name, path, err) ||
	    field_id(o, "thread", &t->thread, &t->thread_name, path, err) ||
	    field_u64(o, "turn", true, UINT64_MAX, &t->turn, NULL, path, err) ||
	    field_u64(o, "time", false, UINT64_MAX, &t->time, &t->has_time, path, err) ||
	    field_u64(o, "generation", false, UINT32_MAX, &v, &present, path, err))
		return HB_ERR_FORMAT;
	t->generation = present ? (uint32_t)v : 0;
	if (field_u64(o, "sequence", false, UINT64_MAX, &t->sequence, &present, path, err))
		return HB_ERR_FORMAT;
	if (!present)
		t->sequence = index;
	it = cJSON_GetObjectItemCaseSensitive(o, "runtime");
	if (it) {
		if (!cJSON_IsBool(it)) {
			snprintf(f, sizeof(f), "%s.runtime", path);
			return hb_error_diag(err, ID(FIELD), HB_ERR_FORMAT, f, false, 0, "expected true or false");
		}
		t->runtime = cJSON_IsTrue(it);
	}
	snprintf(f, sizeof(f), "%s.tokens", path);
	toks = cJSON_GetObjectItemCaseSensitive(o, "tokens");
	if (!toks)
		return hb_error_diag(err, ID(FIELD), HB_ERR_FORMAT, f, false, 0, "required field is missing");
	if (!cJSON_IsArray(toks) || cJSON_GetArraySize(toks) < 1)
		return hb_error_diag(err, ID(FIELD), HB_ERR_FORMAT, f, false, 0, "expected a non-empty array of token ids");
	t->n_tokens = (size_t)cJSON_GetArraySize(toks);
	t->tokens = malloc(t->n_tokens * sizeof(int32_t));
	if (!t->tokens)
		return hb_error_set(err, HB_ERR_NOMEM, f, "out of memory");
	cJSON_ArrayForEach(it, toks) {
		char g[HB_ERROR_FIELD_MAX];
		snprintf(g, sizeof(g), "%s[%zu]", f, i);
		if (!cJSON_IsNumber(it) || hb_json_item_u64(it, g, &v, NULL) || v > INT32_MAX)
			return hb_error_diag(err, ID(FIELD), HB_ERR_FORMAT, g, false, 0,
					     "expected a token id in 0..%d", INT32_MAX);
		t->tokens[i++] = (int32_t)v;
	}
	it = cJSON_GetObjectItemCaseSensitive(o, "boundaries");
	if (it) {
		snprintf(f, sizeof(f), "%s.boundaries", path);
		if (parse_bounds(it, t, f, err))
			return HB_ERR_FORMAT;
	}
	it = cJSON_GetObjectItemCaseSensitive(o, "window");
	if (it) {
		snprintf(f, sizeof(f), "%s.window", path);
		if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 ||
		    hb_json_item_u64(cJSON_GetArrayItem(it, 0), f, &t->window[0], NULL) ||
		    hb_json_item_u64(cJSON_GetArrayItem(it, 1), f, &t->window[1], NULL) ||
		    t->window[1] <= t->window[0] || t->window[1] - t->window[0] != t->n_tokens)
			return hb_error_diag(err, ID(FIELD), HB_ERR_FORMAT, f, false, 0,
					     "expected [start, end] with end - start = the number of tokens");
		t->has_window = true;
	}
	return HB_OK;
}

void hb_transcripts_release(struct hb_transcripts *ts)
{
	for (size_t i = 0; ts->t && i < ts->n; i++) {
		free(ts->t[i].tokens);
		free(ts->t[i].bounds);
		free(ts->t[i].owner_name);
		free(ts->t[i].thread_name);
	}
	free(ts->t);
	ts->t = NULL;
	ts->n = 0;
}

static int cmp_u64_pair(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* How an owner or thread reads in a message: the integer, or the name quoted. */
static const char *shown(char *buf, size_t len, uint64_t id, const char *name)
{
	if (name)
		snprintf(buf, len, "\"%s\"", name);
	else
		snprintf(buf, len, "%" PRIu64, id);
	return buf;
}

/* The text an id was given as: its name, or the integer in decimal (which
 * is what a name that is its own id says too). */
static const char *text_of(char *buf, size_t len, uint64_t id, const char *name)
{
	if (name)
		return name;
	snprintf(buf, len, "%" PRIu64, id);
	return buf;
}

/* Two different texts on one id (only names can collide: an integer is its
 * own id, below 2^63, a name's id has bit 63 set).  p: (id, index, 0)
 * triples; names: the owner (0) or thread (1) names. */
static int collisions(const struct hb_transcripts *ts, uint64_t *p, int thread, struct hb_error *err)
{
	const char *what = thread ? "thread" : "owner";

	for (size_t i = 0; i < ts->n; i++) {
		p[3 * i] = thread ? ts->t[i].thread : ts->t[i].owner;
		p[3 * i + 1] = i;
		p[3 * i + 2] = 0;
	}
	qsort(p, ts->n, 3 * sizeof(uint64_t), cmp_u64_pair);
	for (size_t i = 1; i < ts->n; i++) {
		const struct hb_transcript *a = &ts->t[p[3 * (i - 1) + 1]], *b = &ts->t[p[3 * i + 1]];
		const char *na = thread ? a->thread_name : a->owner_name, *nb = thread ? b->thread_name : b->owner_name;
		char ba[32], bb[32], sa[HB_TRACE_NAME_MAX + 8], sb[HB_TRACE_NAME_MAX + 8], f[48];
		if (p[3 * i] != p[3 * (i - 1)] || !strcmp(text_of(ba, sizeof(ba), p[3 * i], na),
							   text_of(bb, sizeof(bb), p[3 * i], nb)))
			continue;
		snprintf(f, sizeof(f), "line[%" PRIu64 "].%s", b->line, what);
		return hb_error_diag(err, ID(COLLISION), HB_ERR_CONTRACT, f, false, 0,
				     "%s %s and %s %s of line %" PRIu64 " map to one id, %" PRIu64, what,
				     shown(sb, sizeof(sb), p[3 * i], nb), what, shown(sa, sizeof(sa), p[3 * i], na),
				     a->line, p[3 * i]);
	}
	return HB_OK;
}

/* Unique sequences; no two names on one id; one owner per thread.
 * Sorting triples keeps it O(n log n). */
static int cross_checks(const struct hb_transcripts *ts, struct hb_error *err)
{
	uint64_t *p = malloc((ts->n ? ts->n : 1) * 3 * sizeof(uint64_t));
	int rc = HB_OK;

	if (!p)
		return hb_error_set(err, HB_ERR_NOMEM, "transcripts", "out of memory");
	for (size_t i = 0; i < ts->n; i++) {
		p[3 * i] = ts->t[i].sequence;
		p[3 * i + 1] = ts->t[i].line;
		p[3 * i + 2] = 0;
	}
	qsort(p, ts->n, 3 * sizeof(uint64_t), cmp_u64_pair);
	for (size_t i = 1; i < ts->n && !rc; i++)
		if (p[3 * i] == p[3 * (i - 1)]) {
			char f[48];
			snprintf(f, sizeof(f), "line[%" PRIu64 "].sequence", p[3 * i + 1]);
			rc = hb_error_diag(err, ID(SEQUENCE), HB_ERR_CONTRACT, f, false, 0,
					   "sequence %" PRIu64 " is already used on line %" PRIu64, p[3 * i],
					   p[3 * (i - 1) + 1]);
		}
	if (!rc)
		rc = collisions(ts, p, 0, err);
	if (!rc)
		rc = collisions(ts, p, 1, err);
	for (size_t i = 0; i < ts->n && !rc; i++) {
		p[3 * i] = ts->t[i].thread;
		p[3 * i + 1] = i;
		p[3 * i + 2] = ts->t[i].owner;
	}
	if (!rc)
		qsort(p, ts->n, 3 * sizeof(uint64_t), cmp_u64_pair);
	for (size_t i = 1; i < ts->n && !rc; i++)
		if (p[3 * i] == p[3 * (i - 1)] && p[3 * i + 2] != p[3 * (i - 1) + 2]) {
			const struct hb_transcript *a = &ts->t[p[3 * (i - 1) + 1]], *b = &ts->t[p[3 * i + 1]];
			char f[48], st[HB_TRACE_NAME_MAX + 8], sa[HB_TRACE_NAME_MAX + 8], sb[HB_TRACE_NAME_MAX + 8];
			snprintf(f, sizeof(f), "line[%" PRIu64 "].owner", b->line);
			rc = hb_error_diag(err, ID(THREAD), HB_ERR_CONTRACT, f, false, 0,
					   "thread %s belongs to owner %s on line %" PRIu64 ", not %s",
					   shown(st, sizeof(st), b->thread, b->thread_name),
					   shown(sa, sizeof(sa), a->owner, a->owner_name), a->line,
					   shown(sb, sizeof(sb), b->owner, b->owner_name));
		}
	free(p);
	return rc;
}

int hb_transcripts_parse(const char *text, size_t len, const char *what, struct hb_transcripts *out,
			 struct hb_error *err)
{
	size_t cap = 16, pos = 0;
	uint64_t line = 0;
	int rc = HB_OK;

	memset(out, 0, sizeof(*out));
	out->t = calloc(cap, sizeof(*out->t));
	if (!out->t)
		return hb_error_set(err, HB_ERR_NOMEM, what, "out of memory");
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - text) : len;
		cJSON *o = NULL;
		struct hb_error jerr;
		struct hb_transcript *t;
		char path[48];

		line++;
		snprintf(path, sizeof(path), "line[%" PRIu64 "]", line);
		if (out->n == cap) {
			struct hb_transcript *g = realloc(out->t, 2 * cap * sizeof(*g));
			if (!g) {
				rc = hb_error_set(err, HB_ERR_NOMEM, what, "out of memory");
				break;
			}
			memset(g + cap, 0, cap * sizeof(*g));
			out->t = g;
			cap *= 2;
		}
		hb_error_clear(&jerr);
		if (hb_json_parse(text + pos, end - pos, path, &o, &jerr)) {
			rc = hb_error_diag(err, ID(JSON), HB_ERR_FORMAT, path, false, 0, "%s: not one JSON object",
					   what);
			break;
		}
		t = &out->t[out->n++];
		t->line = line;
		if (escapes_nul(text + pos, end - pos))
			rc = hb_error_diag(err, ID(FIELD), HB_ERR_FORMAT, path, false, 0,
					   "a string holds U+0000, which no name or role may");
		else
			rc = parse_line(o, t, out->n - 1, err);
		cJSON_Delete(o);
		if (rc)
			break;
		pos = end + 1;
	}
	if (!rc && !out->n)
		rc = hb_error_diag(err, ID(JSON), HB_ERR_FORMAT, what, false, 0, "no transcripts");
	if (!rc)
		rc = cross_checks(out, err);
	if (rc)
		hb_transcripts_release(out);
	return rc;
}

int hb_transcripts_load(const char *path, struct hb_transcripts *out, struct hb_error *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc;

	/* a path or "-" (standard input), under the same limit */
	if ((rc = hb_read_file(path, UINT64_C(1) << 34, &text, &len, err)))
		return rc;
	rc = hb_transcripts_parse(text, len, path, out, err);
	free(text);
	return rc;
}

char *hb_transcript_render(const struct hb_transcript *t)
{
	cJSON *o = cJSON_CreateObject(), *a;
	char *s;

	if (!o)
		return NULL;
	if (t->owner_name)
		hb_json_add_str(o, "owner", t->owner_name);
	else
		hb_json_add_u64(o, "owner", t->owner);
	if (t->thread_name)
		hb_json_add_str(o, "thread", t->thread_name);
	else
		hb_json_add_u64(o, "thread", t->thread);
	hb_json_add_u64(o, "turn", t->turn);
	hb_json_add_u64(o, "sequence", t->sequence);
	if (t->generation)
		hb_json_add_u64(o, "generation", t->generation);
	if (t->has_time)
		hb_json_add_u64(o, "time", t->time);
	if (t->runtime)
		hb_json_add_bool(o, "runtime", true);
	a = cJSON_AddArrayToObject(o, "tokens");
	for (size_t i = 0; a && i < t->n_tokens; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(t->tokens[i]));
	if (t->n_bounds) {
		a = cJSON_AddArrayToObject(o, "boundaries");
		for (size_t i = 0; a && i < t->n_bounds; i++) {
			cJSON *b = cJSON_CreateObject();
			hb_json_add_u64(b, "at", t->bounds[i].at);
			hb_json_add_str(b, "role", t->bounds[i].role);
			cJSON_AddItemToArray(a, b);
		}
	}
	if (t->has_window) {
		a = cJSON_AddArrayToObject(o, "window");
		cJSON_AddItemToArray(a, hb_json_u64_item(t->window[0]));
		cJSON_AddItemToArray(a, hb_json_u64_item(t->window[1]));
	}
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

void hb_transcript_token_digest(const struct hb_transcript *t, uint8_t out[32])
{
	struct hb_sha256 h;

	hb_sha256_init(&h);
	for (size_t i = 0; i < t->n_tokens; i++) {
		uint8_t b[4];
		uint32_t v = (uint32_t)t->tokens[i];
		for (int j = 0; j < 4; j++)
			b[j] = (uint8_t)(v >> (8 * j));
		hb_sha256_update(&h, b, 4);
	}
	hb_sha256_final(&h, out);
}
