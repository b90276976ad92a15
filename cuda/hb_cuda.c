/*
 * hb_cuda.c: the CUDA backend's host side (hb_cuda.h): the device check,
 * the resident weights, the staging buffers, the sticky error, and the
 * seam's operations (hb_device_ops) as upload, launch, download.
 *
 * One mutex serialises the operations, so sessions on several threads may
 * share the device; every operation ends in a synchronous copy back, so a
 * failed kernel is seen by the operation that launched it.
 */
#include "hb_base.h"
#include "hb_err.h"
#include "backend/hb_backend.h"
#include "hb_cuda.h"
#include "hb_cuda_kern.h"
#include "hb_cuda_int.h"
#include "hb_cuda_gk.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

struct wslot {
	const void *host; /* NULL: empty */
	void *dev;
	uint64_t bytes;
};

/* device staging buffers, grown on demand and kept */

#define MAX_RESIDENT 8

static struct {
	pthread_mutex_t mu;
	bool on, failed;
	struct hb_error err;
	uint64_t fail_at;
	uint64_t generation; /* hbc_generation, stepped by 2 at every start */
	struct wslot *tab;
	size_t cap, used;
	const uint8_t *res_base[MAX_RESIDENT];
	size_t res_len[MAX_RESIDENT], nres;
	uint8_t *res_dev[MAX_RESIDENT]; /* the whole range's device copy, or NULL */
	void *buf[NBUF];
	size_t bufcap[NBUF];
	float *host; /* gathered K and V rows */
	size_t hostcap;
	int32_t *ih; /* the chunk forms' index scratch (pinned) */
	size_t ihcap;
	cudaEvent_t down_ev; /* the end of hbc_down_async's copy */
	const void **ptrs; /* the experts' device weights */
	size_t ptrcap;
	struct hb_cuda_stats st;
	char name[32];
} cu = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* ------------------------------------------------------------ errors */

void hbc_fail(int code, const char *field, const char *what, const char *why)
{
	if (!cu.failed) {
		hb_error_clear(&cu.err);
		hb_error_set(&cu.err, code, field, "cuda: %s: %s", what, why);
	}
	cu.failed = true;
}

bool hbc_ok(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return true;
	hbc_fail(e == cudaErrorMemoryAllocation ? HB_ERR_NOMEM : HB_ERR_IO, "cuda.device", what,
	     cudaGetErrorString(e));
	return false;
}

/* one operation begins: counted, and failed when the test seam says so */
bool hbc_begin(void)
{
	cu.st.calls++;
	if (cu.fail_at && --cu.fail_at == 0)
		hbc_fail(HB_ERR_FAULT, "cuda.fault", "injected", "the test seam failed this operation");
	return !cu.failed;
}

void hbc_count_chunk(void)
{
	cu.st.chunks++;
}

void hbc_count_warm(void)
{
	cu.st.warm_chunks++;
}

static const char *const stage_names[HB_CUDA_STAGES] = {
	"state and inputs up", "embedding", "PLE", "hyper-connections", "GDN products", "GDN convolution and gates",
	"GDN delta rule", "QSA products", "QSA caches and selection", "QSA attention", "router and packing",
	"routed experts", "shared expert", "final mix, outputs and finite check", "state down",
};
static struct {
	bool on;
	struct timespec t;
} prof;

const char *hb_cuda_stage_name(int i)
{
	return i >= 0 && i < HB_CUDA_STAGES ? stage_names[i] : "";
}

static double since(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + 1e-9 * (double)(b->tv_nsec - a->tv_nsec);
}

/* the clock once the device has finished what was launched */
static void device_now(struct timespec *t)
{
	cudaDeviceSynchronize();
	clock_gettime(CLOCK_MONOTONIC, t);
}

void hbc_stage_begin(void)
{
	const char *v = getenv("HB_CUDA_PROFILE");

	prof.on = v && !strcmp(v, "1");
	if (prof.on)
		device_now(&prof.t);
}

void hbc_stage(int i)
{
	struct timespec t;

	if (!prof.on || i < 0 || i >= HB_CUDA_STAGES)
		return;
	device_now(&t);
	cu.st.stage_s[i] += since(&prof.t, &t);
	prof.t = t;
}

static struct timespec prod_t0;

void hbc_product_begin(void)
{
	if (prof.on)
		device_now(&prod_t0);
}

void hbc_product_end(uint64_t rows, uint64_t cols, int kind)
{
	struct timespec t;

	if (!prof.on)
		return;
	device_now(&t);
	for (int i = 0; i < HB_CUDA_PRODUCTS; i++) {
		struct hb_cuda_product_time *p = &cu.st.products[i];
		if (p->calls && (p->rows != rows || p->cols != cols || p->kind != kind))
			continue;
		p->rows = rows, p->cols = cols, p->kind = kind, p->calls++;
		p->s += since(&prod_t0, &t);
		return; /* shapes past the table's last slot are not counted */
	}
}

void hbc_nan_fill(float *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = NAN;
}

/* ------------------------------------------------------------ memory */

void *hbc_buf(int i, size_t bytes)
{
	if (bytes > cu.bufcap[i]) {
		size_t want = bytes + bytes / 4 + 256;
		cudaFree(cu.buf[i]);
		cu.buf[i] = NULL, cu.bufcap[i] = 0;
		if (!hbc_ok(cudaMalloc(&cu.buf[i], want), "allocating a staging buffer"))
			return NULL;
		cu.bufcap[i] = want;
	}
	return cu.buf[i];
}

bool hbc_up(void *dev, const void *host, size_t bytes)
{
	cu.st.bytes_in += bytes;
	return dev && hbc_ok(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), "copying to the device");
}

bool hbc_zero(void *dev, size_t bytes)
{
	return dev && hbc_ok(cudaMemset(dev, 0, bytes), "zeroing device memory");
}

bool hbc_down_async(void *host, const void *dev, size_t bytes)
{
	cu.st.bytes_out += bytes;
	if (!cu.down_ev && !hbc_ok(cudaEventCreateWithFlags(&cu.down_ev, cudaEventDisableTiming), "making an event"))
		return false;
	return hbc_ok(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, 0), "copying back") &&
	       hbc_ok(cudaEventRecord(cu.down_ev, 0), "marking a copy's end");
}

bool hbc_down_wait(void)
{
	return hbc_ok(cudaEventSynchronize(cu.down_ev), "running a kernel or copying back");
}

bool hbc_down(void *host, const void *dev, size_t bytes)
{
	cu.st.bytes_out += bytes;
	return hbc_ok(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), "running a kernel or copying back");
}

bool hbc_up2d(void *dev, size_t dpitch, const void *host, size_t hpitch, size_t width, size_t rows)
{
	cu.st.bytes_in += width * rows;
	return dev && (!rows || !width || hbc_ok(cudaMemcpy2D(dev, dpitch, host, hpitch, width, rows, cudaMemcpyHostToDevice),
				       "copying to the device"));
}

bool hbc_down2d(void *host, size_t hpitch, const void *dev, size_t dpitch, size_t width, size_t rows)
{
	cu.st.bytes_out += width * rows;
	return !rows || !width || hbc_ok(cudaMemcpy2D(host, hpitch, dev, dpitch, width, rows, cudaMemcpyDeviceToHost),
			       "running a kernel or copying back");
}

uint64_t hbc_generation(void)
{
	return cu.generation + (cu.failed ? 1 : 0);
}

size_t hbc_bufcap(int i)
{
	return cu.bufcap[i];
}

void hbc_lock(void)
{
	pthread_mutex_lock(&cu.mu);
}

void hbc_unlock(void)
{
	pthread_mutex_unlock(&cu.mu);
}

/* pinned: copies to and from it skip the driver's staging (the MoE's
 * routes down and packing up, each layer); its contents do not survive
 * a growth */
int32_t *hbc_iscratch(size_t n)
{
	if (n > cu.ihcap) {
		size_t want = n + n / 4 + 64;
		void *p = NULL;
		if (cudaMallocHost(&p, want * sizeof(int32_t)) != cudaSuccess) {
			hbc_fail(HB_ERR_NOMEM, "cuda.host", "the index scratch", "out of pinned host memory");
			return NULL;
		}
		cudaFreeHost(cu.ih);
		cu.ih = p, cu.ihcap = want;
	}
	return cu.ih;
}

const void **hbc_pscratch(size_t n)
{
	if (n > cu.ptrcap) {
		const void **p = realloc(cu.ptrs, n * sizeof(*p));
		if (!p) {
			hbc_fail(HB_ERR_NOMEM, "cuda.host", "the weight pointers", "out of host memory");
			return NULL;
		}
		cu.ptrs = p, cu.ptrcap = n;
	}
	return cu.ptrs;
}

/* the index of the resident range holding [p, p + bytes), or -1 */
static ptrdiff_t range_of(const void *p, size_t bytes)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < cu.nres; i++)
		if (b >= cu.res_base[i] && bytes <= cu.res_len[i] && (size_t)(b - cu.res_base[i]) <= cu.res_len[i] - bytes)
			return (ptrdiff_t)i;
	return -1;
}

bool hbc_resident(const void *p, size_t bytes)
{
	return range_of(p, bytes) >= 0;
}

static size_t slot_of(const void *host)
{
	uintptr_t h = (uintptr_t)host;
	h ^= h >> 17, h *= 0x9e3779b97f4a7c15u, h ^= h >> 29;
	return (size_t)h & (cu.cap - 1);
}

static bool grow_table(void)
{
	size_t ncap = cu.cap ? cu.cap * 2 : 1024;
	struct wslot *old = cu.tab, *t = calloc(ncap, sizeof(*t));
	size_t ocap = cu.cap;

	if (!t) {
		hbc_fail(HB_ERR_NOMEM, "cuda.host", "the weight table", "out of host memory");
		return false;
	}
	cu.tab = t, cu.cap = ncap;
	for (size_t i = 0; i < ocap; i++) {
		if (!old[i].host)
			continue;
		size_t j = slot_of(old[i].host);
		while (t[j].host)
			j = (j + 1) & (ncap - 1);
		t[j] = old[i];
	}
	free(old);
	return true;
}

/* The device copy of w's bytes: kept for a resident weight, else staged in
 * buffer `spare` for this call only. */
const void *hbc_weight(const struct hb_wmat *w, int spare)
{
	uint64_t bytes = w->rows * w->row_bytes;
	size_t j;
	void *d;

	if ((unsigned)w->type > HB_W_AFFINE4_G64) {
		hbc_fail(HB_ERR_UNSUPPORTED, "cuda.weight", "a weight", "storage type unknown to this backend");
		return NULL;
	}
	ptrdiff_t ri = range_of(w->data, (size_t)bytes);
	if (ri < 0) {
		d = hbc_buf(spare, (size_t)bytes);
		return hbc_up(d, w->data, (size_t)bytes) ? d : NULL;
	}
	if (cu.res_dev[ri]) /* the range went up whole */
		return cu.res_dev[ri] + ((const uint8_t *)w->data - cu.res_base[ri]);
	if ((cu.used + 1) * 2 > cu.cap && !grow_table())
		return NULL;
	for (j = slot_of(w->data); cu.tab[j].host; j = (j + 1) & (cu.cap - 1))
		if (cu.tab[j].host == w->data && cu.tab[j].bytes == bytes)
			return cu.tab[j].dev;
	if (!hbc_ok(cudaMalloc(&d, bytes ? (size_t)bytes : 4), "uploading a weight") ||
	    !hbc_ok(cudaMemcpy(d, w->data, (size_t)bytes, cudaMemcpyHostToDevice), "uploading a weight"))
		return NULL;
	cu.tab[j] = (struct wslot){ w->data, d, bytes };
	cu.used++;
	cu.st.weights++;
	cu.st.weight_bytes += bytes;
	return d;
}

/* ------------------------------------------------------------ the seam */

static bool mm(const struct hb_wmat *w, const void *dw, const float *dx, size_t T, float *dy)
{
	return dw && dx && dy &&
	       hbc_ok((cudaError_t)hbk_matmul((int)w->type, dw, w->row_bytes, w->rows, w->cols, dx, T, dy),
		  "launching the matrix kernel");
}

static void op_matmul(const struct hb_wmat *w, const float *x, size_t T, float *y)
{
	size_t nx = T * (size_t)w->cols, ny = T * (size_t)w->rows;
	bool good;

	pthread_mutex_lock(&cu.mu);
	good = hbc_begin();
	if (good) {
		const void *dw = hbc_weight(w, B_W0);
		float *dx = hbc_buf(B_X, nx * 4 + 4), *dy = hbc_buf(B_Y, ny * 4 + 4);
		good = dw && hbc_up(dx, x, nx * 4) && mm(w, dw, dx, T, dy) && hbc_down(y, dy, ny * 4);
	}
	if (!good)
		hbc_nan_fill(y, ny);
	pthread_mutex_unlock(&cu.mu);
}

static void op_swiglu(const struct hb_wmat *gate, const struct hb_wmat *upw, const struct hb_wmat *dn,
		      const float *x, size_t n, float *out)
{
	size_t I = (size_t)gate->rows, nx = n * (size_t)gate->cols, no = n * (size_t)dn->rows;
	bool good;

	pthread_mutex_lock(&cu.mu);
	good = hbc_begin();
	if (good) {
		const void *dg = hbc_weight(gate, B_W0), *du = dg ? hbc_weight(upw, B_W1) : NULL;
		const void *dd = du ? hbc_weight(dn, B_W2) : NULL;
		float *dx = hbc_buf(B_X, nx * 4 + 4), *g = hbc_buf(B_G, n * I * 4 + 4), *u = hbc_buf(B_U, n * I * 4 + 4);
		float *dy = hbc_buf(B_Y, no * 4 + 4);
		good = dd && hbc_up(dx, x, nx * 4) && mm(gate, dg, dx, n, g) && mm(upw, du, dx, n, u) &&
		       hbc_ok((cudaError_t)hbk_swiglu_act(g, u, n * I, g), "launching the SwiGLU kernel") &&
		       mm(dn, dd, g, n, dy) && hbc_down(out, dy, no * 4);
	}
	if (!good)
		hbc_nan_fill(out, no);
	pthread_mutex_unlock(&cu.mu);
}

static void op_gdn(float *S, const float *q, const float *k, const float *v, const float *beta,
		   const float *decay, size_t nk, size_t nv, size_t dk, size_t dv, float qscale, float *o)
{
	size_t ns = nv * dk * dv;
	bool good;

	pthread_mutex_lock(&cu.mu);
	good = hbc_begin();
	if (good) {
		float *dS = hbc_buf(B_S, ns * 4 + 4), *dq = hbc_buf(B_Q, nk * dk * 4 + 4), *dk_ = hbc_buf(B_K, nk * dk * 4 + 4);
		float *dv_ = hbc_buf(B_V, nv * dv * 4 + 4), *db = hbc_buf(B_BETA, nv * 4 + 4);
		float *dd = hbc_buf(B_DECAY, nv * 4 + 4), *dout = hbc_buf(B_O, nv * dv * 4 + 4);
		good = hbc_up(dS, S, ns * 4) && hbc_up(dq, q, nk * dk * 4) && hbc_up(dk_, k, nk * dk * 4) &&
		       hbc_up(dv_, v, nv * dv * 4) && hbc_up(db, beta, nv * 4) && hbc_up(dd, decay, nv * 4) && dout &&
		       hbc_ok((cudaError_t)hbk_gdn_step(dS, dq, dk_, dv_, db, dd, nk, nv, dk, dv, qscale, dout),
			  "launching the delta-rule kernel") &&
		       hbc_down(S, dS, ns * 4) && hbc_down(o, dout, nv * dv * 4);
	}
	if (!good)
		hbc_nan_fill(S, ns), hbc_nan_fill(o, nv * dv);
	pthread_mutex_unlock(&cu.mu);
}

static size_t op_select(const float *iq, size_t heads, size_t dim, const float *pooled, uint64_t groups,
			uint64_t keep, uint64_t ratio, uint64_t visible, int32_t *rows)
{
	size_t nmax = hbc_sel_count(groups, keep, ratio, visible);
	int32_t count = -1;
	bool good;

	pthread_mutex_lock(&cu.mu);
	good = hbc_begin();
	if (good) {
		float *diq = hbc_buf(B_Q, heads * dim * 4 + 4), *dp = hbc_buf(B_POOL, (size_t)groups * dim * 4 + 4);
		float *dsc = hbc_buf(B_SC, (size_t)groups * 4 + 4);
		int32_t *dfl = hbc_buf(B_FL, (size_t)groups * 4 + 4), *dr = hbc_buf(B_ROWS, nmax * 4 + 4);
		int32_t *dc = hbc_buf(B_CNT, 4);
		good = hbc_up(diq, iq, heads * dim * 4) && hbc_up(dp, pooled, (size_t)groups * dim * 4) && dsc && dfl &&
		       dr && dc &&
		       hbc_ok((cudaError_t)hbk_qsa_select(diq, heads, dim, dp, groups, keep, ratio, visible, dsc, dfl,
						       dr, dc),
			  "launching the selection kernels") &&
		       hbc_down(&count, dc, 4);
		if (good && (size_t)count != nmax) {
			hbc_fail(HB_ERR_INTERNAL, "cuda.select", "the selection kernels", "returned a wrong row count");
			good = false;
		}
		good = good && hbc_down(rows, dr, nmax * 4);
	}
	pthread_mutex_unlock(&cu.mu);
	if (good)
		return nmax;
	if (!visible)
		return 0;
	rows[0] = 0; /* attended as NaN: the device has failed */
	return 1;
}

static void op_attend(const float *q, const float *K, const float *V, size_t stride, size_t offset, size_t dim,
		      float scale, const int32_t *rows, size_t n, float *out)
{
	size_t nkv = n * dim;
	bool good;

	pthread_mutex_lock(&cu.mu);
	good = hbc_begin();
	if (good && 2 * nkv > cu.hostcap) {
		float *h = realloc(cu.host, 2 * nkv * sizeof(float));
		if (!h)
			hbc_fail(HB_ERR_NOMEM, "cuda.host", "gathering rows", "out of host memory");
		else
			cu.host = h, cu.hostcap = 2 * nkv;
		good = h != NULL;
	}
	if (good) {
		float *dq = hbc_buf(B_Q, dim * 4 + 4), *dK = hbc_buf(B_K, nkv * 4 + 4), *dV = hbc_buf(B_V, nkv * 4 + 4);
		float *dout = hbc_buf(B_O, dim * 4 + 4);
		for (size_t i = 0; i < n; i++) {
			memcpy(cu.host + i * dim, K + (size_t)rows[i] * stride + offset, dim * 4);
			memcpy(cu.host + nkv + i * dim, V + (size_t)rows[i] * stride + offset, dim * 4);
		}
		good = hbc_up(dq, q, dim * 4) && hbc_up(dK, cu.host, nkv * 4) && hbc_up(dV, cu.host + nkv, nkv * 4) && dout &&
		       hbc_ok((cudaError_t)hbk_attend(dq, dK, dV, dim, scale, n, dout), "launching the attention kernel") &&
		       hbc_down(out, dout, dim * 4);
	}
	if (!good)
		hbc_nan_fill(out, dim);
	pthread_mutex_unlock(&cu.mu);
}

static const struct hb_device_ops cuda_ops = {
	.name = cu.name,
	.matmul = op_matmul,
	.swiglu = op_swiglu,
	.gdn_step = op_gdn,
	.qsa_select = op_select,
	.qsa_attend = op_attend,
	.gdn_scan = hb_cuda_gdn_scan,
	.qsa_select_batch = hb_cuda_select_batch,
	.qsa_attend_batch = hb_cuda_attend_batch,
	.moe_experts = hb_cuda_moe,
	.chunk = hb_cuda_chunk,
};

/* ------------------------------------------------------------ lifecycle */

int hb_cuda_start(struct hb_error *err)
{
	struct cudaDeviceProp p;
	int count = 0, rc = HB_OK;
	cudaError_t e;

	pthread_mutex_lock(&cu.mu);
	if (cu.on)
		goto out;
	e = cudaGetDeviceCount(&count);
	if (e != cudaSuccess || count < 1) {
		rc = hb_error_set(err, HB_ERR_UNSUPPORTED, "cuda.device", "cuda: no CUDA device: %s",
				  e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports none");
		goto out;
	}
	e = cudaGetDeviceProperties(&p, 0);
	if (e == cudaSuccess && p.major < 9) {
		rc = hb_error_set(err, HB_ERR_UNSUPPORTED, "cuda.capability",
				  "cuda: device 0 (%s) has compute capability %d.%d; this backend is built for 9.0 "
				  "or later (sm_90: H100, H200)", p.name, p.major, p.minor);
		goto out;
	}
	if (e == cudaSuccess)
		e = cudaSetDevice(0);
	if (e == cudaSuccess)
		e = cudaFree(NULL); /* the context, now rather than at the first chunk */
	if (e != cudaSuccess) {
		rc = hb_error_set(err, HB_ERR_IO, "cuda.device", "cuda: opening device 0: %s", cudaGetErrorString(e));
		goto out;
	}
	snprintf(cu.name, sizeof(cu.name), "cuda/sm_%d%d", p.major, p.minor);
	cu.failed = false;
	cu.generation += 2;
	hb_error_clear(&cu.err);
	cu.on = true;
	hb_backend_set_device(&cuda_ops);
out:
	pthread_mutex_unlock(&cu.mu);
	return rc;
}

void hb_cuda_stop(void)
{
	pthread_mutex_lock(&cu.mu);
	if (cu.on) {
		hb_backend_set_device(NULL);
		hbc_graph_free();
		for (size_t i = 0; i < cu.cap; i++)
			if (cu.tab[i].host)
				cudaFree(cu.tab[i].dev);
		for (int i = 0; i < NBUF; i++)
			cudaFree(cu.buf[i]);
	}
	free(cu.tab);
	free(cu.host);
	cudaFreeHost(cu.ih);
	if (cu.down_ev)
		cudaEventDestroy(cu.down_ev);
	cu.down_ev = NULL;
	free(cu.ptrs);
	cu.ih = NULL, cu.ihcap = 0, cu.ptrs = NULL, cu.ptrcap = 0;
	memset(cu.buf, 0, sizeof(cu.buf));
	memset(cu.bufcap, 0, sizeof(cu.bufcap));
	memset(&cu.st, 0, sizeof(cu.st));
	cu.tab = NULL, cu.cap = cu.used = 0, cu.host = NULL, cu.hostcap = 0;
	for (size_t i = 0; i < cu.nres; i++)
		if (cu.res_dev[i])
			cudaFree(cu.res_dev[i]), cu.res_dev[i] = NULL;
	cu.nres = 0, cu.on = false, cu.failed = false, cu.fail_at = 0;
	pthread_mutex_unlock(&cu.mu);
}

void hb_cuda_resident(const void *base, size_t len)
{
	pthread_mutex_lock(&cu.mu);
	void *d = NULL;

	/* the whole range now, in one allocation, where the device has room
	 * (a model's load, not its first chunk, pays the bus); else each
	 * weight on its first use */
	if (cu.nres < MAX_RESIDENT && cu.on && !cu.failed && len) {
		if (cudaMalloc(&d, len) != cudaSuccess) {
			(void)cudaGetLastError(); /* out of room: not an error, the lazy path */
			d = NULL;
		} else if (!hbc_ok(cudaMemcpy(d, base, len, cudaMemcpyHostToDevice), "uploading the weights")) {
			cudaFree(d);
			d = NULL;
		} else {
			cu.st.weight_bytes += len;
		}
	}
	if (cu.nres < MAX_RESIDENT)
		cu.res_base[cu.nres] = base, cu.res_len[cu.nres] = len, cu.res_dev[cu.nres++] = d;
	pthread_mutex_unlock(&cu.mu);
}

int hb_cuda_resident_random(const void *base, size_t len, uint64_t seed, struct hb_error *err)
{
	void *d = NULL;
	int rc = HB_OK;
	cudaError_t e = cudaErrorNotReady;

	pthread_mutex_lock(&cu.mu);
	if (!cu.on || cu.failed || cu.nres >= MAX_RESIDENT || !len)
		rc = hb_error_set(err, HB_ERR_INVALID, "cuda.resident", "cuda: no room for another resident range");
	else if ((e = cudaMalloc(&d, len)) != cudaSuccess ||
		 (e = (cudaError_t)hbg_fill_random(d, len, seed)) != cudaSuccess || (e = cudaDeviceSynchronize()) != cudaSuccess)
		rc = hb_error_set(err, e == cudaErrorMemoryAllocation ? HB_ERR_NOMEM : HB_ERR_IO, "cuda.resident",
				  "cuda: %zu random bytes: %s", len, cudaGetErrorString(e));
	if (rc) {
		cudaFree(d);
	} else {
		cu.res_base[cu.nres] = base, cu.res_len[cu.nres] = len, cu.res_dev[cu.nres++] = d;
		cu.st.weight_bytes += len;
	}
	pthread_mutex_unlock(&cu.mu);
	return rc;
}

int hb_cuda_error(struct hb_error *err)
{
	int rc = HB_OK;

	pthread_mutex_lock(&cu.mu);
	if (cu.failed)
		rc = hb_error_set(err, cu.err.code, cu.err.field, "%s", cu.err.msg);
	pthread_mutex_unlock(&cu.mu);
	return rc;
}

void hb_cuda_stats(struct hb_cuda_stats *out)
{
	pthread_mutex_lock(&cu.mu);
	*out = cu.st;
	pthread_mutex_unlock(&cu.mu);
}

void hb_cuda_test_fail_at(uint64_t n)
{
	pthread_mutex_lock(&cu.mu);
	cu.fail_at = n;
	pthread_mutex_unlock(&cu.mu);
}
