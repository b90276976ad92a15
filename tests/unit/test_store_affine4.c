/*
 * Unit tests: the MLX affine 4-bit codec.
 *
 * Byte equality with the independent Python reference
 * (tests/fixtures/codec/affine4-cases.json, made by
 * scripts/affine4-reference.py), three groups worked out by hand, the
 * documented per-group error bound on random data, and every refusal.
 */
#include "hb_base.h"
#include "harness.h"
#include "codec/hb_affine4.h"
#include "hb_half.h"
#include "hb_json.h"
#include "hb_sha256.h"

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

static int hex_u32(const char *s, uint32_t *out)
{
	uint8_t b[4];
	if (strlen(s) != 8 || hb_hex_decode(s, b, 4))
		return -1;
	*out = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	       (uint32_t)b[2] << 8 | b[3];
	return 0;
}

/* ------------------------------------------------------------ fixtures */

static void check_case(const cJSON *c, unsigned *groups)
{
	const cJSON *inputs = cJSON_GetObjectItemCaseSensitive(c, "inputs");
	const cJSON *encoded = cJSON_GetObjectItemCaseSensitive(c, "encoded");
	const cJSON *decoded = cJSON_GetObjectItemCaseSensitive(c, "decoded");
	const cJSON *in_bits = cJSON_GetObjectItemCaseSensitive(inputs, "f32_bits");
	const cJSON *dec_bits = cJSON_GetObjectItemCaseSensitive(decoded, "f32_bits");
	const char *name = NULL, *hex = NULL, *prov = NULL;
	uint64_t group = 0;
	size_t n, nbytes;
	float *w, *d;
	uint8_t *want, *got;

	CHECK(hb_json_str(c, "name", "name", &name, NULL) == 0);
	CHECK(hb_json_u64(c, "group_size", "group_size", &group, NULL) == 0);
	CHECK(hb_json_str(encoded, "hex", "hex", &hex, NULL) == 0);
	CHECK(hb_json_str(inputs, "provenance", "p", &prov, NULL) == 0);
	CHECK_STR(prov, "contract-control");
	CHECK(hb_json_str(encoded, "provenance", "p", &prov, NULL) == 0);
	CHECK_STR(prov, "independent-cross-check");
	CHECK(hb_json_str(decoded, "provenance", "p", &prov, NULL) == 0);
	CHECK_STR(prov, "independent-cross-check");
	if (!name || !hex || !cJSON_IsArray(in_bits) || !cJSON_IsArray(dec_bits))
		return;
	n = (size_t)cJSON_GetArraySize(in_bits);
	nbytes = strlen(hex) / 2;
	CHECK_EQ_U64(cJSON_GetArraySize(dec_bits), n);
	CHECK_EQ_U64(nbytes, n / group * (group / 2 + 4));
	w = calloc(n, sizeof(float));
	d = calloc(n, sizeof(float));
	want = calloc(nbytes, 1);
	got = calloc(nbytes, 1);
	CHECK(hb_hex_decode(hex, want, nbytes) == 0);
	for (size_t i = 0; i < n; i++) {
		uint32_t u = 0;
		CHECK(hex_u32(cJSON_GetArrayItem(in_bits, (int)i)->valuestring, &u) == 0);
		w[i] = bits_f32(u);
	}
	CHECK_EQ_INT(hb_affine4_encode(w, n, (uint32_t)group, got, nbytes, NULL, NULL),
		     HB_OK);
	if (memcmp(got, want, nbytes) != 0)
		hb_check_fail(__FILE__, __LINE__, "case %s: encoded bytes differ "
			      "from the reference", name);
	/* decode the reference bytes, compare bit-exactly */
	CHECK_EQ_INT(hb_affine4_decode(want, nbytes, (uint32_t)group, d, n, NULL,
				       NULL), HB_OK);
	for (size_t i = 0; i < n; i++) {
		uint32_t u = 0;
		CHECK(hex_u32(cJSON_GetArrayItem(dec_bits, (int)i)->valuestring, &u) == 0);
		if (f32_bits(d[i]) != u)
			hb_check_fail(__FILE__, __LINE__, "case %s: decoded[%zu] "
				      "%08x != reference %08x", name, i,
				      f32_bits(d[i]), u);
	}
	*groups += (unsigned)(n / group);
	free(w);
	free(d);
	free(want);
	free(got);
}

static void matches_independent_reference(void)
{
	char path[4096];
	cJSON *doc = NULL, *cases, *c;
	unsigned n = 0, groups = 0;

	snprintf(path, sizeof(path), "%s/tests/fixtures/codec/affine4-cases.json",
		 hb_test_srcdir());
	CHECK_EQ_INT(hb_json_parse_file(path, 1 << 20, &doc, NULL), HB_OK);
	if (!doc)
		return;
	cases = cJSON_GetObjectItemCaseSensitive(doc, "cases");
	cJSON_ArrayForEach(c, cases) {
		check_case(c, &groups);
		n++;
	}
	/* exactly the cases the script writes; a lost case is a failure */
	CHECK_EQ_INT(n, 10);
	CHECK_EQ_INT(groups, 12);
	cJSON_Delete(doc);
}

/* ------------------------------------------------------ hand-checked */

/* Constant group of 64 x -2.0: hi - lo = 0, so scale = bf16(0) = 0x0000,
 * bias = bf16(-2.0) = 0xc000 (sign 1, exponent 128, mantissa 0), every
 * q = 0: 32 zero bytes, then 00 00 (scale LE), 00 c0 (bias LE). */
static void hand_constant(void)
{
	float w[64], d[64];
	uint8_t want[36] = {0}, got[36];

	for (int i = 0; i < 64; i++)
		w[i] = -2.0f;
	want[34] = 0x00;
	want[35] = 0xc0;
	CHECK_EQ_INT(hb_affine4_encode(w, 64, 64, got, sizeof(got), NULL, NULL), 0);
	CHECK(memcmp(got, want, 36) == 0);
	CHECK_EQ_INT(hb_affine4_decode(got, 36, 64, d, 64, NULL, NULL), 0);
	for (int i = 0; i < 64; i++)
		CHECK(d[i] == -2.0f);
}

/* Group 32, w_i = 0.5 * (i % 16): lo 0, hi 7.5, (hi - lo)/15 = 0.5 =
 * bf16 0x3f00, bias 0x0000, q_i = w_i / 0.5 = i % 16.  Byte k holds q_2k
 * low and q_2k+1 high: 0x10 0x32 0x54 0x76 0x98 0xba 0xdc 0xfe, twice;
 * then 00 3f, 00 00. */
static void hand_ramp_g32(void)
{
	static const uint8_t want[20] = {
		0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe,
		0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe,
		0x00, 0x3f, 0x00, 0x00,
	};
	float w[32], d[32];
	uint8_t got[20];

	for (int i = 0; i < 32; i++)
		w[i] = 0.5f * (float)(i % 16);
	CHECK_EQ_INT(hb_affine4_encode(w, 32, 32, got, 20, NULL, NULL), 0);
	CHECK(memcmp(got, want, 20) == 0);
	CHECK_EQ_INT(hb_affine4_decode(got, 20, 32, d, 32, NULL, NULL), 0);
	for (int i = 0; i < 32; i++)
		CHECK(d[i] == w[i]);
}

/* Group 32, w = {-1, 2, 0, 0.5, 1, -0.9, then 26 x 0.1}:
 * lo -1, hi 2, (2 - -1)/15 = 0.2 -> f32 0x3e4ccccd -> bf16: the dropped
 * half 0xcccd > 0x8000 rounds up to 0x3e4d = 0.2001953125; bias bf16(-1) =
 * 0xbf80.  x = (w + 1) / 0.2001953125:
 *   -1 -> 0 -> q 0;  2 -> 14.985 -> 15;  0 -> 4.995 -> 5;  0.5 -> 7.493 -> 7;
 *   1 -> 9.990 -> 10;  -0.9 -> 0.4995 -> 0;  0.1 -> 5.4946 -> 5.
 * Bytes: f0 75 0a, then 13 x 55, then 4d 3e, 80 bf.  Decoded q 15 is
 * 15 * 0.2001953125 - 1 = 2.0029296875 exactly. */
static void hand_mixed_g32(void)
{
	uint8_t want[20], got[20];
	float w[32], d[32];

	w[0] = -1.0f, w[1] = 2.0f, w[2] = 0.0f, w[3] = 0.5f, w[4] = 1.0f;
	w[5] = -0.9f;
	for (int i = 6; i < 32; i++)
		w[i] = 0.1f;
	want[0] = 0xf0, want[1] = 0x75, want[2] = 0x0a;
	for (int i = 3; i < 16; i++)
		want[i] = 0x55;
	want[16] = 0x4d, want[17] = 0x3e, want[18] = 0x80, want[19] = 0xbf;
	CHECK_EQ_INT(hb_affine4_encode(w, 32, 32, got, 20, NULL, NULL), 0);
	CHECK(memcmp(got, want, 20) == 0);
	CHECK_EQ_INT(hb_affine4_decode(got, 20, 32, d, 32, NULL, NULL), 0);
	CHECK(d[1] == 2.0029296875f);
	CHECK(d[0] == -1.0f);
	CHECK(d[2] == (float)(5 * 0.2001953125 - 1.0));
}

/* ---------------------------------------------------------- the bound */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static double uniform(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (double)(rng_state >> 11) / 9007199254740992.0;
}

static void error_within_bound(void)
{
	static const uint32_t groups[] = {32, 64, 128};
	static const double scales[] = {1e-30, 1e-6, 0.02, 1.0, 300.0, 1e20};
	double worst_ratio = 0.0;
	unsigned checked = 0;

	for (size_t gi = 0; gi < HB_ARRAY_LEN(groups); gi++)
	for (size_t si = 0; si < HB_ARRAY_LEN(scales); si++)
	for (int trial = 0; trial < 40; trial++) {
		uint32_t g = groups[gi];
		size_t n = (size_t)g * 4, nb = n / g * (g / 2 + 4);
		float *w = malloc(n * sizeof(float)), *d = malloc(n * sizeof(float));
		uint8_t *e = malloc(nb);
		double offset = (trial % 4 == 0) ? 0.0 : (uniform() - 0.5) * 8.0;

		for (size_t i = 0; i < n; i++) {
			w[i] = (float)(scales[si] * (offset + uniform() * 2.0 - 1.0));
			if (trial % 5 == 1 && i % 37 == 0) /* outliers */
				w[i] = (float)(scales[si] * 40.0 * (uniform() - 0.5));
		}
		CHECK_EQ_INT(hb_affine4_encode(w, n, g, e, nb, NULL, NULL), 0);
		CHECK_EQ_INT(hb_affine4_decode(e, nb, g, d, n, NULL, NULL), 0);
		for (size_t k = 0; k < n / g; k++) {
			float lo = w[k * g], hi = w[k * g];
			double bound;
			for (uint32_t i = 0; i < g; i++) {
				lo = fminf(lo, w[k * g + i]);
				hi = fmaxf(hi, w[k * g + i]);
			}
			bound = hb_affine4_error_bound(lo, hi);
			for (uint32_t i = 0; i < g; i++) {
				double errv = fabs((double)d[k * g + i] - (double)w[k * g + i]);
				if (!(errv <= bound))
					hb_check_fail(__FILE__, __LINE__,
						      "group %u scale %g: error %g > bound %g",
						      g, scales[si], errv, bound);
				worst_ratio = hb_test_max_nan(worst_ratio, errv / bound);
				checked++;
			}
		}
		free(w);
		free(d);
		free(e);
	}
	CHECK_EQ_INT(checked, 6 * 40 * 4 * (32 + 64 + 128));
	/* The bound is not vacuous: some weight comes within a factor of two
	 * of it (half-step rounding error is (hi-lo)/30, the bound's main
	 * term). */
	CHECK(worst_ratio > 0.5);
}

/* ------------------------------------------------------------ refusals */

static void refuses_partial_groups(void)
{
	float w[96] = {0};
	uint8_t out[64];
	uint64_t bytes = 0;
	struct hb_error err;

	hb_error_clear(&err);
	CHECK_EQ_INT(hb_affine4_encode(w, 96, 64, out, 54, NULL, &err),
		     HB_ERR_UNSUPPORTED);
	CHECK_STR(err.field, "affine4.weights");
	CHECK_EQ_INT(hb_affine4_encoded_size(96, 64, &bytes, NULL),
		     HB_ERR_UNSUPPORTED);
	CHECK_EQ_INT(hb_affine4_encoded_size(96, 48, &bytes, NULL),
		     HB_ERR_UNSUPPORTED);
	CHECK_EQ_INT(hb_affine4_encoded_size(96, 32, &bytes, NULL), 0);
	CHECK_EQ_U64(bytes, 60);
	CHECK_EQ_INT(hb_affine4_encoded_size(2560, 64, &bytes, NULL), 0);
	CHECK_EQ_U64(bytes, 40 * 36);
	CHECK_EQ_U64(hb_affine4_group_bytes(64), 36);
	CHECK_EQ_U64(hb_affine4_group_bytes(32), 20);
	CHECK_EQ_U64(hb_affine4_group_bytes(128), 68);
	CHECK_EQ_U64(hb_affine4_group_bytes(16), 0);
	/* wrong output length */
	CHECK_EQ_INT(hb_affine4_encode(w, 64, 64, out, 35, NULL, NULL),
		     HB_ERR_INVALID);
	CHECK_EQ_INT(hb_affine4_decode(out, 36, 64, w, 32, NULL, NULL),
		     HB_ERR_UNSUPPORTED);
	CHECK_EQ_INT(hb_affine4_decode(out, 35, 32, w, 32, NULL, NULL),
		     HB_ERR_INVALID);
}

static void refuses_nonfinite(void)
{
	float w[128];
	uint8_t out[72];
	struct hb_error err;

	for (int i = 0; i < 128; i++)
		w[i] = (float)i;
	w[70] = NAN;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_affine4_encode(w, 128, 64, out, 72, "blk.gate", &err),
		     HB_ERR_NONFINITE);
	CHECK_STR(err.field, "blk.gate[70]");
	w[70] = -INFINITY;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_affine4_encode(w, 128, 64, out, 72, NULL, &err),
		     HB_ERR_NONFINITE);
	CHECK_STR(err.field, "affine4.weights[70]");
	/* a range beyond bf16 */
	w[70] = -3.4e38f; /* bf16 rounds it to -infinity */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_affine4_encode(w, 128, 64, out, 72, NULL, &err),
		     HB_ERR_OVERFLOW);
	CHECK_STR(err.field, "affine4.weights[64]");
}

static void decoder_refuses_nonfinite_params(void)
{
	uint8_t enc[40] = {0};
	float d[64];
	struct hb_error err;

	enc[20 + 16] = 0x80, enc[20 + 17] = 0x7f; /* group 1 scale = +inf */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_affine4_decode(enc, 40, 32, d, 64, "ple.row", &err),
		     HB_ERR_NONFINITE);
	CHECK_STR(err.field, "ple.row[1].scale");
	CHECK_EQ_U64(err.offset, 36);
	memset(enc, 0, sizeof(enc));
	enc[19] = 0xff, enc[18] = 0xc0; /* group 0 bias = NaN */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_affine4_decode(enc, 40, 32, d, 64, NULL, &err),
		     HB_ERR_NONFINITE);
	CHECK_STR(err.field, "affine4.groups[0].bias");
	CHECK_EQ_U64(err.offset, 18);
}

/* A negative scale (MLX's own quantiser writes them) decodes as written. */
static void decoder_accepts_negative_scale(void)
{
	uint8_t enc[20] = {0};
	float d[32];

	enc[0] = 0x21;                 /* q0 = 1, q1 = 2 */
	enc[16] = 0x80, enc[17] = 0xbf; /* scale -1 */
	enc[18] = 0x20, enc[19] = 0x41; /* bias 10 */
	CHECK_EQ_INT(hb_affine4_decode(enc, 20, 32, d, 32, NULL, NULL), 0);
	CHECK(d[0] == 9.0f);
	CHECK(d[1] == 8.0f);
	CHECK(d[2] == 10.0f);
}

/* The range rule exactly: the first non-finite weight is the one named,
 * wherever it sits in its group; and of equal zeros the bias takes the
 * first met (a group whose minimum is zero stores +0 or -0 as its first
 * zero was), whatever lanes the encoder compares in. */
static void range_scan_is_exact(void)
{
	float w[64];
	uint8_t out[36];
	struct hb_error err;
	int wrong = 0;

	for (int bad = 0; bad < 64; bad++) {
		char want[48];
		for (int i = 0; i < 64; i++)
			w[i] = 0.25f * (float)(i % 7) - 0.5f;
		w[bad] = bad % 2 ? INFINITY : NAN;
		if (bad < 63)
			w[63] = NAN; /* a later one is not the one named */
		hb_error_clear(&err);
		snprintf(want, sizeof(want), "g[%d]", bad);
		wrong += hb_affine4_encode(w, 64, 64, out, 36, "g", &err) != HB_ERR_NONFINITE ||
			 strcmp(err.field, want) != 0;
		snprintf(want, sizeof(want), "g[%d]", 64 + bad);
		/* as the second group of two, the index counts from the first */
		{
			float two[128];
			for (int i = 0; i < 64; i++)
				two[i] = 1.0f;
			memcpy(two + 64, w, sizeof(w));
			hb_error_clear(&err);
			wrong += hb_affine4_encode(two, 128, 64, (uint8_t[72]){0}, 72, "g", &err) != HB_ERR_NONFINITE ||
				 strcmp(err.field, want) != 0;
		}
	}
	CHECK_EQ_INT(wrong, 0);
	/* zeros: the minimum is a zero, its sign the first zero's */
	for (int first = 0; first < 64; first++) {
		for (int sign = 0; sign < 2; sign++) {
			uint16_t bias;
			for (int i = 0; i < 64; i++)
				w[i] = 1.0f + (float)i;
			for (int i = first; i < 64; i += 5)
				w[i] = (i == first) == (sign == 1) ? -0.0f : 0.0f;
			CHECK_EQ_INT(hb_affine4_encode(w, 64, 64, out, 36, NULL, NULL), HB_OK);
			bias = (uint16_t)(out[34] | out[35] << 8);
			wrong += bias != (sign ? 0x8000u : 0x0000u);
		}
	}
	CHECK_EQ_INT(wrong, 0);
}

HB_TEST_MAIN(T(matches_independent_reference), T(hand_constant),
	     T(hand_ramp_g32), T(hand_mixed_g32), T(error_within_bound),
	     T(refuses_partial_groups), T(refuses_nonfinite),
	     T(decoder_refuses_nonfinite_params),
	     T(decoder_accepts_negative_scale), T(range_scan_is_exact))
