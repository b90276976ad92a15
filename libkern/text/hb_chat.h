/*
 * hb_chat.h: native rendering of the Qwen3.6 chat template with provenance.
 *
 * Owns: turning a JSON conversation (the messages array that transformers'
 * apply_chat_template accepts, optionally with tool definitions) into one
 * UTF-8 byte stream plus complete, contiguous segments, each DATA or
 * TRUSTED_CONTROL (AFN-006).  Only special-token atoms written by the
 * template itself (<|im_start|>, <|im_end|>, <think>, </think>, <tool_call>,
 * </tool_call>, <tool_response>, </tool_response>) are TRUSTED_CONTROL;
 * template prose ("user\n", "<function=") and every byte of caller text are
 * DATA, even where caller text spells an atom.  Does not own tokenising:
 * the tokenizer consumes the segments.
 *
 * Authority: transformers 5.17.0 apply_chat_template with
 * tests/fixtures/chat/qwen36_chat_template.jinja (sha256 38e318af...90ea),
 * captured by scripts/oracle/capture_chat.py.  The template is implemented
 * natively (no Jinja engine), including Python str.strip() trimming
 * (Unicode White_Space plus U+001C..U+001F, AFN-007) and json.dumps
 * (", " / ": " separators, ensure_ascii=False, insertion order) for tojson.
 * Number spellings are taken from the JSON text, so 1 and 1.0 render as
 * Python would render the int and the float.
 *
 * Deliberate differences from upstream (contract-control, refused with an
 * id where upstream renders): structured media parts (upstream emits vision
 * pad tokens; the artifact is text-only), messages upstream silently drops
 * (a system/developer message after the leading two, a role the template
 * does not know), and tool-call arguments that are neither an object nor
 * null (upstream drops a string's parameters).
 *
 * The library is silent: errors go to struct hb_error with a stable id and
 * a field path such as "messages[3].content".
 */
#ifndef HB_CHAT_H
#define HB_CHAT_H

#include "hb_base.h"
#include "hb_err.h"

/* Diagnostic ids (static strings; tests and hb-run match on them). */
#define HB_CHAT_DIAG_LIST(X)                                                   \
	X(HB_CHAT_E_JSON, "chat-json")              /* not strict JSON / bad UTF-8 / NUL / duplicate key */ \
	X(HB_CHAT_E_INPUT, "chat-input")            /* top level neither array nor {messages, tools} */     \
	X(HB_CHAT_E_EMPTY, "chat-empty")            /* no messages (template raises) */                     \
	X(HB_CHAT_E_MESSAGE, "chat-message")        /* a message that is not an object */                   \
	X(HB_CHAT_E_ROLE, "chat-role")              /* missing or unknown role (upstream drops it) */       \
	X(HB_CHAT_E_SYSTEM_POSITION, "chat-system-position") /* system/developer after the leading two */   \
	X(HB_CHAT_E_CONTENT, "chat-content")        /* content not string/null/list (template raises) */    \
	X(HB_CHAT_E_CONTENT_ITEM, "chat-content-item") /* a list part neither text nor media (raises) */    \
	X(HB_CHAT_E_MEDIA, "chat-media")            /* image/video part: text-only artifact */              \
	X(HB_CHAT_E_TOOLS, "chat-tools")            /* tools present but not an array */                    \
	X(HB_CHAT_E_TOOL_CALLS, "chat-tool-calls")  /* tool_calls present but not an array */               \
	X(HB_CHAT_E_TOOL_CALL, "chat-tool-call")    /* a call without a string name (template raises) */    \
	X(HB_CHAT_E_TOOL_ARGUMENTS, "chat-tool-arguments") /* arguments neither object nor null */          \
	X(HB_CHAT_E_LIMIT, "chat-limit")            /* output would exceed size limits */

#define HB_CHAT_DIAG_ENUM(e, s) e,
enum hb_chat_diag { HB_CHAT_DIAG_LIST(HB_CHAT_DIAG_ENUM) HB_CHAT_DIAG_COUNT };
#undef HB_CHAT_DIAG_ENUM
/* The id string of a diagnostic, or NULL when out of range. */
const char *hb_chat_diag_id(int diag);

enum hb_chat_kind {
	HB_CHAT_DATA = 0,
	HB_CHAT_TRUSTED_CONTROL = 1,
};

struct hb_chat_segment {
	size_t off;                /* byte offset in bytes */
	size_t len;                /* > 0 */
	enum hb_chat_kind kind;
};

struct hb_chat_opts {
	bool add_generation_prompt;/* append "<|im_start|>assistant\n..." */
	bool enable_thinking;      /* false = template's enable_thinking=False */
	bool preserve_thinking;    /* template's preserve_thinking=True */
};

/*
 * A rendering.  bytes is NUL-terminated for convenience (the NUL is not
 * part of len; rendered text itself never holds NUL: JSON "\u0000" is
 * refused).  Segments are non-empty, contiguous from 0 to len, and adjacent
 * segments differ in kind.  A zero-initialised struct is a valid empty one.
 */
struct hb_chat_render {
	char *bytes;
	size_t len;
	struct hb_chat_segment *segs;
	size_t nsegs;
};

/* add_generation_prompt=true, enable_thinking=true, preserve_thinking=false
 * (what hb-run wants; apply_chat_template's own default for
 * add_generation_prompt is false). */
void hb_chat_opts_default(struct hb_chat_opts *opts);

/*
 * Render len bytes of JSON text: either the messages array itself or an
 * object {"messages": [...], "tools": [...]} ("tools" optional, null or an
 * array; any other key is refused).  On success *out is replaced (its
 * previous contents released); on failure *out is untouched and err holds
 * code, id and field.  Codes: HB_ERR_FORMAT (bad JSON), HB_ERR_CONTRACT
 * (what the template raises on, or a malformed conversation),
 * HB_ERR_UNSUPPORTED (media), HB_ERR_NOMEM, HB_ERR_OVERFLOW, HB_ERR_INVALID.
 */
int hb_chat_render_json(const char *json, size_t len,
			const struct hb_chat_opts *opts,
			struct hb_chat_render *out, struct hb_error *err);

/* Check a rendering's segment geometry (coverage, order, non-empty, merged,
 * kinds).  0 or HB_ERR_INTERNAL. */
int hb_chat_render_check(const struct hb_chat_render *r, struct hb_error *err);

/* Free and zero.  NULL is allowed. */
void hb_chat_render_release(struct hb_chat_render *r);

/* Python str.isspace() for one code point: Unicode White_Space minus the
 * few that are not, plus U+001C..U+001F (AFN-007).  Exposed for tests. */
bool hb_chat_py_isspace(uint32_t cp);

#endif
