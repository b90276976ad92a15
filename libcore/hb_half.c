/*
 * hb_half.c: bit-exact 16-bit and 8-bit float conversions (see hb_half.h).
 */
#include "hb_base.h"
#include "hb_half.h"

#include <math.h>

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

float hb_bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

uint16_t hb_f32_to_bf16(float f)
{
	uint32_t u = f32_bits(f);

	if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
		return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN, sign kept */
	/* Round to nearest even on the 16 discarded bits; an overflow of the
	 * mantissa carries into the exponent and reaches infinity correctly. */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

float hb_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;

	if (exp == 0x1f)
		return bits_f32(sign | 0x7f800000u | (man << 13));
	if (exp == 0) {
		/* zero or subnormal: value = man * 2^-24, exact in float */
		float v = ldexpf((float)man, -24);
		return sign ? -v : v;
	}
	return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t hb_f32_to_f16(float f)
{
	uint32_t u = f32_bits(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
	uint32_t exp = (u >> 23) & 0xffu;
	uint32_t man = u & 0x7fffffu;
	int e;

	if (exp == 0xff)
		return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
	e = (int)exp - 127 + 15;
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (e <= 0) {
		/* Subnormal half (or zero): shift the full mantissa with its
		 * implicit bit right, rounding to nearest even. */
		uint32_t full, shift, rem, half_point, r;
		if (e < -10)
			return sign;
		full = man | 0x800000u;
		shift = (uint32_t)(14 - e);
		r = full >> shift;
		rem = full & ((1u << shift) - 1);
		half_point = 1u << (shift - 1);
		if (rem > half_point || (rem == half_point && (r & 1u)))
			r++;
		return (uint16_t)(sign | r);
	}
	{
		uint32_t r = ((uint32_t)e << 10) | (man >> 13);
		uint32_t rem = man & 0x1fffu;
		if (rem > 0x1000u || (rem == 0x1000u && (r & 1u)))
			r++; /* may carry into the exponent, up to infinity */
		return (uint16_t)(sign | r);
	}
}

float hb_fp8e4m3_to_f32(uint8_t v)
{
	uint32_t sign = v >> 7;
	uint32_t exp = (v >> 3) & 0xfu;
	uint32_t man = v & 0x7u;
	float r;

	if (exp == 0xf && man == 0x7)
		return sign ? -NAN : NAN;
	if (exp == 0)
		r = ldexpf((float)man, -9); /* subnormal: man/8 * 2^-6 */
	else
		r = ldexpf(1.0f + (float)man / 8.0f, (int)exp - 7);
	return sign ? -r : r;
}

void hb_bf16_to_f32_n(const uint16_t *in, float *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = hb_bf16_to_f32(in[i]);
}

void hb_f16_to_f32_n(const uint16_t *in, float *out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = hb_f16_to_f32(in[i]);
}
