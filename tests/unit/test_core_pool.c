/* Unit tests: the parallel-for pool. */
#include "hb_base.h"
#include "harness.h"
#include "hb_pool.h"

#include <stdatomic.h>

struct sum_ctx {
	atomic_ullong sum;
	atomic_uint calls[64];
	unsigned fail_at;
};

static int add_job(void *ctx, size_t job, unsigned worker)
{
	struct sum_ctx *c = ctx;
	atomic_fetch_add(&c->sum, job + 1);
	if (worker < 64)
		atomic_fetch_add(&c->calls[worker], 1);
	if (c->fail_at && job + 1 == c->fail_at)
		return HB_ERR_IO;
	return HB_OK;
}

static void sums_with_any_thread_count(void)
{
	static const unsigned counts[] = {1, 2, 3, 8};

	for (size_t k = 0; k < HB_ARRAY_LEN(counts); k++) {
		struct hb_pool *pool = NULL;
		CHECK_EQ_INT(hb_pool_create(counts[k], &pool, NULL), HB_OK);
		CHECK_EQ_INT(hb_pool_size(pool), counts[k]);
		for (int round = 0; round < 50; round++) {
			struct sum_ctx c;
			memset(&c, 0, sizeof(c));
			CHECK_EQ_INT(hb_pool_run(pool, 1000, add_job, &c), HB_OK);
			CHECK_EQ_U64(atomic_load(&c.sum), 1000ull * 1001 / 2);
		}
		hb_pool_destroy(pool);
	}
}

static void first_error_is_returned(void)
{
	struct hb_pool *pool = NULL;
	struct sum_ctx c;

	CHECK_EQ_INT(hb_pool_create(4, &pool, NULL), HB_OK);
	memset(&c, 0, sizeof(c));
	c.fail_at = 10;
	CHECK_EQ_INT(hb_pool_run(pool, 100000, add_job, &c), HB_ERR_IO);
	/* jobs after the failure were skipped, not all run */
	CHECK(atomic_load(&c.sum) < 100000ull * 100001 / 2);
	memset(&c, 0, sizeof(c));
	CHECK_EQ_INT(hb_pool_run(pool, 0, add_job, &c), HB_OK);
	CHECK_EQ_U64(atomic_load(&c.sum), 0);
	hb_pool_destroy(pool);
}

static void default_size_and_limits(void)
{
	struct hb_pool *pool = NULL;
	struct hb_error err;

	CHECK(hb_cpu_count() >= 1);
	CHECK_EQ_INT(hb_pool_create(0, &pool, NULL), HB_OK);
	CHECK_EQ_INT(hb_pool_size(pool), hb_cpu_count());
	hb_pool_destroy(pool);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_pool_create(5000, &pool, &err), HB_ERR_INVALID);
	CHECK_STR(err.field, "threads");
	hb_pool_destroy(NULL);
}

HB_TEST_MAIN(T(sums_with_any_thread_count), T(first_error_is_returned),
	     T(default_size_and_limits))
