/*
 * hb_qsa.c: the CPU reference of QSA's group selection and of attention
 * over gathered rows (backend/hb_backend.h).
 */
#include "hb_base.h"
#include "backend/hb_backend.h"
#include "math/hb_math.h"

#include <math.h>

/* a is a better group than b: higher score, or equal and earlier */
static bool better(const float *sc, int32_t a, int32_t b)
{
	return sc[a] > sc[b] || (sc[a] == sc[b] && a < b);
}

/* min-heap on `better`: the root is the worst kept group */
static void sift_down(const float *sc, int32_t *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, w = i;
		if (l < n && better(sc, h[w], h[l]))
			w = l;
		if (r < n && better(sc, h[w], h[r]))
			w = r;
		if (w == i)
			return;
		int32_t t = h[i];
		h[i] = h[w];
		h[w] = t;
		i = w;
	}
}

static int cmp_i32(const void *a, const void *b)
{
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
	return (x > y) - (x < y);
}

size_t hb_qsa_select(const float *iq, size_t heads, size_t dim, const float *pooled,
		     uint64_t groups, uint64_t keep, uint64_t ratio, uint64_t visible,
		     float *scores, int32_t *heap, int32_t *rows)
{
	float scale = 1.0f / sqrtf((float)dim);
	size_t n = 0, kept = 0;
	const struct hb_device_ops *dev = hb_backend_device();

	if (dev)
		return dev->qsa_select(iq, heads, dim, pooled, groups, keep, ratio, visible, rows);

	for (uint64_t g = 0; g < groups; g++) {
		float sc = 0;
		for (size_t h = 0; h < heads; h++) {
			float d = hb_dot(iq + h * dim, pooled + g * dim, dim);
			sc += d > 0 ? d : 0;
		}
		scores[g] = sc * scale;
	}
	/* membership: the `keep` best by (score desc, group asc) */
	for (uint64_t g = 0; g < groups; g++) {
		if (kept < keep) {
			size_t i = kept++;
			heap[i] = (int32_t)g;
			while (i && better(scores, heap[(i - 1) / 2], heap[i])) {
				int32_t t = heap[i];
				heap[i] = heap[(i - 1) / 2];
				heap[(i - 1) / 2] = t;
				i = (i - 1) / 2;
			}
		} else if (better(scores, (int32_t)g, heap[0])) {
			heap[0] = (int32_t)g;
			sift_down(scores, heap, kept, 0);
		}
	}
	/* emission: chronological, groups expanded, then the raw tail */
	qsort(heap, kept, sizeof(int32_t), cmp_i32);
	for (size_t i = 0; i < kept; i++)
		for (uint64_t r = 0; r < ratio; r++)
			rows[n++] = heap[i] * (int32_t)ratio + (int32_t)r;
	for (uint64_t p = groups * ratio; p < visible; p++)
		rows[n++] = (int32_t)p;
	return n;
}

void hb_qsa_attend(const float *q, const float *K, const float *V, size_t stride, size_t offset,
		   size_t dim, float scale, const int32_t *rows, size_t n, float *probs, float *out)
{
	const struct hb_device_ops *dev = hb_backend_device();

	if (dev) {
		dev->qsa_attend(q, K, V, stride, offset, dim, scale, rows, n, out);
		return;
	}
	for (size_t i = 0; i < n; i++)
		probs[i] = hb_dot(q, K + (size_t)rows[i] * stride + offset, dim) * scale;
	hb_softmax(probs, n);
	for (size_t j = 0; j < dim; j++) {
		float acc = 0;
		for (size_t i = 0; i < n; i++)
			acc += probs[i] * V[(size_t)rows[i] * stride + offset + j];
		out[j] = acc;
	}
}
