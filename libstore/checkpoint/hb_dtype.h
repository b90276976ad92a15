/*
 * hb_dtype.h: tensor element types as the safetensors format names them.
 *
 * This file owns the closed list of element types the toolchain reads from
 * checkpoints, their on-disk names ("BF16", "F8_E4M3", ...) and their byte
 * sizes.  It does not own conversions between types (libcore/hb_half.h) nor
 * GGUF type numbers (the GGUF writer maps these itself).
 *
 * Only types whose elements are whole bytes are listed.  The sub-byte types
 * that newer safetensors versions know (F4, F6_E2M3, F6_E3M2) are refused as
 * unknown: no checkpoint this toolchain converts uses them, and accepting a
 * name we cannot size exactly would be a guess.
 *
 * STABILITY: the enum values are not written to disk by this module; the
 * names are the contract.
 */
#ifndef HB_DTYPE_H
#define HB_DTYPE_H

#include "hb_base.h"
#include "hb_err.h"

/* X(enumerator suffix, safetensors name, bytes per element) */
#define HB_DTYPE_LIST(X)           \
	X(BOOL, "BOOL", 1)         \
	X(U8, "U8", 1)             \
	X(I8, "I8", 1)             \
	X(F8_E4M3, "F8_E4M3", 1)   \
	X(F8_E5M2, "F8_E5M2", 1)   \
	X(F8_E8M0, "F8_E8M0", 1)   \
	X(I16, "I16", 2)           \
	X(U16, "U16", 2)           \
	X(F16, "F16", 2)           \
	X(BF16, "BF16", 2)         \
	X(I32, "I32", 4)           \
	X(U32, "U32", 4)           \
	X(F32, "F32", 4)           \
	X(C64, "C64", 8)           \
	X(F64, "F64", 8)           \
	X(I64, "I64", 8)           \
	X(U64, "U64", 8)

enum hb_dtype {
	HB_DTYPE_INVALID = 0,
#define HB_DTYPE_ENUM_(sym, name, size) HB_DTYPE_##sym,
	HB_DTYPE_LIST(HB_DTYPE_ENUM_)
#undef HB_DTYPE_ENUM_
	HB_DTYPE_COUNT_
};

/*
 * Look up a name of len bytes (need not be NUL-terminated; an embedded NUL
 * never matches).  Exact, case-sensitive.  Returns 0, or HB_ERR_NOTFOUND for
 * a name not in the list (*out untouched).
 */
int hb_dtype_from_name(const char *name, size_t len, enum hb_dtype *out);
/* The safetensors name, or NULL for a value outside the enum. */
const char *hb_dtype_name(enum hb_dtype t);
/* Bytes per element, or 0 for a value outside the enum. */
unsigned hb_dtype_size(enum hb_dtype t);

#endif
