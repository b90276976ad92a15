/*
 * hb_simd_portable.c: the canonical order of hb_simd.h in plain C, the
 * reference every vector path must equal bit for bit.
 *
 * fmaf is the IEEE fused multiply-add (one rounding); glibc resolves it to
 * the FMA instruction where the processor has one and to an exact software
 * emulation elsewhere, so this file needs no -m flag.  Weights are widened
 * 256 at a time into a stack buffer shared by up to 8 tokens; no scratch
 * from the caller, nothing allocated.
 */
#include "hb_base.h"
#include "codec/hb_affine4.h"
#include "hb_half.h"
#include "hb_simd_int.h"
#include "math/hb_math.h"

#include <math.h>

#define CHUNK 256 /* a multiple of 16 and of the affine4 group */
#define TOKENS 8

static float tree16(const float L[16])
{
	float s8[8], s4[4], s2[2];

	for (int j = 0; j < 8; j++)
		s8[j] = L[j] + L[j + 8];
	for (int j = 0; j < 4; j++)
		s4[j] = s8[j] + s8[j + 4];
	for (int j = 0; j < 2; j++)
		s2[j] = s4[j] + s4[j + 2];
	return s2[0] + s2[1];
}

/* Elements [c0, c0 + n) of row p widened into out; false when an affine4
 * group does not decode (non-finite scale or bias). */
static bool widen(const struct hb_wmat *w, const uint8_t *p, size_t c0, size_t n, float *out)
{
	switch (w->type) {
	case HB_W_F32:
		memcpy(out, p + 4 * c0, n * 4);
		return true;
	case HB_W_BF16:
		for (size_t i = 0; i < n; i++)
			out[i] = hb_bf16_to_f32(hb_le16(p + 2 * (c0 + i)));
		return true;
	case HB_W_F16:
		for (size_t i = 0; i < n; i++)
			out[i] = hb_f16_to_f32(hb_le16(p + 2 * (c0 + i)));
		return true;
	case HB_W_AFFINE4_G64:
		return hb_affine4_decode(p + c0 / HB_A4_GROUP * HB_A4_GROUP_BYTES,
					 n / HB_A4_GROUP * HB_A4_GROUP_BYTES, HB_A4_GROUP, out, n, "row", NULL) == HB_OK;
	}
	return false;
}

static void rows(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx, size_t T,
		 float *y, size_t ldy)
{
	size_t n = (size_t)w->cols;
	float buf[CHUNK];

	for (uint64_t r = r0; r < r1; r++) {
		const uint8_t *p = (const uint8_t *)w->data + r * w->row_bytes;
		for (size_t t0 = 0; t0 < T; t0 += TOKENS) {
			size_t nt = T - t0 < TOKENS ? T - t0 : TOKENS;
			float L[TOKENS][16];
			bool ok = true;
			memset(L, 0, sizeof(L));
			for (size_t c0 = 0; c0 < n; c0 += CHUNK) {
				size_t m = n - c0 < CHUNK ? n - c0 : CHUNK;
				ok = widen(w, p, c0, m, buf) && ok;
				for (size_t t = 0; t < nt; t++) {
					const float *xt = x + (t0 + t) * ldx + c0;
					/* c0 is a multiple of 16: element c0 + i is in lane i mod 16 */
					for (size_t i = 0; i < m; i++)
						L[t][i & 15] = fmaf(buf[i], xt[i], L[t][i & 15]);
				}
			}
			for (size_t t = 0; t < nt; t++)
				y[(t0 + t) * ldy + r] = ok ? tree16(L[t]) : NAN;
		}
	}
}

static float dot(const float *a, const float *b, size_t n)
{
	float L[16] = {0};

	for (size_t i = 0; i < n; i++)
		L[i & 15] = fmaf(a[i], b[i], L[i & 15]);
	return tree16(L);
}

#include "hb_simd_gdn.h"

void hb_kern_silu_mul_scalar(const float *g, const float *u, size_t n, float *out)
{
	for (size_t i = 0; i < n; i++)
		out[i] = hb_silu(g[i]) * u[i];
}

void hb_kern_sigmoid_scalar(const float *x, size_t n, float *out)
{
	for (size_t i = 0; i < n; i++)
		out[i] = hb_sigmoid(x[i]);
}

static const struct hb_kern_ops ops = { rows, dot, gdn_heads, hb_kern_silu_mul_scalar, hb_kern_sigmoid_scalar };

const struct hb_kern_ops *hb_kern_ops_portable(void)
{
	return &ops;
}
