/*
 * Unit tests: hb_all_finite, the check every chunk runs over the values it
 * would publish (hb_session.c).  Cross-checked against isfinite() from
 * libm, value by value: every exponent, with every sign, at every position
 * of a 64-value block and of the ragged tail, and the special values.
 */
#include "hb_base.h"
#include "harness.h"
#include "math/hb_math.h"

#include <float.h>
#include <math.h>

static float from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

/* isfinite() over x[0..n): the reference */
static bool ref_finite(const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return false;
	return true;
}

/* every exponent and sign, with a few mantissas, alone in a finite array */
static void every_exponent(void)
{
	static const uint32_t mant[] = { 0, 1, 0x400000, 0x7fffff };
	float x[200] = { 0 };
	size_t checked = 0, mismatched = 0, nonfinite = 0;

	for (uint32_t e = 0; e < 256; e++)
		for (uint32_t sgn = 0; sgn < 2; sgn++)
			for (size_t k = 0; k < 4; k++) {
				float v = from_bits(sgn << 31 | e << 23 | mant[k]);
				size_t at = (e * 8 + sgn * 4 + k) % 200;
				for (size_t i = 0; i < 200; i++)
					x[i] = (float)i - 100.0f;
				x[at] = v;
				checked++;
				nonfinite += !isfinite(v);
				if (hb_all_finite(x, 200) != ref_finite(x, 200))
					mismatched++;
			}
	printf("# %zu arrays, %zu with one value not finite, %zu disagreed with isfinite()\n", checked, nonfinite,
	       mismatched);
	CHECK_EQ_U64(nonfinite, 8); /* exponent 255: +-inf and six NaNs */
	CHECK_EQ_U64(mismatched, 0);
}

/* one bad value at every position of arrays of every length up to 200 */
static void every_position(void)
{
	const float bad[] = { INFINITY, -INFINITY, NAN, -NAN, from_bits(0x7f800001u), from_bits(0xffc00001u) };
	const float good[] = { FLT_MAX, -FLT_MAX, 0.0f, -0.0f, from_bits(1), from_bits(0x807fffffu) };
	float x[200] = { 0 };
	size_t mismatched = 0, checked = 0;

	for (size_t n = 0; n <= 200; n++) {
		for (size_t i = 0; i < n; i++)
			x[i] = good[i % 6];
		if (!hb_all_finite(x, n))
			mismatched++;
		checked++;
		for (size_t at = 0; at < n; at++) {
			x[at] = bad[(n + at) % 6];
			if (hb_all_finite(x, n))
				mismatched++;
			checked++;
			x[at] = good[at % 6];
		}
	}
	printf("# %zu arrays of 0..200 values, %zu answered wrongly\n", checked, mismatched);
	CHECK_EQ_U64(mismatched, 0);
}

HB_TEST_MAIN(T(every_exponent), T(every_position))
