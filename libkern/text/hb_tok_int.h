/*
 * hb_tok_int.h: the tokenizer's private state, shared by hb_tok.c (loading,
 * decoding), hb_tok_pretok.c (the pattern) and hb_tok_encode.c (added
 * tokens, NFC, BPE).
 */
#ifndef HB_TOK_INT_H
#define HB_TOK_INT_H

#include "hb_base.h"
#include "hb_tok.h"

/* A merge: (left id, right id) -> rank, merged id.  Open addressing. */
struct hb_tok_merge {
	uint64_t key; /* left << 32 | right; UINT64_MAX = empty */
	uint32_t rank;
	int32_t id;
};

struct hb_tok_added {
	int32_t id;
	char *content;  /* as matched: NFC'd when normalized */
	size_t len;
	char *raw;      /* as written in tokenizer.json */
	bool special, normalized, lstrip, rstrip;
};

struct hb_tok {
	int pattern;
	bool nfc;
	uint32_t n_ids;        /* one past the largest id */
	uint32_t *off;         /* n_ids + 1 offsets into bytes */
	uint8_t *bytes;        /* decoded bytes of every id */
	uint8_t *is_special;   /* n_ids flags */
	int32_t byte_id[256];  /* the vocabulary id of each single byte */
	struct hb_tok_merge *merges;
	size_t merge_mask;     /* capacity - 1 */
	struct hb_tok_added *added;
	size_t n_added;
	/* added tokens ordered by decreasing length, per normalized flag */
	size_t *added_order;
	uint8_t added_first[256]; /* bit0: a raw token starts with this byte,
				     bit1: a normalized one does */
};

/* Split one piece of (normalized) text into pre-tokens; calls emit for
 * each [start, end) byte range in order. */
typedef int (*hb_tok_emit_fn)(void *ctx, size_t start, size_t end);
int hb_tok_pretokenize(int pattern, const uint8_t *s, size_t n,
		       hb_tok_emit_fn emit, void *ctx, struct hb_error *err);

const struct hb_tok_merge *hb_tok_merge_find(const struct hb_tok *tok,
					     int32_t a, int32_t b);

#endif
