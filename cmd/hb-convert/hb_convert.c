/*
 * hb_convert.c: the conversion transaction (see hb_convert.h).
 *
 * Order: config -> profile -> checkpoint -> inventory -> PLE hash identity
 * -> text assets -> plan (GGUF description, expert and PLE layouts) ->
 * sibling temporary file -> header, dense tensors, expert store, PLE store,
 * padding -> sources unchanged? -> commit with verification.  Everything up
 * to the plan reads metadata only, so a defective source is refused before
 * a byte is written.
 *
 * Diagnostic ids raised here:
 *   conv-profile          unknown --profile
 *   conv-ple-hash         a stored PLE hash buffer disagrees with config.json
 *   conv-ple-rows         the n-gram table's rows disagree with the hash heads
 *   conv-expert-geometry  the real profile with a non-family-4 geometry
 *   conv-verify           the reopened artifact does not verify (our fault)
 *   conv-text-asset       tokenizer.json or chat_template.jinja is not UTF-8
 *   conv-source-pin       the released profile without its pinned source
 *   conv-stage            the test seam aborted a stage
 */
#include "hb_base.h"
#include "artifact/hb_artifact.h"
#include "hb_checked.h"
#include "hb_convert_int.h"
#include "hb_io.h"
#include "hb_json.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONFIG_BYTES (16u << 20)
#define MAX_TEXT_ASSET (64u << 20)

static int stage(struct hb_conv *c, const char *name, struct hb_error *err)
{
	if (c->o->stage_hook && c->o->stage_hook(c->o->stage_ctx, name))
		return hb_error_diag(err, "conv-stage", HB_ERR_FAULT, "convert.stage", false, 0,
				     "aborted after stage %s", name);
	return HB_OK;
}

static int path_join(char *buf, size_t len, const char *dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", dir, name);
	return n < 0 || (size_t)n >= len ? HB_ERR_OVERFLOW : HB_OK;
}

static int load_config(struct hb_conv *c, struct hb_error *err)
{
	char path[4096], *text = NULL;
	size_t len = 0;
	cJSON *root = NULL;
	int rc;

	if (path_join(path, sizeof(path), c->o->src_dir, "config.json"))
		return hb_error_set(err, HB_ERR_INVALID, c->o->src_dir, "path too long");
	rc = hb_read_file(path, MAX_CONFIG_BYTES, &text, &len, err);
	if (rc)
		return rc;
	hb_sha256_buf(text, len, c->config_sha);
	rc = hb_json_parse(text, len, path, &root, err);
	free(text);
	if (rc)
		return rc;
	rc = hb_qwen_config_parse(root, &c->cfg, err);
	cJSON_Delete(root);
	return rc;
}

static int choose_profile(struct hb_conv *c, struct hb_error *err)
{
	const char *want = c->o->profile ? c->o->profile : "auto";

	if (!strcmp(want, "auto"))
		c->profile = hb_profile_auto(&c->cfg);
	else
		c->profile = hb_profile_find(want);
	if (!c->profile)
		return hb_error_diag(err, "conv-profile", HB_ERR_INVALID, "profile", false, 0,
				     "unknown profile '%s'", want);
	return hb_profile_check(c->profile, &c->cfg, err);
}

static int build_inventory(struct hb_conv *c, struct hb_error *err)
{
	int rc = hb_st_checkpoint_open(&c->ck, c->o->src_dir, err);

	if (rc)
		return rc;
	c->ck_open = true;
	c->sources = calloc(c->ck.ntensors ? c->ck.ntensors : 1, sizeof(*c->sources));
	if (!c->sources)
		return hb_error_set(err, HB_ERR_NOMEM, "inventory", "out of memory");
	for (size_t i = 0; i < c->ck.ntensors; i++) {
		struct hb_st_ref r = hb_st_checkpoint_at(&c->ck, i);
		struct hb_inv_source *s = &c->sources[i];
		s->name = r.tensor->name;
		s->dtype = r.tensor->dtype;
		s->ndim = r.tensor->ndim;
		for (unsigned d = 0; d < r.tensor->ndim && d < HB_INV_MAX_DIMS; d++)
			s->shape[d] = r.tensor->shape[d];
		s->nbytes = r.tensor->nbytes;
		s->shard = r.file->base;
		s->shard_offset = r.tensor->file_offset;
	}
	rc = hb_inventory_build(&c->cfg, c->sources, c->ck.ntensors, &c->inv, err);
	if (!rc)
		c->inv_built = true;
	return rc;
}

int hb_conv_read_i64(const struct hb_conv *c, const char *name, int64_t *out,
		     size_t n, struct hb_error *err)
{
	struct hb_st_ref r;
	uint8_t *raw;
	int rc;

	if (!hb_st_checkpoint_find(&c->ck, name, &r))
		return hb_error_set(err, HB_ERR_NOTFOUND, name, "tensor not found");
	if (r.tensor->dtype != HB_DTYPE_I64 || r.tensor->nbytes != n * 8)
		return hb_error_diag(err, "inv-shape", HB_ERR_CONTRACT, name, false, 0,
				     "expected %zu int64 values", n);
	raw = malloc(n * 8 + 1);
	if (!raw)
		return hb_error_set(err, HB_ERR_NOMEM, name, "out of memory");
	rc = hb_st_read(r.file, r.tensor, 0, raw, n * 8, err);
	for (size_t i = 0; !rc && i < n; i++) {
		uint64_t v = 0;
		for (int b = 0; b < 8; b++)
			v |= (uint64_t)raw[i * 8 + (size_t)b] << (8 * b);
		out[i] = (int64_t)v;
	}
	free(raw);
	return rc;
}

/* Compare one stored hash buffer with the recomputed values. */
static int compare_buffer(struct hb_conv *c, uint32_t layer, const char *what,
			  const uint64_t *want, size_t n, struct hb_error *err)
{
	char name[160];
	int64_t got[HB_PLE_MAX_HEADS];
	int rc;

	snprintf(name, sizeof(name), "model.language_model.layers.%u.ple.ple_embedding.%s", layer, what);
	rc = hb_conv_read_i64(c, name, got, n, err);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		if ((uint64_t)got[i] != want[i])
			return hb_error_diag(err, "conv-ple-hash", HB_ERR_CONTRACT, name, false, 0,
					     "stored value [%zu] = %" PRId64 " but config.json gives %" PRIu64
					     "%s", i, got[i], want[i],
					     c->cfg.seed_present ? "" : " (config.json has no seed; upstream's default 1234 was assumed)");
	return HB_OK;
}

static int verify_ple_hash(struct hb_conv *c, struct hb_error *err)
{
	int rc;

	for (size_t p = 0; p < c->cfg.n_ple_layers; p++) {
		struct hb_ple_table_hash *h = &c->ple_hash[p];
		uint64_t rows = 0;
		uint32_t layer;
		rc = hb_ple_hash_compute(&c->cfg, p, h, err);
		if (rc)
			return rc;
		layer = h->layer_id - 1;
		if ((rc = compare_buffer(c, layer, "layer_multipliers", h->multipliers, h->ngram_size, err)) ||
		    (rc = compare_buffer(c, layer, "ngram_heads_vocab_sizes", h->head_sizes, h->heads, err)) ||
		    (rc = compare_buffer(c, layer, "ngram_heads_offsets", h->head_offsets, h->heads, err)))
			return rc;
		for (size_t i = 0; i < c->inv.n; i++) {
			const struct hb_inv_entry *e = &c->inv.entries[i];
			if (e->role == HB_ROLE_PLE_TABLE && e->layer == (int32_t)layer)
				rows += e->src->shape[0];
		}
		if (rows != h->physical_rows)
			return hb_error_diag(err, "conv-ple-rows", HB_ERR_CONTRACT,
					     "ple.ngram_embedding", false, 0,
					     "layer %u table has %" PRIu64 " rows, the hash heads need %" PRIu64,
					     layer, rows, h->physical_rows);
		rc = hb_profile_check_ple(c->profile, h, err);
		if (rc)
			return rc;
	}
	/* Without `seed` in config.json only the stored buffers can settle the
	 * multipliers; they were just required to equal the default's. */
	c->seed_confirmed_by_buffers = !c->cfg.seed_present && c->cfg.n_ple_layers;
	return c->cfg.n_ple_layers ? hb_ple_hash_digest(&c->cfg, c->ple_hash_digest, err) : HB_OK;
}

/* The released profile pins its source: revision, inventory counts, bytes. */
static int check_source_pins(struct hb_conv *c, struct hb_error *err)
{
	const struct hb_profile *p = c->profile;
	const struct { const char *what; uint64_t want, got; } counts[] = {
		{"source tensors", p->source_tensors, c->inv.n},
		{"source shards", p->source_shards, c->ck.nshards},
		{"source bytes", p->source_bytes, c->ck.total_bytes},
		{"vision tensors", p->vision_tensors, c->inv.count[HB_INV_VISION]},
		{"MTP tensors", p->mtp_tensors, c->inv.count[HB_INV_MTP]},
	};

	if (p->from_config)
		return HB_OK;
	if (!c->o->source_revision || strcmp(c->o->source_revision, p->source_revision))
		return hb_error_diag(err, "conv-source-pin", HB_ERR_CONTRACT, "source.revision", false, 0,
				     "profile %s is pinned to revision %s; give it with --source-revision",
				     p->id, p->source_revision);
	for (size_t i = 0; i < HB_ARRAY_LEN(counts); i++)
		if (counts[i].want != counts[i].got)
			return hb_error_diag(err, "conv-source-pin", HB_ERR_CONTRACT, "source.inventory", false, 0,
					     "%" PRIu64 " %s, profile %s pins %" PRIu64, counts[i].got,
					     counts[i].what, p->id, counts[i].want);
	return HB_OK;
}

static int read_asset(const char *dir, const char *name, char **data, size_t *len,
		      uint8_t sha[HB_SHA256_BYTES], struct hb_error *err)
{
	char path[4096];
	int rc;

	*data = NULL;
	*len = 0;
	if (path_join(path, sizeof(path), dir, name))
		return hb_error_set(err, HB_ERR_INVALID, dir, "path too long");
	if (access(path, F_OK) != 0)
		return HB_OK; /* optional */
	rc = hb_read_file(path, MAX_TEXT_ASSET, data, len, err);
	if (!rc)
		hb_sha256_buf(*data, *len, sha);
	return rc;
}

static int load_text_assets(struct hb_conv *c, struct hb_error *err)
{
	int rc = read_asset(c->o->src_dir, "tokenizer.json", &c->tokenizer_json,
			    &c->tokenizer_len, c->tokenizer_sha, err);
	if (rc)
		return rc;
	rc = read_asset(c->o->src_dir, "chat_template.jinja", &c->chat_template,
			&c->template_len, c->template_sha, err);
	if (rc)
		return rc;
	if (c->tokenizer_json && !hb_gguf_utf8_valid(c->tokenizer_json, c->tokenizer_len))
		return hb_error_diag(err, "conv-text-asset", HB_ERR_FORMAT, "tokenizer.json", false, 0,
				     "not valid UTF-8");
	if (c->chat_template && !hb_gguf_utf8_valid(c->chat_template, c->template_len))
		return hb_error_diag(err, "conv-text-asset", HB_ERR_FORMAT, "chat_template.jinja", false, 0,
				     "not valid UTF-8");
	return HB_OK;
}

static uint32_t dense_type(enum hb_dtype t)
{
	switch (t) {
	case HB_DTYPE_BF16: return HB_GGML_BF16;
	case HB_DTYPE_F16: return HB_GGML_F16;
	default: return HB_GGML_F32; /* F32, and FP8 dequantised to F32 */
	}
}

static int plan_dense(struct hb_conv *c, struct hb_error *err)
{
	c->dense = calloc(c->inv.dense_tensors ? c->inv.dense_tensors : 1, sizeof(*c->dense));
	if (!c->dense)
		return hb_error_set(err, HB_ERR_NOMEM, "plan", "out of memory");
	for (size_t i = 0; i < c->inv.n; i++) {
		const struct hb_inv_entry *e = &c->inv.entries[i];
		struct hb_conv_dense *d;
		uint64_t elems = 1;
		int rc;
		if (e->dest != HB_DEST_DENSE || e->is_scale)
			continue;
		d = &c->dense[c->n_dense];
		d->entry = e;
		hb_st_checkpoint_find(&c->ck, e->src->name, &d->src);
		if (e->src->dtype == HB_DTYPE_F8_E4M3) {
			char sname[200];
			snprintf(sname, sizeof(sname), "%s_scale_inv", e->src->name);
			d->scale = hb_inventory_find(&c->inv, sname);
			hb_st_checkpoint_find(&c->ck, sname, &d->scale_src);
		}
		for (uint32_t k = 0; k < e->src->ndim; k++)
			elems *= e->src->shape[k];
		d->ggml_type = dense_type(e->src->dtype);
		d->nbytes = elems * hb_ggml_type_size(d->ggml_type);
		d->gguf_index = c->gw.n_tensors;
		rc = hb_gguf_writer_add_tensor_torch(&c->gw, e->dest_name, d->ggml_type, e->src->ndim,
						     e->src->shape, d->nbytes, 0, err);
		if (rc)
			return rc;
		c->n_dense++;
	}
	return HB_OK;
}

static int plan_experts(struct hb_conv *c, struct hb_error *err)
{
	struct hb_em_geometry real;
	int rc;

	c->em_geom.layers = (uint32_t)c->cfg.num_layers;
	c->em_geom.experts = (uint32_t)c->cfg.num_experts;
	c->em_geom.experts_used = (uint32_t)c->cfg.num_experts_per_tok;
	c->em_geom.hidden = c->cfg.hidden_size;
	c->em_geom.intermediate = c->cfg.moe_intermediate_size;
	if (!c->profile->from_config) {
		hb_em_geometry_qwen4exp(&real);
		if (memcmp(&real, &c->em_geom, sizeof(real)))
			return hb_error_diag(err, "conv-expert-geometry", HB_ERR_CONTRACT, "experts", false, 0,
					     "profile %s requires the family-4 geometry 48 x 512", c->profile->id);
	}
	rc = hb_em_geometry_check(&c->em_geom, err);
	if (!rc)
		rc = hb_em_layout_plan(&c->em_plan, &c->em_geom,
				       c->o->expert_codec == HB_CONV_EXPERTS_AFFINE4_G64 ?
				       HB_EM_CODEC_AFFINE4_G64 : HB_EM_CODEC_BF16, err);
	if (rc)
		return rc;
	c->em_planned = true;
	c->em_index = c->gw.n_tensors;
	return hb_gguf_writer_add_tensor_torch(&c->gw, HB_TENSOR_EXPERT_STORE, HB_GGML_I8, 1,
					       (uint64_t[]){c->em_plan.store_size}, c->em_plan.store_size,
					       HB_STORE_FILE_ALIGN, err);
}

static int plan_ple(struct hb_conv *c, struct hb_error *err)
{
	struct hb_ple_spec spec;
	int rc;

	if (!c->cfg.n_ple_layers)
		return HB_OK;
	if (c->cfg.n_ple_layers > HB_PLE_MAX_TABLES)
		return hb_error_diag(err, "cfg-unsupported", HB_ERR_UNSUPPORTED, "text_config.ple_layer_ids",
				     false, 0, "more than %u PLE layers", HB_PLE_MAX_TABLES);
	memset(&spec, 0, sizeof(spec));
	spec.codec_id = c->o->ple_codec == HB_CONV_PLE_AFFINE4_G32 ? HB_PLE_CODEC_AFFINE4 : HB_PLE_CODEC_BF16;
	spec.codec_version = HB_PLE_CODEC_VERSION;
	spec.group_size = spec.codec_id == HB_PLE_CODEC_AFFINE4 ? 32 : 0;
	spec.row_width = (uint32_t)c->ple_hash[0].row_width;
	spec.rows_per_page = c->o->ple_rows_per_page ? c->o->ple_rows_per_page : HB_CONV_DEFAULT_ROWS_PER_PAGE;
	if (c->cfg.ngram_vocab_divisor > UINT32_MAX)
		return hb_error_diag(err, "cfg-unsupported", HB_ERR_UNSUPPORTED,
				     "text_config.make_ngram_vocab_size_divisible_by", false, 0, "too large");
	spec.row_alignment = (uint32_t)c->cfg.ngram_vocab_divisor;
	spec.table_count = (uint32_t)c->cfg.n_ple_layers;
	for (size_t p = 0; p < c->cfg.n_ple_layers; p++) {
		spec.tables[p].layer_id = c->ple_hash[p].layer_id;
		spec.tables[p].logical_rows = c->ple_hash[p].logical_rows;
	}
	memcpy(spec.hash_identity, c->ple_hash_digest, sizeof(spec.hash_identity));
	rc = hb_ple_plan(&spec, &c->ple_layout, err);
	if (rc)
		return rc;
	for (size_t p = 0; p < c->cfg.n_ple_layers; p++)
		if (c->ple_layout.tables[p].physical_rows != c->ple_hash[p].physical_rows)
			return hb_error_diag(err, "conv-ple-rows", HB_ERR_CONTRACT, "ple.rows", false, 0,
					     "store rows %" PRIu64 " disagree with the padded table %" PRIu64,
					     c->ple_layout.tables[p].physical_rows, c->ple_hash[p].physical_rows);
	c->has_ple = true;
	c->ple_index = c->gw.n_tensors;
	return hb_gguf_writer_add_tensor_torch(&c->gw, HB_TENSOR_PLE_STORE, HB_GGML_I8, 1,
					       (uint64_t[]){c->ple_layout.store_size},
					       c->ple_layout.store_size, HB_STORE_FILE_ALIGN, err);
}

/* Reopen the temporary file as a reader would and verify what was written. */
static int verify_artifact(int fd, void *ctx, struct hb_error *err)
{
	struct hb_conv *c = ctx;
	struct hb_gguf g;
	const struct hb_gguf_tensor *t;
	struct hb_em_layout parsed;
	int rc;

	hb_gguf_init(&g);
	rc = hb_gguf_read_fd(&g, fd, NULL, err);
	if (rc)
		return rc;
	if (g.n_tensors != c->gw.n_tensors || g.layout.file_size != c->gw.layout.file_size) {
		hb_gguf_release(&g);
		return hb_error_diag(err, "conv-verify", HB_ERR_INTERNAL, c->o->out_path, false, 0,
				     "the reopened file does not match its plan");
	}
	t = hb_gguf_find_tensor(&g, HB_TENSOR_EXPERT_STORE);
	memset(&parsed, 0, sizeof(parsed));
	rc = t ? hb_em_parse_fd(fd, t->offset, t->nbytes, &c->em_geom, &parsed, NULL, err)
	       : hb_error_diag(err, "conv-verify", HB_ERR_INTERNAL, HB_TENSOR_EXPERT_STORE, false, 0, "missing");
	if (!rc && c->experts_read_back) {
		/* the payload was read back record by record while it was
		 * written (hb_convert_experts.c); what the reopened file must
		 * still show is the digests computed from those bytes */
		const struct hb_gguf_kv *kv = hb_gguf_find_kv(&g, HB_KEY_EXPERT_RECORD_SHA);
		uint64_t n = 32ull * c->em_geom.layers * c->em_geom.experts;
		if (memcmp(parsed.payload_sha256, c->em_final.payload_sha256, HB_SHA256_BYTES) ||
		    !kv || kv->value.count != n || memcmp(kv->value.elems, c->record_sha, (size_t)n))
			rc = hb_error_diag(err, "conv-verify", HB_ERR_INTERNAL, HB_TENSOR_EXPERT_STORE, false, 0,
					   "the reopened file does not carry the digests written");
	} else if (!rc) {
		rc = hb_em_verify_payload(fd, t->offset, &parsed, err);
	}
	hb_em_layout_release(&parsed);
	if (!rc && c->has_ple) {
		struct hb_ple_store *s = NULL;
		struct hb_ple_verify_report rep;
		t = hb_gguf_find_tensor(&g, HB_TENSOR_PLE_STORE);
		rc = t ? hb_ple_store_open(&s, fd, t->offset, t->nbytes, err)
		       : hb_error_diag(err, "conv-verify", HB_ERR_INTERNAL, HB_TENSOR_PLE_STORE, false, 0, "missing");
		if (!rc)
			rc = hb_ple_payload_verify(s, NULL, NULL, NULL, &rep, err);
		if (!rc && (rep.bad_pages || !rep.payload_ok))
			rc = hb_error_diag(err, "conv-verify", HB_ERR_INTERNAL, HB_TENSOR_PLE_STORE, false, 0,
					   "%" PRIu64 " bad pages after writing", rep.bad_pages);
		hb_ple_store_close(s);
	}
	hb_gguf_release(&g);
	return rc;
}

static int fill_record_digests(struct hb_conv *c, struct hb_error *err)
{
	for (size_t i = 0; i < c->gw.n_kv; i++) {
		struct hb_gguf_value *v = &c->gw.kv[i].value;
		if (strcmp(c->gw.kv[i].key.ptr, HB_KEY_EXPERT_RECORD_SHA))
			continue;
		if (v->count != 32ull * c->em_geom.layers * c->em_geom.experts || !c->record_sha)
			break;
		memcpy(v->elems, c->record_sha, (size_t)v->count);
		return HB_OK;
	}
	return hb_error_set(err, HB_ERR_INTERNAL, HB_KEY_EXPERT_RECORD_SHA, "placeholder missing");
}

static int write_all(struct hb_conv *c, struct hb_error *err)
{
	int rc = hb_publish_begin(&c->pub, c->o->out_path, c->o->force ? HB_PUBLISH_REPLACE : 0, err);

	if (rc)
		return rc;
	c->pub_open = true;
	double t = hb_conv_now();

	/* The header goes last: it carries the record digests, known only once
	 * the expert store is written (its length was fixed at planning). */
	if ((rc = hb_conv_write_dense(c, err)) || (rc = stage(c, "dense", err)))
		return rc;
	c->dense_s = hb_conv_now() - t, t += c->dense_s;
	if ((rc = hb_conv_write_experts(c, err)) || (rc = stage(c, "experts", err)))
		return rc;
	c->experts_s = hb_conv_now() - t, t += c->experts_s;
	if ((rc = hb_conv_write_ple(c, err)) || (rc = stage(c, "ple", err)))
		return rc;
	c->ple_s = hb_conv_now() - t, t += c->ple_s;
	/* every source byte is read: what readahead left of the shards goes
	 * (hb_convert_experts.c drops each shard after its last expert) */
	for (size_t i = 0; i < c->ck.nshards; i++)
		posix_fadvise(c->ck.shards[i].fd, 0, 0, POSIX_FADV_DONTNEED);
	if ((rc = fill_record_digests(c, err)) ||
	    (rc = hb_gguf_writer_write_header_fd(&c->gw, c->pub.fd, err)) ||
	    (rc = stage(c, "header", err)) ||
	    (rc = hb_gguf_writer_write_padding_fd(&c->gw, c->pub.fd, err)))
		return rc;
	/* A source that changed while it was read is not what was converted. */
	rc = hb_st_checkpoint_check_unchanged(&c->ck, err);
	if (!rc)
		rc = stage(c, "sources-unchanged", err);
	if (rc)
		return rc;
	c->header_s = hb_conv_now() - t, t += c->header_s;
	c->pub_open = false;
	/* fsync, reopen, verify, rename */
	rc = hb_publish_commit(&c->pub, verify_artifact, c, err);
	c->commit_s = hb_conv_now() - t;
	return rc;
}

double hb_conv_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void conv_release(struct hb_conv *c)
{
	if (c->pub_open)
		hb_publish_abort(&c->pub);
	hb_gguf_writer_release(&c->gw);
	hb_pool_destroy(c->pool);
	if (c->em_planned)
		hb_em_layout_release(&c->em_plan);
	if (c->em_finished)
		hb_em_layout_release(&c->em_final);
	free(c->dense);
	if (c->inv_built)
		hb_inventory_free(&c->inv);
	free(c->sources);
	if (c->ck_open)
		hb_st_checkpoint_close(&c->ck);
	free(c->record_sha);
	free(c->tokenizer_json);
	free(c->chat_template);
}

int hb_convert(const struct hb_convert_opts *o, cJSON **report, struct hb_error *err)
{
	struct hb_conv *c = calloc(1, sizeof(*c));
	int rc;

	if (report)
		*report = NULL;
	if (!c)
		return hb_error_set(err, HB_ERR_NOMEM, "convert", "out of memory");
	c->o = o;
	hb_gguf_writer_init(&c->gw);
	if ((rc = hb_crypto_start(err)) != HB_OK)
		goto out;
	if ((rc = load_config(c, err)) || (rc = choose_profile(c, err)) ||
	    (rc = build_inventory(c, err)) || (rc = check_source_pins(c, err)) ||
	    (rc = verify_ple_hash(c, err)) ||
	    (rc = load_text_assets(c, err)) || (rc = stage(c, "inventory", err)))
		goto out;
	if ((rc = hb_conv_metadata(c, err)) || (rc = plan_dense(c, err)) ||
	    (rc = plan_experts(c, err)) || (rc = plan_ple(c, err)) ||
	    (rc = hb_gguf_writer_layout(&c->gw, err)) || (rc = stage(c, "plan", err)))
		goto out;
	if ((rc = hb_pool_create(o->threads, &c->pool, err)))
		goto out;
	if (o->progress)
		o->progress->total = c->inv.bytes[HB_INV_BASE] + c->inv.bytes[HB_INV_EXPERT] +
				     c->inv.bytes[HB_INV_PLE];
	if ((rc = write_all(c, err)))
		goto out;
	if (report)
		rc = hb_conv_report(c, report, err);
out:
	conv_release(c);
	free(c);
	return rc;
}
