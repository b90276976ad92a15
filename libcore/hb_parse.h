/*
 * hb_parse.h: strict parsing of numbers given on command lines and in text.
 *
 * Unlike atoi/strtoul these refuse empty strings, signs on unsigned values,
 * trailing garbage, leading white space and out-of-range values, so that
 * "--threads 4x" or "-1" is an error instead of a silent guess.
 */
#ifndef HB_PARSE_H
#define HB_PARSE_H

#include "hb_base.h"

/* Decimal digits only; returns 0 or HB_ERR_INVALID / HB_ERR_OVERFLOW. */
int hb_parse_u64(const char *s, uint64_t *out);
/* Like hb_parse_u64 with an inclusive range check (HB_ERR_INVALID outside). */
int hb_parse_u64_range(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);
/* A finite decimal floating-point number, whole string. */
int hb_parse_double(const char *s, double *out);

/* A list of token ids, the whole of text[0, len): decimal numbers in
 * [0, INT32_MAX] separated by a comma (white space around it allowed) or by
 * white space alone, white space before and after.  Refused with
 * HB_ERR_INVALID: no id at all, an empty item ("1,,2", "1,"), a sign, a
 * NUL or any other byte, a number past INT32_MAX; *bad_at (may be NULL)
 * gets the byte offset where reading stopped.  On success *ids (malloc'd,
 * the caller frees it) holds *n >= 1 ids; on failure nothing is written to
 * them.  HB_ERR_NOMEM when the list cannot be held. */
int hb_parse_id_list(const char *text, size_t len, int32_t **ids, size_t *n, size_t *bad_at);

#endif
