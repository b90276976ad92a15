/*
 * hb_simd.c: the CPU probe and the once-per-process choice of kernel path
 * (see hb_simd.h).  Written after Intel's SDM vol. 2A (CPUID leaves 1 and 7,
 * XGETBV) and the layout of hb_sha256.c's HB_SHA256_IMPL override.
 */
#include "hb_base.h"
#include "hb_simd_int.h"

#include <pthread.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* XCR0 without -mxsave: the instruction is valid once CPUID says OSXSAVE. */
static uint64_t xgetbv0(void)
{
	uint32_t lo, hi;

	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (uint64_t)hi << 32 | lo;
}

void hb_cpu_features(struct hb_cpu_features *f)
{
	unsigned a, b, c, d;
	uint64_t xcr0 = 0;

	memset(f, 0, sizeof(*f));
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return;
	f->fma = (c >> 12) & 1;
	f->f16c = (c >> 29) & 1;
	/* bit 27 OSXSAVE: the OS enabled XSAVE, so XGETBV may run; bit 28 AVX */
	if (((c >> 27) & 1) && ((c >> 28) & 1)) {
		xcr0 = xgetbv0();
		/* XCR0 bits 1, 2: SSE and AVX state saved by the OS */
		f->os_ymm = (xcr0 & 0x6) == 0x6;
		/* bits 5, 6, 7: opmask, ZMM0-15 upper halves, ZMM16-31 */
		f->os_zmm = f->os_ymm && (xcr0 & 0xe0) == 0xe0;
	}
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return;
	f->avx2 = (b >> 5) & 1;
	f->avx512f = (b >> 16) & 1;
	f->avx512bw = (b >> 30) & 1;
	f->avx512vl = (b >> 31) & 1;
	f->avx512_vbmi = (c >> 1) & 1;
	f->avx512_vnni = (c >> 11) & 1;
	f->amx_bf16 = (d >> 22) & 1;
	if (__get_cpuid_count(7, 1, &a, &b, &c, &d))
		f->avx512_bf16 = (a >> 5) & 1;
}

#else

void hb_cpu_features(struct hb_cpu_features *f)
{
	memset(f, 0, sizeof(*f));
}

#endif

static const char *const names[HB_KERNEL_NPATHS] = { "portable", "avx2", "avx512", "avx512vbmi" };

const char *hb_kernel_path_name(int path)
{
	return path >= 0 && path < HB_KERNEL_NPATHS ? names[path] : NULL;
}

static const struct hb_kern_ops *ops_of(int path)
{
	switch (path) {
	case HB_KERNEL_AVX2:
		return hb_kern_ops_avx2();
	case HB_KERNEL_AVX512:
		return hb_kern_ops_avx512();
	case HB_KERNEL_AVX512VBMI:
		return hb_kern_ops_avx512vbmi();
	default:
		return hb_kern_ops_portable();
	}
}

bool hb_kernel_path_usable(int path)
{
	struct hb_cpu_features f;
	bool ymm;

	if (path == HB_KERNEL_PORTABLE)
		return true;
	if (path < 0 || path >= HB_KERNEL_NPATHS || !ops_of(path))
		return false;
	hb_cpu_features(&f);
	ymm = f.avx2 && f.fma && f.f16c && f.os_ymm;
	if (path == HB_KERNEL_AVX2)
		return ymm;
	if (!(ymm && f.avx512f && f.avx512bw && f.avx512vl && f.os_zmm))
		return false;
	return path == HB_KERNEL_AVX512 || f.avx512_vbmi;
}

int hb_kernel_choose(const char *override, const bool usable[HB_KERNEL_NPATHS], int *path,
		     struct hb_error *err)
{
	*path = HB_KERNEL_PORTABLE;
	if (!override || !*override) {
		for (int p = HB_KERNEL_NPATHS - 1; p > HB_KERNEL_PORTABLE; p--)
			if (usable[p]) {
				*path = p;
				break;
			}
		return HB_OK;
	}
	for (int p = 0; p < HB_KERNEL_NPATHS; p++) {
		if (strcmp(override, names[p]) != 0)
			continue;
		if (!usable[p])
			return hb_error_set(err, HB_ERR_UNSUPPORTED, "env.HB_KERNEL_IMPL",
					    "'%s' asked for, but this processor or build cannot run it", names[p]);
		*path = p;
		return HB_OK;
	}
	return hb_error_set(err, HB_ERR_INVALID, "env.HB_KERNEL_IMPL",
			    "unknown kernel path '%.64s' (expected 'portable', 'avx2', 'avx512' or 'avx512vbmi')",
			    override);
}

static pthread_once_t choice_once = PTHREAD_ONCE_INIT;
static int chosen = HB_KERNEL_PORTABLE;
static const struct hb_kern_ops *chosen_ops;
static struct hb_error choice_err;
/* probed once: CPUID traps to the hypervisor on a VM (microseconds) */
static bool usable[HB_KERNEL_NPATHS];

static void choose_once(void)
{
	for (int p = 0; p < HB_KERNEL_NPATHS; p++)
		usable[p] = hb_kernel_path_usable(p);
	hb_error_clear(&choice_err);
	hb_kernel_choose(getenv("HB_KERNEL_IMPL"), usable, &chosen, &choice_err);
	chosen_ops = ops_of(chosen);
}

int hb_kernel_select(struct hb_error *err)
{
	pthread_once(&choice_once, choose_once);
	if (choice_err.code == HB_OK)
		return HB_OK;
	return hb_error_set(err, choice_err.code, choice_err.field, "%s", choice_err.msg);
}

int hb_kernel_path(void)
{
	pthread_once(&choice_once, choose_once);
	return chosen;
}

int hb_kernel_force(int path, struct hb_error *err)
{
	pthread_once(&choice_once, choose_once);
	if (path < 0 || path >= HB_KERNEL_NPATHS || !usable[path])
		return hb_error_set(err, HB_ERR_UNSUPPORTED, "kernel.path", "path %d cannot run here", path);
	chosen = path;
	chosen_ops = ops_of(path);
	return HB_OK;
}

static const struct hb_kern_ops *usable_ops(int path)
{
	pthread_once(&choice_once, choose_once);
	return path > HB_KERNEL_PORTABLE && path < HB_KERNEL_NPATHS && usable[path] ? ops_of(path)
										     : hb_kern_ops_portable();
}

void hb_kern_rows_path(int path, const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x,
		       size_t ldx, size_t T, float *y, size_t ldy)
{
	usable_ops(path)->rows(w, r0, r1, x, ldx, T, y, ldy);
}

float hb_kern_dot_path(int path, const float *a, const float *b, size_t n)
{
	return usable_ops(path)->dot(a, b, n);
}

void hb_kern_rows(const struct hb_wmat *w, uint64_t r0, uint64_t r1, const float *x, size_t ldx,
		  size_t T, float *y, size_t ldy)
{
	pthread_once(&choice_once, choose_once);
	chosen_ops->rows(w, r0, r1, x, ldx, T, y, ldy);
}

float hb_kern_dot(const float *a, const float *b, size_t n)
{
	pthread_once(&choice_once, choose_once);
	return chosen_ops->dot(a, b, n);
}

void hb_kern_gdn_step_path(int path, float *S, const float *q, const float *k, const float *v, const float *beta,
			   const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o)
{
	usable_ops(path)->gdn_heads(S, S, q, k, v, beta, decay, nk, nv, dk, dv, 0, nv, qscale, o);
}

void hb_kern_gdn_step(float *S, const float *q, const float *k, const float *v, const float *beta,
		      const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o)
{
	pthread_once(&choice_once, choose_once);
	chosen_ops->gdn_heads(S, S, q, k, v, beta, decay, nk, nv, dk, dv, 0, nv, qscale, o);
}

void hb_kern_gdn_heads_from_path(int path, float *S, const float *S0, const float *q, const float *k,
				 const float *v, const float *beta, const float *decay, size_t nk, size_t nv,
				 size_t dk, size_t dv, size_t h0, size_t h1, float qscale, float *o)
{
	usable_ops(path)->gdn_heads(S, S0, q, k, v, beta, decay, nk, nv, dk, dv, h0, h1, qscale, o);
}

void hb_kern_gdn_heads_from(float *S, const float *S0, const float *q, const float *k, const float *v,
			    const float *beta, const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, size_t h0,
			    size_t h1, float qscale, float *o)
{
	pthread_once(&choice_once, choose_once);
	chosen_ops->gdn_heads(S, S0, q, k, v, beta, decay, nk, nv, dk, dv, h0, h1, qscale, o);
}

void hb_kern_silu_mul_path(int path, const float *g, const float *u, size_t n, float *out)
{
	usable_ops(path)->silu_mul(g, u, n, out);
}

void hb_kern_silu_mul(const float *g, const float *u, size_t n, float *out)
{
	pthread_once(&choice_once, choose_once);
	chosen_ops->silu_mul(g, u, n, out);
}

void hb_kern_sigmoid_path(int path, const float *x, size_t n, float *out)
{
	usable_ops(path)->sigmoid(x, n, out);
}

void hb_kern_sigmoid(const float *x, size_t n, float *out)
{
	pthread_once(&choice_once, choose_once);
	chosen_ops->sigmoid(x, n, out);
}
