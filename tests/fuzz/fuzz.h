/*
 * fuzz.h: the per-input entry points of the parser fuzz targets.
 *
 * Each tests/fuzz/fuzz_<name>.c defines hb_fuzz_<name>(), which feeds one
 * input to a libstore parser the way a caller would (a buffer, or a memfd
 * for the fd- and path-based readers), exercises what it accepted through
 * the bounds-checked accessors, and checks invariants that must hold for
 * every input (round trips, agreement between two ways of reading).  A
 * clean refusal is the expected outcome for most inputs and returns
 * HB_FUZZ_REFUSED; an invariant that does not hold calls abort(), so that
 * libFuzzer and the unit test both see a crash.
 *
 * The same files are compiled twice: with HB_FUZZ_LIBFUZZER defined (clang,
 * -fsanitize=fuzzer) each also defines LLVMFuzzerTestOneInput; without it
 * (the normal build) tests/unit/test_fuzz_regressions.c calls the functions
 * over every committed seed and regression input.  This header owns only
 * the shared declarations and two small helpers; it owns no parser.
 */
#ifndef HB_FUZZ_H
#define HB_FUZZ_H

#include "hb_base.h"

#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#define HB_FUZZ_REFUSED 0
#define HB_FUZZ_ACCEPTED 1

/* Inputs larger than this are ignored (returns HB_FUZZ_REFUSED): the
 * harness allocations stay bounded whatever the fuzzer generates. */
#define HB_FUZZ_MAX_INPUT (1u << 20)
/* A memfd may be extended (sparse, zeros) to at most this many bytes. */
#define HB_FUZZ_MAX_EXTENT (64u << 20)

int hb_fuzz_gguf(const uint8_t *data, size_t size);
int hb_fuzz_expert_store(const uint8_t *data, size_t size);
int hb_fuzz_ple_manifest(const uint8_t *data, size_t size);
int hb_fuzz_safetensors(const uint8_t *data, size_t size);
int hb_fuzz_config(const uint8_t *data, size_t size);
int hb_fuzz_trace(const uint8_t *data, size_t size);
int hb_fuzz_transcripts(const uint8_t *data, size_t size);
int hb_fuzz_chat(const uint8_t *data, size_t size);
int hb_fuzz_tokenizer(const uint8_t *data, size_t size);
int hb_fuzz_spec(const uint8_t *data, size_t size);
int hb_fuzz_features(const uint8_t *data, size_t size);
int hb_fuzz_predictor(const uint8_t *data, size_t size);
int hb_fuzz_label(const uint8_t *data, size_t size);
int hb_fuzz_checkpoint(const uint8_t *data, size_t size);
int hb_fuzz_st_write(const uint8_t *data, size_t size);
int hb_fuzz_gguf_write(const uint8_t *data, size_t size);
int hb_fuzz_draft(const uint8_t *data, size_t size);
int hb_fuzz_xstrace(const uint8_t *data, size_t size);
int hb_fuzz_timely(const uint8_t *data, size_t size);
int hb_fuzz_aux_json(const uint8_t *data, size_t size);
int hb_fuzz_prompt_ids(const uint8_t *data, size_t size);

/* libFuzzer's entry point, defined by each target when HB_FUZZ_LIBFUZZER. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * An anonymous in-memory file holding len bytes of data at offset at,
 * then ftruncate'd to size (>= at + len; the rest reads as zeros).
 * Returns the fd, or -1 (the harness then skips the input: running out of
 * descriptors or memory is not a parser finding).
 */
static inline int hb_fuzz_memfd(const void *data, size_t len, uint64_t at,
				uint64_t size)
{
	int fd = memfd_create("hb-fuzz", MFD_CLOEXEC);
	const uint8_t *p = data;
	size_t done = 0;

	if (fd < 0)
		return -1;
	if (size < at + len || ftruncate(fd, (off_t)size) != 0)
		goto fail;
	while (done < len) {
		ssize_t n = pwrite(fd, p + done, len - done, (off_t)(at + done));
		if (n <= 0)
			goto fail;
		done += (size_t)n;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

/* Two optional diagnostic ids are the same string (or both absent). */
static inline bool hb_fuzz_same_id(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

/* Little-endian reads for harnesses that look at raw input fields. */
static inline uint32_t hb_fuzz_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t hb_fuzz_le64(const uint8_t *p)
{
	return (uint64_t)hb_fuzz_le32(p) | (uint64_t)hb_fuzz_le32(p + 4) << 32;
}

/* A little-endian write and the CRC-32 (zlib's) of the formats that carry
 * one, for harnesses that reseal mutated inputs. */
static inline void hb_fuzz_put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t hb_fuzz_crc32(const uint8_t *p, size_t n)
{
	return (uint32_t)crc32(crc32(0L, Z_NULL, 0), p, (uInt)n);
}

/* Report a broken invariant and crash, so the input is kept. */
#define HB_FUZZ_ASSERT(cond)                                                 \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", \
				__FILE__, __LINE__, #cond);                  \
			abort();                                             \
		}                                                            \
	} while (0)

#endif
