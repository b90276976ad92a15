/*
 * Unit tests: hb_verify on converted upstream fixtures with corruption in
 * every payload region.  Each corruption is a contract-control edit of a
 * good artifact; the expectations (which page, which record, which digest)
 * follow from where the bytes were changed, not from the verifier.
 */
#include "hb_base.h"
#include "harness.h"
#include "artifact/hb_artifact.h"
#include "hb-convert/hb_convert.h"
#include "gguf/hb_gguf.h"
#include "hb_fault.h"
#include "hb_io.h"
#include "ple/hb_ple_store.h"
#include "hb_sha256.h"
#include "hb-verify-pages/hb_verify.h"

#include <fcntl.h>
#include <unistd.h>

#define MAX_FINDINGS 64

struct seen {
	size_t n;
	struct hb_verify_finding f[MAX_FINDINGS];
};

static void collect(void *ctx, const struct hb_verify_finding *f)
{
	struct seen *s = ctx;
	if (s->n < MAX_FINDINGS)
		s->f[s->n] = *f;
	s->n++;
}

static bool convert_fixture(const char *set, const char *out)
{
	struct hb_convert_opts o;
	char src[4096];

	snprintf(src, sizeof(src), "%s/tests/fixtures/upstream/%s/checkpoint", hb_test_srcdir(), set);
	memset(&o, 0, sizeof(o));
	o.src_dir = src;
	o.out_path = out;
	o.expert_codec = HB_CONV_EXPERTS_BF16;
	o.ple_codec = HB_CONV_PLE_BF16;
	return hb_convert(&o, NULL, NULL) == HB_OK;
}

static int verify_io(const char *path, unsigned threads, size_t chunk, bool direct, struct seen *s,
		     struct hb_verify_stats *st, struct hb_error *err)
{
	struct hb_verify_opts o;

	memset(&o, 0, sizeof(o));
	o.path = path;
	o.threads = threads;
	o.direct_io = direct;
	o.ple = o.experts = true;
	o.chunk_bytes = chunk;
	memset(s, 0, sizeof(*s));
	hb_error_clear(err);
	return hb_verify(&o, collect, s, st, err);
}

static int verify(const char *path, unsigned threads, size_t chunk, struct seen *s,
		  struct hb_verify_stats *st, struct hb_error *err)
{
	return verify_io(path, threads, chunk, false, s, st, err);
}

/* Offsets of the two stores. */
struct where {
	uint64_t em, em_size, ple, ple_size;
};

static bool locate(const char *path, struct where *w)
{
	struct hb_gguf g;
	int fd = open(path, O_RDONLY);
	const struct hb_gguf_tensor *t;
	bool ok;

	hb_gguf_init(&g);
	ok = fd >= 0 && hb_gguf_read_fd(&g, fd, NULL, NULL) == HB_OK;
	if (ok && (t = hb_gguf_find_tensor(&g, HB_TENSOR_EXPERT_STORE)))
		w->em = t->offset, w->em_size = t->nbytes;
	if (ok && (t = hb_gguf_find_tensor(&g, HB_TENSOR_PLE_STORE)))
		w->ple = t->offset, w->ple_size = t->nbytes;
	hb_gguf_release(&g);
	if (fd >= 0)
		close(fd);
	return ok;
}

static void poke(const char *path, uint64_t off, uint8_t xor_with)
{
	int fd = open(path, O_RDWR);
	uint8_t b = 0;
	CHECK(fd >= 0 && pread(fd, &b, 1, (off_t)off) == 1);
	b ^= xor_with;
	CHECK(pwrite(fd, &b, 1, (off_t)off) == 1);
	close(fd);
}

static const struct hb_ple_layout *ple_layout(const char *path, struct hb_ple_store **s, int *fd,
					     const struct where *w)
{
	*fd = open(path, O_RDWR);
	if (*fd < 0 || hb_ple_store_open(s, *fd, w->ple, w->ple_size, NULL))
		return NULL;
	return hb_ple_store_layout(*s);
}

static void clean_artifacts_verify(void)
{
	struct seen s;
	struct hb_verify_stats st;
	struct hb_error err;

	CHECK(convert_fixture("realshape", "r.gguf"));
	CHECK(convert_fixture("general", "g.gguf"));
	CHECK_EQ_INT(verify("r.gguf", 0, 0, &s, &st, &err), HB_OK);
	CHECK_EQ_U64(s.n, 0);
	CHECK(st.ple_payload_checked && st.ple_payload_ok && st.em_payload_checked && st.em_payload_ok);
	CHECK_EQ_U64(st.ple_checked, st.ple_pages);
	CHECK_EQ_U64(st.records_checked, 8 * 32);
	CHECK_EQ_INT(verify("g.gguf", 1, 4096, &s, &st, &err), HB_OK); /* tiny chunks */
	CHECK_EQ_U64(st.records_checked, 6 * 40);
}

/* A flipped byte in a page body: that page's digest and the payload. */
static void page_body_and_record(void)
{
	struct seen s, s1;
	struct hb_verify_stats st;
	struct hb_error err;
	struct where w;
	struct hb_ple_store *ps = NULL;
	const struct hb_ple_layout *l;
	int fd;

	CHECK(convert_fixture("realshape", "r.gguf"));
	CHECK(locate("r.gguf", &w));
	l = ple_layout("r.gguf", &ps, &fd, &w);
	CHECK(l != NULL);
	if (!l)
		return;
	/* page 5, a byte inside its first row; page 9 too */
	poke("r.gguf", w.ple + l->payload_offset + 5 * l->page_stride + HB_PLE_PAGE_HEADER_BYTES + 3, 0x40);
	poke("r.gguf", w.ple + l->payload_offset + 9 * l->page_stride + HB_PLE_PAGE_HEADER_BYTES, 0x01);
	hb_ple_store_close(ps);
	close(fd);
	CHECK_EQ_INT(verify("r.gguf", 0, 0, &s, &st, &err), HB_ERR_DIGEST);
	CHECK_EQ_U64(st.ple_bad, 2);
	CHECK_EQ_U64(s.n, 3); /* two pages, then the PLE payload */
	CHECK_STR(s.f[0].err.id, "ple-page-digest");
	CHECK_EQ_U64(s.f[0].index, 5);
	CHECK(s.f[0].expected[0] && s.f[0].found[0] && strcmp(s.f[0].expected, s.f[0].found));
	CHECK_EQ_U64(s.f[1].index, 9);
	CHECK_STR(s.f[2].kind, "payload");
	CHECK_STR(s.f[2].err.id, "ple-payload-digest");
	/* the same findings, in the same order, with one thread and tiny chunks */
	CHECK_EQ_INT(verify("r.gguf", 1, 8192, &s1, &st, &err), HB_ERR_DIGEST);
	CHECK_EQ_U64(s1.n, s.n);
	for (size_t i = 0; i < s.n && i < s1.n; i++) {
		CHECK_EQ_U64(s1.f[i].index, s.f[i].index);
		CHECK_STR(s1.f[i].found, s.f[i].found);
	}
}

static void expert_record(void)
{
	struct seen s;
	struct hb_verify_stats st;
	struct hb_error err;
	struct where w;
	uint64_t rec_bytes = 3 * 64 * 64 * 2; /* realshape bf16: gate, up, down 64x64 */

	CHECK(convert_fixture("realshape", "r.gguf"));
	CHECK(locate("r.gguf", &w));
	/* data offset 4096 (header + 8 descriptors fit in one page); layer 2
	 * starts at 4096 + 2 * 32 records, all 4096-aligned */
	poke("r.gguf", w.em + 4096 + (2 * 32 + 7) * rec_bytes + 1000, 0x80);
	CHECK_EQ_INT(verify("r.gguf", 0, 0, &s, &st, &err), HB_ERR_DIGEST);
	CHECK_EQ_U64(st.records_bad, 1);
	CHECK_EQ_U64(s.n, 2);
	CHECK_STR(s.f[0].err.id, "verify-record-digest");
	CHECK_EQ_INT(s.f[0].layer, 2);
	CHECK_EQ_INT(s.f[0].expert, 7);
	CHECK_STR(s.f[0].err.field, "expert_store.layer[2].expert[7]");
	CHECK_STR(s.f[1].err.id, "em-payload-digest");
	/* PLE untouched and fully verified meanwhile */
	CHECK(st.ple_payload_ok && st.ple_bad == 0);
}

/* AFN-003's isolated test: change page bytes, recompute that page's digest
 * and the manifest digest, leave the whole-payload digest stale.  Pages and
 * rows verify; only the whole payload fails, and the tool says exactly so. */
static void isolated_whole_payload(void)
{
	struct seen s;
	struct hb_verify_stats st;
	struct hb_error err;
	struct where w;
	struct hb_ple_store *ps = NULL;
	const struct hb_ple_layout *lp;
	struct hb_ple_layout l;
	uint8_t hdr[HB_PLE_HEADER_BYTES], pay[32], man[32], *dir = NULL, *table = NULL, *page = NULL;
	int fd;

	CHECK(convert_fixture("realshape", "r.gguf"));
	CHECK(locate("r.gguf", &w));
	lp = ple_layout("r.gguf", &ps, &fd, &w);
	CHECK(lp != NULL);
	if (!lp)
		return;
	l = *lp;
	hb_ple_store_close(ps);
	dir = malloc((size_t)l.dir_bytes);
	table = malloc((size_t)l.digest_bytes);
	page = malloc((size_t)l.page_stride);
	CHECK(pread(fd, hdr, sizeof(hdr), (off_t)w.ple) == (ssize_t)sizeof(hdr));
	CHECK(pread(fd, dir, (size_t)l.dir_bytes, (off_t)(w.ple + l.dir_offset)) == (ssize_t)l.dir_bytes);
	CHECK(pread(fd, table, (size_t)l.digest_bytes, (off_t)(w.ple + l.digest_offset)) == (ssize_t)l.digest_bytes);
	memcpy(pay, hdr + HB_PLE_OFF_PAYLOAD_SHA256, 32);
	/* page 11: change a row byte, reseal the page digest */
	CHECK(pread(fd, page, (size_t)l.page_stride, (off_t)(w.ple + l.payload_offset + 11 * l.page_stride)) ==
	      (ssize_t)l.page_stride);
	page[HB_PLE_PAGE_HEADER_BYTES + 1] ^= 0x10;
	CHECK(pwrite(fd, page, (size_t)l.page_stride, (off_t)(w.ple + l.payload_offset + 11 * l.page_stride)) ==
	      (ssize_t)l.page_stride);
	hb_sha256_buf(page, (size_t)l.page_stride, table + 11 * 32);
	CHECK(pwrite(fd, table + 11 * 32, 32, (off_t)(w.ple + l.digest_offset + 11 * 32)) == 32);
	/* reseal the manifest over the new table, payload digest unchanged */
	hb_ple_manifest_digest(&l, hdr, dir, table, man);
	hb_ple_header_encode(&l, pay, man, hdr);
	CHECK(pwrite(fd, hdr, sizeof(hdr), (off_t)w.ple) == (ssize_t)sizeof(hdr));
	close(fd);
	free(dir), free(table), free(page);

	CHECK_EQ_INT(verify("r.gguf", 0, 0, &s, &st, &err), HB_ERR_DIGEST);
	CHECK_EQ_U64(st.ple_bad, 0);             /* every page verifies */
	CHECK(st.ple_payload_checked && !st.ple_payload_ok);
	CHECK_EQ_U64(s.n, 1);
	CHECK_STR(s.f[0].kind, "payload");
	CHECK_STR(s.f[0].err.id, "ple-payload-digest");
	{
		char want[HB_SHA256_HEX];
		hb_hex_encode(pay, 32, want);
		CHECK_STR(s.f[0].expected, want); /* the stale recorded digest */
		CHECK(s.f[0].found[0] && strcmp(s.f[0].found, want));
	}
}

/* Two runs said the same: findings in the same order with the same
 * digests, and the same counts. */
static void same_outcome(const struct seen *a, const struct hb_verify_stats *sa, const struct seen *b,
			 const struct hb_verify_stats *sb)
{
	CHECK_EQ_U64(b->n, a->n);
	for (size_t i = 0; i < a->n && i < b->n && i < MAX_FINDINGS; i++) {
		CHECK_STR(b->f[i].err.id, a->f[i].err.id);
		CHECK_EQ_U64(b->f[i].index, a->f[i].index);
		CHECK_STR(b->f[i].expected, a->f[i].expected);
		CHECK_STR(b->f[i].found, a->f[i].found);
	}
	CHECK_EQ_U64(sb->ple_checked, sa->ple_checked);
	CHECK_EQ_U64(sb->ple_bad, sa->ple_bad);
	CHECK_EQ_U64(sb->records_checked, sa->records_checked);
	CHECK_EQ_U64(sb->records_bad, sa->records_bad);
	CHECK_EQ_U64(sb->bytes_read, sa->bytes_read);
	CHECK_EQ_U64(sb->bytes_hashed, sa->bytes_hashed);
	CHECK(sb->ple_payload_ok == sa->ple_payload_ok && sb->em_payload_ok == sa->em_payload_ok);
}

/* The pipeline's outcome does not depend on how many threads share the
 * work, how small the chunks are, or whether the reads bypass the page
 * cache: a page header, a page body, a fill byte and two records broken,
 * verified every way. */
static void pipeline_independent_of_threads_chunks_and_io(void)
{
	static const struct { unsigned threads; size_t chunk; bool direct; } ways[] = {
		{2, 0, true}, {3, 8192, false}, {6, 4096, false}, {8, 20000, true}, {1, 0, false}, {1, 4096, true},
	};
	struct seen base, s;
	struct hb_verify_stats sb, st;
	struct hb_error err;
	struct where w;
	struct hb_ple_store *ps = NULL;
	const struct hb_ple_layout *l;
	uint64_t rec_bytes = 3 * 64 * 64 * 2, pages;
	int fd;

	CHECK(convert_fixture("realshape", "r.gguf"));
	CHECK(locate("r.gguf", &w));
	l = ple_layout("r.gguf", &ps, &fd, &w);
	CHECK(l != NULL);
	if (!l)
		return;
	pages = w.ple + l->payload_offset;
	poke("r.gguf", pages + 2 * l->page_stride + 16, 0x04);                      /* header: first row */
	poke("r.gguf", pages + 30 * l->page_stride + HB_PLE_PAGE_HEADER_BYTES + 9, 0x20); /* body */
	poke("r.gguf", pages + 65 * l->page_stride + l->page_stride - 1, 0x01);       /* last page's fill */
	hb_ple_store_close(ps);
	close(fd);
	poke("r.gguf", w.em + 4096 + 0 * rec_bytes + 5, 0x02);
	poke("r.gguf", w.em + 4096 + (7 * 32 + 31) * rec_bytes + rec_bytes - 1, 0x10);
	CHECK_EQ_INT(verify("r.gguf", 1, 8192, &base, &sb, &err), HB_ERR_DIGEST);
	/* what the edits make: three pages, the PLE payload, two records,
	 * the expert payload */
	CHECK_EQ_U64(base.n, 7);
	CHECK_EQ_U64(sb.ple_bad, 3);
	CHECK_EQ_U64(sb.records_bad, 2);
	CHECK_STR(base.f[0].err.id, "ple-page-header");
	CHECK_EQ_U64(base.f[0].index, 2);
	CHECK_STR(base.f[0].found, "");  /* no digest shown when the header failed */
	CHECK_STR(base.f[1].err.id, "ple-page-digest");
	CHECK(base.f[1].found[0]);
	CHECK_STR(base.f[2].err.id, "ple-reserved-nonzero");
	CHECK_EQ_U64(base.f[2].index, 65);
	CHECK_STR(base.f[3].err.id, "ple-payload-digest");
	CHECK_STR(base.f[4].err.id, "verify-record-digest");
	CHECK_EQ_U64(base.f[4].index, 0);
	CHECK_EQ_U64(base.f[5].index, 7 * 32 + 31);
	CHECK_STR(base.f[6].err.id, "em-payload-digest");
	for (size_t i = 0; i < HB_ARRAY_LEN(ways); i++) {
		CHECK_EQ_INT(verify_io("r.gguf", ways[i].threads, ways[i].chunk, ways[i].direct, &s, &st, &err),
			     HB_ERR_DIGEST);
		same_outcome(&base, &sb, &s, &st);
		if (!ways[i].direct)
			CHECK(!st.direct_io);
		CHECK(st.wall_s > 0 && st.unit_threads >= 1);
	}
}

/* A read that fails in the middle of the expert stream stops verification
 * with the read's error: what was found before it is reported, in order,
 * nothing after it, and the expert payload is not claimed checked. */
static void read_failure_mid_stream(void)
{
	static const unsigned threads[] = {1, 2, 5};
	struct seen s;
	struct hb_verify_stats st;
	struct hb_error err;
	struct where w;
	uint64_t rec_bytes = 3 * 64 * 64 * 2;
	unsigned calls;

	CHECK(convert_fixture("realshape", "r.gguf"));
	CHECK(locate("r.gguf", &w));
	poke("r.gguf", w.em + 4096 + 3 * rec_bytes + 77, 0x08); /* layer 0, expert 3 */
	for (size_t i = 0; i < 2 * HB_ARRAY_LEN(threads); i++) {
		bool direct = i >= HB_ARRAY_LEN(threads); /* two readers then */
		unsigned t = threads[i % HB_ARRAY_LEN(threads)];
		hb_fault_reset();
		CHECK_EQ_INT(verify_io("r.gguf", 1, rec_bytes, direct, &s, &st, &err), HB_ERR_DIGEST);
		calls = hb_fault_calls(HB_FAULT_READ);
		CHECK_EQ_U64(st.records_checked, 256);
		/* one record per chunk: the last reads are the expert records */
		CHECK(calls > 200);
		hb_fault_reset();
		hb_fault_arm(HB_FAULT_READ, calls - 100, EIO);
		CHECK_EQ_INT(verify_io("r.gguf", t, rec_bytes, direct, &s, &st, &err), HB_ERR_IO);
		hb_fault_reset();
		CHECK_EQ_U64(s.n, 1);
		CHECK_STR(s.f[0].err.id, "verify-record-digest");
		CHECK_EQ_INT(s.f[0].expert, 3);
		CHECK(st.records_checked >= 4 && st.records_checked < 256);
		CHECK(!st.em_payload_checked);
		CHECK(st.ple_payload_checked && st.ple_payload_ok);
	}
}

HB_TEST_MAIN(T(clean_artifacts_verify), T(page_body_and_record), T(expert_record),
	     T(isolated_whole_payload), T(pipeline_independent_of_threads_chunks_and_io),
	     T(read_failure_mid_stream))
