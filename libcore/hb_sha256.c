/*
 * hb_sha256.c: SHA-256 streaming over two interchangeable paths, the choice
 * between them, and hex helpers.
 *
 * libsodium (1.0.18 on Debian 12) has no SHA-NI path; at ~350 MB/s per core
 * it would make the verifier, which hashes tens of GB, hash-bound.  Our own
 * path buffers partial blocks and pads per FIPS 180-4 section 5.1.1 here,
 * and leaves whole blocks to hb_sha256_ni.c.  libsodium stays the fallback
 * on processors without the SHA extensions and the independent reference
 * the tests compare against.  This file does not own the block function or
 * the CPUID probe.
 */
#include "hb_base.h"
#include "hb_err.h"
#include "hb_sha256.h"

#include <pthread.h>

static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;
static int sodium_status;
static bool ni_ok;
static int chosen_path = HB_SHA256_PATH_SODIUM;
static struct hb_error choice_err; /* the refusal of HB_SHA256_IMPL, if any */

static void crypto_init_once(void)
{
	sodium_status = sodium_init() < 0 ? HB_ERR_INTERNAL : HB_OK;
	ni_ok = hb_sha256_ni_cpu();
	hb_error_clear(&choice_err);
	hb_sha256_choose(getenv("HB_SHA256_IMPL"), ni_ok, &chosen_path,
			 &choice_err);
}

int hb_crypto_init(void)
{
	pthread_once(&crypto_once, crypto_init_once);
	return sodium_status != HB_OK ? sodium_status : choice_err.code;
}

int hb_sha256_choose(const char *override, bool ni_usable, int *path,
		     struct hb_error *err)
{
	*path = HB_SHA256_PATH_SODIUM;
	if (!override || !*override) {
		if (ni_usable)
			*path = HB_SHA256_PATH_NI;
		return HB_OK;
	}
	if (strcmp(override, "sodium") == 0)
		return HB_OK;
	if (strcmp(override, "ni") == 0) {
		if (!ni_usable)
			return hb_error_set(err, HB_ERR_UNSUPPORTED, "env.HB_SHA256_IMPL",
					    "'ni' asked for, but this processor lacks the SHA extensions (or SSE4.1)");
		*path = HB_SHA256_PATH_NI;
		return HB_OK;
	}
	return hb_error_set(err, HB_ERR_INVALID, "env.HB_SHA256_IMPL",
			    "unknown SHA-256 implementation '%.64s' (expected 'sodium' or 'ni')",
			    override);
}

int hb_sha256_select(struct hb_error *err)
{
	pthread_once(&crypto_once, crypto_init_once);
	if (choice_err.code == HB_OK)
		return HB_OK;
	return hb_error_set(err, choice_err.code, choice_err.field, "%s",
			    choice_err.msg);
}

bool hb_sha256_ni_supported(void)
{
	pthread_once(&crypto_once, crypto_init_once);
	return ni_ok;
}

const char *hb_sha256_impl(void)
{
	pthread_once(&crypto_once, crypto_init_once);
	return chosen_path == HB_SHA256_PATH_NI ? "ni" : "sodium";
}

/* FIPS 180-4 section 5.3.3: the first 32 bits of the fractional parts of the
 * square roots of the first 8 primes. */
static const uint32_t initial_h[8] = {
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

int hb_sha256_init_path(struct hb_sha256 *h, int path)
{
	hb_crypto_init();
	memset(h, 0, sizeof(*h));
	switch (path) {
	case HB_SHA256_PATH_SODIUM:
		crypto_hash_sha256_init(&h->u.sodium);
		break;
	case HB_SHA256_PATH_NI:
		if (!ni_ok)
			return HB_ERR_UNSUPPORTED;
		memcpy(h->u.own.h, initial_h, sizeof(initial_h));
		break;
	default:
		return HB_ERR_INVALID;
	}
	h->path = path;
	return HB_OK;
}

void hb_sha256_init(struct hb_sha256 *h)
{
	hb_crypto_init();
	/* chosen_path is NI only when ni_ok, so this cannot fail. */
	hb_sha256_init_path(h, chosen_path);
}

static void own_update(struct hb_sha256_own *s, const uint8_t *p, size_t len)
{
	size_t whole;

	s->bytes += len;
	if (s->fill) {
		size_t take = HB_SHA256_BLOCK - s->fill;
		if (take > len)
			take = len;
		memcpy(s->buf + s->fill, p, take);
		s->fill += (uint32_t)take;
		p += take;
		len -= take;
		if (s->fill < HB_SHA256_BLOCK)
			return;
		hb_sha256_ni_blocks(s->h, s->buf, 1);
		s->fill = 0;
	}
	/* Whole blocks straight from the caller's memory, no copy. */
	whole = len / HB_SHA256_BLOCK;
	if (whole) {
		hb_sha256_ni_blocks(s->h, p, whole);
		p += whole * HB_SHA256_BLOCK;
		len -= whole * HB_SHA256_BLOCK;
	}
	if (len) {
		memcpy(s->buf, p, len);
		s->fill = (uint32_t)len;
	}
}

void hb_sha256_update(struct hb_sha256 *h, const void *data, size_t len)
{
	if (!len)
		return;
	switch (h->path) {
	case HB_SHA256_PATH_SODIUM:
		crypto_hash_sha256_update(&h->u.sodium, data, len);
		break;
	case HB_SHA256_PATH_NI:
		own_update(&h->u.own, data, len);
		break;
	default: /* spent or never initialised: see hb_sha256.h */
		break;
	}
}

/* Both states at the same block offset: top both partial blocks up with
 * the same bytes (each compresses its own, their earlier bytes differ),
 * then every whole block once for both. */
static void own_update2(struct hb_sha256_own *a, struct hb_sha256_own *b,
			const uint8_t *p, size_t len)
{
	size_t whole;

	a->bytes += len;
	b->bytes += len;
	if (a->fill) {
		size_t take = HB_SHA256_BLOCK - a->fill;
		if (take > len)
			take = len;
		memcpy(a->buf + a->fill, p, take);
		memcpy(b->buf + b->fill, p, take);
		a->fill += (uint32_t)take;
		b->fill += (uint32_t)take;
		p += take;
		len -= take;
		if (a->fill < HB_SHA256_BLOCK)
			return;
		hb_sha256_ni_blocks(a->h, a->buf, 1);
		hb_sha256_ni_blocks(b->h, b->buf, 1);
		a->fill = b->fill = 0;
	}
	whole = len / HB_SHA256_BLOCK;
	if (whole) {
		hb_sha256_ni_blocks2(a->h, b->h, p, whole);
		p += whole * HB_SHA256_BLOCK;
		len -= whole * HB_SHA256_BLOCK;
	}
	if (len) {
		memcpy(a->buf, p, len);
		memcpy(b->buf, p, len);
		a->fill = b->fill = (uint32_t)len;
	}
}

void hb_sha256_update2(struct hb_sha256 *a, struct hb_sha256 *b, const void *data, size_t len)
{
	if (!len)
		return;
	if (a != b && a->path == HB_SHA256_PATH_NI && b->path == HB_SHA256_PATH_NI &&
	    a->u.own.fill == b->u.own.fill) {
		own_update2(&a->u.own, &b->u.own, data, len);
		return;
	}
	hb_sha256_update(a, data, len);
	hb_sha256_update(b, data, len);
}

void hb_sha256_update_lanes(struct hb_sha256 *const h[], const void *const data[], size_t len, unsigned n)
{
	const uint8_t *p[HB_SHA256_LANES] = {NULL};
	uint32_t *state[HB_SHA256_LANES] = {NULL};
	size_t rest[HB_SHA256_LANES] = {0}, common = SIZE_MAX;
	bool ni = n >= 1 && n <= HB_SHA256_LANES;

	for (unsigned i = 0; ni && i < n; i++) {
		ni = h[i]->path == HB_SHA256_PATH_NI;
		for (unsigned j = 0; j < i; j++)
			ni = ni && h[j] != h[i]; /* one state twice: in turn, as the calls would */
	}
	if (!ni || !len) {
		for (unsigned i = 0; n <= HB_SHA256_LANES && i < n; i++)
			hb_sha256_update(h[i], data[i], len);
		return;
	}
	/* each lane tops up its own partial block (so its whole blocks start
	 * at its own offset), then the blocks all lanes have go in together,
	 * then each lane's remainder alone */
	for (unsigned i = 0; i < n; i++) {
		struct hb_sha256_own *o = &h[i]->u.own;
		size_t take = o->fill ? HB_SHA256_BLOCK - o->fill : 0;
		if (take > len)
			take = len;
		own_update(o, data[i], take);
		p[i] = (const uint8_t *)data[i] + take;
		rest[i] = len - take;
		state[i] = o->h;
		if (rest[i] / HB_SHA256_BLOCK < common)
			common = rest[i] / HB_SHA256_BLOCK;
	}
	if (common) {
		hb_sha256_ni_blocks_lanes(state, p, common, n);
		for (unsigned i = 0; i < n; i++) {
			h[i]->u.own.bytes += common * HB_SHA256_BLOCK;
			p[i] += common * HB_SHA256_BLOCK;
			rest[i] -= common * HB_SHA256_BLOCK;
		}
	}
	for (unsigned i = 0; i < n; i++)
		own_update(&h[i]->u.own, p[i], rest[i]);
}

void hb_sha256_buf_lanes(const void *const data[], size_t len, unsigned n, uint8_t out[][HB_SHA256_BYTES])
{
	struct hb_sha256 h[HB_SHA256_LANES], *hp[HB_SHA256_LANES];

	if (n < 1 || n > HB_SHA256_LANES)
		return;
	for (unsigned i = 0; i < n; i++) {
		hb_sha256_init(&h[i]);
		hp[i] = &h[i];
	}
	hb_sha256_update_lanes(hp, data, len, n);
	for (unsigned i = 0; i < n; i++)
		hb_sha256_final(&h[i], out[i]);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* FIPS 180-4 5.1.1: a 1 bit, zeros up to 56 mod 64, then the message
 * length in bits as a 64-bit big-endian integer. */
static void own_final(struct hb_sha256_own *s, uint8_t out[HB_SHA256_BYTES])
{
	uint64_t bits = s->bytes << 3;

	s->buf[s->fill++] = 0x80;
	if (s->fill > HB_SHA256_BLOCK - 8) {
		memset(s->buf + s->fill, 0, HB_SHA256_BLOCK - s->fill);
		hb_sha256_ni_blocks(s->h, s->buf, 1);
		s->fill = 0;
	}
	memset(s->buf + s->fill, 0, HB_SHA256_BLOCK - 8 - s->fill);
	put_be32(s->buf + 56, (uint32_t)(bits >> 32));
	put_be32(s->buf + 60, (uint32_t)bits);
	hb_sha256_ni_blocks(s->h, s->buf, 1);
	for (int i = 0; i < 8; i++)
		put_be32(out + 4 * i, s->h[i]);
}

void hb_sha256_final(struct hb_sha256 *h, uint8_t out[HB_SHA256_BYTES])
{
	switch (h->path) {
	case HB_SHA256_PATH_SODIUM:
		crypto_hash_sha256_final(&h->u.sodium, out);
		break;
	case HB_SHA256_PATH_NI:
		own_final(&h->u.own, out);
		break;
	default:
		memset(out, 0, HB_SHA256_BYTES);
		break;
	}
	/* Spent: the message is not kept around, and reuse needs init. */
	sodium_memzero(h, sizeof(*h));
}

void hb_sha256_buf(const void *data, size_t len, uint8_t out[HB_SHA256_BYTES])
{
	struct hb_sha256 h;
	hb_sha256_init(&h);
	hb_sha256_update(&h, data, len);
	hb_sha256_final(&h, out);
}

void hb_hex_encode(const uint8_t *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int hb_hex_decode(const char *hex, uint8_t *out, size_t n)
{
	if (!hex || strlen(hex) != 2 * n)
		return HB_ERR_FORMAT;
	for (size_t i = 0; i < n; i++) {
		int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return HB_ERR_FORMAT;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return HB_OK;
}

int hb_crypto_start(struct hb_error *err)
{
	int rc = hb_sha256_select(err);

	if (rc)
		return rc;
	if (hb_crypto_init())
		return hb_error_set(err, HB_ERR_INTERNAL, "libsodium", "cannot start");
	return HB_OK;
}
