/*
 * hb_math.c: the graph's per-token arithmetic (see hb_math.h).
 */
#include "hb_base.h"
#include "hb_math.h"

#include <math.h>

void hb_rmsnorm_zc(const float *x, const float *w, size_t n, size_t group, double eps, float *out)
{
	for (size_t g0 = 0; g0 < n; g0 += group) {
		float ss = 0;
		float inv;
		for (size_t i = 0; i < group; i++)
			ss += x[g0 + i] * x[g0 + i];
		inv = 1.0f / sqrtf(ss / (float)group + (float)eps);
		for (size_t i = 0; i < group; i++)
			out[g0 + i] = (x[g0 + i] * inv) * (1.0f + w[g0 + i]);
	}
}

void hb_rmsnorm_w(const float *x, const float *w, size_t n, double eps, float *out)
{
	float ss = 0, inv;

	for (size_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	inv = 1.0f / sqrtf(ss / (float)n + (float)eps);
	for (size_t i = 0; i < n; i++)
		out[i] = w[i] * (x[i] * inv);
}

void hb_l2norm(float *x, size_t n, double eps)
{
	float ss = 0, inv;

	for (size_t i = 0; i < n; i++)
		ss += x[i] * x[i];
	inv = 1.0f / sqrtf(ss + (float)eps);
	for (size_t i = 0; i < n; i++)
		x[i] *= inv;
}

float hb_sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

float hb_silu(float x)
{
	return x * hb_sigmoid(x);
}

float hb_softplus(float x)
{
	return x > 20.0f ? x : log1pf(expf(x));
}

void hb_softmax(float *x, size_t n)
{
	float m = -INFINITY, s = 0;

	for (size_t i = 0; i < n; i++)
		m = x[i] > m ? x[i] : m;
	for (size_t i = 0; i < n; i++) {
		x[i] = expf(x[i] - m);
		s += x[i];
	}
	for (size_t i = 0; i < n; i++)
		x[i] /= s;
}
