/*
 * hb_sha256.h: streaming SHA-256 with a runtime-chosen implementation, plus
 * hex helpers.
 *
 * Two paths compute the same digests: libsodium's portable code ("sodium",
 * about 350 MB/s per core on Debian 12's 1.0.18, which has no SHA-NI path)
 * and our own block function on the x86 SHA extensions ("ni", several times
 * faster; hb_sha256_ni.c).  hb_sha256_init uses the path chosen once per
 * process: "ni" when CPUID reports SHA and SSE4.1, else "sodium", unless the
 * environment variable HB_SHA256_IMPL says "sodium" or "ni".  An override
 * that is unknown, or "ni" on a processor without the extensions, is
 * refused: hb_crypto_init and hb_sha256_select return the error (tools stop
 * there), and hashing itself falls back to "sodium" so a digest is never
 * wrong, only slower.
 */
#ifndef HB_SHA256_H
#define HB_SHA256_H

#include "hb_base.h"
#include "hb_err.h"
#include <sodium.h>

#define HB_SHA256_BYTES 32
#define HB_SHA256_HEX 65 /* 64 digits and a NUL */
#define HB_SHA256_BLOCK 64

/* Which code a state runs on.  The values are not stored anywhere. */
enum hb_sha256_path {
	HB_SHA256_PATH_NONE = 0,   /* spent by final, or never initialised */
	HB_SHA256_PATH_SODIUM = 1, /* libsodium */
	HB_SHA256_PATH_NI = 2,     /* x86 SHA extensions (hb_sha256_ni.c) */
};

/* The state of our own path: FIPS 180-4 H words, a partial block, and the
 * message length so far in bytes. */
struct hb_sha256_own {
	uint32_t h[8];
	uint64_t bytes;
	uint32_t fill; /* bytes waiting in buf, 0..63 */
	uint8_t buf[HB_SHA256_BLOCK];
};

/*
 * A streaming state.  hb_sha256_final spends it (path becomes NONE and the
 * contents are wiped); it must be initialised again before reuse.  On a
 * spent or zero-filled state update does nothing and final writes 32 zero
 * bytes, a value that is not the digest of any known input, so misuse shows
 * up as a digest mismatch rather than as a plausible wrong digest.
 */
struct hb_sha256 {
	int path; /* enum hb_sha256_path */
	union {
		crypto_hash_sha256_state sodium;
		struct hb_sha256_own own;
	} u;
};

/*
 * Initialises libsodium and chooses the SHA-256 path, once (thread-safe).
 * Returns 0, HB_ERR_INTERNAL when libsodium cannot start, or the refusal of
 * HB_SHA256_IMPL (see hb_sha256_select).
 */
int hb_crypto_init(void);
/* hb_crypto_init with its refusal as a record: the HB_SHA256_IMPL refusal
 * as hb_sha256_select words it, or libsodium failing to start. */
int hb_crypto_start(struct hb_error *err);

/* Starts a digest on the process's chosen path. */
void hb_sha256_init(struct hb_sha256 *h);
void hb_sha256_update(struct hb_sha256 *h, const void *data, size_t len);
/*
 * Extends a and b with the same bytes, as hb_sha256_update(a, ...) then
 * hb_sha256_update(b, ...) would.  When both run on the ni path at the same
 * offset within a block (a whole-payload digest and the digest of a page
 * that starts on a block boundary of it, say) the message schedule of each
 * whole block is computed once for both: about 1.36x the rate of two
 * updates on one core, measured (hb_sha256_ni.c).  a and b must differ.
 */
void hb_sha256_update2(struct hb_sha256 *a, struct hb_sha256 *b, const void *data, size_t len);
/* The most states hb_sha256_update_lanes extends at once (more spill the
 * SHA instructions' 16 registers: hb_sha256_ni.c). */
#define HB_SHA256_LANES 3
/*
 * Extends each of n states (1..HB_SHA256_LANES, all different) with its own
 * len bytes, data[i] into h[i], as n hb_sha256_update calls would.  On the
 * ni path the whole blocks of the lanes are compressed interleaved on one
 * core, whatever each state held before (each lane tops up its own partial
 * block first): one SHA-256 chain is bound by the latency of the SHA
 * instructions, so several independent ones go faster together (measured by
 * bench/sha256: the "lanes" lines).  n outside 1..HB_SHA256_LANES does
 * nothing.
 */
void hb_sha256_update_lanes(struct hb_sha256 *const h[], const void *const data[], size_t len, unsigned n);
/* The digests of n (1..HB_SHA256_LANES) buffers of the same length, as n
 * hb_sha256_buf calls give them, by hb_sha256_update_lanes. */
void hb_sha256_buf_lanes(const void *const data[], size_t len, unsigned n, uint8_t out[][HB_SHA256_BYTES]);
/* Writes the digest and spends the state. */
void hb_sha256_final(struct hb_sha256 *h, uint8_t out[HB_SHA256_BYTES]);
void hb_sha256_buf(const void *data, size_t len, uint8_t out[HB_SHA256_BYTES]);

/*
 * Starts a digest on a named path (enum hb_sha256_path), for tests and
 * benchmarks that compare the two.  Returns 0; HB_ERR_UNSUPPORTED for NI on
 * a processor without the extensions; HB_ERR_INVALID for any other value.
 * On failure the state is left spent.
 */
int hb_sha256_init_path(struct hb_sha256 *h, int path);

/* "ni" or "sodium": the path hb_sha256_init uses in this process. */
const char *hb_sha256_impl(void);
/* Whether CPUID reports SHA (leaf 7 EBX bit 29), SSE4.1 and SSSE3. */
bool hb_sha256_ni_supported(void);

/*
 * The path choice as a pure function: override is the value of
 * HB_SHA256_IMPL (NULL or "" for none), ni_usable whether the processor has the
 * extensions.  Sets *path and returns 0; or sets *path to SODIUM (the safe
 * fallback) and returns HB_ERR_INVALID for an unknown name or
 * HB_ERR_UNSUPPORTED for "ni" without the extensions, with field
 * "env.HB_SHA256_IMPL" in err.
 */
int hb_sha256_choose(const char *override, bool ni_usable, int *path,
		     struct hb_error *err);
/* The process's choice (made once from the environment): 0 or its refusal
 * as hb_sha256_choose reports it. */
int hb_sha256_select(struct hb_error *err);

/*
 * Internal to libcore: compress n 64-byte blocks into h with the SHA
 * extensions.  Only call when hb_sha256_ni_cpu() is true.
 */
void hb_sha256_ni_blocks(uint32_t h[8], const uint8_t *data, size_t n);
/* The same n blocks into two states at once (the schedule shared). */
void hb_sha256_ni_blocks2(uint32_t h[8], uint32_t h2[8], const uint8_t *data, size_t n);
/* n blocks of data[i] into h[i] for each of lanes (1..HB_SHA256_LANES)
 * states, interleaved. */
void hb_sha256_ni_blocks_lanes(uint32_t *const h[], const uint8_t *const data[], size_t n, unsigned lanes);
bool hb_sha256_ni_cpu(void);

/* Lowercase hex of n bytes into out (2n+1 bytes). */
void hb_hex_encode(const uint8_t *in, size_t n, char *out);
/* Exactly 2n lowercase or uppercase hex digits; returns 0 or HB_ERR_FORMAT. */
int hb_hex_decode(const char *hex, uint8_t *out, size_t n);

#endif
