/*
 * hb_ple_hash.c: splitmix64 multipliers and prime hash heads (see header).
 * Arithmetic is modulo 2^64 exactly where upstream masks with 2^64 - 1.
 */
#include "hb_base.h"
#include "hb_checked.h"
#include "hb_ple_hash.h"

#define SPLITMIX_GAMMA 0x9E3779B97F4A7C15ull
#define SPLITMIX_M1 0xBF58476D1CE4E5B9ull
#define SPLITMIX_M2 0x94D049BB133111EBull
#define PLE_LAYER_PRIME 10007ull /* upstream's _PRIME_1 */

uint64_t hb_splitmix64(uint64_t x)
{
	x += SPLITMIX_GAMMA;
	x = (x ^ (x >> 30)) * SPLITMIX_M1;
	x = (x ^ (x >> 27)) * SPLITMIX_M2;
	return x ^ (x >> 31);
}

bool hb_is_prime(uint64_t v)
{
	if (v < 2)
		return false;
	if (v % 2 == 0)
		return v == 2;
	for (uint64_t d = 3; d <= v / d; d += 2)
		if (v % d == 0)
			return false;
	return true;
}

int hb_ple_hash_compute(const struct hb_qwen_config *cfg, size_t ple_index,
			struct hb_ple_table_hash *out, struct hb_error *err)
{
	struct hb_ple_table_hash h;
	uint64_t heads = hb_qwen_ngram_heads(cfg);
	uint64_t max_long = (uint64_t)INT64_MAX;
	uint64_t mult_max, half_bound, base_seed, prime, skip;

	if (ple_index >= cfg->n_ple_layers)
		return hb_error_set(err, HB_ERR_INVALID, "ple.hash", "PLE index %zu out of range", ple_index);
	if (cfg->ngram_size > HB_PLE_MAX_NGRAM || heads > HB_PLE_MAX_HEADS || heads == 0)
		return hb_error_diag(err, "cfg-unsupported", HB_ERR_UNSUPPORTED, "ple.hash", false, 0,
				     "%" PRIu64 "-grams with %" PRIu64 " heads exceed the supported %d and %d",
				     cfg->ngram_size, heads, HB_PLE_MAX_NGRAM, HB_PLE_MAX_HEADS);
	memset(&h, 0, sizeof(h));
	h.layer_id = cfg->ple_layer_ids[ple_index];
	h.ple_index = (uint32_t)ple_index;
	h.ngram_size = (uint32_t)cfg->ngram_size;
	h.heads = (uint32_t)heads;

	mult_max = max_long / (cfg->vocab_size ? cfg->vocab_size : 1);
	half_bound = mult_max / 2 ? mult_max / 2 : 1;
	base_seed = cfg->seed + PLE_LAYER_PRIME * (uint64_t)ple_index;
	for (uint64_t i = 0; i < cfg->ngram_size; i++) {
		uint64_t v = base_seed + SPLITMIX_GAMMA * (i + 1);
		h.multipliers[i] = 2 * (hb_splitmix64(v) % half_bound) + 1;
	}

	/* Head k of PLE layer p is the (p*heads + k + 1)-th prime >= base. */
	prime = cfg->ngram_vocab_size_base - 1;
	skip = (uint64_t)ple_index * heads;
	for (uint64_t n = 0; n < skip + heads; n++) {
		do {
			if (prime == UINT64_MAX)
				return hb_error_set(err, HB_ERR_OVERFLOW, "ple.hash", "prime search overflow");
			prime++;
		} while (!hb_is_prime(prime));
		if (n >= skip) {
			uint64_t k = n - skip;
			h.head_sizes[k] = prime;
			h.head_offsets[k] = h.logical_rows;
			if (hb_add_u64(h.logical_rows, prime, &h.logical_rows))
				return hb_error_set(err, HB_ERR_OVERFLOW, "ple.hash", "head rows overflow");
		}
	}
	if (hb_align_up_u64(h.logical_rows, cfg->ngram_vocab_divisor, &h.physical_rows))
		return hb_error_set(err, HB_ERR_OVERFLOW, "ple.hash", "padded rows overflow");
	h.row_width = cfg->ple_embed_dim / heads;
	*out = h;
	return HB_OK;
}

static void put_u64(struct hb_sha256 *s, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	hb_sha256_update(s, b, 8);
}

int hb_ple_hash_digest(const struct hb_qwen_config *cfg,
		       uint8_t out[HB_SHA256_BYTES], struct hb_error *err)
{
	static const char domain[] = "hebrus.ple-hash.v1";
	struct hb_sha256 s;

	hb_sha256_init(&s);
	hb_sha256_update(&s, domain, sizeof(domain) - 1);
	put_u64(&s, cfg->seed);
	put_u64(&s, cfg->n_eos ? (uint64_t)cfg->eos_token_ids[0] : UINT64_MAX);
	put_u64(&s, cfg->n_ple_layers);
	for (size_t p = 0; p < cfg->n_ple_layers; p++) {
		struct hb_ple_table_hash h;
		int rc = hb_ple_hash_compute(cfg, p, &h, err);
		if (rc)
			return rc;
		put_u64(&s, h.layer_id);
		put_u64(&s, h.ngram_size);
		put_u64(&s, h.heads);
		for (uint32_t i = 0; i < h.ngram_size; i++)
			put_u64(&s, h.multipliers[i]);
		for (uint32_t i = 0; i < h.heads; i++)
			put_u64(&s, h.head_sizes[i]);
		for (uint32_t i = 0; i < h.heads; i++)
			put_u64(&s, h.head_offsets[i]);
		put_u64(&s, h.logical_rows);
		put_u64(&s, h.physical_rows);
		put_u64(&s, h.row_width);
	}
	hb_sha256_final(&s, out);
	return HB_OK;
}
