/*
 * hb_profile.c: the profile table (see hb_profile.h).  The released
 * profile's figures come from the source documents: AFN-001 (identity,
 * layers, hidden, streams, pattern, experts, context, source inventory),
 * AFN-003 (PLE rows), AFN-005 (vocabulary and stop ids), AFN-004 (vision and
 * MTP exclusion counts).
 */
#include "hb_base.h"
#include "hb_profile.h"

static const struct hb_profile flash_next = {
	.id = HB_PROFILE_FLASH_NEXT,
	.status = HB_STATUS_PINNED_NOT_SUPPORTED,
	.from_config = false,
	.source_repo = "Qwen/Qwen3.8-Flash-Next",
	.source_revision = "de4b8e4d43b917e7706784d8bb445c9af86a3540",
	.layers = 48,
	.hidden = 2560,
	.hc_count = 4,
	.experts = 512,
	.experts_used = 10,
	.expert_width = 640,
	.context = 262144,
	.vocab_physical = 248320,
	.vocab_semantic = 248077,
	.ple_rows = 320001536,
	.ple_logical_rows = 320001446,
	.ple_row_width = 160,
	.ple_layer_ids = {2}, /* public config: [2]; the issue text said [1] */
	.n_ple_layers = 1,
	.stop_ids = {248044, 248046},
	.n_stop_ids = 2,
	.source_tensors = 1658,
	.source_shards = 131,
	.source_bytes = 359999963128ull,
	.vision_tensors = 333,
	.mtp_tensors = 31,
};

static const struct hb_profile dev = {
	.id = HB_PROFILE_DEV,
	.status = HB_STATUS_CORRECTNESS_FIXTURE,
	.from_config = true,
};

const struct hb_profile *hb_profile_flash_next(void)
{
	return &flash_next;
}

const struct hb_profile *hb_profile_dev(void)
{
	return &dev;
}

const struct hb_profile *hb_profile_find(const char *id)
{
	if (id && !strcmp(id, flash_next.id))
		return &flash_next;
	if (id && !strcmp(id, dev.id))
		return &dev;
	return NULL;
}

const struct hb_profile *hb_profile_auto(const struct hb_qwen_config *cfg)
{
	if (cfg->num_layers == flash_next.layers && cfg->hidden_size == flash_next.hidden &&
	    cfg->num_experts == flash_next.experts)
		return &flash_next;
	return &dev;
}

static int mismatch(struct hb_error *err, const char *field, uint64_t want, uint64_t got)
{
	return hb_error_diag(err, "profile-mismatch", HB_ERR_CONTRACT, field, false, 0,
			     "profile %s requires %" PRIu64 ", got %" PRIu64,
			     flash_next.id, want, got);
}

int hb_profile_check(const struct hb_profile *p, const struct hb_qwen_config *c,
		     struct hb_error *err)
{
	const struct { const char *field; uint64_t want, got; } eq[] = {
		{"text_config.num_hidden_layers", p->layers, c->num_layers},
		{"text_config.hidden_size", p->hidden, c->hidden_size},
		{"text_config.hc_count", p->hc_count, c->hc_count},
		{"text_config.num_experts", p->experts, c->num_experts},
		{"text_config.num_experts_per_tok", p->experts_used, c->num_experts_per_tok},
		{"text_config.moe_intermediate_size", p->expert_width, c->moe_intermediate_size},
		{"text_config.max_position_embeddings", p->context, c->max_position_embeddings},
		{"text_config.vocab_size", p->vocab_physical, c->vocab_size},
		{"text_config.ple_layer_ids.count", p->n_ple_layers, c->n_ple_layers},
	};

	if (p->from_config)
		return HB_OK;
	for (size_t i = 0; i < HB_ARRAY_LEN(eq); i++)
		if (eq[i].want != eq[i].got)
			return mismatch(err, eq[i].field, eq[i].want, eq[i].got);
	/* GDN, GDN, GDN, QSA repeated */
	for (uint64_t i = 0; i < c->num_layers; i++) {
		uint8_t want = (i + 1) % 4 ? HB_LAYER_LINEAR : HB_LAYER_SPARSE;
		if (c->layer_kind[i] != want) {
			char field[64];
			snprintf(field, sizeof(field), "text_config.layer_types[%" PRIu64 "]", i);
			return hb_error_diag(err, "profile-mismatch", HB_ERR_CONTRACT, field, false, 0,
					     "profile %s requires %s", p->id,
					     hb_layer_kind_name((enum hb_layer_kind)want));
		}
	}
	for (size_t i = 0; i < p->n_ple_layers; i++)
		if (c->ple_layer_ids[i] != p->ple_layer_ids[i])
			return mismatch(err, "text_config.ple_layer_ids", p->ple_layer_ids[i], c->ple_layer_ids[i]);
	if (!c->qsa)
		return hb_error_diag(err, "profile-mismatch", HB_ERR_CONTRACT, "text_config.indexer_n_heads",
				     false, 0, "profile %s requires QSA", p->id);
	return HB_OK;
}

int hb_profile_check_ple(const struct hb_profile *p, const struct hb_ple_table_hash *h,
			 struct hb_error *err)
{
	if (p->from_config)
		return HB_OK;
	if (h->physical_rows != p->ple_rows)
		return mismatch(err, "ple.rows", p->ple_rows, h->physical_rows);
	if (h->logical_rows != p->ple_logical_rows)
		return mismatch(err, "ple.logical_rows", p->ple_logical_rows, h->logical_rows);
	if (h->row_width != p->ple_row_width)
		return mismatch(err, "ple.row_width", p->ple_row_width, h->row_width);
	return HB_OK;
}
