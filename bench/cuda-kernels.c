/*
 * bench/cuda-kernels.c: a kernel timer to preload into any CUDA program
 * of this tree (GPU machine only; `make` builds it where the CUDA
 * toolkit's CUPTI is): every kernel's device time from CUPTI's activity
 * records, summed by name, printed at exit as a table, largest first.
 *
 *   LD_PRELOAD=build/bench/libhb-kernels.so build/bench/gpu-graph --tokens 4096
 *
 * Why: HB_CUDA_PROFILE times the graph's stages with a synchronisation
 * after each; this names the kernels inside a stage without changing
 * how they overlap.  Columns: calls, total ms, share of all kernel time,
 * mean us a call, the last call's grid and block, its dynamic shared
 * memory and the shared memory the SM was configured with, registers a
 * thread.  HB_KERNELS_TOP limits the rows (default 40).  The table goes
 * to stderr, so a program's own output stays as it was.
 */
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KERNELS 512
#define BUF_BYTES (8u << 20)

struct kstat {
	const char *name; /* CUPTI's string, alive while CUPTI is */
	uint64_t calls, ns;
	int32_t grid[3], block[3], dyn;
	uint32_t carve, regs;
};

static struct kstat stats[MAX_KERNELS];
static size_t nstats, dropped;
static int live;

static struct kstat *slot(const char *name)
{
	for (size_t i = 0; i < nstats; i++)
		if (stats[i].name == name || !strcmp(stats[i].name, name))
			return &stats[i];
	if (nstats == MAX_KERNELS)
		return NULL;
	stats[nstats].name = name;
	return &stats[nstats++];
}

static void CUPTIAPI buffer_wanted(uint8_t **buf, size_t *size, size_t *most)
{
	*buf = aligned_alloc(8, BUF_BYTES);
	*size = *buf ? BUF_BYTES : 0;
	*most = 0;
}

static void CUPTIAPI buffer_done(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size, size_t valid)
{
	CUpti_Activity *r = NULL;

	(void)ctx, (void)stream, (void)size;
	while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
		const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
		struct kstat *s;

		if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			continue;
		if (!(s = slot(k->name ? k->name : "?"))) {
			dropped++;
			continue;
		}
		s->calls++, s->ns += k->end - k->start;
		s->grid[0] = k->gridX, s->grid[1] = k->gridY, s->grid[2] = k->gridZ;
		s->block[0] = k->blockX, s->block[1] = k->blockY, s->block[2] = k->blockZ;
		s->dyn = k->dynamicSharedMemory, s->carve = k->sharedMemoryExecuted, s->regs = k->registersPerThread;
	}
	free(buf);
}

static int by_time(const void *a, const void *b)
{
	const struct kstat *x = a, *y = b;

	return (x->ns < y->ns) - (x->ns > y->ns);
}

/* a context about to go (the runtime's teardown at exit may come before
 * this library's destructor): its records are collected first */
static void CUPTIAPI context_going(void *user, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void *data)
{
	(void)user, (void)data;
	if (domain == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)
		cuptiActivityFlushAll(1);
}

__attribute__((constructor)) static void kernels_start(void)
{
	CUpti_SubscriberHandle sub;

	if (cuptiActivityRegisterCallbacks(buffer_wanted, buffer_done) != CUPTI_SUCCESS ||
	    cuptiSubscribe(&sub, (CUpti_CallbackFunc)context_going, NULL) != CUPTI_SUCCESS ||
	    cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) !=
		    CUPTI_SUCCESS ||
	    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
		fprintf(stderr, "cuda-kernels: CUPTI would not record kernels; no table\n");
		return;
	}
	live = 1;
}

__attribute__((destructor)) static void kernels_report(void)
{
	const char *top = getenv("HB_KERNELS_TOP");
	size_t rows = top ? strtoul(top, NULL, 10) : 40;
	uint64_t all = 0;

	if (!live)
		return;
	cuptiActivityFlushAll(1);
	qsort(stats, nstats, sizeof(stats[0]), by_time);
	for (size_t i = 0; i < nstats; i++)
		all += stats[i].ns;
	fprintf(stderr, "# kernels (CUPTI): %zu names, %.3f ms of kernel time in all%s\n", nstats, all / 1e6,
		dropped ? "; some records dropped (too many names)" : "");
	fprintf(stderr, "# %6s %10s %6s %10s %16s %12s %7s %7s %4s  %s\n", "calls", "total ms", "share", "mean us",
		"grid", "block", "dyn KB", "smem KB", "regs", "kernel");
	for (size_t i = 0; i < nstats && i < rows; i++) {
		const struct kstat *s = &stats[i];
		char g[40], b[40];

		snprintf(g, sizeof(g), "%dx%dx%d", s->grid[0], s->grid[1], s->grid[2]);
		snprintf(b, sizeof(b), "%dx%dx%d", s->block[0], s->block[1], s->block[2]);
		fprintf(stderr, "  %6llu %10.3f %5.1f%% %10.1f %16s %12s %7.1f %7.1f %4u  %.110s\n",
			(unsigned long long)s->calls, s->ns / 1e6, all ? 100.0 * s->ns / all : 0.0,
			s->ns / 1e3 / s->calls, g, b, s->dyn / 1024.0, s->carve / 1024.0, s->regs, s->name);
	}
}
