/*
 * hb_cuda_gk.h: the kernels of the device graph (hb_cuda_graph.c), the
 * per-token and per-channel stages between the matrix products that the
 * host graph runs in libkern/graph: norms, rotary, hyper-connection mixes,
 * convolutions, gates, the router.  Internal to cuda/.
 *
 * Every pointer is device memory; every launcher queues on the default
 * stream and returns the launch's cudaError_t as an int.  Each computes
 * what the host graph's loop of the same name computes, in float32, with
 * libkern/math's e^x (hbg_init uploads its table: the double-precision
 * steps are IEEE on the device too, so sigmoid and SiLU of the same input
 * give the host's bits); sums over a row are block reductions, so they
 * differ from the host's in rounding only.
 */
#ifndef HB_CUDA_GK_H
#define HB_CUDA_GK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int hbg_init(const double exp_table[16]);

/* x[t][s*H + j] = row tok[t] of the embedding widened, for each of hc streams */
int hbg_embed(int type, const void *W, uint64_t row_bytes, size_t H, const int32_t *tok, size_t T, size_t hc,
	      float *x);
/* zero-centred RMSNorm (hb_rmsnorm_zc) of `rows` rows of n values at stride
 * ld (in and out), per group of `group` values; out may be x */
int hbg_rmsnorm_zc(const float *x, size_t ldx, const float *w, size_t n, size_t group, float eps, float *out,
		   size_t ldo, size_t rows);
/* hb_rmsnorm_zc then partial rotary (hb_rope) of heads of `dim` values:
 * head h of row r at x + r ldx + h hx, out + r ldo + h ho; position
 * pos0 + r * pstep; rotary over the first 2 half values */
int hbg_norm_rope(const float *x, size_t ldx, size_t hx, const float *w, size_t dim, float eps,
		  const float *inv_freq, size_t half, uint64_t pos0, uint64_t pstep, float *out, size_t ldo,
		  size_t ho, size_t rows, size_t heads);
/* a[i] = silu(a[i] / div) */
int hbg_silu_div(float *a, size_t n, float div);
/* out[t][j] = sum over s of sigmoid(mix[t][sH + j]) xn[t][sH + j], / hc */
int hbg_hc_mix(const float *mix, const float *xn, size_t T, size_t hc, size_t H, float *out);
/* v[i] = 2 sigmoid(v[i] / hc) */
int hbg_hc_inj(float *v, size_t n, float hc);
/* x[t][sH + j] += y[t][j] inj[t][s] */
int hbg_hc_add(float *x, const float *y, const float *inj, size_t T, size_t hc, size_t H);
/* hbg_hc_add, then hbg_rmsnorm_zc of x's T rows of hc groups of H into out
 * (rows hc H apart), in one pass: the same values as the two */
int hbg_hc_add_norm(float *x, const float *y, const float *inj, size_t T, size_t hc, size_t H, const float *w,
		    float eps, float *out);
/* the causal depthwise convolution of kernel K then SiLU (GDN), out of
 * place: in [T][cd] with the K - 1 previous inputs in from [K-1][cd]; the
 * last K - 1 inputs into to */
int hbg_gdn_conv(const float *w, const float *from, float *to, const float *in, float *out, size_t T, size_t cd,
		 size_t K);
/* hb_l2norm (eps inside the root) of each of `heads` heads of dim at the
 * start of each of `rows` rows of stride ld, in place */
int hbg_l2norm_heads(float *x, size_t ld, size_t rows, size_t heads, size_t dim, float eps);
/* b = sigmoid(b); a = exp(g), g = -exp(A_log) softplus(a + dt_bias), n = T nv;
 * g itself also into lg unless NULL (the chunked delta rule's log decays) */
int hbg_gdn_gates(float *b, float *a, float *lg, size_t n, size_t nv, const float *A_log, const float *dt_bias);
/* o = w rmsnorm(o) times act(z) (act: sigmoid when sig, else SiLU), per head of dv */
int hbg_gated_norm(float *o, const float *z, const float *w, size_t heads, size_t dv, float eps, int sig);
/* y[t][j] += b[j] for j < n, rows at stride ld */
int hbg_add_bias(float *y, size_t ld, const float *b, size_t n, size_t T);
/* pooled[g] = mean over r < ratio of raw[g ratio + r] (in r order), g in [g0, g1) */
int hbg_pool_groups(const float *raw, size_t dim, uint64_t g0, uint64_t g1, size_t ratio, float *pooled);
/* o[t][h][j] *= sigmoid(q[t][h 2 hd + hd + j]) */
int hbg_qsa_gate(float *o, const float *q, size_t T, size_t nh, size_t hd);
/* per token: softmax of p[t][E], top k by (probability desc, id asc),
 * weights (renormalised when norm) */
int hbg_route(float *p, size_t T, size_t E, size_t k, int norm, int32_t *ids, float *w);
/* y[t][j] += sigmoid(gate[t]) sh[t][j] */
int hbg_shared_add(float *y, const float *sh, const float *gate, size_t T, size_t H);
/* the PLE gate: per token and stream s, g = key_s . q_s / sqrt(H),
 * gv[t][sH + j] = sigmoid(sign(g) sqrt(max(|g|, 1e-6))) val[t][j] */
int hbg_ple_gate(const float *key, const float *q, const float *val, size_t T, size_t hc, size_t H, float *gv);
/* the PLE's dilated depthwise convolution over [from ... gvn], kernel K,
 * dilation dil, C channels: x[t][c] += gv[t][c] + silu(acc); the last
 * (K-1) dil normed inputs into to */
int hbg_ple_conv(const float *w, const float *from, float *to, const float *gvn, const float *gv, float *x,
		 size_t T, size_t C, size_t K, size_t dil);
/* random bf16 words of magnitude 2^-7..2^-4 over bytes (hb_cuda_resident_random) */
int hbg_fill_random(void *d, size_t bytes, uint64_t seed);
/* *flag = 0 when any of x[0..n) is not finite (flag left as it is otherwise) */
int hbg_check_finite(const float *x, size_t n, int *flag);

#ifdef __cplusplus
}
#endif

#endif
