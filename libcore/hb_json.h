/*
 * hb_json.h: strict JSON reading and writing over cJSON.
 *
 * Readers name the field they were looking for in the error record
 * ("config.text_config.hidden_size") so that a refused input points at its
 * defect.  cJSON keeps numbers as doubles, so integers are accepted only
 * when they are whole and no larger than 2^53, where a double is exact;
 * larger ones are refused rather than rounded.
 */
#ifndef HB_JSON_H
#define HB_JSON_H

#include "hb_base.h"
#include "hb_err.h"
#include <cJSON.h>

/* The largest integer a JSON reader accepts: 2^53 - 1.  cJSON parses
 * numbers into doubles, and 2^53 is also what "9007199254740993" rounds to,
 * so 2^53 itself cannot be told from a neighbour that is not exact. */
#define HB_JSON_MAX_EXACT_INT 9007199254740991.0
#define HB_JSON_MAX_EXACT_U64 ((UINT64_C(1) << 53) - 1)

/* Parse len bytes (need not be NUL-terminated).  Refusals carry the ids
 * json-syntax (not JSON; the offset is where cJSON stopped) and
 * json-trailing (bytes after the value other than white space). */
int hb_json_parse(const char *text, size_t len, const char *what,
		  cJSON **out, struct hb_error *err);
/* Read and parse a file no larger than max_bytes. */
int hb_json_parse_file(const char *path, uint64_t max_bytes, cJSON **out,
		       struct hb_error *err);

/*
 * Typed getters on an object member.  path is the dotted name used in
 * errors for the member itself.  A missing member is HB_ERR_NOTFOUND, a
 * wrong type or value HB_ERR_FORMAT.
 */
int hb_json_u64(const cJSON *obj, const char *key, const char *path,
		uint64_t *out, struct hb_error *err);
int hb_json_i64(const cJSON *obj, const char *key, const char *path,
		int64_t *out, struct hb_error *err);
int hb_json_f64(const cJSON *obj, const char *key, const char *path,
		double *out, struct hb_error *err);
int hb_json_bool(const cJSON *obj, const char *key, const char *path,
		 bool *out, struct hb_error *err);
/* The returned string is owned by obj. */
int hb_json_str(const cJSON *obj, const char *key, const char *path,
		const char **out, struct hb_error *err);
/* A number item (not a member) as an exact integer. */
int hb_json_item_u64(const cJSON *item, const char *path, uint64_t *out,
		     struct hb_error *err);
int hb_json_item_i64(const cJSON *item, const char *path, int64_t *out,
		     struct hb_error *err);

/* Serialise (formatted, trailing newline) into a heap string. */
int hb_json_render(const cJSON *root, bool pretty, char **out, size_t *len,
		   struct hb_error *err);

/* Add helpers that keep the NULL check in one place; return 0 or NOMEM. */
int hb_json_add_str(cJSON *obj, const char *key, const char *value);
int hb_json_add_u64(cJSON *obj, const char *key, uint64_t value);
/* The item hb_json_add_u64 adds, for arrays: a number printed with every
 * digit (cJSON's own printing keeps 15 significant digits and would round
 * 1234567890123456789's smaller cousins from 10^15 up), or the decimal
 * string past 2^53.  NULL when out of memory. */
cJSON *hb_json_u64_item(uint64_t value);
int hb_json_add_bool(cJSON *obj, const char *key, bool value);

#endif
