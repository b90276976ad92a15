/* Unit tests: strict number parsing. */
#include "hb_base.h"
#include "harness.h"
#include "hb_err.h"
#include "hb_parse.h"

static void unsigned_values(void)
{
	uint64_t v = 99;

	CHECK_EQ_INT(hb_parse_u64("0", &v), HB_OK);
	CHECK_EQ_U64(v, 0);
	CHECK_EQ_INT(hb_parse_u64("18446744073709551615", &v), HB_OK);
	CHECK_EQ_U64(v, UINT64_MAX);
	v = 5;
	CHECK_EQ_INT(hb_parse_u64("18446744073709551616", &v), HB_ERR_OVERFLOW);
	CHECK_EQ_U64(v, 5);
	CHECK_EQ_INT(hb_parse_u64("", &v), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_parse_u64("-1", &v), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_parse_u64("+1", &v), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_parse_u64(" 1", &v), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_parse_u64("4x", &v), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_parse_u64("0x10", &v), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_parse_u64(NULL, &v), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_parse_u64_range("3", 1, 8, &v), HB_OK);
	CHECK_EQ_U64(v, 3);
	CHECK_EQ_INT(hb_parse_u64_range("0", 1, 8, &v), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_parse_u64_range("9", 1, 8, &v), HB_ERR_INVALID);
}

static void doubles(void)
{
	double d = 0;

	CHECK_EQ_INT(hb_parse_double("0.7", &d), HB_OK);
	CHECK(d == 0.7);
	CHECK_EQ_INT(hb_parse_double("1e-3", &d), HB_OK);
	CHECK(d == 1e-3);
	CHECK_EQ_INT(hb_parse_double("nan", &d), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_parse_double("inf", &d), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_parse_double("1e999", &d), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_parse_double("1.5x", &d), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_parse_double(" 1", &d), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_parse_double("", &d), HB_ERR_INVALID);
}

HB_TEST_MAIN(T(unsigned_values), T(doubles))
