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

#endif
