/*
 * hb_gdn.c: the CPU reference of the gated delta rule's recurrence
 * (backend/hb_backend.h), transcribed from upstream's recurrent form of
 * Qwen4ExpTextGatedDeltaNet.  The graph owns everything around it: the
 * projections, the causal convolution and its state, the l2 norms, beta and
 * the decay, and the gated RMSNorm of the output.
 */
#include "hb_base.h"
#include "backend/hb_backend.h"

void hb_gdn_step(float *S0, const float *q0, const float *k0, const float *v0, const float *beta,
		 const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o0)
{
	size_t rep = nv / nk;

	for (size_t h = 0; h < nv; h++) {
		const float *q = q0 + (h / rep) * dk, *k = k0 + (h / rep) * dk, *v = v0 + h * dv;
		float *S = S0 + h * dk * dv, *o = o0 + h * dv;
		/* S *= exp(g); delta = (v - S^T k) * beta; S += k delta^T; o = S^T q */
		for (size_t i = 0; i < dk * dv; i++)
			S[i] *= decay[h];
		for (size_t j = 0; j < dv; j++) {
			float mem = 0;
			for (size_t i = 0; i < dk; i++)
				mem += S[i * dv + j] * k[i];
			o[j] = (v[j] - mem) * beta[h]; /* delta, reused as scratch */
		}
		for (size_t i = 0; i < dk; i++)
			for (size_t j = 0; j < dv; j++)
				S[i * dv + j] += k[i] * o[j];
		for (size_t j = 0; j < dv; j++) {
			float acc = 0;
			for (size_t i = 0; i < dk; i++)
				acc += S[i * dv + j] * (q[i] * qscale);
			o[j] = acc;
		}
	}
}
