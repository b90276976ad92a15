/*
 * hb_simd_avx512_vbmi.c: the affine4 rows of hb_simd_avx512.c with the
 * nibble indices made by AVX512-VBMI's VPMULTISHIFTQB (Ice Lake and later,
 * AMD Zen 4): each block's eight bytes are broadcast from memory (a load,
 * no shuffle) and one multishift puts nibble j in the low bits of dword j,
 * which is all VPERMPS reads.  Two shuffle-port instructions per 16 weights
 * instead of about three (zero-extension, lane extraction and the
 * unpacking), which is the decode bottleneck at T = 1: measured 7.6 GB/s
 * in-cache on one shared Sapphire Rapids core before (bench/kernels.c).
 * The arithmetic (table, FMA order) is hb_simd_avx512.c's, bit for bit.
 *
 * Compiled with the avx512 flags plus -mavx512vbmi (Makefile).
 */
#include "hb_base.h"
#include "hb_simd_int.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VBMI__) && \
	defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>
#include <math.h>

#define INL static inline __attribute__((always_inline))

struct a4s {
	__m512 lut;
	const uint8_t *gp;
};

/* as hb_simd_avx512.c's a4_prep: lut[q] = scale * q + bias, two roundings */
INL bool a4_prep(const uint8_t *gp, struct a4s *q)
{
	const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	uint32_t sbits;
	__m512i sb;

	memcpy(&sbits, gp + 32, 4);
	sb = _mm512_set1_epi32((int)sbits);
	q->lut = _mm512_add_ps(_mm512_mul_ps(iota, _mm512_castsi512_ps(_mm512_slli_epi32(sb, 16))),
			       _mm512_castsi512_ps(_mm512_and_si512(sb, _mm512_set1_epi32((int)0xffff0000u))));
	q->gp = gp;
	return (sbits & 0x7f80u) != 0x7f80u && (sbits & 0x7f800000u) != 0x7f800000u;
}

/* dword j of qword m (j = 2m, 2m + 1) takes the byte at bit 4j of the
 * block's 64 bits: its low nibble is weight j */
INL __m512 a4_16(const struct a4s *q, int blk)
{
	const __m512i ctl = _mm512_set_epi32(60, 56, 52, 48, 44, 40, 36, 32, 28, 24, 20, 16, 12, 8, 4, 0);
	int64_t v;

	memcpy(&v, q->gp + 8 * blk, 8);
	return _mm512_permutexvar_ps(_mm512_multishift_epi64_epi8(ctl, _mm512_set1_epi64(v)), q->lut);
}

#include "hb_simd_avx512_tile.h"

void hb_kern_avx512vbmi_rows_a4(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx,
				size_t T, float *y, size_t ldy)
{
	if (T == 1 && rows_a4_one(w, r0, r1, x, y))
		return;
	rows_t(HB_W_AFFINE4_G64, w, r0, r1, x, ldx, T, y, ldy);
}

bool hb_kern_avx512vbmi_built(void)
{
	return true;
}

#else

void hb_kern_avx512vbmi_rows_a4(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx,
				size_t T, float *y, size_t ldy)
{
	(void)w, (void)r0, (void)r1, (void)x, (void)ldx, (void)T, (void)y, (void)ldy;
}

bool hb_kern_avx512vbmi_built(void)
{
	return false;
}

#endif
