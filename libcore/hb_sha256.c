/*
 * hb_sha256.c: libsodium SHA-256 wrappers.  libsodium (1.0.18 on Debian 12)
 * has no SHA-NI path; throughput work belongs to the verifier, not here.
 */
#include "hb_base.h"
#include "hb_err.h"
#include "hb_sha256.h"

#include <pthread.h>

static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;
static int crypto_status;

static void crypto_init_once(void)
{
	crypto_status = sodium_init() < 0 ? HB_ERR_INTERNAL : HB_OK;
}

int hb_crypto_init(void)
{
	pthread_once(&crypto_once, crypto_init_once);
	return crypto_status;
}

void hb_sha256_init(struct hb_sha256 *h)
{
	hb_crypto_init();
	crypto_hash_sha256_init(&h->st);
}

void hb_sha256_update(struct hb_sha256 *h, const void *data, size_t len)
{
	if (len)
		crypto_hash_sha256_update(&h->st, data, len);
}

void hb_sha256_final(struct hb_sha256 *h, uint8_t out[HB_SHA256_BYTES])
{
	crypto_hash_sha256_final(&h->st, out);
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
