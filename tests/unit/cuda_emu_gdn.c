/*
 * cuda_emu_gdn.c: hbk_gdn_chunked for test_cuda_emu, the chunked parallel
 * form of the delta rule (cuda/hb_cuda_gdnc.cu's contract) restated in
 * plain C over the same spans: with G the running sum of the span's log
 * decays (double),
 *   X = (I + A)^-1, A[i][j] = beta_i e^(G_i - G_j) k_i.k_j (j < i)
 *   D = X diag(beta) V - X diag(beta e^G) K S
 *   O = diag(e^G) Q S + P D, P[i][j] = e^(G_i - G_j) q_i.k_j (j <= i)
 *   S' = e^G_last S + sum_j e^(G_last - G_j) k_j D_j^T
 * so that the graph's parity tests run the chunked form's algebra against
 * the recurrent CPU reference on machines without a GPU.  The kernel's
 * device code itself runs only on a GPU (test_cuda_parity there).
 */
#include "hb_base.h"
#include "hb_cuda_kern.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SPAN HBK_GDN_SPAN

int hbk_gdn_chunked_parts = 3; /* bench/cuda-gdn's; the emulation runs both parts */

static float dotf(const float *a, const float *b, size_t n)
{
	float s = 0;

	for (size_t i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* rows [n][m] . S [m][dv] */
static void times_state(const float *rows, size_t n, const float *S, size_t m, size_t dv, float *out)
{
	for (size_t i = 0; i < n; i++)
		for (size_t c = 0; c < dv; c++) {
			float s = 0;
			for (size_t d = 0; d < m; d++)
				s += rows[i * m + d] * S[d * dv + c];
			out[i * dv + c] = s;
		}
}

/* one span of one value head: q (scaled), k [n][dk], v [n][dv] gathered;
 * S [dk][dv] in place; w: 2 SPAN (SPAN + dv) floats of scratch */
static void span(float *S, const float *q, const float *k, const float *v, const float *beta, const float *g,
		 size_t n, size_t dk, size_t dv, float *o, size_t ldo, float *w)
{
	float *X = w, *A = X + SPAN * SPAN, *D = A + SPAN * SPAN, *KS = D + SPAN * dv;
	double G[SPAN], acc = 0;

	for (size_t i = 0; i < n; i++)
		acc += g[i], G[i] = acc;
	for (size_t i = 0; i < n; i++)
		for (size_t m = 0; m < i; m++)
			A[i * SPAN + m] = beta[i] * expf((float)(G[i] - G[m])) * dotf(k + i * dk, k + m * dk, dk);
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < n; j++) {
			float s = 0;
			for (size_t m = j; m < i; m++) /* X[m][j] = 0 below m = j */
				s += A[i * SPAN + m] * X[m * SPAN + j];
			X[i * SPAN + j] = i == j ? 1.0f : j < i ? -s : 0.0f;
		}
	times_state(k, n, S, dk, dv, KS);
	for (size_t i = 0; i < n; i++)
		for (size_t c = 0; c < dv; c++) {
			float u = 0, ws = 0;
			for (size_t j = 0; j <= i; j++) {
				u += X[i * SPAN + j] * beta[j] * v[j * dv + c];
				ws += X[i * SPAN + j] * beta[j] * expf((float)G[j]) * KS[j * dv + c];
			}
			D[i * dv + c] = u - ws;
		}
	times_state(q, n, S, dk, dv, KS); /* now Q S */
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j <= i; j++)
			A[i * SPAN + j] = expf((float)(G[i] - G[j])) * dotf(q + i * dk, k + j * dk, dk); /* now P */
		for (size_t c = 0; c < dv; c++) {
			float pd = 0;
			for (size_t j = 0; j <= i; j++)
				pd += A[i * SPAN + j] * D[j * dv + c];
			o[i * ldo + c] = expf((float)G[i]) * KS[i * dv + c] + pd;
		}
	}
	for (size_t d = 0; d < dk; d++)
		for (size_t c = 0; c < dv; c++) {
			float s = 0;
			for (size_t j = 0; j < n; j++)
				s += expf((float)(G[n - 1] - G[j])) * k[j * dk + d] * D[j * dv + c];
			S[d * dv + c] = expf((float)G[n - 1]) * S[d * dv + c] + s;
		}
}

int hbk_gdn_chunked(float *S, const float *qkv, size_t ld, const float *beta, const float *g, const struct hbk_seqs *q,
		    size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o, size_t ldo, float *scratch)
{
	float *qs, *ks, *vs, *bs, *gs, *w;

	(void)scratch;
	if (!nv || !nk || nv % nk || q->n > HBK_SEQS_MAX)
		return (int)cudaErrorInvalidValue;
	if (dk > 128)
		return -1;
	qs = malloc(SPAN * (2 * dk + 3 * dv + 4 + 2 * SPAN) * sizeof(float));
	if (!qs)
		return (int)cudaErrorMemoryAllocation;
	ks = qs + SPAN * dk, vs = ks + SPAN * dk, bs = vs + SPAN * dv, gs = bs + SPAN, w = gs + SPAN;
	for (uint32_t z = 0; z < q->n; z++)
		for (size_t h = 0; h < nv; h++) {
			size_t kh = h / (nv / nk);
			float *Sh = S + z * q->s_stride + h * dk * dv;
			for (size_t t0 = 0; t0 < q->len[z]; t0 += SPAN) {
				size_t n = q->len[z] - t0 < SPAN ? q->len[z] - t0 : SPAN, r0 = q->off[z] + t0;
				for (size_t i = 0; i < n; i++) {
					const float *x = qkv + (r0 + i) * ld;
					for (size_t d = 0; d < dk; d++)
						qs[i * dk + d] = x[kh * dk + d] * qscale, ks[i * dk + d] = x[nk * dk + kh * dk + d];
					memcpy(vs + i * dv, x + 2 * nk * dk + h * dv, dv * sizeof(float));
					bs[i] = beta[(r0 + i) * nv + h], gs[i] = g[(r0 + i) * nv + h];
				}
				span(Sh, qs, ks, vs, bs, gs, n, dk, dv, o + r0 * ldo + h * dv, ldo, w);
			}
		}
	free(qs);
	return 0;
}
