/*
 * Unit tests: bfloat16 / float16 / FP8 conversions.  The float16 narrowing
 * is cross-checked against the compiler's own _Float16 conversion (an
 * independent implementation) over every half value and a large sample of
 * floats.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb_half.h"

#include <math.h>

static uint32_t bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static void bf16_rounding(void)
{
	/* 1 + 2^-8 is exactly halfway between two bf16 values: ties to even. */
	CHECK_EQ_INT(hb_f32_to_bf16(from_bits(0x3f808000u)), 0x3f80);
	CHECK_EQ_INT(hb_f32_to_bf16(from_bits(0x3f818000u)), 0x3f82);
	CHECK_EQ_INT(hb_f32_to_bf16(from_bits(0x3f808001u)), 0x3f81);
	CHECK_EQ_INT(hb_f32_to_bf16(from_bits(0x3f807fffu)), 0x3f80);
	CHECK_EQ_INT(hb_f32_to_bf16(-0.0f), 0x8000);
	CHECK_EQ_INT(hb_f32_to_bf16(INFINITY), 0x7f80);
	CHECK_EQ_INT(hb_f32_to_bf16(-INFINITY), 0xff80);
	/* The largest float rounds up to infinity, as in PyTorch. */
	CHECK_EQ_INT(hb_f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80);
	/* A NaN whose payload lives only in the low bits stays a NaN. */
	CHECK(isnan(hb_bf16_to_f32(hb_f32_to_bf16(from_bits(0x7f800001u)))));
	CHECK_EQ_INT(hb_f32_to_bf16(from_bits(0xff800001u)) & 0x8000, 0x8000);
}

static void bf16_round_trip_exhaustive(void)
{
	for (uint32_t h = 0; h < 65536; h++) {
		float f = hb_bf16_to_f32((uint16_t)h);
		CHECK_EQ_U64(bits(f), h << 16);
		if (isnan(f))
			CHECK(isnan(hb_bf16_to_f32(hb_f32_to_bf16(f))));
		else if (hb_f32_to_bf16(f) != h)
			CHECK_EQ_INT(hb_f32_to_bf16(f), h);
	}
}

static void f16_matches_compiler_exhaustive(void)
{
	for (uint32_t h = 0; h < 65536; h++) {
		_Float16 ref;
		uint16_t hh = (uint16_t)h;
		float mine = hb_f16_to_f32(hh);
		memcpy(&ref, &hh, 2);
		if (isnan((float)ref)) {
			CHECK(isnan(mine));
			CHECK(isnan(hb_f16_to_f32(hb_f32_to_f16(mine))));
			continue;
		}
		if (bits(mine) != bits((float)ref))
			CHECK_EQ_U64(bits(mine), bits((float)ref));
		if (hb_f32_to_f16(mine) != hh)
			CHECK_EQ_INT(hb_f32_to_f16(mine), hh);
	}
}

/* xorshift: deterministic, covers every exponent including subnormals. */
static uint32_t next_rand(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static void f16_rounding_matches_compiler(void)
{
	uint32_t seed = 0x12345678u;
	unsigned mismatches = 0;

	for (unsigned i = 0; i < 4000000; i++) {
		float f = from_bits(next_rand(&seed));
		_Float16 ref = (_Float16)f;
		uint16_t want;
		memcpy(&want, &ref, 2);
		if (isnan(f))
			continue;
		if (hb_f32_to_f16(f) != want && mismatches++ < 5)
			CHECK_EQ_INT(hb_f32_to_f16(f), want);
	}
	CHECK_EQ_INT(mismatches, 0);
	/* Named edges: ties to even at 1 + 2^-11, subnormal ties, overflow. */
	CHECK_EQ_INT(hb_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);
	CHECK_EQ_INT(hb_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02);
	CHECK_EQ_INT(hb_f32_to_f16(ldexpf(1.0f, -25)), 0x0000);
	CHECK_EQ_INT(hb_f32_to_f16(ldexpf(3.0f, -25)), 0x0002);
	CHECK_EQ_INT(hb_f32_to_f16(65520.0f), 0x7c00);
	CHECK_EQ_INT(hb_f32_to_f16(65519.0f), 0x7bff);
}

/* FP8 E4M3 "fn": values from the OCP FP8 specification's table. */
static void fp8_e4m3(void)
{
	CHECK(hb_fp8e4m3_to_f32(0x00) == 0.0f);
	CHECK(signbit(hb_fp8e4m3_to_f32(0x80)));
	CHECK(hb_fp8e4m3_to_f32(0x38) == 1.0f);
	CHECK(hb_fp8e4m3_to_f32(0xb8) == -1.0f);
	CHECK(hb_fp8e4m3_to_f32(0x7e) == 448.0f);   /* the largest finite */
	CHECK(hb_fp8e4m3_to_f32(0x08) == ldexpf(1.0f, -6)); /* smallest normal */
	CHECK(hb_fp8e4m3_to_f32(0x01) == ldexpf(1.0f, -9)); /* smallest subnormal */
	CHECK(hb_fp8e4m3_to_f32(0x07) == ldexpf(7.0f, -9));
	CHECK(hb_fp8e4m3_to_f32(0x78) == 256.0f);   /* exponent 15 is finite */
	CHECK(isnan(hb_fp8e4m3_to_f32(0x7f)));
	CHECK(isnan(hb_fp8e4m3_to_f32(0xff)));
	CHECK(hb_fp8e4m3_to_f32(0x3c) == 1.5f);
}

static void bulk_widening(void)
{
	uint16_t in[3] = {0x3f80, 0xc000, 0x0000};
	uint16_t hin[2] = {0x3c00, 0xc000};
	float out[3];

	hb_bf16_to_f32_n(in, out, 3);
	CHECK(out[0] == 1.0f && out[1] == -2.0f && out[2] == 0.0f);
	hb_f16_to_f32_n(hin, out, 2);
	CHECK(out[0] == 1.0f && out[1] == -2.0f);
}

HB_TEST_MAIN(T(bf16_rounding), T(bf16_round_trip_exhaustive),
	     T(f16_matches_compiler_exhaustive), T(f16_rounding_matches_compiler),
	     T(fp8_e4m3), T(bulk_widening))
