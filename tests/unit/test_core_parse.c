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

/* The ids of text, or the offset where it was refused (-1 - offset). */
static long long ids_of(const char *text, size_t len, int32_t *first, size_t *n)
{
	int32_t *v = NULL;
	size_t at = 12345;
	int rc = hb_parse_id_list(text, len, &v, n, &at);

	if (rc)
		return -1 - (long long)at;
	*first = v[0];
	free(v);
	return 0;
}

static void id_lists(void)
{
	int32_t *v = NULL, f = 0;
	size_t n = 0, at = 0;

	CHECK_EQ_INT(hb_parse_id_list("1,2, 3 ,4\t5\n6\r\n", 15, &v, &n, &at), HB_OK);
	CHECK_EQ_U64(n, 6);
	for (size_t i = 0; v && i < n; i++)
		CHECK_EQ_INT(v[i], (int)i + 1);
	free(v);
	CHECK_EQ_INT(ids_of("  2147483647  ", 14, &f, &n), 0);
	CHECK_EQ_INT(f, INT32_MAX);
	CHECK_EQ_INT(ids_of("0007", 4, &f, &n), 0);
	CHECK_EQ_INT(f, 7);
	/* refusals name the byte where reading stopped */
	CHECK_EQ_INT(ids_of("", 0, &f, &n), -1 - 0);
	CHECK_EQ_INT(ids_of(" \n", 2, &f, &n), -1 - 2);
	CHECK_EQ_INT(ids_of("1,,2", 4, &f, &n), -1 - 2);
	CHECK_EQ_INT(ids_of("1,2,", 4, &f, &n), -1 - 4);
	CHECK_EQ_INT(ids_of(",1", 2, &f, &n), -1 - 0);
	CHECK_EQ_INT(ids_of("1,-2", 4, &f, &n), -1 - 2);
	CHECK_EQ_INT(ids_of("+1", 2, &f, &n), -1 - 0);
	CHECK_EQ_INT(ids_of("1 2 x\n", 6, &f, &n), -1 - 4);
	CHECK_EQ_INT(ids_of("12x", 3, &f, &n), -1 - 2);
	CHECK_EQ_INT(ids_of("5, 2147483648", 13, &f, &n), -1 - 3);
	CHECK_EQ_INT(ids_of("99999999999999999999999", 23, &f, &n), -1 - 0);
	CHECK_EQ_INT(ids_of("1;2", 3, &f, &n), -1 - 1);
	/* the whole length is read: a NUL is a byte like any other */
	CHECK_EQ_INT(ids_of("1 2\0 3", 6, &f, &n), -1 - 3);
	CHECK_EQ_INT(ids_of("1 2\0 3", 3, &f, &n), 0);
	CHECK_EQ_U64(n, 2);
	/* nothing is written on a refusal */
	v = (int32_t *)&f;
	n = 77;
	CHECK_EQ_INT(hb_parse_id_list("1,", 2, &v, &n, NULL), HB_ERR_INVALID);
	CHECK(v == (int32_t *)&f);
	CHECK_EQ_U64(n, 77);
	/* more ids than the first allocation holds */
	{
		char big[3000];
		size_t k = 0;
		for (int i = 0; i < 1000; i++)
			k += (size_t)snprintf(big + k, sizeof(big) - k, "%d,", i % 10);
		big[k - 1] = '\n';
		v = NULL;
		CHECK_EQ_INT(hb_parse_id_list(big, k, &v, &n, NULL), HB_OK);
		CHECK_EQ_U64(n, 1000);
		CHECK(v && v[999] == 9 && v[500] == 0);
		free(v);
	}
}

HB_TEST_MAIN(T(unsigned_values), T(doubles), T(id_lists))
