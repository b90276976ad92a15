/*
 * bench/sha256.c: SHA-256 throughput of each hb_sha256 path on one
 * in-memory buffer; bench/sha256.sh drives it and adds sha256sum.
 *
 * usage: sha256 [--bytes N] [--repeat N] [--write FILE]
 *
 * Fills N bytes (default 1 GiB) from a fixed-seed generator, so every run
 * hashes the same bytes, optionally writes them to FILE (for sha256sum),
 * then hashes them with each path in 1 MiB updates, the way a verifier
 * feeds pages, best of --repeat runs (default 2).  Prints one line per path:
 *   <path> <bytes> <seconds> <MB/s> <hex digest>
 * with MB/s = bytes / seconds / 10^6, or "<path> unsupported".  Then, on
 * the ni path, hb_sha256_update_lanes over the same bytes cut into L equal
 * parts hashed side by side (L = 2 .. HB_SHA256_LANES, 1 MiB updates a lane):
 *   lanes <L> <bytes> <seconds> <MB/s> <MB/s over ni's>
 * each part's digest checked against hb_sha256_buf of the part.  Exits 1 when
 * the paths or the lanes disagree on a digest; never judges a time.
 */
#include "hb_base.h"
#include "hb_err.h"
#include "hb_sha256.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#define PIECE ((size_t)1 << 20)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void fill(uint8_t *p, size_t n)
{
	uint64_t s = 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < n; i += 8) {
		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		uint64_t v = s * 0x2545f4914f6cdd1dull;
		memcpy(p + i, &v, n - i < 8 ? n - i : 8);
	}
}

static int write_file(const char *path, const uint8_t *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		return -1;
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return close(fd);
}

/* Best-of-repeat seconds to hash p on path; the digest into out. */
static int time_path(int path, const uint8_t *p, size_t n, int repeat,
		     uint8_t out[HB_SHA256_BYTES], double *best)
{
	*best = 0;
	for (int r = 0; r < repeat; r++) {
		struct hb_sha256 h;
		double t0, t;

		if (hb_sha256_init_path(&h, path) != HB_OK)
			return -1;
		t0 = now();
		for (size_t off = 0; off < n; off += PIECE)
			hb_sha256_update(&h, p + off, n - off < PIECE ? n - off : PIECE);
		hb_sha256_final(&h, out);
		t = now() - t0;
		if (r == 0 || t < *best)
			*best = t;
	}
	return 0;
}

/* Best-of-repeat seconds to hash the lanes parts of p side by side; 0, or
 * 1 when a part's digest is not hb_sha256_buf's. */
static int time_lanes(unsigned lanes, const uint8_t *p, size_t n, int repeat, double *best)
{
	size_t part = n / lanes;
	int bad = 0;

	*best = 0;
	for (int r = 0; r < repeat; r++) {
		struct hb_sha256 h[HB_SHA256_LANES], *hp[HB_SHA256_LANES];
		const void *at[HB_SHA256_LANES];
		uint8_t d[HB_SHA256_BYTES], want[HB_SHA256_BYTES];
		double t0, t;

		for (unsigned l = 0; l < lanes; l++) {
			hb_sha256_init_path(&h[l], HB_SHA256_PATH_NI);
			hp[l] = &h[l];
		}
		t0 = now();
		for (size_t off = 0; off < part; off += PIECE) {
			for (unsigned l = 0; l < lanes; l++)
				at[l] = p + l * part + off;
			hb_sha256_update_lanes(hp, at, part - off < PIECE ? part - off : PIECE, lanes);
		}
		t = now() - t0;
		for (unsigned l = 0; l < lanes; l++) {
			hb_sha256_final(&h[l], d);
			hb_sha256_buf(p + l * part, part, want);
			bad |= memcmp(d, want, sizeof(d)) != 0;
		}
		if (r == 0 || t < *best)
			*best = t;
	}
	return bad;
}

static int usage(void)
{
	fprintf(stderr, "usage: sha256 [--bytes N] [--repeat N] [--write FILE]\n");
	return 2;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int path;
	} paths[] = {{"sodium", HB_SHA256_PATH_SODIUM}, {"ni", HB_SHA256_PATH_NI}};
	size_t n = (size_t)1 << 30;
	int repeat = 2, status = 0;
	const char *file = NULL;
	uint8_t first[HB_SHA256_BYTES];
	bool have_first = false;
	uint8_t *buf;

	for (int i = 1; i < argc; i++) {
		char *end;
		if (i + 1 >= argc)
			return usage();
		if (strcmp(argv[i], "--bytes") == 0) {
			errno = 0;
			unsigned long long v = strtoull(argv[++i], &end, 10);
			if (errno || *end || v == 0 || v > SIZE_MAX)
				return usage();
			n = (size_t)v;
		} else if (strcmp(argv[i], "--repeat") == 0) {
			long v = strtol(argv[++i], &end, 10);
			if (*end || v < 1 || v > 100)
				return usage();
			repeat = (int)v;
		} else if (strcmp(argv[i], "--write") == 0) {
			file = argv[++i];
		} else {
			return usage();
		}
	}
	if (hb_crypto_init() != HB_OK) {
		struct hb_error err;
		char msg[512];

		hb_error_clear(&err);
		if (hb_sha256_select(&err) == HB_OK)
			hb_error_set(&err, HB_ERR_INTERNAL, "libsodium", "sodium_init failed");
		fprintf(stderr, "sha256: %s\n", hb_error_format(&err, msg, sizeof(msg)));
		return 1;
	}
	buf = malloc(n);
	if (!buf) {
		fprintf(stderr, "sha256: cannot allocate %zu bytes\n", n);
		return 1;
	}
	fill(buf, n);
	if (file && write_file(file, buf, n) != 0) {
		fprintf(stderr, "sha256: cannot write '%s': %s\n", file, strerror(errno));
		free(buf);
		return 1;
	}
	printf("dispatch %s\n", hb_sha256_impl());
	for (size_t i = 0; i < HB_ARRAY_LEN(paths); i++) {
		uint8_t d[HB_SHA256_BYTES];
		char hex[HB_SHA256_HEX];
		double s;

		if (time_path(paths[i].path, buf, n, repeat, d, &s) != 0) {
			printf("%s unsupported\n", paths[i].name);
			continue;
		}
		hb_hex_encode(d, sizeof(d), hex);
		printf("%s %zu %.6f %.1f %s\n", paths[i].name, n, s,
		       (double)n / s / 1e6, hex);
		if (have_first && memcmp(first, d, sizeof(d)) != 0) {
			fprintf(stderr, "sha256: the %s digest differs from the sodium digest\n",
				paths[i].name);
			status = 1;
		}
		memcpy(first, d, sizeof(d));
		have_first = true;
	}
	if (hb_sha256_ni_supported()) {
		double one = 0;
		uint8_t d[HB_SHA256_BYTES];

		/* ni alone again, just before: the ratio's baseline */
		time_path(HB_SHA256_PATH_NI, buf, n, repeat, d, &one);
		for (unsigned l = 2; l <= HB_SHA256_LANES; l++) {
			double s;
			size_t bytes = n / l * l;
			if (time_lanes(l, buf, n, repeat, &s)) {
				fprintf(stderr, "sha256: %u lanes disagree with hb_sha256_buf\n", l);
				status = 1;
			}
			printf("lanes %u %zu %.6f %.1f %.3f\n", l, bytes, s, (double)bytes / s / 1e6,
			       ((double)bytes / s) / ((double)n / one));
		}
	}
	free(buf);
	return status;
}
