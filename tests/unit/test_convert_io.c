/*
 * Unit tests: hb_convert's expert pipeline I/O (hb_convert_experts.c) on
 * the realshape fixture: the read-back refuses what the file does not give
 * back, in both read modes and at every place of a sync window; faults in
 * the pipeline publish nothing; the read mode, the window and the thread
 * count change no byte; the buffered mode leaves none of the artifact's
 * expert payload in the page cache.
 */
#include "hb_base.h"
#include "harness.h"
#include "hb-convert/hb_convert.h"
#include "hb_fault.h"
#include "hb_io.h"
#include "hb_json.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

static const char *ckpt(const char *set)
{
	static char path[4096];
	snprintf(path, sizeof(path), "%s/tests/fixtures/upstream/%s/checkpoint", hb_test_srcdir(), set);
	return path;
}

/* bf16 experts and PLE from realshape into out.gguf, the rest defaults. */
static void realshape_bf16(struct hb_convert_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->src_dir = ckpt("realshape");
	o->out_path = "out.gguf";
	o->expert_codec = HB_CONV_EXPERTS_BF16;
	o->ple_codec = HB_CONV_PLE_BF16;
}

/* A record the file does not give back as written (the seam flips one
 * byte of what was read back) is refused as conv-verify at its offset,
 * whatever the read mode and wherever the record falls in its sync window
 * (buffered: the last record of a window, the first of the next, a window
 * of one record, the last record, whose window holds the trailing
 * padding); nothing is published, no temporary file stays, and an existing
 * target survives. */
struct flip {
	uint64_t record;
	size_t at;
	unsigned seen;
};

static void flip_one(void *ctx, uint64_t record, uint8_t *bytes, size_t len)
{
	struct flip *f = ctx;
	f->seen++;
	if (record == f->record && f->at < len)
		bytes[f->at] ^= 0x01;
}

static void readback_mismatch_refused(void)
{
	/* realshape: 8 x 32 records of 24576 bytes */
	static const struct { int io; uint64_t window, record; } ways[] = {
		{HB_CONV_IO_DIRECT, 0, 255},          {HB_CONV_IO_DIRECT, 0, 100},
		{HB_CONV_IO_AUTO, 0, 201},            {HB_CONV_IO_BUFFERED, 0, 0},
		{HB_CONV_IO_BUFFERED, 3 * 24576, 2},  {HB_CONV_IO_BUFFERED, 3 * 24576, 3},
		{HB_CONV_IO_BUFFERED, 3 * 24576, 255}, {HB_CONV_IO_BUFFERED, 24576, 77},
		{HB_CONV_IO_BUFFERED, 24575, 31},     {HB_CONV_IO_BUFFERED, 5 * 24576 + 1, 32},
	};
	static const unsigned threads[] = {1, 3};
	struct hb_convert_opts o;
	struct hb_error err;

	realshape_bf16(&o);
	o.force = true;
	o.readback_hook = flip_one;
	CHECK(hb_test_write_file("out.gguf", "old", 3) == 0);
	for (size_t i = 0; i < HB_ARRAY_LEN(ways); i++)
		for (size_t t = 0; t < HB_ARRAY_LEN(threads); t++) {
			struct flip f = {ways[i].record, 24575 - 1000 * t - 7 * i, 0};
			char *data = NULL;
			size_t len = 0;
			o.io = ways[i].io;
			o.io_window = ways[i].window;
			o.threads = threads[t];
			o.readback_ctx = &f;
			hb_error_clear(&err);
			CHECK_EQ_INT(hb_convert(&o, NULL, &err), HB_ERR_INTERNAL);
			CHECK_STR(err.id, "conv-verify");
			CHECK(err.has_offset);
			/* every record before the flipped one was read back */
			CHECK(f.seen >= f.record + 1);
			CHECK_EQ_INT(hb_read_file("out.gguf", 100, &data, &len, NULL), HB_OK);
			CHECK(len == 3 && data && !memcmp(data, "old", 3));
			free(data);
			CHECK_EQ_INT(hb_test_count_prefix(".", ".out.gguf.hbtmp"), 0);
		}
	/* the seam that changes nothing: every record read back once */
	{
		for (int io = HB_CONV_IO_AUTO; io <= HB_CONV_IO_DIRECT; io++) {
			struct flip f = {UINT64_MAX, 0, 0};
			o.readback_ctx = &f;
			o.io = io;
			o.io_window = 2 * 24576;
			o.threads = 2;
			CHECK_EQ_INT(hb_convert(&o, NULL, NULL), HB_OK);
			CHECK_EQ_U64(f.seen, 8 * 32);
		}
	}
}

/* Faults inside the expert pipeline (a record write, a source read or a
 * read-back in the middle of the store) stop the conversion with the
 * system's error, in either read mode; nothing is published. */
struct counts {
	unsigned writes, reads;
};

static int count_at_dense(void *ctx, const char *stage)
{
	struct counts *c = ctx;
	if (!strcmp(stage, "dense")) {
		c->writes = hb_fault_calls(HB_FAULT_WRITE);
		c->reads = hb_fault_calls(HB_FAULT_READ);
	}
	return 0;
}

static void pipeline_faults_publish_nothing(void)
{
	struct hb_convert_opts o;
	struct counts at = {0, 0};
	unsigned reads_total;

	realshape_bf16(&o);
	o.stage_hook = count_at_dense;
	o.stage_ctx = &at;
	hb_fault_reset();
	CHECK_EQ_INT(hb_convert(&o, NULL, NULL), HB_OK);
	reads_total = hb_fault_calls(HB_FAULT_READ);
	hb_fault_reset();
	unlink("out.gguf");
	/* 256 records, three source reads and one read-back each */
	CHECK(reads_total > at.reads + 4 * 256);
	{
		const struct { enum hb_fault_site site; unsigned nth; } f[] = {
			{HB_FAULT_WRITE, at.writes + 1}, {HB_FAULT_WRITE, at.writes + 130},
			{HB_FAULT_READ, at.reads + 2}, {HB_FAULT_READ, at.reads + 500},
			{HB_FAULT_READ, at.reads + 4 * 256 - 1},
		};
		for (size_t i = 0; i < HB_ARRAY_LEN(f); i++)
			for (unsigned threads = 1; threads <= 3; threads += 2) {
				struct hb_error err;
				o.threads = threads;
				o.io = threads == 1 ? HB_CONV_IO_DIRECT : HB_CONV_IO_BUFFERED;
				hb_fault_reset();
				hb_fault_arm(f[i].site, f[i].nth, EIO);
				hb_error_clear(&err);
				CHECK_EQ_INT(hb_convert(&o, NULL, &err), HB_ERR_IO);
				hb_fault_reset();
				CHECK(!hb_test_exists("out.gguf"));
				CHECK_EQ_INT(hb_test_count_prefix(".", ".out.gguf.hbtmp"), 0);
			}
	}
}

/* Neither the thread count nor the read mode changes a byte: bf16 and
 * affine4, 1, 2, 3 and 7 threads, O_DIRECT where possible and buffered
 * with windows of one record, of three records and a byte (not a record
 * multiple), and larger than the store. */
static void io_and_threads_do_not_change_bytes(void)
{
	static const enum hb_expert_codec_opt codecs[] = {HB_CONV_EXPERTS_BF16, HB_CONV_EXPERTS_AFFINE4_G64};
	static const struct { unsigned threads; int io; uint64_t window; } ways[] = {
		{2, HB_CONV_IO_BUFFERED, 0},          {7, HB_CONV_IO_AUTO, 0},
		{7, HB_CONV_IO_DIRECT, 0},            {1, HB_CONV_IO_BUFFERED, 1},
		{3, HB_CONV_IO_BUFFERED, 3 * 24576 + 1}, {2, HB_CONV_IO_BUFFERED, 1ull << 40},
	};
	struct hb_convert_opts o;

	memset(&o, 0, sizeof(o));
	o.src_dir = ckpt("realshape");
	o.ple_codec = HB_CONV_PLE_BF16;
	o.force = true;
	for (size_t k = 0; k < HB_ARRAY_LEN(codecs); k++) {
		char *x = NULL;
		size_t lx = 0;
		o.expert_codec = codecs[k];
		o.threads = 1;
		o.io = HB_CONV_IO_DIRECT;
		o.io_window = 0;
		o.out_path = "base.gguf";
		CHECK_EQ_INT(hb_convert(&o, NULL, NULL), HB_OK);
		CHECK_EQ_INT(hb_read_file("base.gguf", 64u << 20, &x, &lx, NULL), HB_OK);
		for (size_t i = 0; i < HB_ARRAY_LEN(ways); i++) {
			char *y = NULL;
			size_t ly = 0;
			o.threads = ways[i].threads;
			o.io = ways[i].io;
			o.io_window = ways[i].window;
			o.out_path = "other.gguf";
			CHECK_EQ_INT(hb_convert(&o, NULL, NULL), HB_OK);
			CHECK_EQ_INT(hb_read_file("other.gguf", 64u << 20, &y, &ly, NULL), HB_OK);
			CHECK(x && y && lx == ly && memcmp(x, y, lx) == 0);
			free(y);
		}
		free(x);
	}
}


/* Pages of [off, off + len) of fd in the page cache (mincore of a mapping
 * that is never touched, so nothing is read). */
static uint64_t resident(int fd, uint64_t off, uint64_t len)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t a = off / (uint64_t)pg * (uint64_t)pg, n = (off + len - a + (uint64_t)pg - 1) / (uint64_t)pg;
	unsigned char *v = calloc(n ? n : 1, 1);
	uint64_t count = 0;
	void *m = n ? mmap(NULL, n * (uint64_t)pg, PROT_READ, MAP_SHARED, fd, (off_t)a) : MAP_FAILED;

	CHECK(m != MAP_FAILED && v);
	if (m != MAP_FAILED && v && !mincore(m, n * (uint64_t)pg, v))
		for (uint64_t i = 0; i < n; i++)
			count += v[i] & 1;
	if (m != MAP_FAILED)
		munmap(m, n * (uint64_t)pg);
	free(v);
	return count;
}

/* Buffered, every synced window is read back and dropped from the page
 * cache: after the conversion at most the two partial pages at the
 * payload's ends stay (the reader's header pages lie before it); the
 * report names the window.  (The source shards are dropped too, but the
 * kernel's asynchronous readahead may still be bringing pages in when they
 * are, so that is not asserted.)  Where the file system has no page cache
 * to drop (tmpfs) it is skipped. */
static void buffered_leaves_no_cache(void)
{
	struct hb_convert_opts o;
	struct statfs fs;
	cJSON *rep = NULL;
	uint64_t off = 0, bytes = 0, payload = 0, window = 0, rb = 0;
	cJSON *st, *pp;
	int fd;

	if (statfs(".", &fs) == 0 && fs.f_type == 0x01021994 /* TMPFS_MAGIC */) {
		hb_test_skip("the test directory is on tmpfs: POSIX_FADV_DONTNEED drops nothing there");
		return;
	}
	realshape_bf16(&o);
	o.io = HB_CONV_IO_AUTO;
	o.io_window = 4 * 24576;
	o.threads = 2;
	CHECK_EQ_INT(hb_convert(&o, &rep, NULL), HB_OK);
	st = cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "stores"), "experts");
	pp = cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "timing"), "expert_pipeline");
	CHECK_EQ_INT(hb_json_u64(st, "offset", "o", &off, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_u64(st, "bytes", "b", &bytes, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_u64(st, "record_bytes", "r", &rb, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_u64(pp, "payload_bytes", "p", &payload, NULL), HB_OK);
	CHECK_EQ_INT(hb_json_u64(pp, "window_bytes", "w", &window, NULL), HB_OK);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(pp, "io")), "buffered");
	CHECK_EQ_U64(rb, 24576);
	CHECK_EQ_U64(payload, 8 * 32 * rb);
	CHECK_EQ_U64(window, 4 * rb);
	cJSON_Delete(rep);
	/* the last payload_bytes of the store lie inside its payload */
	fd = open("out.gguf", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0 && bytes > payload);
	if (fd >= 0) {
		CHECK(resident(fd, off + bytes - payload, payload) <= 2);
		close(fd);
	}
}

HB_TEST_MAIN(T(readback_mismatch_refused), T(pipeline_faults_publish_nothing),
	     T(io_and_threads_do_not_change_bytes), T(buffered_leaves_no_cache))
