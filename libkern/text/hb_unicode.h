/*
 * hb_unicode.h: the Unicode facts the tokenizer needs, and nothing more.
 *
 * Owns: code-point classes used by the Qwen pre-tokenizer patterns (\p{L},
 * \p{M}, \p{N} by General_Category; \s as Oniguruma's Unicode \s, which is
 * the White_Space property), Canonical_Combining_Class, NFC, and strict
 * UTF-8 decoding.  Does not own case folding, NFKC, grapheme clusters or
 * anything a pattern we accept does not use.
 *
 * The tables are generated from Debian's unicode-data package by
 * scripts/gen-unicode-tables.py; hb_unicode_version() names the UCD version.
 */
#ifndef HB_UNICODE_H
#define HB_UNICODE_H

#include "hb_base.h"
#include "hb_err.h"

enum {
	HB_UC_L = 1,   /* General_Category L* */
	HB_UC_M = 2,   /* General_Category M* */
	HB_UC_N = 4,   /* General_Category N* */
	HB_UC_WS = 8,  /* White_Space (= Oniguruma Unicode \s) */
	HB_UC_NQC = 16 /* NFC_Quick_Check is No or Maybe */
};

/* The UCD version the tables came from, e.g. "15.0.0". */
const char *hb_unicode_version(void);
/* HB_UC_* flags of a code point (0 for cp > U+10FFFF). */
unsigned hb_unicode_flags(uint32_t cp);
/* Canonical_Combining_Class (0 for cp > U+10FFFF). */
unsigned hb_unicode_ccc(uint32_t cp);

/*
 * Decode one UTF-8 scalar at s[0..n) (n > 0).  Strict (RFC 3629: no
 * overlongs, surrogates or values above U+10FFFF).  Returns the sequence
 * length 1..4 and stores the code point, or 0 when the bytes are not a
 * valid sequence.
 */
size_t hb_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);
/* Encode cp (a scalar value) into out[4]; returns the length. */
size_t hb_utf8_encode(uint32_t cp, uint8_t out[4]);
/* Whether s[0..n) is valid UTF-8. */
bool hb_utf8_valid(const uint8_t *s, size_t n);

/*
 * Canonical composition (NFC) of valid UTF-8 s[0..n).  On success *out is a
 * fresh malloc'd buffer (NUL-terminated, the terminator not counted in
 * *out_len), owned by the caller.  HB_ERR_FORMAT on invalid UTF-8
 * (diagnostic id "utf8-invalid", with the byte offset), HB_ERR_NOMEM.
 */
int hb_unicode_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_len,
		   struct hb_error *err);
/* Whether NFC would leave s unchanged, by quick check (valid UTF-8 only). */
bool hb_unicode_nfc_quick(const uint8_t *s, size_t n);

/*
 * Display policy for bytes that may not be UTF-8 (decode output): replace
 * each maximal invalid subpart with U+FFFD, exactly as Rust's
 * String::from_utf8_lossy and Python's bytes.decode("utf-8", "replace") do
 * (Unicode "U+FFFD substitution of maximal subparts").  *out is malloc'd
 * and NUL-terminated.
 */
int hb_utf8_lossy(const uint8_t *s, size_t n, uint8_t **out, size_t *out_len,
		  struct hb_error *err);

#endif
