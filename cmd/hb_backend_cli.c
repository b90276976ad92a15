/*
 * hb_backend_cli.c: `--backend cpu|cuda` for hb-run and hb-replay
 * (hb_backend_cli.h).
 */
#include "hb_base.h"
#include "hb_backend_cli.h"
#include "hb_map.h"
#include "backend/hb_backend.h"

#include <time.h>
#ifdef HB_WITH_CUDA
#include "hb_cuda.h"
#endif

int hb_backend_parse(const char *arg, enum hb_backend_choice *out)
{
	if (!strcmp(arg, "cpu"))
		*out = HB_BACKEND_CPU;
	else if (!strcmp(arg, "cuda"))
		*out = HB_BACKEND_CUDA;
	else
		return -1;
	return 0;
}

int hb_backend_cli_start(enum hb_backend_choice b, struct hb_error *err)
{
	if (b == HB_BACKEND_CPU)
		return HB_OK;
#ifdef HB_WITH_CUDA
	return hb_cuda_start(err);
#else
	return hb_error_set(err, HB_ERR_UNSUPPORTED, "backend",
			    "this binary was built without the CUDA backend (no nvcc when it was built)");
#endif
}

void hb_backend_cli_model(enum hb_backend_choice b, const struct hb_model *m)
{
#ifdef HB_WITH_CUDA
	if (b == HB_BACKEND_CUDA)
		hb_cuda_resident(m->map, m->map_len); /* the mapping is read-only: upload once */
#else
	(void)b, (void)m;
#endif
}

void hb_backend_cli_explain(enum hb_backend_choice b, struct hb_error *err)
{
#ifdef HB_WITH_CUDA
	struct hb_error dev;

	hb_error_clear(&dev);
	if (b == HB_BACKEND_CUDA && hb_cuda_error(&dev)) {
		hb_error_clear(err);
		hb_error_set(err, dev.code, dev.field, "%s", dev.msg);
	}
#else
	(void)b, (void)err;
#endif
}

void hb_backend_cli_stop(enum hb_backend_choice b)
{
#ifdef HB_WITH_CUDA
	if (b == HB_BACKEND_CUDA)
		hb_cuda_stop();
#else
	(void)b;
#endif
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void hb_backend_cli_prefault(const struct hb_model *m, struct hb_pool *pool, bool skip, bool measure_pmd,
			     struct hb_prefault_report *out)
{
	double t0;

	memset(out, 0, sizeof(*out));
	if (skip || hb_backend_device())
		return;
	t0 = now();
	hb_model_prefault(m, pool);
	out->seconds = now() - t0;
	if (measure_pmd)
		out->pmd_bytes = hb_map_pmd_bytes(m->map, m->map_len);
}

int hb_weights_parse(const char *arg, enum hb_weights_mode *out)
{
	if (!strcmp(arg, "read"))
		*out = HB_WEIGHTS_READ;
	else if (!strcmp(arg, "map"))
		*out = HB_WEIGHTS_MAP;
	else
		return -1;
	return 0;
}

const char *hb_weights_name(enum hb_weights_mode mode)
{
	return mode == HB_WEIGHTS_READ ? "read" : "map";
}

int hb_weights_resolve(enum hb_backend_choice b, const char *expert_cache, const enum hb_weights_mode *asked,
		       enum hb_weights_mode *mode, struct hb_error *err)
{
	bool streamed = expert_cache && strcmp(expert_cache, "all") != 0;

	*mode = asked ? *asked : b == HB_BACKEND_CPU && !streamed ? HB_WEIGHTS_READ : HB_WEIGHTS_MAP;
	if (*mode != HB_WEIGHTS_READ)
		return HB_OK;
	if (b == HB_BACKEND_CUDA)
		return hb_error_set(err, HB_ERR_INVALID, "--weights",
				    "read is for the cpu backend: cuda uploads the mapped artifact (use map)");
	if (streamed)
		return hb_error_set(err, HB_ERR_INVALID, "--weights",
				    "read loads every expert, which --expert-cache %s streams instead (use map)",
				    expert_cache);
	return HB_OK;
}
