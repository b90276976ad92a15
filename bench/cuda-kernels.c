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
 *
 * HB_KERNELS_GAPS=N adds where the device waited: every kernel, copy and
 * set in the order it started, the time between one's end (the latest
 * end so far) and the next one's start summed by the pair of names
 * around it, the N largest pairs printed with the device's busy and idle
 * time over the span (an idle stretch is the host's: its synchronous
 * copies, its work between launches, its launches slower than the
 * kernels they launch).
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

/* HB_KERNELS_GAPS: every activity's span and name, in arrival order */
#define MAX_EVENTS (1u << 20)
struct event {
	uint64_t start, end;
	const char *name;
};
static struct event *events;
static size_t nevents, events_lost;
static const char COPY_UP[] = "(copy to the device)", COPY_DOWN[] = "(copy to the host)",
		  COPY_ON[] = "(copy on the device)", COPY_OTHER[] = "(copy)", MEMSET[] = "(memset)";

static void event_add(uint64_t start, uint64_t end, const char *name)
{
	if (!events)
		return;
	if (nevents == MAX_EVENTS) {
		events_lost++;
		return;
	}
	events[nevents++] = (struct event){ start, end, name };
}

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

		if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
			const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
			event_add(m->start, m->end,
				  m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD	? COPY_UP
				  : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? COPY_DOWN
				  : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? COPY_ON
										   : COPY_OTHER);
			continue;
		}
		if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
			const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
			event_add(m->start, m->end, MEMSET);
			continue;
		}
		if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			continue;
		event_add(k->start, k->end, k->name ? k->name : "?");
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
	if (getenv("HB_KERNELS_GAPS") && (events = malloc(MAX_EVENTS * sizeof(*events))) &&
	    (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS ||
	     cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS)) {
		fprintf(stderr, "cuda-kernels: CUPTI would not record copies; no gaps\n");
		free(events), events = NULL;
	}
	live = 1;
}

struct gap {
	const char *before, *after;
	uint64_t ns, count;
};

static int by_start(const void *a, const void *b)
{
	const struct event *x = a, *y = b;

	return (x->start > y->start) - (x->start < y->start);
}

static int by_gap(const void *a, const void *b)
{
	const struct gap *x = a, *y = b;

	return (x->ns < y->ns) - (x->ns > y->ns);
}

static int same(const char *a, const char *b)
{
	return a == b || !strcmp(a, b);
}

/* HB_KERNELS_GAPS: where the device waited, by the names around each wait */
static void gaps_report(size_t rows)
{
	static struct gap gaps[4096];
	size_t ngaps = 0;
	uint64_t busy = 0, idle = 0, end;

	if (!events || !nevents)
		return;
	qsort(events, nevents, sizeof(events[0]), by_start);
	end = events[0].end, busy = events[0].end - events[0].start;
	for (size_t i = 1; i < nevents; i++) {
		const struct event *e = &events[i];
		if (e->start > end) {
			size_t g = 0;
			idle += e->start - end;
			while (g < ngaps && !(same(gaps[g].before, events[i - 1].name) && same(gaps[g].after, e->name)))
				g++;
			if (g == ngaps && ngaps < 4096)
				gaps[ngaps++] = (struct gap){ events[i - 1].name, e->name, 0, 0 };
			if (g < ngaps)
				gaps[g].ns += e->start - end, gaps[g].count++;
		}
		busy += e->end > end ? e->end - (e->start > end ? e->start : end) : 0;
		end = e->end > end ? e->end : end;
	}
	qsort(gaps, ngaps, sizeof(gaps[0]), by_gap);
	fprintf(stderr, "# gaps (CUPTI): %zu kernels, copies and sets over %.3f ms: busy %.3f ms, idle %.3f ms%s\n",
		nevents, (end - events[0].start) / 1e6, busy / 1e6, idle / 1e6,
		events_lost ? "; some records lost (too many)" : "");
	fprintf(stderr, "# %6s %10s %10s  %s\n", "waits", "idle ms", "mean us", "the last to end -> the next to start");
	for (size_t i = 0; i < ngaps && i < rows; i++)
		fprintf(stderr, "  %6llu %10.3f %10.1f  %.60s -> %.60s\n", (unsigned long long)gaps[i].count,
			gaps[i].ns / 1e6, gaps[i].ns / 1e3 / gaps[i].count, gaps[i].before, gaps[i].after);
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
	if (events)
		gaps_report(strtoul(getenv("HB_KERNELS_GAPS"), NULL, 10));
}
