/*
 * hb_pool.h: a small fixed thread pool running parallel-for jobs.
 *
 * hb_pool_run(pool, n, fn, ctx) calls fn(ctx, i, worker) once for every i in
 * [0, n), spread over the pool's threads (the calling thread works too), and
 * returns when all calls have finished.  Jobs are handed out by an atomic
 * counter, so uneven jobs balance themselves.  The first non-zero return of
 * fn is returned; jobs not yet started after a failure are skipped.
 */
#ifndef HB_POOL_H
#define HB_POOL_H

#include "hb_base.h"
#include "hb_err.h"

struct hb_pool;

typedef int (*hb_pool_fn)(void *ctx, size_t job, unsigned worker);

/* The number of CPUs this process may run on (affinity mask), at least 1. */
unsigned hb_cpu_count(void);
/* threads == 0 means hb_cpu_count(). */
int hb_pool_create(unsigned threads, struct hb_pool **out, struct hb_error *err);
unsigned hb_pool_size(const struct hb_pool *pool);
int hb_pool_run(struct hb_pool *pool, size_t jobs, hb_pool_fn fn, void *ctx);
void hb_pool_destroy(struct hb_pool *pool);

#endif
