/*
 * hb_affine4.h: the MLX affine 4-bit codec (encode, decode, error bound).
 *
 * This owns the bytes of one quantised row and nothing else: no store
 * layout, no tensor names, no file I/O.  The ExpertMajor v2 store uses it
 * with group size 64 (ARCHITECTURE.md §4.1); the PLE store may use it with
 * group size 32.
 *
 * Layout of one group of G weights (G/2 + 4 bytes, 36 for G = 64, 20 for
 * G = 32), groups back to back along the row:
 *
 *   bytes 0 .. G/2-1   nibbles: weight 2k in the LOW nibble of byte k,
 *                      weight 2k+1 in the HIGH nibble
 *   bytes G/2, G/2+1   scale, bfloat16, little-endian
 *   bytes G/2+2, G/2+3 bias,  bfloat16, little-endian
 *
 * Decoding: w = scale * q + bias, computed in float32 from the bf16-decoded
 * scale and bias.  scale * q is exact in float32 (8 x 4 significant bits),
 * so the result is the single rounding of the exact value whether or not
 * the compiler fuses the multiply-add.  The decoder accepts any finite scale
 * and bias (MLX's own quantiser writes negative scales); a non-finite scale
 * or bias is refused.
 *
 * Encoding (the "min-max, bf16-first" rule; deterministic and reproduced
 * bit-exactly by scripts/affine4-reference.py):
 *
 *   lo = the first minimum, hi = the first maximum of the group (strict <, >)
 *   bias  = bf16_rne(lo)
 *   scale = bf16_rne(f32_rne(((double)hi - (double)lo) / 15.0))
 *   q_i   = 0 when scale == 0, else
 *           x = ((double)w_i - (double)bias) / (double)scale,
 *           q_i = 0 if x <= 0, 15 if x >= 15, else round-half-even(x)
 *
 * Why this rule and not MLX's edge-anchored one (which picks the endpoint of
 * larger magnitude and snaps the scale so that endpoint is exact): ours
 * quantises against the scale and bias *as stored* (after bf16 rounding), so
 * the per-group error bound below follows from three lines of algebra and
 * the independent Python reference needs no MLX.  A constant group encodes
 * as scale 0, bias bf16(value): exact for every bf16-representable input,
 * which is every weight of a bf16 checkpoint.
 *
 * Error bound, per group, with u = 2^-8 the bf16 unit round-off and
 * r = (hi - lo) / 15:
 *   - a weight inside [bias, bias + 15 scale] is within scale/2 of its
 *     reconstruction, and scale <= r (1 + u + 2^-24);
 *   - a weight below bias is within bias - lo <= u |lo| of bias;
 *   - a weight above bias + 15 scale is within
 *     hi - bias - 15 scale <= u |lo| + 1.01 u (hi - lo) of it;
 *   - the float32 decode adds at most 2^-24 of |w'|, bf16 subnormal
 *     rounding at most 2^-134 absolute per rounding.
 * Summing the cases (a sum bounds the maximum):
 *   bound = (hi - lo) (1/30 + 2^-7) + 2^-8 |lo| + 2^-22 max(|lo|, |hi|) + 2^-126
 * hb_affine4_error_bound() returns it; the unit test holds every weight of
 * random groups of many magnitudes to it.
 *
 * Refusals: n not a multiple of G is HB_ERR_UNSUPPORTED (never padded); a
 * NaN or infinite input is HB_ERR_NONFINITE naming its index; a group whose
 * bias or scale does not fit bf16 (|w| beyond ~3.39e38) is HB_ERR_OVERFLOW.
 */
#ifndef HB_AFFINE4_H
#define HB_AFFINE4_H

#include "hb_base.h"
#include "hb_err.h"

/* Supported group sizes: 32, 64 and 128, the sizes MLX defines.  Any other
 * value is refused (HB_ERR_UNSUPPORTED), not approximated. */
bool hb_affine4_group_ok(uint32_t group);

/* Bytes of one encoded group: group/2 + 4 (0 for an unsupported group). */
size_t hb_affine4_group_bytes(uint32_t group);

/*
 * Encoded size of n weights: (n / group) * (group/2 + 4), checked.
 * HB_ERR_UNSUPPORTED when group is unsupported or n is not a multiple of it.
 */
int hb_affine4_encoded_size(uint64_t n, uint32_t group, uint64_t *bytes,
			    struct hb_error *err);

/*
 * Encode n float32 weights (one or more whole rows) into out, which must
 * hold exactly hb_affine4_encoded_size(n) bytes (out_len must equal it).
 * what is the field path used in errors ("…gate.weights" gives
 * "…gate.weights[17]"); NULL means "affine4.weights".  On failure out may
 * hold partial output; the caller discards it.
 */
int hb_affine4_encode(const float *w, size_t n, uint32_t group, uint8_t *out,
		      size_t out_len, const char *what, struct hb_error *err);

/*
 * Decode in_len bytes (whole groups) into n = in_len / (group/2+4) * group
 * float32 weights; n must match exactly.  what as for encode, naming the
 * encoded bytes ("…[3].scale" is reported for a bad scale of group 3).
 */
int hb_affine4_decode(const uint8_t *in, size_t in_len, uint32_t group,
		      float *out, size_t n, const char *what,
		      struct hb_error *err);

/* The per-group bound above, for a group whose inputs span [lo, hi]. */
double hb_affine4_error_bound(float lo, float hi);

#endif
