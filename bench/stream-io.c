/*
 * bench/stream-io.c: the streaming engine's read path (libkern/stream) on
 * records of the real Qwen4Exp width, against a named baseline measured
 * in the same run.  Not a test: it prints, never asserts a time.
 *
 * usage: stream-io DIR [RECORDS [ROUNDS]]
 *
 * Writes DIR/stream-io.store once: one layer of RECORDS (default 256)
 * ExpertMajor records laid out for family 4 with mlx-affine4-g64 (2,764,800
 * bytes each, 4096-aligned), filled with pseudo-random bytes, and the
 * record digest table.  Then, for buffered and O_DIRECT reads at depths 1,
 * 2, 4 and 8 (one I/O thread per depth), reads every record once through a
 * 16-slot budget as routes of 10 (the decode shape: top-10), each round
 * starting cold (the file's pages dropped with POSIX_FADV_DONTNEED; O_DIRECT
 * never fills them).  Prints per configuration: MB/s, issue-to-ready
 * p50/p99, and the ratio to the baseline "buffered, depth 1"; and SHA-256
 * of the same bytes in memory, the verification's share of a read.
 * Takes the best of ROUNDS (default 3) rounds per configuration.
 */
#include "hb_base.h"
#include "hb_sha256.h"
#include "stream/hb_stream.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static int build(const char *path, uint32_t records, struct hb_xs_source *src)
{
	struct hb_em_geometry g;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	uint8_t *rec;
	int fd, rc = 0;

	hb_em_geometry_qwen4exp(&g);
	g.layers = 1;
	g.experts = records;
	memset(src, 0, sizeof(*src));
	if (hb_em_layout_plan(&src->layout, &g, HB_EM_CODEC_AFFINE4_G64, NULL))
		return -1;
	src->path = strdup(path);
	src->record_sha = malloc((size_t)records * 32);
	rec = malloc((size_t)src->layout.record_bytes);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (!src->path || !src->record_sha || !rec || fd < 0) {
		free(rec);
		return -1;
	}
	for (uint32_t e = 0; e < records && !rc; e++) {
		uint64_t off = src->layout.layers[0].data_offset + (uint64_t)e * src->layout.record_bytes;
		for (size_t i = 0; i + 8 <= src->layout.record_bytes; i += 8) {
			uint64_t v = rng(&x);
			memcpy(rec + i, &v, 8);
		}
		hb_sha256_buf(rec, (size_t)src->layout.record_bytes, src->record_sha + (size_t)e * 32);
		if (pwrite(fd, rec, (size_t)src->layout.record_bytes, (off_t)off) != (ssize_t)src->layout.record_bytes)
			rc = -1;
	}
	if (!rc && fsync(fd))
		rc = -1;
	close(fd);
	free(rec);
	return rc;
}

static void drop_cache(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
		close(fd);
	}
}

/* One cold pass over every record; seconds, or < 0 on a failure. */
static double pass(const struct hb_xs_source *src, enum hb_xs_direct direct, unsigned depth,
		   struct hb_xs_stats *st, char *mode, size_t mode_len)
{
	struct hb_xs_config c;
	struct hb_xs *s = NULL;
	struct hb_error err;
	uint32_t n = src->layout.expert_count;
	double t0, t;

	hb_xs_config_default(&c);
	c.threads = depth;
	c.depth = depth;
	c.reserved_p0 = 0;
	c.direct = direct;
	c.budget_bytes = 16 * hb_xs_slot_bytes(src);
	drop_cache(src->path);
	hb_error_clear(&err);
	if (hb_xs_open(src, &c, &s, &err)) {
		fprintf(stderr, "stream-io: %s: %s\n", err.field, err.msg);
		return -1;
	}
	snprintf(mode, mode_len, "%s", hb_xs_io_mode(s));
	t0 = now_s();
	for (uint32_t first = 0; first < n; first += 10) {
		uint32_t ex[10], k = n - first < 10 ? n - first : 10;
		struct hb_xs_want w[10];
		struct hb_xs_route r;
		struct hb_xs_lease l;
		size_t idx;
		int rc;
		for (uint32_t i = 0; i < k; i++)
			ex[i] = first + i;
		hb_xs_route_init(&r, w, 10);
		if (hb_xs_route_begin(s, &r, 0, ex, k, &err))
			break;
		while ((rc = hb_xs_route_next(s, &r, &idx, &l, &err)) == HB_OK)
			hb_xs_release(s, &l, NULL);
		hb_xs_route_end(s, &r);
		if (rc != HB_XS_DONE) {
			fprintf(stderr, "stream-io: %s: %s\n", err.field, err.msg);
			hb_xs_close(s);
			return -1;
		}
	}
	t = now_s() - t0;
	hb_xs_stats_get(s, st);
	hb_xs_close(s);
	return t;
}

int main(int argc, char **argv)
{
	struct hb_xs_source src;
	char path[4096];
	uint32_t records = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) : 256;
	unsigned rounds = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 3;
	static const unsigned depths[] = {1, 2, 4, 8};
	double base = 0, bytes;
	uint8_t d[32];

	if (argc < 2 || records == 0 || records > 512 || rounds == 0) {
		fprintf(stderr, "usage: stream-io DIR [RECORDS (1-512) [ROUNDS]]\n");
		return 2;
	}
	if (hb_crypto_init())
		return 1;
	snprintf(path, sizeof(path), "%s/stream-io.store", argv[1]);
	if (build(path, records, &src)) {
		fprintf(stderr, "stream-io: cannot write %s\n", path);
		return 1;
	}
	bytes = (double)records * (double)src.layout.record_bytes;
	printf("records %u x %" PRIu64 " bytes (%.1f MB), budget 16 slots, routes of 10, sha256 %s\n", records,
	       src.layout.record_bytes, bytes / 1e6, hb_sha256_impl());
	{
		/* verification alone: the same bytes hashed in memory */
		uint8_t *buf = malloc((size_t)src.layout.record_bytes);
		double t0 = now_s();
		memset(buf, 0x5a, (size_t)src.layout.record_bytes);
		for (uint32_t e = 0; e < records; e++)
			hb_sha256_buf(buf, (size_t)src.layout.record_bytes, d);
		printf("sha256 in memory          %8.1f MB/s (one thread)\n", bytes / (now_s() - t0) / 1e6);
		free(buf);
	}
	for (int direct = 0; direct < 2; direct++)
		for (size_t i = 0; i < HB_ARRAY_LEN(depths); i++) {
			struct hb_xs_stats st;
			struct hb_xs_metrics m;
			char mode[96] = "";
			double best = -1;
			for (unsigned r = 0; r < rounds; r++) {
				double t = pass(&src, direct ? HB_XS_DIRECT_ON : HB_XS_DIRECT_OFF, depths[i], &st, mode,
						sizeof(mode));
				if (t < 0)
					break;
				if (best < 0 || t < best)
					best = t;
			}
			if (best < 0) {
				printf("%-9s depth %u: not available here\n", direct ? "direct" : "buffered", depths[i]);
				continue;
			}
			hb_xs_metrics_get(&st, &m);
			if (!direct && i == 0)
				base = best;
			printf("%-9s depth %u  %8.1f MB/s  p50 %7.2f ms  p99 %7.2f ms  x%.2f of buffered depth 1  (%s)\n",
			       direct ? "direct" : "buffered", depths[i], bytes / best / 1e6, m.ready_p50_ns / 1e6,
			       m.ready_p99_ns / 1e6, base / best, mode);
		}
	unlink(path);
	hb_xs_source_release(&src);
	return 0;
}
