/*
 * fuzz_config.c: fuzz target of the config.json reader: hb_json_parse of
 * the raw bytes, then hb_qwen_config_parse of the tree.
 *
 * Invariants: a tree hb_json_parse accepted renders (hb_json_render) to
 * text that parses again, and the config reader gives the same verdict on
 * both trees (same id and field when refused, the same resolved struct when
 * accepted): nothing the reader relies on may depend on spelling that
 * rendering normalises (white space, number formatting, escapes; trees
 * with a non-finite number are left out, see all_finite).  An
 * accepted config must stay inside its declared bounds (layer and PLE
 * tables, EOS list) and the lookup helpers must invert each other.  This
 * file owns only the harness; the readers are libcore/hb_json.c and
 * libstore/model/hb_qwen_config.c.
 */
#include "hb_base.h"
#include "fuzz.h"
#include "hb_json.h"
#include "model/hb_qwen_config.h"

#include <math.h>

/*
 * Whether every number of the tree is finite.  cJSON reads an overflowing
 * literal (1e999) as infinity and renders infinity as null, which the
 * config reader treats as an absent field: that render is lossy, so such
 * trees are left out of the render/re-parse comparison (the reader itself
 * refuses the non-finite value: regressions/config/render-nonfinite-*).
 */
static bool all_finite(const cJSON *item, int depth)
{
	const cJSON *child;

	if (depth > 2 * CJSON_NESTING_LIMIT)
		return false;
	if (cJSON_IsNumber(item) && !isfinite(item->valuedouble))
		return false;
	for (child = item->child; child; child = child->next)
		if (!all_finite(child, depth + 1))
			return false;
	return true;
}

static void check_config(const struct hb_qwen_config *c)
{
	HB_FUZZ_ASSERT(c->num_layers >= 1 && c->num_layers <= HB_QWEN_MAX_LAYERS);
	HB_FUZZ_ASSERT(c->n_ple_layers <= HB_QWEN_MAX_LAYERS);
	HB_FUZZ_ASSERT(c->n_eos <= HB_QWEN_MAX_EOS);
	for (uint64_t i = 0; i < c->num_layers; i++) {
		HB_FUZZ_ASSERT(c->layer_kind[i] == HB_LAYER_LINEAR ||
			       c->layer_kind[i] == HB_LAYER_SPARSE);
		HB_FUZZ_ASSERT(strcmp(hb_layer_kind_name(c->layer_kind[i]), "unknown") != 0);
	}
	for (size_t i = 0; i < c->n_ple_layers; i++) {
		HB_FUZZ_ASSERT(c->ple_layer_ids[i] >= 1);
		HB_FUZZ_ASSERT(i == 0 || c->ple_layer_ids[i - 1] < c->ple_layer_ids[i]);
		HB_FUZZ_ASSERT(hb_qwen_ple_index(c, c->ple_layer_ids[i]) == (int)i);
	}
	HB_FUZZ_ASSERT(hb_qwen_ple_index(c, 0) == -1);
	HB_FUZZ_ASSERT(strcmp(hb_act_name(c->hidden_act), "unknown") != 0);
	HB_FUZZ_ASSERT(strcmp(hb_act_name(c->output_gate), "unknown") != 0);
	(void)hb_qwen_ngram_heads(c);
}

int hb_fuzz_config(const uint8_t *data, size_t size)
{
	struct hb_qwen_config c1, c2;
	struct hb_error e1, e2;
	cJSON *root = NULL, *again = NULL;
	char *text = NULL;
	size_t len = 0;
	int rc, rc1, rc2;

	if (size > HB_FUZZ_MAX_INPUT)
		return HB_FUZZ_REFUSED;
	hb_error_clear(&e1);
	rc = hb_json_parse((const char *)data, size, "config.json", &root, &e1);
	if (rc != HB_OK) {
		HB_FUZZ_ASSERT(rc < 0 && e1.code == rc && root == NULL);
		return HB_FUZZ_REFUSED;
	}
	memset(&c1, 0, sizeof(c1));
	memset(&c2, 0, sizeof(c2));
	rc1 = hb_qwen_config_parse(root, &c1, &e1);
	HB_FUZZ_ASSERT(rc1 == HB_OK || (rc1 < 0 && e1.code == rc1));
	if (all_finite(root, 0) && hb_json_render(root, false, &text, &len, &e2) == HB_OK) {
		HB_FUZZ_ASSERT(hb_json_parse(text, len, "rendered", &again, &e2) == HB_OK);
		hb_error_clear(&e2);
		rc2 = hb_qwen_config_parse(again, &c2, &e2);
		HB_FUZZ_ASSERT(rc1 == rc2);
		HB_FUZZ_ASSERT(hb_fuzz_same_id(e1.id, e2.id));
		HB_FUZZ_ASSERT(strcmp(e1.field, e2.field) == 0);
		if (rc1 == HB_OK)
			HB_FUZZ_ASSERT(memcmp(&c1, &c2, sizeof(c1)) == 0);
		cJSON_Delete(again);
		free(text);
	}
	if (rc1 == HB_OK)
		check_config(&c1);
	cJSON_Delete(root);
	return rc1 == HB_OK ? HB_FUZZ_ACCEPTED : HB_FUZZ_REFUSED;
}

#ifdef HB_FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	hb_fuzz_config(data, size);
	return 0;
}
#endif
