/*
 * hb_pool.c: pthread parallel-for pool (see hb_pool.h).
 *
 * One batch runs at a time; a batch generation counter tells the workers a
 * new batch exists.  Decode hands out hundreds of small batches a token
 * (one per projection), and waking a sleeping thread through a futex costs
 * tens of microseconds in a virtual machine, more than most of those
 * batches take: so a worker that has finished a batch first watches the
 * counter for a while (HB_POOL_SPIN pauses, about 100 µs on current x86)
 * and only then sleeps on the condition variable, and the caller waits for
 * the last worker the same way.  Which thread runs which job never
 * changes a result (callers reduce in a fixed order), only how soon.
 */
#include "hb_base.h"
#include "hb_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

/* pauses a thread spins before it sleeps (see above) */
#define HB_POOL_SPIN 4096

struct hb_pool {
	unsigned nthreads;       /* including the caller */
	pthread_t *threads;      /* nthreads - 1 workers */
	pthread_mutex_t mu;
	pthread_cond_t wake;
	pthread_cond_t done;
	_Atomic uint64_t generation; /* written under mu, read by spinners */
	atomic_bool stopping;
	/* the current batch */
	hb_pool_fn fn;
	void *ctx;
	size_t jobs;
	atomic_size_t next;
	atomic_int first_rc;
	atomic_uint active;      /* workers still inside the batch */
};

unsigned hb_cpu_count(void)
{
	cpu_set_t set;
	long n;

	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		int c = CPU_COUNT(&set);
		if (c > 0)
			return (unsigned)c;
	}
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1u;
}

static void run_jobs(struct hb_pool *pool, unsigned worker)
{
	for (;;) {
		size_t i = atomic_fetch_add(&pool->next, 1);
		int rc;

		if (i >= pool->jobs)
			return;
		if (atomic_load(&pool->first_rc) != 0)
			continue; /* drain the counter without running */
		rc = pool->fn(pool->ctx, i, worker);
		if (rc) {
			int expected = 0;
			atomic_compare_exchange_strong(&pool->first_rc, &expected, rc);
		}
	}
}

struct worker_arg {
	struct hb_pool *pool;
	unsigned index;
};

/* spin until the generation leaves `seen` or the pool stops; false: still there */
static bool spin_for_batch(struct hb_pool *pool, uint64_t seen)
{
	for (unsigned k = 0; k < HB_POOL_SPIN; k++) {
		if (atomic_load_explicit(&pool->generation, memory_order_acquire) != seen ||
		    atomic_load_explicit(&pool->stopping, memory_order_acquire))
			return true;
		cpu_relax();
	}
	return false;
}

static void *worker_main(void *arg)
{
	struct worker_arg *wa = arg;
	struct hb_pool *pool = wa->pool;
	unsigned index = wa->index;
	uint64_t seen = 0;

	free(wa);
	for (;;) {
		if (!spin_for_batch(pool, seen)) {
			pthread_mutex_lock(&pool->mu);
			while (!atomic_load(&pool->stopping) && atomic_load(&pool->generation) == seen)
				pthread_cond_wait(&pool->wake, &pool->mu);
			pthread_mutex_unlock(&pool->mu);
		}
		if (atomic_load(&pool->stopping))
			break;
		seen = atomic_load(&pool->generation);
		run_jobs(pool, index);
		/* the last one out signals under mu: a caller that found active
		 * non-zero under mu is then already waiting */
		if (atomic_fetch_sub(&pool->active, 1) == 1) {
			pthread_mutex_lock(&pool->mu);
			pthread_cond_signal(&pool->done);
			pthread_mutex_unlock(&pool->mu);
		}
	}
	return NULL;
}

int hb_pool_create(unsigned threads, struct hb_pool **out, struct hb_error *err)
{
	struct hb_pool *pool;

	if (threads == 0)
		threads = hb_cpu_count();
	if (threads > 1024)
		return hb_error_set(err, HB_ERR_INVALID, "threads",
				    "%u threads is more than the 1024 allowed", threads);
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return hb_error_set(err, HB_ERR_NOMEM, "threads", "out of memory");
	pool->nthreads = threads;
	pthread_mutex_init(&pool->mu, NULL);
	pthread_cond_init(&pool->wake, NULL);
	pthread_cond_init(&pool->done, NULL);
	if (threads > 1) {
		pool->threads = calloc(threads - 1, sizeof(pthread_t));
		if (!pool->threads) {
			hb_pool_destroy(pool);
			return hb_error_set(err, HB_ERR_NOMEM, "threads", "out of memory");
		}
	}
	for (unsigned i = 0; i + 1 < threads; i++) {
		struct worker_arg *wa = malloc(sizeof(*wa));
		int e;
		if (!wa) {
			pool->nthreads = i + 1;
			hb_pool_destroy(pool);
			return hb_error_set(err, HB_ERR_NOMEM, "threads", "out of memory");
		}
		wa->pool = pool;
		wa->index = i + 1;
		e = pthread_create(&pool->threads[i], NULL, worker_main, wa);
		if (e) {
			free(wa);
			pool->nthreads = i + 1;
			hb_pool_destroy(pool);
			return hb_error_sys(err, e, "threads", "cannot start a thread");
		}
	}
	*out = pool;
	return HB_OK;
}

unsigned hb_pool_size(const struct hb_pool *pool)
{
	return pool ? pool->nthreads : 1;
}

int hb_pool_run(struct hb_pool *pool, size_t jobs, hb_pool_fn fn, void *ctx)
{
	if (jobs == 0)
		return HB_OK;
	pool->fn = fn;
	pool->ctx = ctx;
	pool->jobs = jobs;
	atomic_store(&pool->next, 0);
	atomic_store(&pool->first_rc, 0);
	if (pool->nthreads > 1 && jobs > 1) {
		unsigned k;
		atomic_store(&pool->active, pool->nthreads - 1);
		/* the batch's fields above are published by this increment */
		pthread_mutex_lock(&pool->mu);
		atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
		pthread_cond_broadcast(&pool->wake);
		pthread_mutex_unlock(&pool->mu);
		run_jobs(pool, 0);
		for (k = 0; k < HB_POOL_SPIN && atomic_load_explicit(&pool->active, memory_order_acquire); k++)
			cpu_relax();
		if (k == HB_POOL_SPIN) {
			pthread_mutex_lock(&pool->mu);
			while (atomic_load(&pool->active))
				pthread_cond_wait(&pool->done, &pool->mu);
			pthread_mutex_unlock(&pool->mu);
		}
	} else {
		run_jobs(pool, 0);
	}
	return atomic_load(&pool->first_rc);
}

void hb_pool_destroy(struct hb_pool *pool)
{
	if (!pool)
		return;
	pthread_mutex_lock(&pool->mu);
	atomic_store(&pool->stopping, true);
	pthread_cond_broadcast(&pool->wake);
	pthread_mutex_unlock(&pool->mu);
	for (unsigned i = 0; pool->threads && i + 1 < pool->nthreads; i++)
		pthread_join(pool->threads[i], NULL);
	free(pool->threads);
	pthread_mutex_destroy(&pool->mu);
	pthread_cond_destroy(&pool->wake);
	pthread_cond_destroy(&pool->done);
	free(pool);
}
