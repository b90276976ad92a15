/*
 * cuda_dev.h: what the CUDA backend's device tests (test_cuda_ops,
 * test_cuda_chunk) share: a seeded generator, the device installed or the
 * case skipped, the switch between the CPU reference and the device behind
 * the seam, a NaN-aware largest difference, and the near-tie test of QSA
 * selections.  Header-only (static): each
 * test sets CUDA_DEV_SEED before including it, so its random shapes stay
 * its own.  Only where HB_WITH_CUDA is defined.
 */
#ifndef CUDA_DEV_H
#define CUDA_DEV_H

#include "hb_base.h"
#include "harness.h"
#include "backend/hb_backend.h"
#include "hb_cuda.h"

#include <math.h>

static uint64_t rng = CUDA_DEV_SEED;

static inline float urand(void) /* [-1, 1) */
{
	rng = rng * 6364136223846793005u + 1442695040888963407u;
	return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static inline size_t pick(size_t lo, size_t hi)
{
	rng = rng * 6364136223846793005u + 1442695040888963407u;
	return lo + (size_t)((rng >> 33) % (hi - lo + 1));
}

static const struct hb_device_ops *dev;

/* the device installed, or the case skipped */
static inline bool up(void)
{
	struct hb_error err;

	hb_error_clear(&err);
	if (hb_cuda_start(&err)) {
		hb_test_skip("no usable CUDA device: %s", err.msg);
		return false;
	}
	dev = hb_backend_device();
	CHECK(dev != NULL);
	return dev != NULL;
}

static inline void cpu(void)
{
	hb_backend_set_device(NULL);
}

static inline void gpu(void)
{
	hb_backend_set_device(dev);
}

static inline double max_diff(const float *a, const float *b, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++)
		m = hb_test_max_nan(m, fabs((double)a[i] - (double)b[i]));
	return m;
}

static inline int cmp_desc(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x < y) - (x > y);
}

/* whether the reference's keep-th and (keep+1)-th scores nearly tie
 * (within 1e-5 relative) */
static inline bool near_tie(const float *scores, uint64_t groups, uint64_t keep)
{
	float *s = malloc(groups * sizeof(float) + 4);
	bool tie;

	memcpy(s, scores, groups * sizeof(float));
	qsort(s, groups, sizeof(float), cmp_desc);
	tie = keep < groups && fabsf(s[keep - 1] - s[keep]) <= 1e-5f * fabsf(s[keep - 1]);
	free(s);
	return tie;
}

#endif
