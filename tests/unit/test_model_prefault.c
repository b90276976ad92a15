/*
 * Unit tests: hb_model_prefault (libkern/graph/hb_model.h) reads the pages
 * execution reads from the mapping and leaves the others alone.  The
 * realshape fixture is converted (its PLE page store, 276 KB, is the last
 * thing in the file, after 6 MB of expert records) and mapped; after the
 * call, /proc/self/pagemap must show every page before the PLE store
 * present in this process's page tables, and none inside the PLE store;
 * with the experts streamed (hb_model_stream), none inside the expert
 * store either.  Pages within 128 KiB of a skipped range's ends are not
 * checked: the kernel maps a read fault's neighbours (fault-around, 64 KiB
 * by default) whatever this code reads.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb-convert/hb_convert.h"
#include "graph/hb_model.h"
#include "hb_pool.h"

#include <fcntl.h>
#include <unistd.h>

#define EDGE ((size_t)128 << 10)

static struct hb_model *convert_load(void)
{
	struct hb_model *m = NULL;
	struct hb_convert_opts co;
	struct hb_error err;
	char src[4096];

	snprintf(src, sizeof(src), "%s/tests/fixtures/upstream/realshape/checkpoint", hb_test_srcdir());
	memset(&co, 0, sizeof(co));
	co.src_dir = src;
	co.out_path = "a.gguf";
	co.expert_codec = HB_CONV_EXPERTS_BF16;
	co.ple_codec = HB_CONV_PLE_BF16;
	co.threads = 1;
	hb_error_clear(&err);
	if (!hb_test_exists("a.gguf"))
		CHECK_EQ_INT(hb_convert(&co, NULL, &err), HB_OK);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_model_load("a.gguf", &m, &err), HB_OK);
	CHECK_STR(err.msg, "");
	return m;
}

/* pages of [from, to) of the mapping present in the page tables; -1: no pagemap */
static long present_pages(const struct hb_model *m, size_t from, size_t to)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	int fd = open("/proc/self/pagemap", O_RDONLY);
	long n = 0;

	if (fd < 0)
		return -1;
	for (size_t o = from / page * page; o < to; o += page) {
		uint64_t e = 0;
		uintptr_t va = (uintptr_t)(m->map + o);
		if (pread(fd, &e, sizeof(e), (off_t)(va / page * sizeof(e))) != (ssize_t)sizeof(e)) {
			n = -1;
			break;
		}
		n += (long)(e >> 63 & 1);
	}
	close(fd);
	return n;
}

static long pages(size_t from, size_t to)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	return (long)((to + page - 1) / page - from / page);
}

static void resident_reads_all_but_ple(void)
{
	struct hb_model *m = convert_load();
	size_t ple_from, ple_to;

	if (!m)
		return;
	CHECK(m->ple_len > 2 * EDGE + 4096);
	ple_from = m->ple_off + EDGE, ple_to = m->ple_off + m->ple_len - EDGE;
	if (present_pages(m, 0, 4096) < 0) {
		hb_test_skip("/proc/self/pagemap cannot be read");
		hb_model_free(m);
		return;
	}
	/* nothing has read the mapping yet: the check below can fail */
	CHECK(present_pages(m, 0, m->ple_off) < pages(0, m->ple_off));
	hb_model_prefault(m, NULL);
	CHECK_EQ_U64((uint64_t)present_pages(m, 0, m->ple_off), (uint64_t)pages(0, m->ple_off));
	CHECK_EQ_U64((uint64_t)present_pages(m, ple_from, ple_to), 0);
	hb_model_free(m);
}

static void streamed_skips_the_expert_store(void)
{
	struct hb_model *m = convert_load();
	struct hb_xs_config cfg;
	struct hb_pool *pool = NULL;
	struct hb_error err;
	size_t em = 0, dense_to = 0;

	if (!m)
		return;
	em = (size_t)(m->em_base - m->map);
	dense_to = em; /* the dense tensors come first in the artifact */
	if (present_pages(m, 0, 4096) < 0) {
		hb_test_skip("/proc/self/pagemap cannot be read");
		hb_model_free(m);
		return;
	}
	hb_xs_config_default(&cfg);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_model_stream(m, "50%", &cfg, HB_XS_PRED_NONE, &err), HB_OK);
	CHECK(m->xs != NULL);
	CHECK(m->em_len > 2 * EDGE);
	CHECK_EQ_INT(hb_pool_create(2, &pool, &err), HB_OK);
	hb_model_prefault(m, pool);
	CHECK_EQ_U64((uint64_t)present_pages(m, 0, dense_to), (uint64_t)pages(0, dense_to));
	CHECK_EQ_U64((uint64_t)present_pages(m, em + EDGE, em + m->em_len - EDGE), 0);
	CHECK_EQ_U64((uint64_t)present_pages(m, m->ple_off + EDGE, m->ple_off + m->ple_len - EDGE), 0);
	hb_pool_destroy(pool);
	hb_model_free(m);
}

HB_TEST_MAIN(T(resident_reads_all_but_ple), T(streamed_skips_the_expert_store))
