/*
 * fp_ref.c: test-only float-format and affine4-bound references (see
 * fp_ref.h).  Deliberately written another way than the library: the bf16
 * rounding compares the discarded half against the halfway point instead
 * of adding a bias, the binary16 decode goes through ldexp instead of bit
 * moves, and the affine4 bound is the case analysis of the encoding rule
 * instead of hb_affine4_error_bound's closed form.
 */
#include "hb_base.h"
#include "fp_ref.h"
#include "harness.h"

#include <float.h>
#include <math.h>

uint32_t fp_ref_f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

float fp_ref_bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

uint16_t fp_ref_bf16_rne_bits(uint32_t u)
{
	uint32_t exponent = (u >> 23) & 0xffu, fraction = u & 0x7fffffu;
	uint32_t kept = u >> 16, dropped = u & 0xffffu;

	if (exponent == 0xffu && fraction != 0)
		return (uint16_t)(kept | 0x0040u); /* NaN: quiet, sign and top payload kept */
	/* above half way, or exactly half way with an odd kept part: round up.
	 * Incrementing the 16-bit pattern is the next representable magnitude
	 * (a fraction overflow moves into the exponent; 0x7f7f + 1 is +inf). */
	if (dropped > 0x8000u || (dropped == 0x8000u && (kept & 1u)))
		kept++;
	return (uint16_t)kept;
}

uint16_t fp_ref_bf16_rne(float f)
{
	return fp_ref_bf16_rne_bits(fp_ref_f32_bits(f));
}

float fp_ref_bf16_to_f32(uint16_t h)
{
	return fp_ref_bits_f32((uint32_t)h << 16);
}

double fp_ref_f16_to_double(uint16_t h)
{
	int sign = h >> 15, exponent = (h >> 10) & 0x1f, fraction = h & 0x3ff;
	double v;

	if (exponent == 0x1f)
		v = fraction ? NAN : INFINITY;
	else if (exponent == 0)
		v = ldexp((double)fraction, -24); /* subnormal: fraction x 2^-24 */
	else
		v = ldexp((double)(1024 + fraction), exponent - 25); /* 1.f x 2^(e-15) */
	return sign ? -v : v;
}

double fp_ref_affine4_bound(float lo, float hi)
{
	float bias = fp_ref_bf16_to_f32(fp_ref_bf16_rne(lo));
	double r = ((double)hi - (double)lo) / 15.0;
	float scale, rf;
	double top, worst, decode, slack;

	if (!isfinite(lo) || !isfinite(hi) || hi < lo || !isfinite(bias))
		return INFINITY;
	if (r > (double)FLT_MAX)
		return INFINITY; /* the float32 quotient itself overflows */
	rf = (float)r;
	scale = fp_ref_bf16_to_f32(fp_ref_bf16_rne(rf));
	if (!isfinite(scale))
		return INFINITY;
	top = (double)bias + 15.0 * (double)scale;
	if (scale == 0.0f) {
		double a = fabs((double)lo - (double)bias), b = fabs((double)hi - (double)bias);
		worst = a > b ? a : b;
		top = bias;
	} else {
		double below = (double)bias - (double)lo, above = (double)hi - top;
		worst = (double)scale / 2.0 + 15.0 * (double)scale * ldexp(1.0, -50);
		worst = hb_test_max_nan(worst, below);
		worst = hb_test_max_nan(worst, above);
	}
	decode = ldexp(fabs(top) > fabs((double)bias) ? fabs(top) : fabs((double)bias), -24) + ldexp(1.0, -150);
	/* the double subtractions above, in case an exponent gap made one inexact */
	slack = ldexp(fabs((double)lo) + fabs((double)hi) + fabs(top), -50);
	return worst + decode + slack;
}
