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
