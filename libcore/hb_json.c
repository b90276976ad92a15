/*
 * hb_json.c: strict cJSON wrappers (see hb_json.h).
 */
#include "hb_base.h"
#include "hb_io.h"
#include "hb_json.h"

#include <math.h>

int hb_json_parse(const char *text, size_t len, const char *what,
		  cJSON **out, struct hb_error *err)
{
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);

	if (!root) {
		uint64_t at = end && end >= text ? (uint64_t)(end - text) : 0;
		const char *ep = cJSON_GetErrorPtr();
		if (ep && ep >= text && ep <= text + len)
			at = (uint64_t)(ep - text);
		return hb_error_diag(err, "json-syntax", HB_ERR_FORMAT, what, true, at, "invalid JSON");
	}
	/* cJSON stops at the end of the first value; anything but white space
	 * after it (a NUL byte included: a padded or truncated-and-zeroed file)
	 * is a second document or garbage, not something to ignore. */
	if (end) {
		for (const char *p = end; p < text + len; p++) {
			if (*p != ' ' && *p != '\n' && *p != '\r' && *p != '\t') {
				cJSON_Delete(root);
				return hb_error_diag(err, "json-trailing", HB_ERR_FORMAT, what, true,
						     (uint64_t)(p - text), "trailing bytes after the JSON value");
			}
		}
	}
	*out = root;
	return HB_OK;
}

int hb_json_parse_file(const char *path, uint64_t max_bytes, cJSON **out,
		       struct hb_error *err)
{
	char *text = NULL;
	size_t len = 0;
	int rc = hb_read_file(path, max_bytes, &text, &len, err);

	if (rc)
		return rc;
	rc = hb_json_parse(text, len, path, out, err);
	free(text);
	return rc;
}

/* Look up a member; on failure *rc holds the code (err may be NULL). */
static const cJSON *member(const cJSON *obj, const char *key, const char *path,
			   int *rc, struct hb_error *err)
{
	const cJSON *item;

	if (!cJSON_IsObject(obj)) {
		*rc = hb_error_set(err, HB_ERR_FORMAT, path, "parent is not a JSON object");
		return NULL;
	}
	item = cJSON_GetObjectItemCaseSensitive(obj, key);
	if (!item)
		*rc = hb_error_set(err, HB_ERR_NOTFOUND, path, "missing");
	return item;
}

int hb_json_item_i64(const cJSON *item, const char *path, int64_t *out,
		     struct hb_error *err)
{
	double v;

	if (!cJSON_IsNumber(item))
		return hb_error_set(err, HB_ERR_FORMAT, path, "expected an integer");
	v = item->valuedouble;
	if (!isfinite(v) || v != floor(v))
		return hb_error_set(err, HB_ERR_FORMAT, path, "expected an integer, got %g", v);
	if (fabs(v) > HB_JSON_MAX_EXACT_INT)
		return hb_error_set(err, HB_ERR_UNSUPPORTED, path,
				    "integer beyond 2^53 - 1 cannot be read exactly");
	*out = (int64_t)v;
	return HB_OK;
}

int hb_json_item_u64(const cJSON *item, const char *path, uint64_t *out,
		     struct hb_error *err)
{
	int64_t v;
	int rc = hb_json_item_i64(item, path, &v, err);

	if (rc)
		return rc;
	if (v < 0)
		return hb_error_set(err, HB_ERR_FORMAT, path,
				    "expected a non-negative integer, got %" PRId64, v);
	*out = (uint64_t)v;
	return HB_OK;
}

int hb_json_u64(const cJSON *obj, const char *key, const char *path,
		uint64_t *out, struct hb_error *err)
{
	int rc = HB_OK;
	const cJSON *item = member(obj, key, path, &rc, err);
	return item ? hb_json_item_u64(item, path, out, err) : rc;
}

int hb_json_i64(const cJSON *obj, const char *key, const char *path,
		int64_t *out, struct hb_error *err)
{
	int rc = HB_OK;
	const cJSON *item = member(obj, key, path, &rc, err);
	return item ? hb_json_item_i64(item, path, out, err) : rc;
}

int hb_json_f64(const cJSON *obj, const char *key, const char *path,
		double *out, struct hb_error *err)
{
	int rc = HB_OK;
	const cJSON *item = member(obj, key, path, &rc, err);

	if (!item)
		return rc;
	if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble))
		return hb_error_set(err, HB_ERR_FORMAT, path, "expected a finite number");
	*out = item->valuedouble;
	return HB_OK;
}

int hb_json_bool(const cJSON *obj, const char *key, const char *path,
		 bool *out, struct hb_error *err)
{
	int rc = HB_OK;
	const cJSON *item = member(obj, key, path, &rc, err);

	if (!item)
		return rc;
	if (!cJSON_IsBool(item))
		return hb_error_set(err, HB_ERR_FORMAT, path, "expected true or false");
	*out = cJSON_IsTrue(item);
	return HB_OK;
}

int hb_json_str(const cJSON *obj, const char *key, const char *path,
		const char **out, struct hb_error *err)
{
	int rc = HB_OK;
	const cJSON *item = member(obj, key, path, &rc, err);

	if (!item)
		return rc;
	if (!cJSON_IsString(item) || !item->valuestring)
		return hb_error_set(err, HB_ERR_FORMAT, path, "expected a string");
	*out = item->valuestring;
	return HB_OK;
}

/*
 * The shortest "%.*g" text of d that reads back as d bit for bit, into buf
 * (32 bytes).  cJSON prints 15 significant digits whenever they read back
 * within a relative epsilon, so a double can come out one unit in the last
 * place off (2^53 as 9.00719925474099e+15): a rendered tree would then not
 * say what it holds.
 */
static void exact_text(double d, char buf[32])
{
	for (int digits = 15; digits <= 17; digits++) {
		snprintf(buf, 32, "%.*g", digits, d);
		if (strtod(buf, NULL) == d)
			return;
	}
}

/* Whether cJSON would print a finite number of the tree inexactly. */
static bool has_inexact_number(const cJSON *item)
{
	char buf[32];

	for (; item; item = item->next) {
		double d = item->valuedouble;

		/* cJSON prints an integral value as its int: -0 would lose its sign */
		if (cJSON_IsNumber(item) && d == 0 && signbit(d))
			return true;
		if (cJSON_IsNumber(item) && isfinite(d) && d != (double)item->valueint) {
			snprintf(buf, sizeof(buf), "%1.15g", d);
			if (strtod(buf, NULL) != d)
				return true;
		}
		if (item->child && has_inexact_number(item->child))
			return true;
	}
	return false;
}

/* Each finite number of the copy becomes raw text that reads back exactly. */
static int make_numbers_exact(cJSON *item)
{
	char buf[32], *text;

	for (; item; item = item->next) {
		if (cJSON_IsNumber(item) && isfinite(item->valuedouble)) {
			exact_text(item->valuedouble, buf);
			if (!(text = strdup(buf)))
				return HB_ERR_NOMEM;
			item->type = cJSON_Raw | (item->type & cJSON_StringIsConst);
			item->valuestring = text;
		}
		if (item->child && make_numbers_exact(item->child))
			return HB_ERR_NOMEM;
	}
	return HB_OK;
}

int hb_json_render(const cJSON *root, bool pretty, char **out, size_t *len,
		   struct hb_error *err)
{
	cJSON *copy = NULL;
	char *s;
	size_t n;
	char *r;

	if (has_inexact_number(root)) {
		if (!(copy = cJSON_Duplicate(root, true)) || make_numbers_exact(copy)) {
			cJSON_Delete(copy);
			return hb_error_set(err, HB_ERR_NOMEM, "json", "cannot render JSON");
		}
		root = copy;
	}
	s = pretty ? cJSON_Print(root) : cJSON_PrintUnformatted(root);
	cJSON_Delete(copy);
	if (!s)
		return hb_error_set(err, HB_ERR_NOMEM, "json", "cannot render JSON");
	n = strlen(s);
	r = realloc(s, n + 2);
	if (!r) {
		free(s);
		return hb_error_set(err, HB_ERR_NOMEM, "json", "cannot render JSON");
	}
	r[n] = '\n';
	r[n + 1] = '\0';
	*out = r;
	if (len)
		*len = n + 1;
	return HB_OK;
}

int hb_json_add_str(cJSON *obj, const char *key, const char *value)
{
	return cJSON_AddStringToObject(obj, key, value ? value : "") ? HB_OK : HB_ERR_NOMEM;
}

cJSON *hb_json_u64_item(uint64_t value)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%" PRIu64, value);
	/* Values past 2^53 - 1 would not read back (2^53 itself is refused:
	 * 2^53 + 1 converts to 2^53 as a double): strings (compared as
	 * integers). */
	if (value > HB_JSON_MAX_EXACT_U64)
		return cJSON_CreateString(buf);
	/* cJSON prints a number with 15 significant digits unless that reads
	 * back off by more than a relative epsilon, so 16-digit integers came
	 * out rounded (9007199254740991 as 9.00719925474099e+15): those are
	 * written digit for digit (the text is still a JSON number). */
	if (value >= UINT64_C(1000000000000000))
		return cJSON_CreateRaw(buf);
	return cJSON_CreateNumber((double)value);
}

int hb_json_add_u64(cJSON *obj, const char *key, uint64_t value)
{
	cJSON *it = hb_json_u64_item(value);

	if (!it || !cJSON_AddItemToObject(obj, key, it)) {
		cJSON_Delete(it);
		return HB_ERR_NOMEM;
	}
	return HB_OK;
}

int hb_json_add_bool(cJSON *obj, const char *key, bool value)
{
	return cJSON_AddBoolToObject(obj, key, value) ? HB_OK : HB_ERR_NOMEM;
}
