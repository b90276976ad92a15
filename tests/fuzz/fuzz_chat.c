/*
 * fuzz_chat.c: fuzz target of the chat-message reader and renderer
 * (hebrus-chat(5)), hb_chat_render_json, with the first input byte choosing
 * the template options.
 *
 * Invariants: a refusal carries a chat- id; an accepted rendering passes
 * hb_chat_render_check (segments non-empty, contiguous, merged, covering
 * the bytes), holds no NUL byte, and rendering the same input again gives
 * the same bytes and segments (no hidden state).  This file owns only the
 * harness; the renderer is libkern/text/hb_chat.c and hb_chat_json.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "text/hb_chat.h"

int hb_fuzz_chat(const uint8_t *data, size_t size)
{
	struct hb_chat_opts o;
	struct hb_chat_render r1 = {0}, r2 = {0};
	struct hb_error err;
	int rc;

	if (size < 1 || size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	hb_chat_opts_default(&o);
	o.add_generation_prompt = data[0] & 1;
	o.enable_thinking = data[0] & 2;
	o.preserve_thinking = data[0] & 4;
	hb_error_clear(&err);
	rc = hb_chat_render_json((const char *)data + 1, size - 1, &o, &r1, &err);
	if (rc) {
		HB_FUZZ_ASSERT(err.id && !strncmp(err.id, "chat-", 5));
		HB_FUZZ_ASSERT(!r1.bytes && !r1.len && !r1.nsegs); /* untouched on failure */
		return HB_FUZZ_REFUSED;
	}
	HB_FUZZ_ASSERT(hb_chat_render_check(&r1, NULL) == HB_OK);
	HB_FUZZ_ASSERT(r1.len == 0 || memchr(r1.bytes, 0, r1.len) == NULL);
	if (hb_chat_render_json((const char *)data + 1, size - 1, &o, &r2, NULL) == HB_OK) {
		HB_FUZZ_ASSERT(r2.len == r1.len && r2.nsegs == r1.nsegs);
		HB_FUZZ_ASSERT(!r1.len || !memcmp(r1.bytes, r2.bytes, r1.len));
		for (size_t i = 0; i < r1.nsegs; i++) /* field by field: a segment has padding */
			HB_FUZZ_ASSERT(r1.segs[i].off == r2.segs[i].off && r1.segs[i].len == r2.segs[i].len &&
				       r1.segs[i].kind == r2.segs[i].kind);
	}
	hb_chat_render_release(&r1);
	hb_chat_render_release(&r2);
	return HB_FUZZ_ACCEPTED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_chat(data, size);
	return 0;
}
#endif
