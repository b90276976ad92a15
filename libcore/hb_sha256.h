/*
 * hb_sha256.h: streaming SHA-256 over libsodium, plus hex helpers.
 */
#ifndef HB_SHA256_H
#define HB_SHA256_H

#include "hb_base.h"
#include <sodium.h>

#define HB_SHA256_BYTES 32
#define HB_SHA256_HEX 65 /* 64 digits and a NUL */

struct hb_sha256 {
	crypto_hash_sha256_state st;
};

/* Initialises libsodium once (thread-safe); returns 0 or HB_ERR_INTERNAL. */
int hb_crypto_init(void);
void hb_sha256_init(struct hb_sha256 *h);
void hb_sha256_update(struct hb_sha256 *h, const void *data, size_t len);
void hb_sha256_final(struct hb_sha256 *h, uint8_t out[HB_SHA256_BYTES]);
void hb_sha256_buf(const void *data, size_t len, uint8_t out[HB_SHA256_BYTES]);

/* Lowercase hex of n bytes into out (2n+1 bytes). */
void hb_hex_encode(const uint8_t *in, size_t n, char *out);
/* Exactly 2n lowercase or uppercase hex digits; returns 0 or HB_ERR_FORMAT. */
int hb_hex_decode(const char *hex, uint8_t *out, size_t n);

#endif
