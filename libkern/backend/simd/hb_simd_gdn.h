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
 * updated before it is read for o, exactly as the four passes do.
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
 * One value head: S starts from src, S itself or the other bank of a
 * transactional state, which pass 1 reads as it writes S (the copy a
 * separate memcpy made before: the same values, one pass less).
 */
static void gdn_head(float *S, const float *src, const float *q, const float *k, const float *v, float beta,
		     float decay, size_t dk, size_t dv, float qscale, float *o)
{
	float mem[GDN_MAXDV], delta[GDN_MAXDV];
	size_t jv = dv <= GDN_MAXDV ? dv / 16 * 16 : 0; /* vector columns; the rest scalar */

	/* pass 1: S = src * decay; mem = S^T k */
	for (size_t j = 0; j < jv; j += 16)
		v16_store(mem + j, (hb_v16){0});
	for (size_t i = 0; i < dk; i++) {
		float *row = S + i * dv;
		const float *from = src + i * dv;
		for (size_t j = 0; j < jv; j += 16) {
			hb_v16 s = v16_load(from + j) * decay;
			v16_store(row + j, s);
			v16_store(mem + j, v16_load(mem + j) + s * k[i]);
		}
	}
	for (size_t j = 0; j < jv; j++)
		delta[j] = (v[j] - mem[j]) * beta;
	/* pass 2: S += k delta^T; o = S^T (q * qscale) */
	for (size_t j = 0; j < jv; j += 16)
		v16_store(o + j, (hb_v16){0});
	for (size_t i = 0; i < dk; i++) {
		float *row = S + i * dv, ki = k[i], qi = q[i] * qscale;
		for (size_t j = 0; j < jv; j += 16) {
			hb_v16 s = v16_load(row + j) + ki * v16_load(delta + j);
			v16_store(row + j, s);
			v16_store(o + j, v16_load(o + j) + s * qi);
		}
	}
	/* columns past the last whole vector: the reference loops as written */
	for (size_t j = jv; j < dv; j++) {
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
