/*
 * adm_sparse.c: the sparse full-geometry qwen4exp-flash-next artifact (see
 * adm_sparse.h).  Test support only: the model constants go through the
 * converter's hb_artifact_write_model_constants (one writer of that part of
 * the schema); identity, PLE, source and store keys are written here, key
 * by key with the schema's exact GGUF types (hb_artifact.h), from a
 * config.json text parsed by hb_qwen_config, with the PLE identity from
 * hb_ple_hash.  Payload bytes are never written: they are holes.
 *
 * Provenance of the values (config.json below):
 *   source documents (pinned by the profile, hb_profile.c): 48 layers,
 *     hidden 2560, hc_count 4, pattern GDN GDN GDN QSA x 12, 512 experts
 *     top-10 of width 640, context 262144, vocabulary 248320 physical /
 *     248077 semantic, stop ids 248044 248046, ple_layer_ids [2],
 *     ple_embed_dim 2560 (16 heads of 160), 320,001,536 PLE rows of which
 *     90 padding, the source repository, revision and inventory counts;
 *   a public config of the checkpoint: num_attention_heads 32,
 *     num_key_value_heads 2, head_dim 256, linear_num_key_heads 16,
 *     linear_num_value_heads 48, linear key/value head dim 128,
 *     indexer_n_heads 16, indexer_head_dim 128, indexer_budget 2048,
 *     indexer_compress_ratio 4, shared_expert_intermediate_size 640,
 *     hc_lowrank 320, rope_theta 1e7 with partial_rotary_factor 0.25;
 *   derived here: ngram_size 3 x heads_per_ngram 8 = 16 heads (160 x 16 =
 *     2560) and ngram_vocab_size_base 20,000,000, whose 16 consecutive
 *     primes sum to 320,001,446 logical rows, 320,001,536 when padded to
 *     a multiple of 128 -- the documented row count;
 *   assumed as in the upstream fixtures (tests/fixtures/upstream,
 *     realshape mirrors the released structure): mrope_section
 *     [11, 11, 10] interleaved (sums to rotary_dim / 2 = 32), conv kernels
 *     4, indexer_kv_heads 1, seed 1234, split_ngram_parts 4,
 *     output_gate_type sigmoid, rms_norm_eps 1e-6, eos_token_id 248044.
 * The source inventory digest is synthetic (there is no source here); the
 * config digest is the SHA-256 of the text below.
 */
#include "hb_base.h"
#include "adm_sparse.h"
#include "artifact/hb_artifact.h"
#include "hb-convert/hb_convert.h"
#include "expert/hb_expert_store.h"
#include "gguf/hb_gguf.h"
#include "model/hb_inventory.h"
#include "hb_io.h"
#include "hb_json.h"
#include "model/hb_ple_hash.h"
#include "ple/hb_ple_store.h"
#include "model/hb_profile.h"
#include "model/hb_qwen_config.h"
#include "hb_sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#define SEMANTIC_VOCAB 248077u
#define N_SPECIAL 33u           /* ids 248044..248076 */
#define INVENTORY_HEX "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed"
#define TEMPLATE "{%- for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{%- endfor %}"

static int config_text(char **out, size_t *len, struct hb_error *err)
{
	char types[48 * 26 + 8];
	size_t n = 0;
	char *buf = malloc(8192);

	if (!buf)
		return hb_error_set(err, HB_ERR_NOMEM, "config", "out of memory");
	for (int i = 0; i < 48; i++)
		n += (size_t)snprintf(types + n, sizeof(types) - n, "%s\"%s\"", i ? "," : "",
				      (i + 1) % 4 ? "linear_attention" : "full_attention");
	*len = (size_t)snprintf(buf, 8192,
		"{\"architectures\":[\"Qwen4ExpForConditionalGeneration\"],\"model_type\":\"qwen4_exp\","
		"\"tie_word_embeddings\":false,\"transformers_version\":\"5.17.0\","
		"\"text_config\":{\"model_type\":\"qwen4_exp_text\",\"vocab_size\":248320,\"hidden_size\":2560,"
		"\"num_hidden_layers\":48,\"num_attention_heads\":32,\"num_key_value_heads\":2,\"head_dim\":256,"
		"\"max_position_embeddings\":262144,\"rms_norm_eps\":1e-06,\"attention_bias\":false,"
		"\"hidden_act\":\"silu\",\"output_gate_type\":\"sigmoid\",\"tie_word_embeddings\":false,"
		"\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000000.0,"
		"\"partial_rotary_factor\":0.25,\"mrope_section\":[11,11,10],\"mrope_interleaved\":true},"
		"\"layer_types\":[%s],\"linear_conv_kernel_dim\":4,\"linear_key_head_dim\":128,"
		"\"linear_value_head_dim\":128,\"linear_num_key_heads\":16,\"linear_num_value_heads\":48,"
		"\"num_experts\":512,\"num_experts_per_tok\":10,\"moe_intermediate_size\":640,"
		"\"shared_expert_intermediate_size\":640,\"norm_topk_prob\":true,\"hc_count\":4,\"hc_lowrank\":320,"
		"\"ple_layer_ids\":[2],\"ple_embed_dim\":2560,\"ple_conv_kernel_size\":4,\"ngram_size\":3,"
		"\"heads_per_ngram\":8,\"ngram_vocab_size_base\":20000000,\"make_ngram_vocab_size_divisible_by\":128,"
		"\"split_ngram_parts\":4,\"seed\":1234,\"indexer_n_heads\":16,\"indexer_kv_heads\":1,"
		"\"indexer_head_dim\":128,\"indexer_budget\":2048,\"indexer_compress_ratio\":4,"
		"\"eos_token_id\":248044,\"pad_token_id\":null,\"bos_token_id\":null}}", types);
	*out = buf;
	return HB_OK;
}

int adm_sparse_tokenizer(uint64_t n, char **out, size_t *len, struct hb_error *err)
{
	size_t cap = (size_t)n * 40 + 256, pos = 0;
	char *buf = malloc(cap);
	uint64_t regular = n > N_SPECIAL ? n - N_SPECIAL : 0;

	if (!buf)
		return hb_error_set(err, HB_ERR_NOMEM, "tokenizer", "out of memory");
	pos += (size_t)snprintf(buf + pos, cap - pos, "{\"version\":\"1.0\",\"added_tokens\":[");
	for (uint64_t id = regular; id < n; id++)
		pos += (size_t)snprintf(buf + pos, cap - pos,
					"%s{\"id\":%" PRIu64 ",\"content\":\"<|special_%" PRIu64 "|>\",\"special\":true}",
					id > regular ? "," : "", id, id);
	pos += (size_t)snprintf(buf + pos, cap - pos, "],\"model\":{\"type\":\"BPE\",\"vocab\":{");
	for (uint64_t id = 0; id < regular; id++)
		pos += (size_t)snprintf(buf + pos, cap - pos, "%s\"t%" PRIu64 "\":%" PRIu64, id ? "," : "", id, id);
	pos += (size_t)snprintf(buf + pos, cap - pos, "},\"merges\":[]}}");
	*out = buf;
	*len = pos;
	return HB_OK;
}

static void hex_of(const void *p, size_t n, char hex[HB_SHA256_HEX])
{
	uint8_t d[HB_SHA256_BYTES];
	hb_sha256_buf(p, n, d);
	hb_hex_encode(d, sizeof(d), hex);
}

#define U32(k, v) do { if (!rc) rc = hb_gguf_writer_add_u32(w, k, (uint32_t)(v), err); } while (0)
#define U64(k, v) do { if (!rc) rc = hb_gguf_writer_add_u64(w, k, (uint64_t)(v), err); } while (0)
#define F64(k, v) do { if (!rc) rc = hb_gguf_writer_add_f64(w, k, (double)(v), err); } while (0)
#define BOOL(k, v) do { if (!rc) rc = hb_gguf_writer_add_bool(w, k, (v), err); } while (0)
#define STR(k, v) do { if (!rc) rc = hb_gguf_writer_add_str(w, k, (v), err); } while (0)
#define ARR(k, t, p, n) do { if (!rc) rc = hb_gguf_writer_add_array(w, k, t, p, n, err); } while (0)

static uint8_t record_zero_sha[HB_SHA256_BYTES];

static void zero_digest(uint64_t n, uint8_t out[HB_SHA256_BYTES])
{
	static const uint8_t z[65536];
	struct hb_sha256 s;

	hb_sha256_init(&s);
	for (uint64_t done = 0; done < n; done += sizeof(z))
		hb_sha256_update(&s, z, n - done < sizeof(z) ? (size_t)(n - done) : sizeof(z));
	hb_sha256_final(&s, out);
}

static int metadata(struct hb_gguf_writer *w, const struct hb_qwen_config *q, const struct hb_ple_table_hash *h,
		    const uint8_t ple_digest[HB_SHA256_BYTES], const char *cfg_hex, const char *tok, size_t tok_len,
		    struct hb_error *err)
{
	const struct hb_profile *p = hb_profile_flash_next();
	const char *rules[] = {"vision: model.visual.*", "mtp: mtp.*"};
	uint32_t ids[1] = {h->layer_id}, eos[1] = {(uint32_t)q->eos_token_ids[0]}, stop[2] = {248044, 248046};
	uint64_t sizes[HB_PLE_MAX_HEADS], offs[HB_PLE_MAX_HEADS];
	char hex[HB_SHA256_HEX];
	int rc = 0;

	for (uint32_t i = 0; i < h->heads; i++)
		sizes[i] = h->head_sizes[i], offs[i] = h->head_offsets[i];
	STR(HB_KEY_ARCH, HB_ARCH);
	U32(HB_KEY_ALIGNMENT, HB_ALIGNMENT);
	STR(HB_KEY_NAME, "Qwen3.8-Flash-Next");
	if (!rc)
		rc = hb_artifact_write_model_constants(w, q, err);
	ARR(HB_KEY_PLE_LAYERS, HB_GGUF_U32, ids, 1);
	U32(HB_KEY_PLE_DIM, q->ple_embed_dim);
	U32(HB_KEY_PLE_CONV, q->ple_conv_kernel_size);
	U32(HB_KEY_PLE_NGRAM, q->ngram_size);
	U32(HB_KEY_PLE_HEADS_PER_NGRAM, q->heads_per_ngram);
	U64(HB_KEY_PLE_BASE, q->ngram_vocab_size_base);
	U32(HB_KEY_PLE_DIVISOR, q->ngram_vocab_divisor);
	U64(HB_KEY_PLE_SEED, q->seed);
	ARR(HB_KEY_PLE_MULTIPLIERS, HB_GGUF_U64, h->multipliers, h->ngram_size);
	ARR(HB_KEY_PLE_HEAD_SIZES, HB_GGUF_U64, sizes, h->heads);
	ARR(HB_KEY_PLE_HEAD_OFFSETS, HB_GGUF_U64, offs, h->heads);
	ARR(HB_KEY_PLE_ROWS, HB_GGUF_U64, &h->physical_rows, 1);
	ARR(HB_KEY_PLE_LOGICAL_ROWS, HB_GGUF_U64, &h->logical_rows, 1);
	U32(HB_KEY_PLE_ROW_WIDTH, h->row_width);
	hb_hex_encode(ple_digest, HB_SHA256_BYTES, hex);
	STR(HB_KEY_PLE_HASH, hex);
	ARR(HB_KEY_EOS, HB_GGUF_U32, eos, 1);
	ARR(HB_KEY_STOP, HB_GGUF_U32, stop, 2);
	STR(HB_KEY_PROFILE, p->id);
	STR(HB_KEY_STATUS, p->status);
	STR(HB_KEY_GEOMETRY_SOURCE, "profile");
	STR(HB_KEY_SOURCE_REPO, p->source_repo);
	STR(HB_KEY_SOURCE_REVISION, p->source_revision);
	STR(HB_KEY_SOURCE_INVENTORY, INVENTORY_HEX);
	STR(HB_KEY_SOURCE_CONFIG, cfg_hex);
	U64(HB_KEY_SOURCE_TENSORS, p->source_tensors);
	U64(HB_KEY_SOURCE_BYTES, p->source_bytes);
	U64(HB_KEY_SOURCE_SHARDS, p->source_shards);
	U64(HB_KEY_EXCL_VISION, p->vision_tensors);
	U64(HB_KEY_EXCL_MTP, p->mtp_tensors);
	if (!rc)
		rc = hb_gguf_writer_add_str_array(w, HB_KEY_EXCL_RULES, rules, NULL, 2, err);
	BOOL(HB_KEY_TEXT_ONLY, true);
	BOOL(HB_KEY_MTP_EXECUTED, false);
	STR(HB_KEY_EXPERT_CODEC, "bf16");
	STR(HB_KEY_EXPERT_CODEC_LABEL, "exact-reference");
	STR(HB_KEY_EXPERT_SOURCE_DTYPE, "BF16");
	/* one SHA-256 per record: every record is a hole (zeros), so every
	 * entry is the digest of record_bytes zero bytes */
	if (!rc) {
		size_t n = 32u * 48u * 512u;
		uint8_t *d = malloc(n);
		if (!d)
			rc = hb_error_set(err, HB_ERR_NOMEM, "metadata", "out of memory");
		for (size_t i = 0; !rc && i < n; i += 32)
			memcpy(d + i, record_zero_sha, 32);
		if (!rc)
			rc = hb_gguf_writer_add_array(w, HB_KEY_EXPERT_RECORD_SHA, HB_GGUF_U8, d, n, err);
		free(d);
	}
	STR(HB_KEY_PLE_CODEC, "bf16");
	STR(HB_KEY_PLE_SOURCE_DTYPE, "BF16");
	hex_of(tok, tok_len, hex);
	STR(HB_KEY_TOKENIZER_SHA, hex);
	if (!rc)
		rc = hb_gguf_writer_add_strn(w, HB_KEY_TOKENIZER_JSON, tok, tok_len, err);
	hex_of(TEMPLATE, strlen(TEMPLATE), hex);
	STR(HB_KEY_TEMPLATE_SHA, hex);
	STR(HB_KEY_CHAT_TEMPLATE, TEMPLATE);
	STR(HB_KEY_CONVERTER, "adm_sparse (test builder)");
	return rc;
}

struct build {
	struct hb_qwen_config cfg;
	struct hb_ple_table_hash h;
	uint8_t ple_digest[HB_SHA256_BYTES];
	struct hb_em_layout em;
	struct hb_ple_layout pl;
	struct hb_expected_tensor *dense;
	size_t n_dense;
	char *cfg_text, *tok;
	size_t cfg_len, tok_len;
};

static int plan(struct build *b, struct hb_error *err)
{
	struct hb_em_geometry geo;
	struct hb_ple_spec spec;
	cJSON *root = NULL;
	int rc = config_text(&b->cfg_text, &b->cfg_len, err);

	if (!rc)
		rc = hb_json_parse(b->cfg_text, b->cfg_len, "config.json", &root, err);
	if (!rc)
		rc = hb_qwen_config_parse(root, &b->cfg, err);
	cJSON_Delete(root);
	if (!rc)
		rc = hb_profile_check(hb_profile_flash_next(), &b->cfg, err);
	if (!rc)
		rc = hb_ple_hash_compute(&b->cfg, 0, &b->h, err);
	if (!rc)
		rc = hb_profile_check_ple(hb_profile_flash_next(), &b->h, err);
	if (!rc)
		rc = hb_ple_hash_digest(&b->cfg, b->ple_digest, err);
	if (!rc)
		rc = hb_expected_dense(&b->cfg, &b->dense, &b->n_dense, err);
	if (!rc)
		rc = adm_sparse_tokenizer(SEMANTIC_VOCAB, &b->tok, &b->tok_len, err);
	if (rc)
		return rc;
	hb_em_geometry_qwen4exp(&geo);
	if ((rc = hb_em_layout_plan(&b->em, &geo, HB_EM_CODEC_BF16, err)))
		return rc;
	zero_digest(b->em.record_bytes, record_zero_sha);
	if (hb_hex_decode(INVENTORY_HEX, b->em.source_sha256, HB_SHA256_BYTES))
		return hb_error_set(err, HB_ERR_INTERNAL, "inventory", "bad hex");
	b->em.source_size = 48ull * 512 * 3 * 640 * 2560 * 2;
	b->em.source_tensors = 48ull * 512 * 3;
	memset(&spec, 0, sizeof(spec));
	spec.codec_id = HB_PLE_CODEC_BF16;
	spec.codec_version = HB_PLE_CODEC_VERSION;
	spec.row_width = (uint32_t)b->h.row_width;
	spec.rows_per_page = 256; /* hb-convert's default */
	spec.row_alignment = (uint32_t)b->cfg.ngram_vocab_divisor;
	spec.table_count = 1;
	spec.tables[0].layer_id = b->h.layer_id;
	spec.tables[0].logical_rows = b->h.logical_rows;
	memcpy(spec.hash_identity, b->ple_digest, sizeof(spec.hash_identity));
	return hb_ple_plan(&spec, &b->pl, err);
}

/* ExpertMajor header and descriptors; the payload stays a hole. */
static int write_em(struct build *b, int fd, uint64_t base, struct hb_error *err)
{
	uint64_t n = hb_em_layout_meta_bytes(&b->em);
	uint8_t *buf = calloc(1, (size_t)n);
	int rc;

	if (!buf)
		return hb_error_set(err, HB_ERR_NOMEM, "expert_store", "out of memory");
	rc = hb_em_serialise(&b->em, buf, (size_t)n, err);
	if (!rc)
		rc = hb_pwrite_full(fd, buf, (size_t)n, base, "expert_store", err);
	free(buf);
	return rc;
}

/* PLE manifest, directory and an all-zero digest table, the manifest
 * digest computed over exactly those bytes; pages stay holes. */
static int write_ple(struct build *b, int fd, uint64_t base, struct hb_error *err)
{
	const struct hb_ple_layout *l = &b->pl;
	uint8_t hdr[HB_PLE_HEADER_BYTES], zero[HB_PLE_DIGEST_BYTES] = {0}, man[HB_PLE_DIGEST_BYTES];
	uint8_t *dir = calloc(1, (size_t)l->dir_bytes), *dig = calloc(1, (size_t)l->digest_bytes + 1);
	int rc = HB_OK;

	if (!dir || !dig)
		rc = hb_error_set(err, HB_ERR_NOMEM, "ple", "out of memory");
	if (!rc) {
		hb_ple_directory_encode(l, dir);
		hb_ple_header_encode(l, zero, zero, hdr);
		hb_ple_manifest_digest(l, hdr, dir, dig, man);
		hb_ple_header_encode(l, zero, man, hdr);
		rc = hb_pwrite_full(fd, hdr, sizeof(hdr), base, "ple", err);
	}
	if (!rc)
		rc = hb_pwrite_full(fd, dir, (size_t)l->dir_bytes, base + l->dir_offset, "ple", err);
	if (!rc)
		rc = hb_pwrite_full(fd, dig, (size_t)l->digest_bytes, base + l->digest_offset, "ple", err);
	free(dir);
	free(dig);
	return rc;
}

int adm_sparse_build(const char *path, struct adm_sparse_info *info, struct hb_error *err)
{
	struct build b;
	struct hb_gguf_writer gw, *w = &gw;
	char cfg_hex[HB_SHA256_HEX];
	int fd = -1, rc;
	size_t em_i = 0, ple_i = 0;

	memset(&b, 0, sizeof(b));
	hb_gguf_writer_init(w);
	rc = plan(&b, err);
	if (!rc) {
		hex_of(b.cfg_text, b.cfg_len, cfg_hex);
		rc = metadata(w, &b.cfg, &b.h, b.ple_digest, cfg_hex, b.tok, b.tok_len, err);
	}
	/* dense tensors (BF16, in the order hb_expected_dense gives), then the
	 * expert store, then the PLE store last, as hb-convert lays them out */
	for (size_t i = 0; !rc && i < b.n_dense; i++) {
		const struct hb_expected_tensor *x = &b.dense[i];
		uint64_t elems = 1;
		for (uint32_t d = 0; d < x->ndim; d++)
			elems *= x->shape[d];
		rc = hb_gguf_writer_add_tensor_torch(w, x->dest, HB_GGML_BF16, x->ndim, x->shape, elems * 2, 0, err);
	}
	if (!rc) {
		em_i = w->n_tensors;
		rc = hb_gguf_writer_add_tensor_torch(w, HB_TENSOR_EXPERT_STORE, HB_GGML_I8, 1,
						     (uint64_t[]){b.em.store_size}, b.em.store_size,
						     HB_STORE_FILE_ALIGN, err);
	}
	if (!rc) {
		ple_i = w->n_tensors;
		rc = hb_gguf_writer_add_tensor_torch(w, HB_TENSOR_PLE_STORE, HB_GGML_I8, 1,
						     (uint64_t[]){b.pl.store_size}, b.pl.store_size,
						     HB_STORE_FILE_ALIGN, err);
	}
	if (!rc)
		rc = hb_gguf_writer_layout(w, err);
	if (!rc) {
		if (unlink(path) && errno != ENOENT)
			rc = hb_error_sys(err, errno, path, "unlink");
		fd = rc ? -1 : open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (!rc && fd < 0)
			rc = hb_error_sys(err, errno, path, "open");
		if (!rc && ftruncate(fd, (off_t)w->layout.file_size))
			rc = hb_error_sys(err, errno, path, "ftruncate");
	}
	if (!rc)
		rc = hb_gguf_writer_write_header_fd(w, fd, err);
	if (!rc)
		rc = hb_gguf_writer_write_padding_fd(w, fd, err);
	if (!rc)
		rc = write_em(&b, fd, w->tensors[em_i].offset, err);
	if (!rc)
		rc = write_ple(&b, fd, w->tensors[ple_i].offset, err);
	if (!rc && info) {
		info->file_size = w->layout.file_size;
		info->tensors = w->n_tensors;
		info->ple_pages = b.pl.page_count;
		info->header_bytes = w->layout.data_start;
	}
	if (fd >= 0 && close(fd) && !rc)
		rc = hb_error_sys(err, errno, path, "close");
	hb_gguf_writer_release(w);
	hb_em_layout_release(&b.em);
	free(b.dense);
	free(b.cfg_text);
	free(b.tok);
	return rc;
}
