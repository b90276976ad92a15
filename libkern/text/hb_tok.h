/*
 * hb_tok.h: byte-level BPE tokenizer driven by a Hugging Face tokenizer.json.
 *
 * Owns: loading tokenizer.json text (vocabulary, merges with their ranks,
 * added tokens with their flags, the NFC normaliser, the pre-tokenizer
 * pattern, ByteLevel), encoding text to ids and decoding ids to bytes.
 * Does not own: reading the file (the caller passes its bytes; the artifact
 * embeds them with their SHA-256), chat rendering (it calls
 * hb_tok_encode(..., HB_TOK_DATA, ...) for DATA segments and
 * hb_tok_control_id() for TRUSTED_CONTROL atoms), or the model's physical
 * logits width (AFN-005: vocab_size here is the tokenizer's id domain only).
 *
 * Authority: the Hugging Face `tokenizers` library (0.23.2), whose output on
 * a pinned corpus is frozen in tests/fixtures/tokenizer/.  The pre-tokenizer
 * regex is not interpreted: the known Qwen patterns, recognised by their
 * exact text, are implemented by hand (hb_tok_pretok.c); any other pattern,
 * normaliser, model option or pre-tokenizer shape is refused with a stable
 * diagnostic id (struct hb_error.id), never approximated:
 *
 *   tok-json          not JSON, or a member has the wrong type
 *   tok-model         model is not BPE, or uses dropout, unk_token,
 *                     continuing_subword_prefix, end_of_word_suffix,
 *                     byte_fallback or ignore_merges
 *   tok-normalizer    normaliser other than null or NFC
 *   tok-pretokenizer  pre-tokenizer other than Sequence[Split(Isolated),
 *                     ByteLevel(add_prefix_space=false, use_regex=false)]
 *   tok-pattern       the Split pattern is not one of the known Qwen texts
 *   tok-decoder       decoder other than ByteLevel
 *   tok-postprocessor post-processor other than null or ByteLevel
 *   tok-vocab         bad or duplicate id, or a byte symbol missing
 *   tok-merge         malformed merge, or one naming a token not in vocab
 *   tok-added         bad added token (empty, id clash, single_word=true)
 *   utf8-invalid      encode input is not valid UTF-8 (offset recorded)
 *   tok-id            decode input holds a negative id
 *
 * All functions return 0 or a negative hb_err and never print.
 */
#ifndef HB_TOK_H
#define HB_TOK_H

#include "hb_base.h"
#include "hb_err.h"

struct hb_tok;

/*
 * The id space the reader builds its dense per-id tables for: an id at or
 * past it is refused (tok-vocab) before anything is allocated for it, so a
 * tokenizer.json declaring id 1.6e9 costs nothing (a fuzzed input made the
 * tables 6 GB).  Sixteen times the largest vocabulary in use (262,144).
 */
#define HB_TOK_MAX_IDS (1u << 22)

enum hb_tok_pattern {
	HB_TOK_PATTERN_QWEN2 = 1,  /* Qwen2/Qwen3: ...?\p{L}+|\p{N}|... */
	HB_TOK_PATTERN_QWEN35 = 2, /* Qwen3.5+: ...?[\p{L}\p{M}]+|...  */
};

/* Encode modes. */
enum hb_tok_mode {
	/* HF Tokenizer.encode(text, add_special_tokens=False): added tokens
	 * (special or not) spelled in the text are split out first. */
	HB_TOK_PLAIN = 0,
	/* Caller text is data (AFN-006): no added token is ever matched; the
	 * whole text goes through NFC, the pattern and BPE. */
	HB_TOK_DATA = 1,
};

/* Decode flags. */
enum { HB_TOK_SKIP_SPECIAL = 1 }; /* drop added tokens marked special */

/* A caller-owned growing id vector; zero-initialise, release with
 * hb_tok_ids_release. */
struct hb_tok_ids {
	int32_t *ids;
	size_t len, cap;
};
void hb_tok_ids_release(struct hb_tok_ids *v);

/* Parse tokenizer.json text (len bytes, need not be NUL-terminated). */
int hb_tok_load(const char *json, size_t len, struct hb_tok **out,
		struct hb_error *err);
void hb_tok_free(struct hb_tok *tok);

int hb_tok_pattern(const struct hb_tok *tok);
/* "qwen2" or "qwen35". */
const char *hb_tok_pattern_name(int pattern);
/* One past the largest assigned id (vocabulary and added tokens). */
uint32_t hb_tok_vocab_size(const struct hb_tok *tok);
/* Number of added tokens; content and flags of the i-th (file order). */
size_t hb_tok_added_count(const struct hb_tok *tok);
int hb_tok_added_get(const struct hb_tok *tok, size_t i, int32_t *id,
		     const char **content, bool *special);

/*
 * Append the ids of text[0..n) to out.  text must be valid UTF-8 (else
 * HB_ERR_FORMAT, "utf8-invalid", offset of the first bad byte) and below
 * 1 GiB (HB_ERR_OVERFLOW).  Transactional: on failure out->len and the ids
 * already there are unchanged (the array may have been grown).  Safe to call
 * from several threads on one tok (tok is only read).
 */
int hb_tok_encode(const struct hb_tok *tok, const uint8_t *text, size_t n,
		  int mode, struct hb_tok_ids *out, struct hb_error *err);

/*
 * The id of the added token whose content is exactly s[0..n) (for trusted
 * template atoms).  HB_ERR_NOTFOUND when no added token has that content.
 */
int hb_tok_control_id(const struct hb_tok *tok, const uint8_t *s, size_t n,
		      int32_t *id);

/*
 * The bytes id decodes to (ByteLevel-mapped back for vocabulary tokens, the
 * content for added tokens); *len = 0 and NULL for ids that are not
 * assigned.  The pointer lives as long as tok.
 */
const uint8_t *hb_tok_id_bytes(const struct hb_tok *tok, int32_t id, size_t *len);

/*
 * Decode ids to the exact bytes they stand for, which need not be valid
 * UTF-8 (a token may hold part of a character).  Unassigned ids (>= the
 * vocabulary, or holes) decode to nothing, as upstream does; a negative id
 * is HB_ERR_INVALID ("tok-id").  *out is malloc'd and NUL-terminated.
 *
 * Display policy: to show the bytes as text, pass them to hb_utf8_lossy()
 * (hb_unicode.h), which replaces each maximal invalid subpart by U+FFFD;
 * that is exactly upstream's decode() string (Rust from_utf8_lossy).
 */
int hb_tok_decode(const struct hb_tok *tok, const int32_t *ids, size_t n,
		  unsigned flags, uint8_t **out, size_t *out_len,
		  struct hb_error *err);

#endif
