/*
 * hb_gdn.c: the CPU reference of the gated delta rule's recurrence
 * (backend/hb_backend.h), transcribed from upstream's recurrent form of
 * Qwen4ExpTextGatedDeltaNet.  The graph owns everything around it: the
 * projections, the causal convolution and its state, the l2 norms, beta and
 * the decay, and the gated RMSNorm of the output.
 */
#include "hb_base.h"
#include "backend/hb_backend.h"
#include "backend/simd/hb_simd.h"
#include "math/hb_math.h"

void hb_gdn_step(float *S0, const float *q0, const float *k0, const float *v0, const float *beta,
		 const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o0)
{
	const struct hb_device_ops *dev = hb_backend_device();

	if (dev) {
		dev->gdn_step(S0, q0, k0, v0, beta, decay, nk, nv, dk, dv, qscale, o0);
		return;
	}
	/* per value head h (key head h / (nv / nk)):
	 *   S *= exp(g); delta = (v - S^T k) * beta; S += k delta^T; o = S^T q
	 * in two passes over S, vectorised across the value dimension; every
	 * output's operations in the order of the four-pass loops these
	 * replace (backend/simd/hb_simd_gdn.h; test_simd_kernels holds them bit for
	 * bit to those loops on every path) */
	hb_kern_gdn_step(S0, q0, k0, v0, beta, decay, nk, nv, dk, dv, qscale, o0);
}

struct scan {
	float *S;
	const float *S0, *qkv, *beta, *decay;
	size_t ld, T, nk, nv, dk, dv, ldo, heads_per_job;
	float qscale;
	float *o;
	int bad; /* a head's state came out not finite (set by any job) */
};

/* one job: a range of value heads through every token of the chunk, the
 * first token reading them from S0 (when that is elsewhere: the copy of
 * old rides on the step's first pass), then checked */
static int scan_job(void *ctx, size_t job, unsigned worker)
{
	struct scan *c = ctx;
	size_t h0 = job * c->heads_per_job, h1 = h0 + c->heads_per_job, kd = c->nk * c->dk, hs = c->dk * c->dv;

	(void)worker;
	if (h1 > c->nv)
		h1 = c->nv;
	if (c->T == 0 && c->S0 != c->S) /* no token to carry the copy */
		memcpy(c->S + h0 * hs, c->S0 + h0 * hs, (h1 - h0) * hs * sizeof(float));
	for (size_t t = 0; t < c->T; t++) {
		const float *x = c->qkv + t * c->ld;
		hb_kern_gdn_heads_from(c->S, t ? c->S : c->S0, x, x + kd, x + 2 * kd, c->beta + t * c->nv,
				       c->decay + t * c->nv, c->nk, c->nv, c->dk, c->dv, h0, h1, c->qscale,
				       c->o + t * c->ldo);
	}
	if (!hb_all_finite(c->S + h0 * hs, (h1 - h0) * hs))
		__atomic_store_n(&c->bad, 1, __ATOMIC_RELAXED);
	return HB_OK;
}

bool hb_gdn_scan_from(struct hb_pool *pool, float *S, const float *S0, const float *qkv, size_t ld,
		      const float *beta, const float *decay, size_t T, size_t nk, size_t nv, size_t dk, size_t dv,
		      float qscale, float *o, size_t ldo)
{
	struct scan c = { S, S0, qkv, beta, decay, ld, T, nk, nv, dk, dv, ldo, 1, qscale, o, 0 };
	unsigned workers = pool ? hb_pool_size(pool) : 1;

	const struct hb_device_ops *dev = hb_backend_device();

	if (dev) {
		if (S0 != S)
			memcpy(S, S0, nv * dk * dv * sizeof(float));
		if (dev->gdn_scan) { /* the device's chunk form */
			dev->gdn_scan(S, qkv, ld, beta, decay, T, nk, nv, dk, dv, qscale, o, ldo);
		} else { /* the device's step, token by token */
			for (size_t t = 0; t < T; t++) {
				const float *x = qkv + t * ld;
				hb_gdn_step(S, x, x + nk * dk, x + 2 * nk * dk, beta + t * nv, decay + t * nv, nk, nv,
					    dk, dv, qscale, o + t * ldo);
			}
		}
		return hb_all_finite(S, nv * dk * dv);
	}

	/* one head a job (the pool's counter balances them); one job when
	 * there is no one to share with or the state is tiny */
	if (workers < 2 || nv < 2 || T * nv * dk * dv < 16384) {
		c.heads_per_job = nv ? nv : 1;
		scan_job(&c, 0, 0);
	} else {
		hb_pool_run(pool, nv, scan_job, &c);
	}
	return !c.bad;
}

void hb_gdn_scan(struct hb_pool *pool, float *S, const float *qkv, size_t ld, const float *beta,
		 const float *decay, size_t T, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o,
		 size_t ldo)
{
	(void)hb_gdn_scan_from(pool, S, S, qkv, ld, beta, decay, T, nk, nv, dk, dv, qscale, o, ldo);
}
