/* Unit tests: checked size arithmetic. */
#include "hb_base.h"
#include "harness.h"
#include "hb_checked.h"

static void add_and_mul(void)
{
	uint64_t r = 7;

	CHECK_EQ_INT(hb_add_u64(1, 2, &r), HB_OK);
	CHECK_EQ_U64(r, 3);
	r = 7;
	CHECK_EQ_INT(hb_add_u64(UINT64_MAX, 1, &r), HB_ERR_OVERFLOW);
	CHECK_EQ_U64(r, 7); /* untouched on overflow */
	CHECK_EQ_INT(hb_add_u64(UINT64_MAX - 1, 1, &r), HB_OK);
	CHECK_EQ_U64(r, UINT64_MAX);
	CHECK_EQ_INT(hb_mul_u64(UINT64_MAX / 3, 3, &r), HB_OK);
	CHECK_EQ_INT(hb_mul_u64((UINT64_MAX / 3) + 1, 3, &r), HB_ERR_OVERFLOW);
	CHECK_EQ_INT(hb_mul_u64(0, UINT64_MAX, &r), HB_OK);
	CHECK_EQ_U64(r, 0);
	CHECK_EQ_INT(hb_sub_u64(3, 4, &r), HB_ERR_OVERFLOW);
	CHECK_EQ_INT(hb_sub_u64(4, 3, &r), HB_OK);
	CHECK_EQ_U64(r, 1);
}

static void align_up(void)
{
	uint64_t r = 0;

	CHECK_EQ_INT(hb_align_up_u64(0, 4096, &r), HB_OK);
	CHECK_EQ_U64(r, 0);
	CHECK_EQ_INT(hb_align_up_u64(1, 4096, &r), HB_OK);
	CHECK_EQ_U64(r, 4096);
	CHECK_EQ_INT(hb_align_up_u64(4096, 4096, &r), HB_OK);
	CHECK_EQ_U64(r, 4096);
	/* The PLE row alignment from AFN-003: 320,001,446 -> 320,001,536. */
	CHECK_EQ_INT(hb_align_up_u64(320001446u, 128, &r), HB_OK);
	CHECK_EQ_U64(r, 320001536u);
	/* Not only powers of two. */
	CHECK_EQ_INT(hb_align_up_u64(10, 36, &r), HB_OK);
	CHECK_EQ_U64(r, 36);
	CHECK_EQ_INT(hb_align_up_u64(UINT64_MAX - 1, 4096, &r), HB_ERR_OVERFLOW);
	CHECK_EQ_INT(hb_align_up_u64(5, 0, &r), HB_ERR_OVERFLOW);
}

static void range_checks(void)
{
	CHECK(hb_range_inside(0, 0, 0));
	CHECK(hb_range_inside(0, 10, 10));
	CHECK(!hb_range_inside(1, 10, 10));
	CHECK(!hb_range_inside(11, 0, 10));
	/* The naive off + len <= size would wrap and accept this. */
	CHECK(!hb_range_inside(UINT64_MAX, 2, 10));
	CHECK(!hb_range_inside(2, UINT64_MAX, 10));
	CHECK(hb_offset_ok((uint64_t)INT64_MAX, 0));
	CHECK(!hb_offset_ok((uint64_t)INT64_MAX, 1));
	CHECK(!hb_offset_ok((uint64_t)INT64_MAX + 1, 0));
}

HB_TEST_MAIN(T(add_and_mul), T(align_up), T(range_checks))
