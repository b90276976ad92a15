/*
 * hb_chat_int.h: internals shared by hb_chat.c (the template) and
 * hb_chat_json.c (strict input checks, Python-compatible value rendering).
 * Not installed; nothing outside libkern/text/hb_chat*.c includes it.
 */
#ifndef HB_CHAT_INT_H
#define HB_CHAT_INT_H

#include "hb_chat.h"
#include <cJSON.h>

/* A growable byte string; rc keeps the first allocation/overflow error. */
struct hb_chat_str {
	char *p;
	size_t n, cap;
	int rc;
};

void hb_chat_str_put(struct hb_chat_str *s, const char *p, size_t n);
void hb_chat_str_puts(struct hb_chat_str *s, const char *z);
void hb_chat_str_free(struct hb_chat_str *s);

/* Number literals of the input, in document order; a cJSON number node's
 * valueint is overwritten with its index here (the tree is ours). */
struct hb_chat_lit {
	const char *p;
	size_t n;
};

struct hb_chat_doc {
	cJSON *root;
	struct hb_chat_lit *lits;
	size_t nlits;
};

/* Parse strictly: JSON grammar for numbers, no "\u0000", valid UTF-8 in
 * every string and key, no duplicate keys.  Errors carry id chat-json. */
int hb_chat_doc_parse(const char *json, size_t len, struct hb_chat_doc *doc,
		      struct hb_error *err);
void hb_chat_doc_free(struct hb_chat_doc *doc);

/* Python json.dumps(v, ensure_ascii=False) (separators ", " and ": "). */
void hb_chat_tojson(const struct hb_chat_doc *doc, const cJSON *v,
		    struct hb_chat_str *s);
/* Jinja's `| string` of a scalar: str() in Python (True, None, 1.0, inf). */
void hb_chat_pystr(const struct hb_chat_doc *doc, const cJSON *v,
		   struct hb_chat_str *s);

#endif
