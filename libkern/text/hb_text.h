/*
 * hb_text.h: prompt text to token ids, each id with its provenance.
 *
 * Owns: the join between chat rendering (hb_chat.h) and the tokenizer
 * (hb_tok.h), and the rule that decides which ids may be control ids
 * (AFN-006): plain caller text is encoded as DATA only (HB_TOK_DATA: an
 * added token spelled in the text stays ordinary bytes); a rendering's DATA
 * segments likewise; a rendering's TRUSTED_CONTROL segment must be exactly
 * one added token of the tokenizer and becomes that one id.  Does not own
 * rendering, BPE, reading files or printing.
 *
 * Transactional: on failure *out is untouched (the caller's previous
 * tokens stay valid); on success it is replaced (previous arrays freed).
 * Silent: errors go to struct hb_error; a refusal of our own carries a
 * stable id from HB_TEXT_DIAG_LIST, a tokenizer refusal keeps the
 * tokenizer's id (utf8-invalid, ...).
 */
#ifndef HB_TEXT_H
#define HB_TEXT_H

#include "hb_base.h"
#include "hb_chat.h"
#include "hb_err.h"
#include "hb_tok.h"

/* Diagnostic ids (static strings; hb-run(1) lists them). */
#define HB_TEXT_DIAG_LIST(X)                                                    \
	X(HB_TEXT_E_CONTROL, "text-control")   /* a TRUSTED_CONTROL segment is not one added token */ \
	X(HB_TEXT_E_SEGMENTS, "text-segments") /* a rendering's segments do not tile its bytes */

#define HB_TEXT_DIAG_ENUM(e, s) e,
enum hb_text_diag { HB_TEXT_DIAG_LIST(HB_TEXT_DIAG_ENUM) HB_TEXT_DIAG_COUNT };
#undef HB_TEXT_DIAG_ENUM
/* The id string of a diagnostic, or NULL when out of range. */
const char *hb_text_diag_id(int diag);

/* Provenance of one id. */
enum hb_text_prov {
	HB_TEXT_DATA = 0,    /* from caller or template prose bytes */
	HB_TEXT_CONTROL = 1, /* a template-authored atom (TRUSTED_CONTROL) */
};
/* "DATA" or "TRUSTED_CONTROL" (NULL for other values). */
const char *hb_text_prov_name(int prov);

/*
 * n ids and their provenance (ids[i] has prov[i]).  A zero-initialised
 * struct is a valid empty one; release with hb_text_tokens_release.
 */
struct hb_text_tokens {
	int32_t *ids;
	uint8_t *prov; /* enum hb_text_prov */
	size_t n;
};
void hb_text_tokens_release(struct hb_text_tokens *t);

/* Plain text s[0..n) (UTF-8), all DATA. */
int hb_text_encode_plain(const struct hb_tok *tok, const uint8_t *s, size_t n,
			 struct hb_text_tokens *out, struct hb_error *err);

/*
 * A chat rendering: DATA segments through HB_TOK_DATA, each TRUSTED_CONTROL
 * segment to exactly one id (hb_tok_control_id), else HB_ERR_CONTRACT with
 * id "text-control" and field "segments[i]".  A rendering whose segments
 * do not tile its bytes is HB_ERR_INVALID ("text-segments").
 */
int hb_text_encode_chat(const struct hb_tok *tok, const struct hb_chat_render *r,
			struct hb_text_tokens *out, struct hb_error *err);

#endif
