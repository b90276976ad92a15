/*
 * fuzz_tokenizer.c: fuzz target of the tokenizer.json reader, hb_tok_load,
 * and of encoding and decoding with what it accepted.
 *
 * Invariants: a refusal carries a tok- id; with an accepted tokenizer,
 * encoding a fixed sample (ASCII, digits, CJK, an emoji, control bytes) in
 * both modes gives only ids below the vocabulary size or refuses cleanly,
 * decoding those ids succeeds, and every added token's id is assigned
 * (it has bytes to decode to; an added token may share its id with a
 * vocabulary entry, whose bytes then win, as upstream's do).  This file owns only the
 * harness; the reader is libkern/text/hb_tok*.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "text/hb_tok.h"

static const char sample[] = "Hello, world! 12345 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80\t\n  x";

static void exercise(const struct hb_tok *tok)
{
	uint32_t vocab = hb_tok_vocab_size(tok);

	for (int mode = HB_TOK_PLAIN; mode <= HB_TOK_DATA; mode++) {
		struct hb_tok_ids ids = {0};
		uint8_t *out = NULL;
		size_t out_len = 0;

		if (hb_tok_encode(tok, (const uint8_t *)sample, sizeof(sample) - 1, mode, &ids, NULL) == HB_OK) {
			for (size_t i = 0; i < ids.len; i++)
				HB_FUZZ_ASSERT(ids.ids[i] >= 0 && (uint32_t)ids.ids[i] < vocab);
			HB_FUZZ_ASSERT(hb_tok_decode(tok, ids.ids, ids.len, 0, &out, &out_len, NULL) == HB_OK);
			free(out);
		}
		hb_tok_ids_release(&ids);
	}
	for (size_t i = 0; i < hb_tok_added_count(tok) && i < 64; i++) {
		int32_t id;
		const char *content;
		bool special;
		const uint8_t *b;
		size_t n;

		if (hb_tok_added_get(tok, i, &id, &content, &special) != HB_OK)
			continue;
		HB_FUZZ_ASSERT(id >= 0 && (uint32_t)id < vocab);
		b = hb_tok_id_bytes(tok, id, &n);
		HB_FUZZ_ASSERT(b != NULL && content != NULL);
		(void)n;
	}
}

int hb_fuzz_tokenizer(const uint8_t *data, size_t size)
{
	struct hb_tok *tok = NULL;
	struct hb_error err;

	if (size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	hb_error_clear(&err);
	if (hb_tok_load((const char *)data, size, &tok, &err)) {
		HB_FUZZ_ASSERT(err.id && !strncmp(err.id, "tok-", 4));
		return HB_FUZZ_REFUSED;
	}
	exercise(tok);
	hb_tok_free(tok);
	return HB_FUZZ_ACCEPTED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_tokenizer(data, size);
	return 0;
}
#endif
