/*
 * hb_checked.h: size and offset arithmetic that reports overflow.
 *
 * Every size, offset and count that comes from a file goes through these
 * before it is used, and bound checks are written as `n > size || pos >
 * size - n` so that the check itself cannot overflow.  Functions return 0 or
 * HB_ERR_OVERFLOW and never write *out on overflow.
 */
#ifndef HB_CHECKED_H
#define HB_CHECKED_H

#include "hb_base.h"
#include "hb_err.h"

static inline int hb_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	uint64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return HB_ERR_OVERFLOW;
	*out = r;
	return HB_OK;
}

static inline int hb_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	uint64_t r;
	if (__builtin_mul_overflow(a, b, &r))
		return HB_ERR_OVERFLOW;
	*out = r;
	return HB_OK;
}

static inline int hb_sub_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	if (b > a)
		return HB_ERR_OVERFLOW;
	*out = a - b;
	return HB_OK;
}

/* Round a up to a multiple of align (align > 0, any value, not only 2^k). */
static inline int hb_align_up_u64(uint64_t a, uint64_t align, uint64_t *out)
{
	uint64_t rem, r;
	if (align == 0)
		return HB_ERR_OVERFLOW;
	rem = a % align;
	if (rem == 0) {
		*out = a;
		return HB_OK;
	}
	if (__builtin_add_overflow(a, align - rem, &r))
		return HB_ERR_OVERFLOW;
	*out = r;
	return HB_OK;
}

static inline int hb_size_from_u64(uint64_t a, size_t *out)
{
	if (a > SIZE_MAX)
		return HB_ERR_OVERFLOW;
	*out = (size_t)a;
	return HB_OK;
}

/* True when [off, off+len) lies inside [0, size); written not to overflow. */
static inline bool hb_range_inside(uint64_t off, uint64_t len, uint64_t size)
{
	return len <= size && off <= size - len;
}

/* An offset usable as off_t (pread and friends take a signed 64-bit). */
static inline bool hb_offset_ok(uint64_t off, uint64_t len)
{
	return off <= (uint64_t)INT64_MAX && len <= (uint64_t)INT64_MAX - off;
}

#endif
