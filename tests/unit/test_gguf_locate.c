/*
 * Unit tests: hb_gguf_locate_tensor (libstore/gguf/hb_gguf_locate.c), the
 * header skim admission uses to start the PLE manifest hash before the full
 * parse.  Its promise is one implication: whenever hb_gguf_read_fd accepts
 * a file, the skim finds every tensor at the parsed offset and size.  The
 * cases check it on files the writer makes (a 1 MiB string, string arrays,
 * a 4096-aligned tensor, a non-default alignment), on 4,000 seeded
 * corruptions of such a file (each accepted one compared tensor by tensor),
 * that an absent name is NOTFOUND, and that the skim reads far less than
 * the header (it skips bodies by their lengths).
 */
#include "hb_base.h"
#include "harness.h"
#include "gguf/hb_gguf.h"
#include "hb_io.h"

#include <fcntl.h>
#include <unistd.h>

#define BIG_STRING (1u << 20)

static const char *const names[] = {"blk.0.w", "blk.1.w", "store", "tail"};

/* A file the writer lays out: alignment `align`, a BIG_STRING-byte value
 * before the tensor infos, a string array, four tensors. */
static size_t write_file(const char *path, uint32_t align, unsigned char **bytes)
{
	static const char *const strs[] = {"a", "", "long \xc3\xa9 string"};
	struct hb_gguf_writer w;
	struct hb_error err;
	char *big = malloc(BIG_STRING);
	unsigned char data[256];
	int fd, rc = 0;
	size_t size = 0;

	memset(big, 'x', BIG_STRING);
	memset(data, 0x5a, sizeof(data));
	hb_error_clear(&err);
	hb_gguf_writer_init(&w);
	if (align != HB_GGUF_DEFAULT_ALIGNMENT)
		rc |= hb_gguf_writer_add_u32(&w, "general.alignment", align, &err);
	rc |= hb_gguf_writer_add_strn(&w, "tokenizer.json", big, BIG_STRING, &err);
	rc |= hb_gguf_writer_add_str_array(&w, "tokens", strs, NULL, 3, &err);
	rc |= hb_gguf_writer_add_u64(&w, "n", 7, &err);
	rc |= hb_gguf_writer_add_tensor_ggml(&w, names[0], HB_GGML_F32, 2,
					     (const uint64_t[]){4, 3}, 48, 0, &err);
	rc |= hb_gguf_writer_add_tensor_ggml(&w, names[1], HB_GGML_BF16, 1,
					     (const uint64_t[]){10}, 20, 0, &err);
	rc |= hb_gguf_writer_add_tensor_ggml(&w, names[2], HB_GGML_I8, 1,
					     (const uint64_t[]){200}, 200, 4096, &err);
	rc |= hb_gguf_writer_add_tensor_ggml(&w, names[3], HB_GGML_I8, 1,
					     (const uint64_t[]){5}, 5, 0, &err);
	rc |= hb_gguf_writer_layout(&w, &err);
	CHECK_EQ_INT(rc, 0);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	rc = hb_gguf_writer_write_header_fd(&w, fd, &err);
	for (size_t i = 0; i < w.n_tensors && !rc; i++)
		rc = hb_pwrite_full(fd, data, (size_t)w.tensors[i].nbytes, w.tensors[i].offset,
				    "t", NULL);
	if (!rc)
		rc = hb_gguf_writer_write_padding_fd(&w, fd, &err);
	CHECK_EQ_INT(rc, 0);
	size = (size_t)w.layout.file_size;
	*bytes = malloc(size);
	CHECK_EQ_INT(hb_pread_full(fd, *bytes, size, 0, "t", NULL), 0);
	close(fd);
	hb_gguf_writer_release(&w);
	free(big);
	return size;
}

/* Every tensor the parse accepted, located at its parsed extent. */
static bool skim_agrees(int fd, const struct hb_gguf *g)
{
	for (uint64_t i = 0; i < g->n_tensors; i++) {
		const struct hb_gguf_tensor *t = &g->tensors[i];
		uint64_t off = ~0ull, n = ~0ull;

		if (hb_gguf_locate_tensor(fd, t->name.ptr, &off, &n, NULL) != HB_OK ||
		    off != t->offset || n != t->nbytes)
			return false;
	}
	return true;
}

static void finds_what_the_parse_finds(void)
{
	static const uint32_t aligns[] = {HB_GGUF_DEFAULT_ALIGNMENT, 64, 4096};

	for (size_t a = 0; a < sizeof(aligns) / sizeof(aligns[0]); a++) {
		unsigned char *bytes = NULL;
		struct hb_gguf g;
		struct hb_error err;
		uint64_t off, n, got = 0;
		int fd;

		write_file("f.gguf", aligns[a], &bytes);
		fd = open("f.gguf", O_RDONLY);
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_gguf_read_fd(&g, fd, NULL, &err), HB_OK);
		CHECK_EQ_U64(g.n_tensors, 4);
		CHECK(skim_agrees(fd, &g));
		/* the 4096-aligned tensor really is at a 4096 boundary */
		CHECK_EQ_U64(hb_gguf_find_tensor(&g, "store")->offset % 4096, 0);
		CHECK_EQ_INT(hb_gguf_locate_tensor(fd, "absent", &off, &n, &got), HB_ERR_NOTFOUND);
		/* it skipped the 1 MiB value the parse read */
		CHECK(got > 0 && got < g.bytes_read / 4);
		hb_gguf_release(&g);
		close(fd);
		free(bytes);
	}
}

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Corrupt the header region (small and large values written over length
 * and count fields, single bytes flipped, the file cut): wherever the full
 * parse still accepts the result, the skim agrees with it. */
static void agrees_on_every_accepted_corruption(void)
{
	unsigned char *bytes = NULL, *m;
	size_t size = write_file("f.gguf", 64, &bytes), accepted = 0;
	uint64_t seed = 20261201;
	struct hb_gguf g0;
	struct hb_error err;
	int fd = open("f.gguf", O_RDONLY);

	CHECK_EQ_INT(hb_gguf_read_fd(&g0, fd, NULL, &err), HB_OK);
	close(fd);
	m = malloc(size);
	for (int i = 0; i < 4000; i++) {
		size_t n = size, at;
		uint64_t r = next(&seed);
		int ok;

		memcpy(m, bytes, size);
		/* the first 64 bytes (counts, the first key) and the tensor infos
		 * are where a changed byte can still parse */
		at = r & 1 ? (size_t)(next(&seed) % 64)
			   : (size_t)(g0.layout.tensor_info_start +
				      next(&seed) % (g0.layout.data_start - g0.layout.tensor_info_start));
		switch ((r >> 1) % 4) {
		case 0: m[at] ^= (unsigned char)(1u << (next(&seed) % 8)); break;
		case 1: m[at] = (unsigned char)next(&seed); break;
		case 2: n = at; break; /* cut */
		default: /* a plausible small value over an 8-byte field */
			if (at + 8 <= size) {
				uint64_t v = next(&seed) % 4096;
				memcpy(m + at, &v, 8);
			}
		}
		CHECK_EQ_INT(hb_test_write_file("m.gguf", m, n), 0);
		fd = open("m.gguf", O_RDONLY);
		hb_error_clear(&err);
		struct hb_gguf g;
		ok = hb_gguf_read_fd(&g, fd, NULL, &err) == HB_OK;
		if (ok) {
			accepted++;
			if (!skim_agrees(fd, &g))
				CHECK(!"the skim disagrees with an accepted parse");
			hb_gguf_release(&g);
		} else {
			uint64_t off, len;
			(void)hb_gguf_locate_tensor(fd, "store", &off, &len, NULL); /* must not crash */
		}
		close(fd);
	}
	/* the campaign is worth something only if some corruptions parse */
	CHECK(accepted > 100);
	hb_gguf_release(&g0);
	free(m);
	free(bytes);
}

static void refuses_what_is_not_gguf(void)
{
	static const unsigned char junk[64] = "GGUF\x02";
	uint64_t off, n, got = 99;
	int fd;

	CHECK_EQ_INT(hb_test_write_file("j", junk, sizeof(junk)), 0);
	fd = open("j", O_RDONLY);
	CHECK_EQ_INT(hb_gguf_locate_tensor(fd, "store", &off, &n, &got), HB_ERR_NOTFOUND);
	CHECK(got <= sizeof(junk));
	close(fd);
	CHECK_EQ_INT(hb_gguf_locate_tensor(-1, "store", &off, &n, NULL), HB_ERR_NOTFOUND);
}

HB_TEST_MAIN(T(finds_what_the_parse_finds), T(agrees_on_every_accepted_corruption),
	     T(refuses_what_is_not_gguf))
