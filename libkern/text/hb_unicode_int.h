/*
 * hb_unicode_int.h: the generated tables behind hb_unicode.c (private).
 * hb_unicode_tables.c is written by scripts/gen-unicode-tables.py.
 */
#ifndef HB_UNICODE_INT_H
#define HB_UNICODE_INT_H

#include "hb_base.h"

#define HB_UC_SHIFT 7

struct hb_uc_decomp {
	uint32_t cp;
	uint16_t off; /* into hb_uc_decomp_pool */
	uint8_t len;  /* full canonical decomposition, recursive */
};

struct hb_uc_comp {
	uint32_t first, second, composite;
};

extern const char hb_uc_version[];
extern const uint16_t hb_uc_flags_index[];
extern const uint8_t hb_uc_flags_blocks[];
extern const uint16_t hb_uc_ccc_index[];
extern const uint8_t hb_uc_ccc_blocks[];
extern const uint32_t hb_uc_decomp_pool[];
extern const struct hb_uc_decomp hb_uc_decomp[];
extern const size_t hb_uc_decomp_count;
extern const struct hb_uc_comp hb_uc_comp[];
extern const size_t hb_uc_comp_count;

#endif
