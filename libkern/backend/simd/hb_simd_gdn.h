/*
 * hb_simd_gdn.h: one token of the gated delta rule (backend/hb_backend.h,
 * hb_gdn_step) in two passes over the state instead of four, vectorised
 * across the value dimension j.  Included by every path's file, so each
 * compiles it for its own instruction set (GCC vector extensions: 16
 * floats a vector, split by the compiler into what the ISA has).
 *
 * Why this is bit-identical to the reference loops and across paths: every
 * output keeps its own operations in its own order.  mem[j] and o[j] are
 * sums over i in increasing i, as in the reference; vectorising across j
 * only runs independent sums side by side.  Each step is a separate IEEE
 * multiply and add (these files compile with -ffp-contract=off: never an
 * FMA here, unlike the matrix kernels, because the reference has none).
 * Fusing passes changes no value: S is scaled before it is read for mem,
 * updated before it is read for o, exactly as the four passes do; pass 2
 * scales it again rather than reading back what pass 1 would have stored
 * (the same multiply of the same operands, so the same float), which
 * leaves one store of the state a token instead of two.
 * Internal to libkern/backend/simd.
 */
#ifndef HB_SIMD_GDN_H
#define HB_SIMD_GDN_H

typedef float hb_v16 __attribute__((vector_size(64)));

#define GDN_MAXDV 1024 /* wider value heads take the scalar columns below */

static inline hb_v16 v16_load(const float *p)
{
	hb_v16 v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void v16_store(float *p, hb_v16 v)
{
	memcpy(p, &v, sizeof(v));
}

/*
 * Pass 1 over value columns [j, j + 16 nb) of one head: mem = (src *
 * decay)^T k, S not written yet.  The block's sums stay in registers
 * across the dk rows (nb is a constant where it is called: 4, then 1).
 */
static inline __attribute__((always_inline)) void gdn_pass1(int nb, const float *src, const float *k, float decay,
							    size_t dk, size_t dv, size_t j, float *mem)
{
	hb_v16 acc[4];

	for (int b = 0; b < nb; b++)
		acc[b] = (hb_v16){0};
	for (size_t i = 0; i < dk; i++) {
		const float *from = src + i * dv + j;
		for (int b = 0; b < nb; b++)
			acc[b] = acc[b] + (v16_load(from + 16 * b) * decay) * k[i];
	}
	for (int b = 0; b < nb; b++)
		v16_store(mem + j + 16 * b, acc[b]);
}

/*
 * Pass 2 over the same columns: S = src * decay + k delta^T (the product
 * src * decay made again, the same float pass 1 summed); o = S^T (q *
 * qscale).  src may be S: each element is read before it is written.
 */
static inline __attribute__((always_inline)) void gdn_pass2(int nb, float *S, const float *src, const float *q,
							    const float *k, const float *delta, float decay,
							    size_t dk, size_t dv, size_t j, float qscale, float *o)
{
	hb_v16 acc[4], d[4];

	for (int b = 0; b < nb; b++) {
		acc[b] = (hb_v16){0};
		d[b] = v16_load(delta + j + 16 * b);
	}
	for (size_t i = 0; i < dk; i++) {
		float *row = S + i * dv + j, ki = k[i], qi = q[i] * qscale;
		const float *from = src + i * dv + j;
		for (int b = 0; b < nb; b++) {
			hb_v16 s = v16_load(from + 16 * b) * decay + ki * d[b];
			v16_store(row + 16 * b, s);
			acc[b] = acc[b] + s * qi;
		}
	}
	for (int b = 0; b < nb; b++)
		v16_store(o + j + 16 * b, acc[b]);
}

/*
 * One value head: S starts from src, S itself or the other bank of a
 * transactional state, which both passes read and pass 2 alone writes
 * (the decayed state is not stored between them: the copy a separate
 * memcpy made once and the decayed S pass 1 stored, the same values, are
 * both gone).  Columns go in blocks of 64, then 16: each column's sums
 * over i stay in increasing i, so the blocking changes no bit.
 */
static void gdn_head(float *S, const float *src, const float *q, const float *k, const float *v, float beta,
		     float decay, size_t dk, size_t dv, float qscale, float *o)
{
	float mem[GDN_MAXDV], delta[GDN_MAXDV];
	size_t jv = dv <= GDN_MAXDV ? dv / 16 * 16 : 0; /* vector columns; the rest scalar */
	size_t jb = jv / 64 * 64, j;

	for (j = 0; j < jb; j += 64)
		gdn_pass1(4, src, k, decay, dk, dv, j, mem);
	for (; j < jv; j += 16)
		gdn_pass1(1, src, k, decay, dk, dv, j, mem);
	for (j = 0; j < jv; j++)
		delta[j] = (v[j] - mem[j]) * beta;
	for (j = 0; j < jb; j += 64)
		gdn_pass2(4, S, src, q, k, delta, decay, dk, dv, j, qscale, o);
	for (; j < jv; j += 16)
		gdn_pass2(1, S, src, q, k, delta, decay, dk, dv, j, qscale, o);
	/* columns past the last whole vector: the reference loops as written */
	for (j = jv; j < dv; j++) {
		float m = 0, d, acc = 0;
		for (size_t i = 0; i < dk; i++) {
			S[i * dv + j] = src[i * dv + j] * decay;
			m += S[i * dv + j] * k[i];
		}
		d = (v[j] - m) * beta;
		for (size_t i = 0; i < dk; i++) {
			S[i * dv + j] += k[i] * d;
			acc += S[i * dv + j] * (q[i] * qscale);
		}
		o[j] = acc;
	}
}

/* value heads h0 <= h < h1 of one token (hb_kern_gdn_heads_from): S from
 * S0 (S itself for the state in place) */
static void gdn_heads(float *S, const float *S0, const float *q0, const float *k0, const float *v0,
		      const float *beta, const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, size_t h0,
		      size_t h1, float qscale, float *o0)
{
	size_t rep = nv / nk;

	for (size_t h = h0; h < h1; h++)
		gdn_head(S + h * dk * dv, S0 + h * dk * dv, q0 + (h / rep) * dk, k0 + (h / rep) * dk, v0 + h * dv,
			 beta[h], decay[h], dk, dv, qscale, o0 + h * dv);
}

#endif
