/*
 * hb_sha256_ni.c: the SHA-256 compression function on the x86 SHA
 * extensions, and the CPUID probe that says whether it may run.
 *
 * It owns only whole 64-byte blocks and the eight state words; buffering,
 * padding, the length field and the choice of path belong to hb_sha256.c.
 * Only the functions that use the intrinsics carry
 * target("sha,sse4.1"), so the rest of the build needs no -msha and no
 * instruction beyond the baseline is reachable unless hb_sha256_ni_cpu()
 * said yes.  Written from FIPS 180-4 and Intel's description of SHA256RNDS2,
 * SHA256MSG1 and SHA256MSG2.
 */
#include "hb_base.h"
#include "hb_sha256.h"

#if defined(__x86_64__) || defined(__i386__)

#include <cpuid.h>
#include <immintrin.h>

bool hb_sha256_ni_cpu(void)
{
	unsigned a, b, c, d;

	/* Leaf 1 ECX: bit 9 SSSE3 (PSHUFB, PALIGNR), bit 19 SSE4.1 (PBLENDW). */
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return false;
	if (!(c & (1u << 9)) || !(c & (1u << 19)))
		return false;
	/* Leaf 7 subleaf 0 EBX bit 29: SHA; __get_cpuid_count checks that the
	 * processor has leaf 7 at all. */
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return false;
	return (b & (1u << 29)) != 0;
}

/* FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of the
 * cube roots of the first 64 primes. */
static const uint32_t round_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define HB_NI_TARGET __attribute__((target("sha,sse4.1,ssse3")))

/* Unaligned 16-byte access; the cast goes through void * because the
 * pointers really are only 4- or 1-byte aligned (loadu/storeu allow it). */
HB_NI_TARGET static inline __m128i load16(const void *p)
{
	return _mm_loadu_si128((const __m128i *)p);
}

HB_NI_TARGET static inline void store16(void *p, __m128i v)
{
	_mm_storeu_si128((__m128i *)p, v);
}

/*
 * Four rounds t..t+3.  SHA256RNDS2 takes the working variables split as
 * {A,B,E,F} and {C,D,G,H} (A and C in the top lane) and W[t]+K[t] for two
 * rounds in the low two lanes of its implicit operand, and returns the new
 * {A,B,E,F}; the new {C,D,G,H} after two rounds is the old {A,B,E,F}.  So
 * the two registers trade roles every two rounds and no extra moves are
 * needed.
 */
HB_NI_TARGET static inline void four_rounds(__m128i *abef, __m128i *cdgh,
					    __m128i w, int t)
{
	__m128i wk = _mm_add_epi32(w, load16(&round_k[t]));

	*cdgh = _mm_sha256rnds2_epu32(*cdgh, *abef, wk);
	/* Rounds t+2 and t+3 take lanes 2 and 3 of wk. */
	*abef = _mm_sha256rnds2_epu32(*abef, *cdgh, _mm_shuffle_epi32(wk, 0x0e));
}

/*
 * The next four schedule words W[t..t+3] from the previous sixteen, held as
 * w0 = W[t-16..t-13], ..., w3 = W[t-4..t-1] (lane 0 the lowest index).
 * SHA256MSG1 adds sigma0 of the following word to each of w0's lanes; the
 * W[t-7] terms (W[t-7..t-4]: lanes 1..3 of w2 and lane 0 of w3) are added
 * here; SHA256MSG2 adds sigma1(W[t-2]), chaining the two lanes that depend
 * on words it is computing.
 */
HB_NI_TARGET static inline __m128i schedule(__m128i w0, __m128i w1, __m128i w2,
					    __m128i w3)
{
	__m128i x = _mm_sha256msg1_epu32(w0, w1);

	x = _mm_add_epi32(x, _mm_alignr_epi8(w3, w2, 4));
	return _mm_sha256msg2_epu32(x, w3);
}

HB_NI_TARGET void hb_sha256_ni_blocks(uint32_t h[8], const uint8_t *data,
				      size_t n)
{
	/* Message words are big-endian; this reverses the bytes of each lane. */
	const __m128i bswap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5,
					   6, 7, 0, 1, 2, 3);
	__m128i lo, hi, abef, cdgh;

	/* h[0..3] = a,b,c,d and h[4..7] = e,f,g,h, lane 0 first; the
	 * instructions want {F,E,B,A} and {H,G,D,C} from lane 0 up. */
	lo = _mm_shuffle_epi32(load16(&h[0]), 0xb1); /* b a d c */
	hi = _mm_shuffle_epi32(load16(&h[4]), 0x1b); /* h g f e */
	abef = _mm_alignr_epi8(lo, hi, 8);    /* f e b a */
	cdgh = _mm_blend_epi16(hi, lo, 0xf0); /* h g d c */

	for (; n; n--, data += HB_SHA256_BLOCK) {
		__m128i save_abef = abef, save_cdgh = cdgh;
		__m128i w[4];

		for (int i = 0; i < 4; i++) {
			w[i] = load16(data + 16 * i);
			w[i] = _mm_shuffle_epi8(w[i], bswap);
			four_rounds(&abef, &cdgh, w[i], 4 * i);
		}
		/* Rounds 16..63: w[i & 3] is replaced by the words four groups
		 * on, so the array always holds the last sixteen. */
#pragma GCC unroll 12
		for (int i = 4; i < 16; i++) {
			__m128i next = schedule(w[i & 3], w[(i + 1) & 3],
						w[(i + 2) & 3], w[(i + 3) & 3]);
			w[i & 3] = next;
			four_rounds(&abef, &cdgh, next, 4 * i);
		}
		abef = _mm_add_epi32(abef, save_abef);
		cdgh = _mm_add_epi32(cdgh, save_cdgh);
	}

	lo = _mm_shuffle_epi32(abef, 0x1b); /* a b e f */
	hi = _mm_shuffle_epi32(cdgh, 0xb1); /* g h c d */
	store16(&h[0], _mm_blend_epi16(lo, hi, 0xf0)); /* a b c d */
	store16(&h[4], _mm_alignr_epi8(hi, lo, 8));    /* e f g h */
}

/*
 * Two digests over the same blocks (hb_sha256_update2): the message schedule
 * depends only on the data, so it is computed once and both states take
 * their rounds from it.  The two round chains are independent, so their
 * SHA256RNDS2 instructions interleave and hide each other's latency.
 * Measured on the 2-core development VM (Xeon family 6 model 207, thread CPU
 * time, 64 MiB in memory): two hb_sha256_ni_blocks calls 630-646 MB/s of
 * data, this 821-880 MB/s, 1.36x.
 */
HB_NI_TARGET static inline void four_rounds2(__m128i *abef, __m128i *cdgh,
					     __m128i *abef2, __m128i *cdgh2,
					     __m128i w, int t)
{
	__m128i wk = _mm_add_epi32(w, load16(&round_k[t]));
	__m128i wk_hi = _mm_shuffle_epi32(wk, 0x0e);

	*cdgh = _mm_sha256rnds2_epu32(*cdgh, *abef, wk);
	*cdgh2 = _mm_sha256rnds2_epu32(*cdgh2, *abef2, wk);
	*abef = _mm_sha256rnds2_epu32(*abef, *cdgh, wk_hi);
	*abef2 = _mm_sha256rnds2_epu32(*abef2, *cdgh2, wk_hi);
}

HB_NI_TARGET static inline void state_load(const uint32_t h[8], __m128i *abef,
					   __m128i *cdgh)
{
	__m128i lo = _mm_shuffle_epi32(load16(&h[0]), 0xb1); /* b a d c */
	__m128i hi = _mm_shuffle_epi32(load16(&h[4]), 0x1b); /* h g f e */

	*abef = _mm_alignr_epi8(lo, hi, 8);    /* f e b a */
	*cdgh = _mm_blend_epi16(hi, lo, 0xf0); /* h g d c */
}

HB_NI_TARGET static inline void state_store(uint32_t h[8], __m128i abef,
					    __m128i cdgh)
{
	__m128i lo = _mm_shuffle_epi32(abef, 0x1b); /* a b e f */
	__m128i hi = _mm_shuffle_epi32(cdgh, 0xb1); /* g h c d */

	store16(&h[0], _mm_blend_epi16(lo, hi, 0xf0)); /* a b c d */
	store16(&h[4], _mm_alignr_epi8(hi, lo, 8));    /* e f g h */
}

HB_NI_TARGET void hb_sha256_ni_blocks2(uint32_t h[8], uint32_t h2[8],
				       const uint8_t *data, size_t n)
{
	const __m128i bswap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5,
					   6, 7, 0, 1, 2, 3);
	__m128i abef, cdgh, abef2, cdgh2;

	state_load(h, &abef, &cdgh);
	state_load(h2, &abef2, &cdgh2);
	for (; n; n--, data += HB_SHA256_BLOCK) {
		__m128i s_abef = abef, s_cdgh = cdgh, s_abef2 = abef2, s_cdgh2 = cdgh2;
		__m128i w[4];

		for (int i = 0; i < 4; i++) {
			w[i] = _mm_shuffle_epi8(load16(data + 16 * i), bswap);
			four_rounds2(&abef, &cdgh, &abef2, &cdgh2, w[i], 4 * i);
		}
#pragma GCC unroll 12
		for (int i = 4; i < 16; i++) {
			__m128i next = schedule(w[i & 3], w[(i + 1) & 3],
						w[(i + 2) & 3], w[(i + 3) & 3]);
			w[i & 3] = next;
			four_rounds2(&abef, &cdgh, &abef2, &cdgh2, next, 4 * i);
		}
		abef = _mm_add_epi32(abef, s_abef);
		cdgh = _mm_add_epi32(cdgh, s_cdgh);
		abef2 = _mm_add_epi32(abef2, s_abef2);
		cdgh2 = _mm_add_epi32(cdgh2, s_cdgh2);
	}
	state_store(h, abef, cdgh);
	state_store(h2, abef2, cdgh2);
}

/*
 * Independent digests over different buffers (hb_sha256_update_lanes): each
 * lane has its own schedule and state, and the lanes' instructions are
 * issued round group by round group, so one chain's SHA256RNDS2 latency
 * hides behind the others'.  A single chain waits on that latency every two
 * rounds: measured on a Zen 3 EPYC (2-core VM), one SHA256RNDS2 every 1.29
 * ns alone, every 0.37 ns with four chains.  The instructions have only
 * legacy encodings, so what the lanes keep in registers must fit the 16 XMM
 * registers (six a lane: the state's two and the schedule's four):
 * bench/sha256 there, of one digest's rate, 2 lanes 1.50-1.68x, 3 lanes
 * 1.77-1.85x, 4 lanes (tried) 1.52-1.56x (its spills cost more than the
 * fourth chain gains), so HB_SHA256_LANES is 3.
 */
/* every loop over lanes unrolled, or the states and schedules live on the
 * stack and each round waits on a store and a load */
#define LANES_UNROLL _Pragma("GCC unroll 4")

HB_NI_TARGET static inline __attribute__((always_inline)) void
lanes_body(uint32_t *const h[], const uint8_t *const data[], size_t n, const unsigned lanes)
{
	const __m128i bswap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5,
					   6, 7, 0, 1, 2, 3);
	__m128i abef[HB_SHA256_LANES], cdgh[HB_SHA256_LANES];

	LANES_UNROLL
	for (unsigned l = 0; l < lanes; l++)
		state_load(h[l], &abef[l], &cdgh[l]);
	for (size_t b = 0; b < n; b++) {
		__m128i s_abef[HB_SHA256_LANES], s_cdgh[HB_SHA256_LANES];
		__m128i w[HB_SHA256_LANES][4];

		LANES_UNROLL
		for (unsigned l = 0; l < lanes; l++) {
			s_abef[l] = abef[l];
			s_cdgh[l] = cdgh[l];
		}
		LANES_UNROLL
		for (int i = 0; i < 4; i++)
			LANES_UNROLL
			for (unsigned l = 0; l < lanes; l++) {
				w[l][i] = _mm_shuffle_epi8(load16(data[l] + b * HB_SHA256_BLOCK + 16 * i), bswap);
				four_rounds(&abef[l], &cdgh[l], w[l][i], 4 * i);
			}
#pragma GCC unroll 12
		for (int i = 4; i < 16; i++)
			LANES_UNROLL
			for (unsigned l = 0; l < lanes; l++) {
				__m128i x = schedule(w[l][i & 3], w[l][(i + 1) & 3], w[l][(i + 2) & 3],
						     w[l][(i + 3) & 3]);
				w[l][i & 3] = x;
				four_rounds(&abef[l], &cdgh[l], x, 4 * i);
			}
		LANES_UNROLL
		for (unsigned l = 0; l < lanes; l++) {
			abef[l] = _mm_add_epi32(abef[l], s_abef[l]);
			cdgh[l] = _mm_add_epi32(cdgh[l], s_cdgh[l]);
		}
	}
	LANES_UNROLL
	for (unsigned l = 0; l < lanes; l++)
		state_store(h[l], abef[l], cdgh[l]);
}

HB_NI_TARGET void hb_sha256_ni_blocks_lanes(uint32_t *const h[], const uint8_t *const data[], size_t n,
					    unsigned lanes)
{
	/* each count its own copy, so the loops over lanes unroll */
	switch (lanes) {
	case 1:
		hb_sha256_ni_blocks(h[0], data[0], n);
		break;
	case 2:
		lanes_body(h, data, n, 2);
		break;
	case 3:
		lanes_body(h, data, n, 3);
		break;
	default: /* refused by the caller (hb_sha256_update_lanes) */
		break;
	}
}

#else /* not x86: the path does not exist */

bool hb_sha256_ni_cpu(void)
{
	return false;
}

void hb_sha256_ni_blocks(uint32_t h[8], const uint8_t *data, size_t n)
{
	(void)h;
	(void)data;
	(void)n;
}

void hb_sha256_ni_blocks_lanes(uint32_t *const h[], const uint8_t *const data[], size_t n, unsigned lanes)
{
	(void)h;
	(void)data;
	(void)n;
	(void)lanes;
}

void hb_sha256_ni_blocks2(uint32_t h[8], uint32_t h2[8], const uint8_t *data,
			  size_t n)
{
	(void)h;
	(void)h2;
	(void)data;
	(void)n;
}

#endif
