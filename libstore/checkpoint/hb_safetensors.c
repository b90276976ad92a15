/*
 * hb_safetensors.c: open and validate one .safetensors file (see
 * hb_safetensors.h for the rules and the diagnostic table).
 *
 * This file owns the byte-level checks of the header (length, NUL, UTF-8),
 * a strict JSON scanner that runs before cJSON, the semantic checks of the
 * tensor table, bounded tensor reads and change detection.  Checkpoint
 * directories live in hb_st_checkpoint.c.
 *
 * Why a scanner before cJSON: cJSON keeps numbers as doubles and decodes
 * "\u0000" into a terminator, so by itself it would read 9007199254740993 as
 * ...992, 1e3 as 1000, and "a\u0000b" as "a".  The scanner walks the exact
 * grammar once, refuses those inputs with a diagnostic that names the tensor
 * and the byte, and records where every top-level key starts so that later
 * semantic errors carry a byte offset too.  cJSON then builds the tree of a
 * text already known to be well formed.
 */
#include "hb_base.h"
#include "hb_checked.h"
#include "hb_io.h"
#include "hb_json.h"
#include "hb_safetensors.h"

#include <sys/stat.h>
#include <unistd.h>

const struct hb_st_diag_info hb_st_diag_table[HB_ST_DIAG_COUNT] = {
#define HB_ST_DIAG_ROW_(sym, id, meaning) [HB_ST_DIAG_##sym] = { id, meaning },
	HB_ST_DIAG_LIST(HB_ST_DIAG_ROW_)
#undef HB_ST_DIAG_ROW_
};

const struct hb_st_diag_info *hb_st_diag_lookup(const char *id)
{
	for (size_t i = 0; id && i < HB_ST_DIAG_COUNT; i++)
		if (strcmp(hb_st_diag_table[i].id, id) == 0)
			return &hb_st_diag_table[i];
	return NULL;
}

#define SCAN_DEPTH_MAX 16 /* the format needs 3; deeper input is hostile */
#define EXACT_INT_MAX (((uint64_t)1 << 53) - 1) /* hb_json's HB_JSON_MAX_EXACT_U64 */

/* ------------------------------------------------------------ scanner */

struct scan {
	const unsigned char *s;
	size_t len, pos;
	uint64_t base_off;       /* file offset of s[0] (8) */
	const char *file;        /* base name for field paths */
	struct hb_error *err;
	int rc;
	/* raw spans of the keys in force at depth 1 and 2, for field paths */
	const unsigned char *k1, *k2;
	size_t k1len, k2len;
	int keydepth;            /* how many of k1, k2 are in force */
	uint64_t *key_at;        /* file offset of each top-level key */
	size_t nkeys, capkeys;
};

static void scan_path(const struct scan *sc, char *buf, size_t n)
{
	if (sc->keydepth >= 1 && sc->k1len == 12 && !memcmp(sc->k1, "__metadata__", 12))
		snprintf(buf, n, "%s:__metadata__", sc->file);
	else if (sc->keydepth >= 2)
		snprintf(buf, n, "%s:tensors[%.*s].%.*s", sc->file, (int)sc->k1len,
			 (const char *)sc->k1, (int)sc->k2len, (const char *)sc->k2);
	else if (sc->keydepth == 1)
		snprintf(buf, n, "%s:tensors[%.*s]", sc->file, (int)sc->k1len,
			 (const char *)sc->k1);
	else
		snprintf(buf, n, "%s:header", sc->file);
}

/* Record the first scanner error; the position is a byte of s. */
static int scan_fail(struct scan *sc, enum hb_st_diag d, size_t at, const char *what)
{
	char path[HB_ERROR_FIELD_MAX];

	if (sc->rc)
		return sc->rc;
	scan_path(sc, path, sizeof(path));
	sc->rc = hb_error_diag(sc->err, hb_st_diag_table[d].id, HB_ERR_FORMAT, path,
			       true, sc->base_off + at, "%s", what);
	return sc->rc;
}

static void scan_ws(struct scan *sc)
{
	while (sc->pos < sc->len) {
		unsigned char c = sc->s[sc->pos];
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		sc->pos++;
	}
}

static int scan_hex4(struct scan *sc, unsigned *out)
{
	unsigned v = 0;

	if (sc->len - sc->pos < 4)
		return scan_fail(sc, HB_ST_DIAG_HEADER_JSON, sc->pos, "truncated \\u escape");
	for (int i = 0; i < 4; i++) {
		unsigned char c = sc->s[sc->pos + (size_t)i];
		unsigned d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return scan_fail(sc, HB_ST_DIAG_HEADER_JSON, sc->pos + (size_t)i,
					 "bad hex digit in \\u escape");
		v = v * 16 + d;
	}
	sc->pos += 4;
	*out = v;
	return HB_OK;
}

/* A string at sc->pos (the opening quote); the raw content span is returned. */
static int scan_string(struct scan *sc, const unsigned char **raw, size_t *rawlen)
{
	size_t start = ++sc->pos;

	while (sc->pos < sc->len) {
		unsigned char c = sc->s[sc->pos];
		if (c == '"') {
			*raw = sc->s + start;
			*rawlen = sc->pos - start;
			sc->pos++;
			return HB_OK;
		}
		if (c < 0x20)
			return scan_fail(sc, HB_ST_DIAG_HEADER_JSON, sc->pos,
					 "unescaped control character in a string");
		if (c != '\\') {
			sc->pos++; /* bytes >= 0x80 were checked as UTF-8 already */
			continue;
		}
		if (++sc->pos >= sc->len)
			break;
		c = sc->s[sc->pos++];
		if (c == 'u') {
			size_t at = sc->pos - 2;
			unsigned u, lo;
			if (scan_hex4(sc, &u))
				return sc->rc;
			if (u == 0)
				return scan_fail(sc, HB_ST_DIAG_HEADER_NUL, at,
						 "\\u0000 escape would truncate the string");
			if (u >= 0xDC00 && u <= 0xDFFF)
				return scan_fail(sc, HB_ST_DIAG_HEADER_UTF8, at,
						 "lone low surrogate escape");
			if (u >= 0xD800 && u <= 0xDBFF) {
				if (sc->len - sc->pos < 2 || sc->s[sc->pos] != '\\' ||
				    sc->s[sc->pos + 1] != 'u')
					return scan_fail(sc, HB_ST_DIAG_HEADER_UTF8, at,
							 "lone high surrogate escape");
				sc->pos += 2;
				if (scan_hex4(sc, &lo))
					return sc->rc;
				if (lo < 0xDC00 || lo > 0xDFFF)
					return scan_fail(sc, HB_ST_DIAG_HEADER_UTF8, at,
							 "high surrogate without a low surrogate");
			}
		} else if (!strchr("\"\\/bfnrt", c)) {
			return scan_fail(sc, HB_ST_DIAG_HEADER_JSON, sc->pos - 2,
					 "invalid escape in a string");
		}
	}
	return scan_fail(sc, HB_ST_DIAG_HEADER_JSON, sc->len, "unterminated string");
}

/*
 * A JSON number.  Every number the format allows is a shape dimension or a
 * data offset, so anything but a plain integer is refused here (the
 * reference's serde also refuses 1.0 and 1e3 for an integer field), and
 * magnitudes above 2^53 - 1 are refused because cJSON could not hold them
 * exactly (2^53 + 1 reads as 2^53) (STRICTER: the reference reads up to 2^64-1; no real tensor or
 * file reaches 2^53 bytes).
 */
static int scan_number(struct scan *sc)
{
	size_t start = sc->pos;
	bool neg = false, big = false;
	uint64_t v = 0;

	if (sc->s[sc->pos] == '-') {
		neg = true;
		sc->pos++;
	}
	if (sc->pos >= sc->len || sc->s[sc->pos] < '0' || sc->s[sc->pos] > '9')
		return scan_fail(sc, HB_ST_DIAG_HEADER_JSON, sc->pos, "malformed number");
	if (sc->s[sc->pos] == '0') {
		sc->pos++;
	} else {
		while (sc->pos < sc->len && sc->s[sc->pos] >= '0' && sc->s[sc->pos] <= '9') {
			unsigned d = sc->s[sc->pos++] - '0';
			if (big || v > (EXACT_INT_MAX - d) / 10)
				big = true;
			else
				v = v * 10 + d;
		}
	}
	if (sc->pos < sc->len && (sc->s[sc->pos] == '.' || sc->s[sc->pos] == 'e' ||
				  sc->s[sc->pos] == 'E'))
		return scan_fail(sc, HB_ST_DIAG_NUMBER_NOT_INTEGER, start,
				 "number is not a plain integer");
	if (neg && v == 0 && !big)
		return scan_fail(sc, HB_ST_DIAG_NUMBER_NOT_INTEGER, start, "number is -0");
	if (big)
		return scan_fail(sc, HB_ST_DIAG_NUMBER_RANGE, start,
				 "integer larger than 2^53 - 1 cannot be read exactly");
	return HB_OK;
}

static int scan_value(struct scan *sc, int depth);

static int scan_container(struct scan *sc, int depth, bool object)
{
	unsigned char close = object ? '}' : ']';
	int saved_keydepth = sc->keydepth;

	if (depth >= SCAN_DEPTH_MAX)
		return scan_fail(sc, HB_ST_DIAG_HEADER_JSON, sc->pos, "nesting too deep");
	sc->pos++;
	scan_ws(sc);
	if (sc->pos < sc->len && sc->s[sc->pos] == close) {
		sc->pos++;
		return HB_OK;
	}
	for (;;) {
		if (object) {
			const unsigned char *k;
			size_t klen, kpos = sc->pos;
			if (sc->pos >= sc->len || sc->s[sc->pos] != '"')
				return scan_fail(sc, HB_ST_DIAG_HEADER_JSON, sc->pos,
						 "expected a string key");
			if (scan_string(sc, &k, &klen))
				return sc->rc;
			if (depth == 0) {
				if (sc->nkeys == sc->capkeys) {
					size_t cap = sc->capkeys ? sc->capkeys * 2 : 64;
					uint64_t *nk = realloc(sc->key_at, cap * sizeof(*nk));
					if (!nk)
						return sc->rc = hb_error_set(sc->err, HB_ERR_NOMEM,
									     sc->file, "out of memory");
					sc->key_at = nk;
					sc->capkeys = cap;
				}
				sc->key_at[sc->nkeys++] = sc->base_off + kpos;
				sc->k1 = k, sc->k1len = klen, sc->keydepth = 1;
			} else if (depth == 1) {
				sc->k2 = k, sc->k2len = klen, sc->keydepth = 2;
			}
			scan_ws(sc);
			if (sc->pos >= sc->len || sc->s[sc->pos] != ':')
				return scan_fail(sc, HB_ST_DIAG_HEADER_JSON, sc->pos, "expected ':'");
			sc->pos++;
			scan_ws(sc);
		}
		if (scan_value(sc, depth + 1))
			return sc->rc;
		scan_ws(sc);
		if (sc->pos >= sc->len)
			return scan_fail(sc, HB_ST_DIAG_HEADER_JSON, sc->pos, "unterminated container");
		if (sc->s[sc->pos] == close) {
			sc->pos++;
			sc->keydepth = saved_keydepth;
			return HB_OK;
		}
		if (sc->s[sc->pos] != ',')
			return scan_fail(sc, HB_ST_DIAG_HEADER_JSON, sc->pos, "expected ',' or a close");
		sc->pos++;
		scan_ws(sc);
	}
}

static int scan_value(struct scan *sc, int depth)
{
	static const char *const words[] = { "true", "false", "null" };
	const unsigned char *raw;
	size_t rawlen;
	unsigned char c;

	if (sc->pos >= sc->len)
		return scan_fail(sc, HB_ST_DIAG_HEADER_JSON, sc->pos, "expected a value");
	c = sc->s[sc->pos];
	if (c == '{' || c == '[')
		return scan_container(sc, depth, c == '{');
	if (c == '"')
		return scan_string(sc, &raw, &rawlen);
	if (c == '-' || (c >= '0' && c <= '9'))
		return scan_number(sc);
	for (size_t i = 0; i < HB_ARRAY_LEN(words); i++) {
		size_t n = strlen(words[i]);
		if (sc->len - sc->pos >= n && !memcmp(sc->s + sc->pos, words[i], n)) {
			sc->pos += n;
			return HB_OK;
		}
	}
	return scan_fail(sc, HB_ST_DIAG_HEADER_JSON, sc->pos, "unexpected character");
}

/* Byte checks over the whole header, padding included. */
static int check_bytes(struct scan *sc)
{
	const unsigned char *s = sc->s;
	size_t i = 0, n = sc->len;

	while (i < n) {
		unsigned char c = s[i];
		size_t need;
		uint32_t cp, min;

		if (c == 0)
			return scan_fail(sc, HB_ST_DIAG_HEADER_NUL, i, "NUL byte in the header");
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xC2 && c <= 0xDF)
			need = 1, cp = c & 0x1F, min = 0x80;
		else if (c >= 0xE0 && c <= 0xEF)
			need = 2, cp = c & 0x0F, min = 0x800;
		else if (c >= 0xF0 && c <= 0xF4)
			need = 3, cp = c & 0x07, min = 0x10000;
		else
			return scan_fail(sc, HB_ST_DIAG_HEADER_UTF8, i, "invalid UTF-8 lead byte");
		if (need > n - i - 1)
			return scan_fail(sc, HB_ST_DIAG_HEADER_UTF8, i, "truncated UTF-8 sequence");
		for (size_t k = 1; k <= need; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return scan_fail(sc, HB_ST_DIAG_HEADER_UTF8, i,
						 "invalid UTF-8 continuation byte");
			cp = (cp << 6) | (s[i + k] & 0x3F);
		}
		if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return scan_fail(sc, HB_ST_DIAG_HEADER_UTF8, i,
					 "overlong, surrogate or out-of-range UTF-8");
		i += need + 1;
	}
	return HB_OK;
}

/* ------------------------------------------------------- table checks */

struct ctx {
	struct hb_st_file *f;
	struct hb_error *err;
	uint64_t *key_at;
	uint64_t *tensor_at; /* file offset of each tensor's key */
};

static int entry_fail(struct ctx *c, enum hb_st_diag d, const char *tensor,
		      const char *field, uint64_t at, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

static int entry_fail(struct ctx *c, enum hb_st_diag d, const char *tensor,
		      const char *field, uint64_t at, const char *fmt, ...)
{
	char path[HB_ERROR_FIELD_MAX], msg[HB_ERROR_MSG_MAX];
	va_list ap;

	snprintf(path, sizeof(path), "%s:tensors[%s]%s%s", c->f->base, tensor,
		 field ? "." : "", field ? field : "");
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return hb_error_diag(c->err, hb_st_diag_table[d].id, HB_ERR_FORMAT, path,
			     true, at, "%s", msg);
}

static int cmp_cstr_ptr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int check_metadata(struct ctx *c, const cJSON *m, uint64_t at)
{
	char path[HB_ERROR_FIELD_MAX];
	const cJSON *it;
	const char **keys;
	size_t n = 0, k = 0;
	int rc = HB_OK;

	snprintf(path, sizeof(path), "%s:__metadata__", c->f->base);
	/* STRICTER: the reference reads `null` as an absent map. */
	if (!cJSON_IsObject(m))
		return hb_error_diag(c->err, HB_ST_ID(METADATA_INVALID), HB_ERR_FORMAT,
				     path, true, at, "__metadata__ is not an object");
	cJSON_ArrayForEach(it, m) {
		if (!cJSON_IsString(it)) {
			snprintf(path, sizeof(path), "%s:__metadata__[%s]", c->f->base,
				 it->string);
			return hb_error_diag(c->err, HB_ST_ID(METADATA_INVALID), HB_ERR_FORMAT,
					     path, true, at, "value is not a string");
		}
		n++;
	}
	/* STRICTER: the reference keeps the last of repeated keys silently. */
	keys = calloc(n ? n : 1, sizeof(*keys));
	if (!keys)
		return hb_error_set(c->err, HB_ERR_NOMEM, path, "out of memory");
	cJSON_ArrayForEach(it, m)
		keys[k++] = it->string;
	qsort(keys, n, sizeof(*keys), cmp_cstr_ptr);
	for (k = 1; k < n; k++) {
		if (strcmp(keys[k - 1], keys[k]) == 0) {
			snprintf(path, sizeof(path), "%s:__metadata__[%s]", c->f->base, keys[k]);
			rc = hb_error_diag(c->err, HB_ST_ID(METADATA_INVALID), HB_ERR_FORMAT,
					   path, true, at, "key appears twice");
			break;
		}
	}
	free(keys);
	return rc;
}

static int read_dims(const cJSON *arr, size_t max, uint64_t *out, unsigned *n)
{
	const cJSON *it;
	unsigned k = 0;

	if (!cJSON_IsArray(arr))
		return HB_ERR_FORMAT;
	cJSON_ArrayForEach(it, arr) {
		if (k == max || hb_json_item_u64(it, "", &out[k], NULL))
			return HB_ERR_FORMAT;
		k++;
	}
	*n = k;
	return HB_OK;
}

static int check_entry(struct ctx *c, const cJSON *e, struct hb_st_tensor *t, uint64_t at)
{
	static const char *const fields[3] = { "dtype", "shape", "data_offsets" };
	const cJSON *have[3] = { NULL, NULL, NULL }, *it;
	const char *nm = t->name;
	uint64_t offs[2], bytes;
	unsigned n;

	if (!cJSON_IsObject(e))
		return entry_fail(c, HB_ST_DIAG_ENTRY_NOT_OBJECT, nm, NULL, at,
				  "tensor entry is not an object");
	cJSON_ArrayForEach(it, e) {
		size_t k = 0;
		while (k < 3 && strcmp(it->string, fields[k]) != 0)
			k++;
		/* STRICTER: the reference ignores fields it does not know. */
		if (k == 3)
			return entry_fail(c, HB_ST_DIAG_ENTRY_UNKNOWN_FIELD, nm, it->string, at,
					  "unknown tensor field");
		if (have[k])
			return entry_fail(c, HB_ST_DIAG_ENTRY_DUPLICATE_FIELD, nm, it->string, at,
					  "field appears twice");
		have[k] = it;
	}
	for (size_t k = 0; k < 3; k++)
		if (!have[k])
			return entry_fail(c, HB_ST_DIAG_ENTRY_MISSING_FIELD, nm, fields[k], at,
					  "required field is missing");
	if (!cJSON_IsString(have[0]) ||
	    hb_dtype_from_name(have[0]->valuestring, strlen(have[0]->valuestring), &t->dtype))
		return entry_fail(c, HB_ST_DIAG_DTYPE_UNKNOWN, nm, "dtype", at,
				  "dtype is not a known element type name");
	if (read_dims(have[1], HB_ST_MAX_DIMS, t->shape, &t->ndim))
		return entry_fail(c, HB_ST_DIAG_SHAPE_INVALID, nm, "shape", at,
				  "shape is not an array of at most %d non-negative integers",
				  HB_ST_MAX_DIMS);
	t->nelem = 1;
	for (unsigned d = 0; d < t->ndim; d++)
		if (hb_mul_u64(t->nelem, t->shape[d], &t->nelem))
			return entry_fail(c, HB_ST_DIAG_SHAPE_OVERFLOW, nm, "shape", at,
					  "element count overflows 64 bits at dimension %u", d);
	if (hb_mul_u64(t->nelem, hb_dtype_size(t->dtype), &bytes))
		return entry_fail(c, HB_ST_DIAG_SHAPE_OVERFLOW, nm, "shape", at,
				  "byte count overflows 64 bits");
	if (read_dims(have[2], 2, offs, &n) || n != 2)
		return entry_fail(c, HB_ST_DIAG_OFFSETS_INVALID, nm, "data_offsets", at,
				  "data_offsets is not [begin, end] of non-negative integers");
	if (offs[0] > offs[1])
		return entry_fail(c, HB_ST_DIAG_OFFSETS_REVERSED, nm, "data_offsets", at,
				  "begin %" PRIu64 " is after end %" PRIu64, offs[0], offs[1]);
	t->begin = offs[0];
	t->end = offs[1];
	t->nbytes = offs[1] - offs[0];
	if (t->nbytes != bytes)
		return entry_fail(c, HB_ST_DIAG_OFFSETS_MISMATCH, nm, "data_offsets", at,
				  "%" PRIu64 " bytes between the offsets, %s shape needs %" PRIu64,
				  t->nbytes, hb_dtype_name(t->dtype), bytes);
	return HB_OK;
}

static int cmp_tensor_name(const void *a, const void *b)
{
	const struct hb_st_tensor *x = *(const struct hb_st_tensor *const *)a;
	const struct hb_st_tensor *y = *(const struct hb_st_tensor *const *)b;
	int r = strcmp(x->name, y->name);

	/* Ties fall back to header order so that the later copy is reported. */
	return r ? r : (x < y ? -1 : x > y);
}

static int cmp_tensor_offsets(const void *a, const void *b)
{
	const struct hb_st_tensor *x = *(const struct hb_st_tensor *const *)a;
	const struct hb_st_tensor *y = *(const struct hb_st_tensor *const *)b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* The data layout: sorted by offsets the tensors tile [0, data size). */
static int check_layout(struct ctx *c, uint64_t data_size)
{
	struct hb_st_file *f = c->f;
	struct hb_st_tensor **order;
	uint64_t next = 0;
	int rc = HB_OK;

	order = malloc((f->ntensors ? f->ntensors : 1) * sizeof(*order));
	if (!order)
		return hb_error_set(c->err, HB_ERR_NOMEM, f->base, "out of memory");
	for (size_t i = 0; i < f->ntensors; i++)
		order[i] = &f->tensors[i];
	qsort(order, f->ntensors, sizeof(*order), cmp_tensor_offsets);
	for (size_t i = 0; i < f->ntensors && !rc; i++) {
		struct hb_st_tensor *t = order[i];
		uint64_t at = c->tensor_at[t - f->tensors];
		if (t->begin > next)
			rc = entry_fail(c, HB_ST_DIAG_OFFSETS_GAP, t->name, "data_offsets", at,
					"%" PRIu64 " unowned bytes before this tensor at data offset %" PRIu64,
					t->begin - next, next);
		else if (t->begin < next)
			rc = entry_fail(c, HB_ST_DIAG_OFFSETS_OVERLAP, t->name, "data_offsets", at,
					"begins at %" PRIu64 ", inside bytes owned up to %" PRIu64,
					t->begin, next);
		next = t->end;
	}
	free(order);
	if (rc)
		return rc;
	if (next < data_size)
		return hb_error_diag(c->err, HB_ST_ID(BUFFER_TRAILING), HB_ERR_FORMAT,
				     f->base, true, f->data_start + next,
				     "%" PRIu64 " bytes after the last tensor belong to none",
				     data_size - next);
	if (next > data_size)
		return hb_error_diag(c->err, HB_ST_ID(BUFFER_SHORT), HB_ERR_SHORT, f->base,
				     true, f->file_size,
				     "tensors need %" PRIu64 " data bytes, the file has %" PRIu64,
				     next, data_size);
	return HB_OK;
}

static int check_table(struct ctx *c, cJSON *root, size_t nkeys)
{
	struct hb_st_file *f = c->f;
	cJSON *it, *meta = NULL;
	size_t n = 0, k = 0, i;
	uint64_t meta_at = 0;
	int rc;

	cJSON_ArrayForEach(it, root)
		n++;
	if (n != nkeys)
		return hb_error_set(c->err, HB_ERR_INTERNAL, f->base,
				    "scanner saw %zu keys, cJSON %zu", nkeys, n);
	f->tensors = calloc(n ? n : 1, sizeof(*f->tensors));
	c->tensor_at = calloc(n ? n : 1, sizeof(*c->tensor_at));
	if (!f->tensors || !c->tensor_at)
		return hb_error_set(c->err, HB_ERR_NOMEM, f->base, "out of memory");
	cJSON_ArrayForEach(it, root) {
		uint64_t at = c->key_at[k++];
		size_t len = strlen(it->string);
		struct hb_st_tensor *t;

		if (strcmp(it->string, "__metadata__") == 0) {
			if (meta)
				return hb_error_diag(c->err, HB_ST_ID(METADATA_INVALID),
						     HB_ERR_FORMAT, f->base, true, at,
						     "__metadata__ appears twice");
			meta = it;
			meta_at = at;
			continue;
		}
		/* STRICTER: the reference accepts any name, of any length. */
		if (len == 0 || len > HB_ST_NAME_MAX)
			return entry_fail(c, HB_ST_DIAG_TENSOR_NAME_INVALID, it->string,
					  NULL, at, "tensor name is %zu bytes; 1 to %d allowed",
					  len, HB_ST_NAME_MAX);
		t = &f->tensors[f->ntensors];
		t->name = malloc(len + 1);
		if (!t->name)
			return hb_error_set(c->err, HB_ERR_NOMEM, f->base, "out of memory");
		memcpy(t->name, it->string, len + 1);
		t->name_len = len;
		c->tensor_at[f->ntensors++] = at;
		if ((rc = check_entry(c, it, t, at)))
			return rc;
		t->file_offset = f->data_start + t->begin; /* no overflow: see below */
	}
	if (meta && (rc = check_metadata(c, meta, meta_at)))
		return rc;

	/* STRICTER: cJSON and the reference (last one wins) both accept a
	 * repeated tensor name; two definitions of one tensor are refused. */
	f->by_name = malloc((f->ntensors ? f->ntensors : 1) * sizeof(*f->by_name));
	if (!f->by_name)
		return hb_error_set(c->err, HB_ERR_NOMEM, f->base, "out of memory");
	for (i = 0; i < f->ntensors; i++)
		f->by_name[i] = &f->tensors[i];
	qsort(f->by_name, f->ntensors, sizeof(*f->by_name), cmp_tensor_name);
	for (i = 1; i < f->ntensors; i++) {
		const struct hb_st_tensor *t = f->by_name[i];
		if (strcmp(f->by_name[i - 1]->name, t->name) == 0)
			return entry_fail(c, HB_ST_DIAG_DUPLICATE_TENSOR, t->name, NULL,
					  c->tensor_at[t - f->tensors],
					  "tensor name appears twice in the header");
	}
	if ((rc = check_layout(c, f->file_size - f->data_start)))
		return rc;
	if (meta) {
		cJSON_DetachItemViaPointer(root, meta);
		f->metadata = meta;
	}
	return HB_OK;
}

/* ------------------------------------------------------------- open */

static uint64_t le64(const unsigned char *b)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | b[i];
	return v;
}

static int capture_identity(int fd, struct hb_st_identity *id, const char *what,
			    struct hb_error *err)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return hb_error_sys(err, errno, what, "cannot stat");
	id->dev = (uint64_t)st.st_dev;
	id->ino = (uint64_t)st.st_ino;
	id->size = (uint64_t)st.st_size;
	id->mtime_sec = (int64_t)st.st_mtim.tv_sec;
	id->mtime_nsec = (int64_t)st.st_mtim.tv_nsec;
	if (!S_ISREG(st.st_mode))
		return hb_error_set(err, HB_ERR_UNSUPPORTED, what, "not a regular file");
	return HB_OK;
}

static int parse_header(struct hb_st_file *f, struct hb_error *err)
{
	unsigned char lenbuf[8];
	struct scan sc;
	struct ctx c;
	char path[HB_ERROR_FIELD_MAX];
	unsigned char *text = NULL;
	cJSON *root = NULL;
	uint64_t n;
	int rc;

	snprintf(path, sizeof(path), "%s:header_length", f->base);
	if (f->file_size < 8)
		return hb_error_diag(err, HB_ST_ID(FILE_SHORT), HB_ERR_SHORT, path, true,
				     f->file_size, "file is %" PRIu64 " bytes, less than 8",
				     f->file_size);
	if ((rc = hb_pread_full(f->fd, lenbuf, 8, 0, f->base, err)))
		return rc;
	n = le64(lenbuf);
	/* Both checks come before any allocation of n bytes. */
	if (n > HB_ST_HEADER_MAX)
		return hb_error_diag(err, HB_ST_ID(HEADER_SIZE_LIMIT), HB_ERR_FORMAT, path,
				     true, 0, "header length %" PRIu64 " exceeds %u",
				     n, HB_ST_HEADER_MAX);
	if (n > f->file_size - 8)
		return hb_error_diag(err, HB_ST_ID(HEADER_TRUNCATED), HB_ERR_SHORT, path,
				     true, 0, "header length %" PRIu64 " but only %" PRIu64
				     " bytes follow", n, f->file_size - 8);
	f->header_len = n;
	f->data_start = 8 + n;
	/* data_start <= file_size < 2^63, so data_start + begin for begin <
	 * 2^53 cannot overflow: file_offset needs no checked add. */
	text = malloc((size_t)n + 1);
	if (!text)
		return hb_error_set(err, HB_ERR_NOMEM, f->base, "out of memory");
	if ((rc = hb_pread_full(f->fd, text, (size_t)n, 8, f->base, err)))
		goto out;
	text[n] = '\0';

	memset(&sc, 0, sizeof(sc));
	sc.s = text;
	sc.len = (size_t)n;
	sc.base_off = 8;
	sc.file = f->base;
	sc.err = err;
	if ((rc = check_bytes(&sc)))
		goto out;
	/* The reference's newer releases refuse a first byte other than '{'. */
	if (n == 0 || text[0] != '{') {
		rc = hb_error_diag(err, HB_ST_ID(HEADER_NOT_OBJECT), HB_ERR_FORMAT, path, true,
				   8, "header does not start with '{'");
		goto out;
	}
	if ((rc = scan_value(&sc, 0)))
		goto out;
	/* STRICTER: writers pad with spaces only; the reference takes any JSON
	 * white space here. */
	for (size_t i = sc.pos; i < sc.len; i++) {
		if (text[i] != ' ') {
			snprintf(path, sizeof(path), "%s:header", f->base);
			rc = hb_error_diag(err, HB_ST_ID(HEADER_TRAILING), HB_ERR_FORMAT, path,
					   true, 8 + i, "byte 0x%02x after the JSON object",
					   text[i]);
			goto out;
		}
	}
	root = cJSON_ParseWithLength((const char *)text, sc.pos);
	if (!root) {
		rc = hb_error_set(err, HB_ERR_NOMEM, f->base, "cJSON could not build the header");
		goto out;
	}
	memset(&c, 0, sizeof(c));
	c.f = f;
	c.err = err;
	c.key_at = sc.key_at;
	rc = check_table(&c, root, sc.nkeys);
	free(c.tensor_at);
out:
	cJSON_Delete(root);
	free(sc.key_at);
	free(text);
	return rc;
}

int hb_st_open(struct hb_st_file *f, const char *path, struct hb_error *err)
{
	const char *slash;
	int rc;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	f->path = strdup(path);
	if (!f->path)
		return hb_error_set(err, HB_ERR_NOMEM, path, "out of memory");
	slash = strrchr(f->path, '/');
	f->base = slash ? slash + 1 : f->path;
	if ((rc = hb_open_read(path, &f->fd, err)))
		goto fail;
	if ((rc = capture_identity(f->fd, &f->identity, f->base, err)))
		goto fail;
	f->file_size = f->identity.size;
	if ((rc = parse_header(f, err)))
		goto fail;
	return HB_OK;
fail:
	hb_st_close(f);
	return rc;
}

void hb_st_close(struct hb_st_file *f)
{
	if (!f)
		return;
	if (f->fd >= 0)
		close(f->fd);
	for (size_t i = 0; f->tensors && i < f->ntensors; i++)
		free(f->tensors[i].name);
	free(f->tensors);
	free(f->by_name);
	cJSON_Delete(f->metadata);
	free(f->path);
	memset(f, 0, sizeof(*f));
	f->fd = -1;
}

const struct hb_st_tensor *hb_st_find(const struct hb_st_file *f, const char *name)
{
	size_t lo = 0, hi = f->ntensors;

	if (!f->by_name)
		return NULL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = strcmp(f->by_name[mid]->name, name);
		if (r == 0)
			return f->by_name[mid];
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const char *hb_st_metadata_get(const struct hb_st_file *f, const char *key)
{
	const cJSON *v = f->metadata ? cJSON_GetObjectItemCaseSensitive(f->metadata, key) : NULL;
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

int hb_st_read(const struct hb_st_file *f, const struct hb_st_tensor *t,
	       uint64_t offset, void *buf, size_t len, struct hb_error *err)
{
	char path[HB_ERROR_FIELD_MAX];

	if (!hb_range_inside(offset, len, t->nbytes)) {
		snprintf(path, sizeof(path), "%s:tensors[%s]", f->base, t->name);
		return hb_error_diag(err, HB_ST_ID(READ_RANGE), HB_ERR_INVALID, path, true,
				     offset, "read of %zu bytes at %" PRIu64
				     " leaves a tensor of %" PRIu64 " bytes",
				     len, offset, t->nbytes);
	}
	return hb_pread_full(f->fd, buf, len, t->file_offset + offset, f->base, err);
}

int hb_st_check_unchanged(const struct hb_st_file *f, struct hb_error *err)
{
	struct hb_st_identity now, by_path;
	struct stat st;
	const struct hb_st_identity *was = &f->identity;
	int rc = capture_identity(f->fd, &now, f->base, err);

	if (rc)
		return rc;
	if (stat(f->path, &st) != 0)
		return hb_error_diag(err, HB_ST_ID(SOURCE_CHANGED), HB_ERR_CHANGED, f->base,
				     false, 0, "the path no longer names a file: %s",
				     strerror(errno));
	by_path.dev = (uint64_t)st.st_dev;
	by_path.ino = (uint64_t)st.st_ino;
	if (now.size != was->size || now.mtime_sec != was->mtime_sec ||
	    now.mtime_nsec != was->mtime_nsec || now.ino != was->ino || now.dev != was->dev)
		return hb_error_diag(err, HB_ST_ID(SOURCE_CHANGED), HB_ERR_CHANGED, f->base,
				     false, 0, "size, mtime or inode changed since open "
				     "(size %" PRIu64 " -> %" PRIu64 ")", was->size, now.size);
	/* The open descriptor still sees the old file after a rename over
	 * the path; the next reader of the path would not. */
	if (by_path.ino != was->ino || by_path.dev != was->dev)
		return hb_error_diag(err, HB_ST_ID(SOURCE_CHANGED), HB_ERR_CHANGED, f->base,
				     false, 0, "the path now names another file");
	return HB_OK;
}
