/*
 * hb_affine4.c: the MLX affine 4-bit codec (see hb_affine4.h for the byte
 * layout, the quantiser and the error bound).
 *
 * Owns encoding and decoding of whole groups.  It does not know about
 * tensors, stores or files; callers pass rows and name them for errors.
 */
#include "hb_base.h"
#include "hb_affine4.h"
#include "hb_checked.h"
#include "hb_half.h"

#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

bool hb_affine4_group_ok(uint32_t group)
{
	return group == 32 || group == 64 || group == 128;
}

size_t hb_affine4_group_bytes(uint32_t group)
{
	return hb_affine4_group_ok(group) ? group / 2u + 4u : 0;
}

int hb_affine4_encoded_size(uint64_t n, uint32_t group, uint64_t *bytes,
			    struct hb_error *err)
{
	if (!hb_affine4_group_ok(group))
		return hb_error_set(err, HB_ERR_UNSUPPORTED, "affine4.group_size",
				    "group size %" PRIu32 " is not 32, 64 or 128",
				    group);
	if (n % group != 0)
		return hb_error_set(err, HB_ERR_UNSUPPORTED, "affine4.weights",
				    "%" PRIu64 " weights are not a whole number "
				    "of groups of %" PRIu32 " (never padded)",
				    n, group);
	if (hb_mul_u64(n / group, hb_affine4_group_bytes(group), bytes))
		return hb_error_set(err, HB_ERR_OVERFLOW, "affine4.weights",
				    "encoded size of %" PRIu64 " weights overflows",
				    n);
	return HB_OK;
}

#if !defined(__SSE2__)
/* Round half to even for 0 < x < 15 (the caller clamps first, so floor is
 * exact and the difference is exact in double). */
static unsigned round_half_even(double x)
{
	double f = floor(x);
	double d = x - f;
	unsigned q = (unsigned)f;

	if (d > 0.5 || (d == 0.5 && (q & 1u)))
		q++;
	return q;
}
#endif

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v & 0xffu);
	p[1] = (uint8_t)(v >> 8);
}

static uint16_t get_le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static int encode_group(const float *w, uint32_t group, uint8_t *out,
			size_t base, const char *what, struct hb_error *err)
{
	float lo = w[0], hi = w[0], scale_f, bias_f;
	uint16_t scale_h, bias_h;
	double r;
	bool scanned = false;

#if defined(__SSE2__)
	/* The range four weights at a time when every weight is finite; the
	 * scalar loop below decides otherwise (which weight is refused), and
	 * when an end is a zero (MINPS and MAXPS pick either sign of equal
	 * zeros, the loop keeps the first one met).  The scalar loop took
	 * 1.0 ns a weight, as much as half the quantising (measured). */
	{
		const __m128i expo = _mm_set1_epi32(0x7f800000);
		__m128 vlo = _mm_loadu_ps(w), vhi = vlo;
		__m128i bad = _mm_setzero_si128();
		for (uint32_t i = 0; i < group; i += 4) {
			__m128 v = _mm_loadu_ps(w + i);
			bad = _mm_or_si128(bad, _mm_cmpeq_epi32(_mm_and_si128(_mm_castps_si128(v), expo), expo));
			vlo = _mm_min_ps(vlo, v);
			vhi = _mm_max_ps(vhi, v);
		}
		if (!_mm_movemask_epi8(bad)) {
			vlo = _mm_min_ps(vlo, _mm_shuffle_ps(vlo, vlo, 0x4e));
			vlo = _mm_min_ps(vlo, _mm_shuffle_ps(vlo, vlo, 0xb1));
			vhi = _mm_max_ps(vhi, _mm_shuffle_ps(vhi, vhi, 0x4e));
			vhi = _mm_max_ps(vhi, _mm_shuffle_ps(vhi, vhi, 0xb1));
			lo = _mm_cvtss_f32(vlo);
			hi = _mm_cvtss_f32(vhi);
			scanned = lo != 0.0f && hi != 0.0f;
			if (!scanned)
				lo = hi = w[0];
		}
	}
#endif
	for (uint32_t i = 0; !scanned && i < group; i++) {
		if (!isfinite(w[i])) {
			char field[HB_ERROR_FIELD_MAX];
			snprintf(field, sizeof(field), "%s[%zu]", what, base + i);
			return hb_error_set(err, HB_ERR_NONFINITE, field,
					    "weight is not finite (%g)",
					    (double)w[i]);
		}
		if (w[i] < lo)
			lo = w[i];
		if (w[i] > hi)
			hi = w[i];
	}
	/* Round the parameters first and quantise against the stored values:
	 * that is what makes the documented bound hold. */
	bias_h = hb_f32_to_bf16(lo);
	r = ((double)hi - (double)lo) / 15.0;
	scale_h = hb_f32_to_bf16((float)r);
	bias_f = hb_bf16_to_f32(bias_h);
	scale_f = hb_bf16_to_f32(scale_h);
	if (!isfinite(bias_f) || !isfinite(scale_f)) {
		char field[HB_ERROR_FIELD_MAX];
		snprintf(field, sizeof(field), "%s[%zu]", what, base);
		return hb_error_set(err, HB_ERR_OVERFLOW, field,
				    "group range [%g, %g] does not fit bfloat16 "
				    "scale and bias", (double)lo, (double)hi);
	}
#if defined(__SSE2__)
	/* The same double arithmetic two weights at a time.  Clamped to [0, 15]
	 * first, CVTPD2DQ rounds in the current (default, never changed) mode,
	 * to nearest with ties to even: exactly the scalar branch below, 7.5x
	 * faster (19.7 -> 2.6 ns a weight with the range scan, measured; the
	 * scalar floor() is a libm call at the x86-64 baseline). */
	if (scale_f == 0.0f) {
		memset(out, 0, group / 2u);
	} else {
		const __m128d b = _mm_set1_pd((double)bias_f), s = _mm_set1_pd((double)scale_f);
		const __m128d zero = _mm_setzero_pd(), fifteen = _mm_set1_pd(15.0);
		for (uint32_t k = 0; k < group / 2u; k++) {
			__m128d x = _mm_set_pd((double)w[2 * k + 1], (double)w[2 * k]);
			__m128i q;
			x = _mm_div_pd(_mm_sub_pd(x, b), s);
			q = _mm_cvtpd_epi32(_mm_min_pd(_mm_max_pd(x, zero), fifteen));
			out[k] = (uint8_t)(_mm_cvtsi128_si32(q) | (_mm_extract_epi16(q, 2) << 4));
		}
	}
#else
	for (uint32_t k = 0; k < group / 2u; k++) {
		unsigned q[2];
		for (unsigned j = 0; j < 2; j++) {
			double x;
			if (scale_f == 0.0f) {
				q[j] = 0;
				continue;
			}
			x = ((double)w[2 * k + j] - (double)bias_f) / (double)scale_f;
			q[j] = x <= 0.0 ? 0u : x >= 15.0 ? 15u : round_half_even(x);
		}
		out[k] = (uint8_t)(q[0] | (q[1] << 4));
	}
#endif
	put_le16(out + group / 2u, scale_h);
	put_le16(out + group / 2u + 2u, bias_h);
	return HB_OK;
}

int hb_affine4_encode(const float *w, size_t n, uint32_t group, uint8_t *out,
		      size_t out_len, const char *what, struct hb_error *err)
{
	uint64_t need = 0;
	size_t gbytes;
	int rc = hb_affine4_encoded_size(n, group, &need, err);

	if (rc)
		return rc;
	if (need != out_len)
		return hb_error_set(err, HB_ERR_INVALID, "affine4.output",
				    "output is %zu bytes, %" PRIu64 " needed",
				    out_len, need);
	if (!what)
		what = "affine4.weights";
	gbytes = hb_affine4_group_bytes(group);
	for (size_t g = 0; g < n / group; g++) {
		rc = encode_group(w + g * group, group, out + g * gbytes,
				  g * group, what, err);
		if (rc)
			return rc;
	}
	return HB_OK;
}

int hb_affine4_decode(const uint8_t *in, size_t in_len, uint32_t group,
		      float *out, size_t n, const char *what,
		      struct hb_error *err)
{
	uint64_t need = 0;
	size_t gbytes;
	int rc = hb_affine4_encoded_size(n, group, &need, err);

	if (rc)
		return rc;
	if (need != in_len)
		return hb_error_set(err, HB_ERR_INVALID, "affine4.input",
				    "%zu encoded bytes do not hold %zu weights "
				    "(%" PRIu64 " bytes)", in_len, n, need);
	if (!what)
		what = "affine4.groups";
	gbytes = hb_affine4_group_bytes(group);
	for (size_t g = 0; g < n / group; g++) {
		const uint8_t *p = in + g * gbytes;
		float scale = hb_bf16_to_f32(get_le16(p + group / 2u));
		float bias = hb_bf16_to_f32(get_le16(p + group / 2u + 2u));
		float *o = out + g * group;

		if (!isfinite(scale) || !isfinite(bias)) {
			char field[HB_ERROR_FIELD_MAX];
			snprintf(field, sizeof(field), "%s[%zu].%s", what, g,
				 isfinite(scale) ? "bias" : "scale");
			return hb_error_set_at(err, HB_ERR_NONFINITE, field,
					       g * gbytes + group / 2u +
					       (isfinite(scale) ? 2u : 0u),
					       "bfloat16 value is not finite");
		}
		for (uint32_t k = 0; k < group / 2u; k++) {
			/* scale * q is exact in float32, so the sum is rounded
			 * once however the compiler schedules it. */
			float p0 = scale * (float)(p[k] & 0x0fu);
			float p1 = scale * (float)(p[k] >> 4);
			o[2 * k] = p0 + bias;
			o[2 * k + 1] = p1 + bias;
		}
	}
	return HB_OK;
}

double hb_affine4_error_bound(float lo, float hi)
{
	double span = (double)hi - (double)lo;
	double alo = fabs((double)lo), ahi = fabs((double)hi);
	double big = alo > ahi ? alo : ahi;

	return span * (1.0 / 30.0 + ldexp(1.0, -7)) + ldexp(alo, -8) +
	       ldexp(big, -22) + ldexp(1.0, -126);
}
