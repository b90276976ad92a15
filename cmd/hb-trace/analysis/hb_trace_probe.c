/*
 * hb_trace_probe.c: the storage probe (hb_trace_probe.h).  Offsets come
 * from a fixed-seed generator so that two probes read the same places.
 */
#include "hb_base.h"
#include "hb_trace_probe.h"
#include "hb_io.h"

#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#define ALIGN 4096u
#define LAT_SAMPLES 129u
#define BW_READS 48u
#define TEMP_BYTES (64ull << 20)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
	return *s;
}

struct worker {
	int fd;
	uint64_t size, len, reads, seed;
	int rc;
};

static void *bw_thread(void *arg)
{
	struct worker *w = arg;
	void *buf = NULL;
	uint64_t slots = (w->size - w->len) / ALIGN + 1;

	if (posix_memalign(&buf, ALIGN, w->len)) {
		w->rc = HB_ERR_NOMEM;
		return NULL;
	}
	for (uint64_t i = 0; i < w->reads && !w->rc; i++) {
		uint64_t off = (rnd(&w->seed) % slots) * ALIGN;
		if (pread(w->fd, buf, w->len, (off_t)off) != (ssize_t)w->len)
			w->rc = HB_ERR_IO;
	}
	free(buf);
	return NULL;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int make_temp(int *fd, struct hb_error *err)
{
	const char *dir = getenv("TMPDIR");
	uint8_t *buf = malloc(1 << 20);
	uint64_t s = 88172645463325252ull;

	if (!buf)
		return hb_error_set(err, HB_ERR_NOMEM, "probe", "out of memory");
	*fd = open(dir && *dir ? dir : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (*fd < 0) {
		free(buf);
		return hb_error_sys(err, errno, dir && *dir ? dir : "/tmp", "cannot create a temporary file in");
	}
	for (uint64_t off = 0; off < TEMP_BYTES; off += 1 << 20) {
		for (size_t i = 0; i < (1 << 20) / 8; i++) {
			uint64_t v = rnd(&s);
			memcpy(buf + 8 * i, &v, 8);
		}
		if (hb_pwrite_full(*fd, buf, 1 << 20, off, "probe", err)) {
			free(buf);
			close(*fd);
			return err ? err->code : HB_ERR_IO;
		}
	}
	free(buf);
	if (fsync(*fd))
		return hb_error_sys(err, errno, "probe", "cannot sync the temporary file");
	return HB_OK;
}

int hb_tprobe_run(const char *path, uint64_t read_bytes, struct hb_tprobe_result *out,
		  struct hb_error *err)
{
	int fd = -1, dfd;
	uint64_t size = 0, s = 0x2545f4914f6cdd1dull;
	double lat[LAT_SAMPLES];
	void *buf = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	out->read_bytes = read_bytes ? (read_bytes + ALIGN - 1) / ALIGN * ALIGN : 1u << 20;
	if (path) {
		if ((rc = hb_open_read(path, &fd, err)))
			return rc;
	} else if ((rc = make_temp(&fd, err))) {
		return rc;
	}
	if ((rc = hb_file_size(fd, &size, path ? path : "probe", err)))
		goto out;
	if (size < out->read_bytes || size < ALIGN) {
		rc = hb_error_set(err, HB_ERR_INVALID, path ? path : "probe",
				  "the file (%" PRIu64 " bytes) is smaller than one read (%" PRIu64 ")", size,
				  out->read_bytes);
		goto out;
	}
	out->file_bytes = size;
	/* O_DIRECT through /proc/self/fd works for an O_TMPFILE too */
	{
		char p[64];
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		dfd = open(p, O_RDONLY | O_DIRECT | O_CLOEXEC);
	}
	if (dfd >= 0) {
		close(fd);
		fd = dfd;
		out->direct = true;
	}
	if (posix_memalign(&buf, ALIGN, ALIGN)) {
		rc = hb_error_set(err, HB_ERR_NOMEM, "probe", "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < LAT_SAMPLES; i++) {
		uint64_t off = (rnd(&s) % (size / ALIGN)) * ALIGN;
		double t0 = now_s();
		if (pread(fd, buf, ALIGN, (off_t)off) != (ssize_t)ALIGN) {
			if (out->direct && i == 0) { /* O_DIRECT refused at read time: buffered */
				char p[64];
				snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
				dfd = open(p, O_RDONLY | O_CLOEXEC);
				if (dfd >= 0) {
					close(fd);
					fd = dfd;
					out->direct = false;
					i--;
					continue;
				}
			}
			rc = hb_error_sys(err, errno ? errno : EIO, path ? path : "probe", "cannot read");
			goto out;
		}
		lat[i] = now_s() - t0;
	}
	qsort(lat, LAT_SAMPLES, sizeof(lat[0]), cmp_d);
	out->latency_s = lat[LAT_SAMPLES / 2];
	for (int d = 0; d < HB_TPROBE_DEPTHS; d++) {
		uint32_t depth = 1u << d;
		pthread_t th[16];
		struct worker w[16];
		uint64_t bytes = 0;
		double t0 = now_s();
		out->depths[d] = depth;
		for (uint32_t i = 0; i < depth; i++) {
			w[i] = (struct worker){ fd, size, out->read_bytes, BW_READS / depth + 1, s + 7919u * (i + 1), 0 };
			if (pthread_create(&th[i], NULL, bw_thread, &w[i])) {
				w[i].rc = HB_ERR_IO;
				w[i].reads = 0;
				th[i] = 0;
			}
		}
		for (uint32_t i = 0; i < depth; i++) {
			if (th[i])
				pthread_join(th[i], NULL);
			if (w[i].rc) {
				rc = hb_error_set(err, w[i].rc, path ? path : "probe", "a bandwidth read failed");
				goto out;
			}
			bytes += w[i].reads * out->read_bytes;
		}
		out->bandwidth[d] = (double)bytes / (now_s() - t0);
		if (out->bandwidth[d] > out->best_bandwidth)
			out->best_bandwidth = out->bandwidth[d];
	}
	for (int d = 0; d < HB_TPROBE_DEPTHS; d++)
		if (out->bandwidth[d] >= 0.9 * out->best_bandwidth) {
			out->depth = out->depths[d];
			break;
		}
	rc = HB_OK;
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return rc;
}
