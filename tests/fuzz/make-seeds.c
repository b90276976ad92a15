/*
 * make-seeds.c: writes the generated part of the fuzz seed corpus
 * (tests/fuzz/seeds/) through libstore's own writers: small valid
 * ExpertMajor v2 and PLE v1 stores (bf16 and affine4) with the flags byte
 * the harnesses expect in front, and two minimal GGUF files.  The other
 * seeds are copied from project fixtures by tests/fuzz/make-seeds.
 * Deterministic: the same sources always give the same bytes.
 *
 * usage: make-seeds SEEDS_DIR   (the per-target directories must exist)
 */
#include "hb_base.h"
#include "hb_err.h"
#include "expert/hb_expert_store.h"
#include "gguf/hb_gguf.h"
#include "hb_io.h"
#include "trace/hb_trace.h"
#include "ple/hb_ple_store.h"
#include "predict/hb_predict.h"

#include "../fuzz/fuzz_dir.h"

#include <sys/mman.h>
#include <unistd.h>

static const char *seeds_dir;

static int die(const char *what, const struct hb_error *err)
{
	char buf[512];

	fprintf(stderr, "make-seeds: %s: %s\n", what,
		err ? hb_error_format(err, buf, sizeof(buf)) : "failed");
	exit(1);
}

/* Write flags (when >= 0) and then len bytes of fd from offset 0. */
static void save(const char *target, const char *name, int flags, int fd,
		 uint64_t len)
{
	char path[1024];
	uint8_t *buf = malloc((size_t)len + 1);
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", seeds_dir, target, name);
	if (!buf || hb_pread_full(fd, buf + 1, (size_t)len, 0, path, NULL))
		die(path, NULL);
	buf[0] = (uint8_t)flags;
	f = fopen(path, "wb");
	if (!f || fwrite(flags >= 0 ? buf : buf + 1, 1,
			 (size_t)len + (flags >= 0), f) != (size_t)len + (flags >= 0) ||
	    fclose(f) != 0)
		die(path, NULL);
	free(buf);
}

static int new_memfd(void)
{
	int fd = memfd_create("seed", MFD_CLOEXEC);

	if (fd < 0)
		die("memfd_create", NULL);
	return fd;
}

/* ------------------------------------------------------------ expert store */

static int write_em(enum hb_em_codec_id codec, uint64_t hidden,
		    uint64_t inter, uint32_t layers, uint32_t experts,
		    uint64_t *size)
{
	struct hb_em_geometry g = { layers, experts, 1, hidden, inter };
	struct hb_em_layout plan, out;
	struct hb_em_writer w;
	struct hb_error err;
	uint8_t src[HB_SHA256_BYTES];
	size_t n = (size_t)(hidden * inter);
	float *m = malloc(n * 3 * sizeof(float));
	int fd = new_memfd();

	hb_error_clear(&err);
	if (!m)
		die("malloc", NULL);
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i * 7 + 1);
	if (hb_em_layout_plan(&plan, &g, codec, &err) ||
	    hb_em_writer_begin(&w, &plan, fd, 0, 4242, src, 9, &err))
		die("expert store", &err);
	for (uint32_t l = 0; l < layers; l++)
		for (uint32_t e = 0; e < experts; e++) {
			for (size_t i = 0; i < 3 * n; i++)
				m[i] = (float)((int)((i * 31 + l * 7 + e) % 19) - 9) / 8.0f;
			if (hb_em_writer_put_f32(&w, l, e, m, m + n, m + 2 * n, &err))
				die("expert store put", &err);
		}
	if (hb_em_writer_finish(&w, &out, &err))
		die("expert store finish", &err);
	*size = out.store_size;
	hb_em_layout_release(&out);
	hb_em_writer_release(&w);
	hb_em_layout_release(&plan);
	free(m);
	return fd;
}

static void expert_seeds(void)
{
	uint64_t size;
	uint64_t meta_bf16 = HB_EM_HEADER_BYTES + 2 * HB_EM_DESCRIPTOR_BYTES;
	int fd;

	/* bf16: 2 layers of 3 experts, hidden 8, intermediate 4 */
	fd = write_em(HB_EM_CODEC_BF16, 8, 4, 2, 3, &size);
	save("expert_store", "ok-bf16-full", 0x00, fd, size);
	save("expert_store", "ok-bf16-base4096", 0x04, fd, size);
	save("expert_store", "ok-bf16-meta-extend", 0x02, fd, meta_bf16);
	save("expert_store", "ok-bf16-meta-extend-reseal", 0x03, fd, meta_bf16);
	close(fd);
	/* affine4: 1 layer of 2 experts, hidden 64, intermediate 64 */
	fd = write_em(HB_EM_CODEC_AFFINE4_G64, 64, 64, 1, 2, &size);
	save("expert_store", "ok-affine4-full", 0x00, fd, size);
	save("expert_store", "ok-affine4-meta-extend", 0x02, fd,
	     HB_EM_HEADER_BYTES + HB_EM_DESCRIPTOR_BYTES);
	close(fd);
}

/* ------------------------------------------------------------------ PLE */

static int write_ple(uint32_t codec, uint32_t width, uint64_t *size)
{
	struct hb_ple_spec spec;
	struct hb_ple_layout l;
	struct hb_ple_writer *w;
	struct hb_error err;
	uint16_t *rows;
	int fd = new_memfd();

	hb_error_clear(&err);
	memset(&spec, 0, sizeof(spec));
	spec.codec_id = codec;
	spec.codec_version = HB_PLE_CODEC_VERSION;
	spec.group_size = codec == HB_PLE_CODEC_AFFINE4 ? 32 : 0;
	spec.row_width = width;
	spec.rows_per_page = 3;
	spec.row_alignment = 4;
	spec.table_count = 2;
	spec.tables[0].layer_id = 1;
	spec.tables[0].logical_rows = 5;
	spec.tables[1].layer_id = 2;
	spec.tables[1].logical_rows = 3;
	for (unsigned i = 0; i < HB_PLE_DIGEST_BYTES; i++)
		spec.hash_identity[i] = (uint8_t)(0x30 + i);
	if (hb_ple_plan(&spec, &l, &err) || hb_ple_writer_begin(&w, fd, 0, &l, &err))
		die("ple store", &err);
	rows = malloc(sizeof(uint16_t) * width * l.physical_rows);
	if (!rows)
		die("malloc", NULL);
	for (uint64_t i = 0; i < width * l.physical_rows; i++)
		rows[i] = (uint16_t)(0x3f80 + (i % 64) * 3); /* small finite bf16 */
	if (hb_ple_writer_put_bf16(w, rows, l.physical_rows, &err) ||
	    hb_ple_writer_finish(w, NULL, NULL, &err))
		die("ple store rows", &err);
	hb_ple_writer_free(w);
	free(rows);
	*size = l.store_size;
	return fd;
}

static void ple_seeds(void)
{
	uint64_t size;
	int fd;

	fd = write_ple(HB_PLE_CODEC_BF16, 16, &size);
	save("ple_manifest", "ok-bf16-full", 0x00, fd, size);
	save("ple_manifest", "ok-bf16-full-reseal-base4096", 0x0b, fd, size);
	save("ple_manifest", "ok-bf16-manifest-extend", 0x04, fd, 4096);
	close(fd);
	fd = write_ple(HB_PLE_CODEC_AFFINE4, 64, &size);
	save("ple_manifest", "ok-affine4-full", 0x00, fd, size);
	save("ple_manifest", "ok-affine4-full-reseal", 0x03, fd, size);
	close(fd);
}

/* ----------------------------------------------------------------- GGUF */

static void gguf_seeds(void)
{
	static const uint64_t dims[2] = { 4, 2 };
	static const uint32_t arr[3] = { 1, 2, 3 };
	struct hb_gguf_writer w;
	struct hb_error err;
	int fd = new_memfd();

	hb_error_clear(&err);
	hb_gguf_writer_init(&w);
	if (hb_gguf_writer_layout(&w, &err) || hb_gguf_writer_write_header_fd(&w, fd, &err) ||
	    hb_gguf_writer_write_padding_fd(&w, fd, &err))
		die("gguf empty", &err);
	save("gguf", "ok-empty.gguf", -1, fd, w.layout.file_size);
	hb_gguf_writer_release(&w);
	close(fd);

	fd = new_memfd();
	hb_gguf_writer_init(&w);
	if (hb_gguf_writer_add_str(&w, "general.architecture", "qwen4exp", &err) ||
	    hb_gguf_writer_add_u32(&w, "general.alignment", 32, &err) ||
	    hb_gguf_writer_add_array(&w, "a", HB_GGUF_U32, arr, 3, &err) ||
	    hb_gguf_writer_add_tensor_torch(&w, "w", HB_GGML_F32, 2, dims, 32, 0, &err) ||
	    hb_gguf_writer_add_tensor_torch(&w, "b", HB_GGML_BF16, 1, dims, 8, 0, &err) ||
	    hb_gguf_writer_layout(&w, &err) || hb_gguf_writer_write_header_fd(&w, fd, &err) ||
	    hb_gguf_writer_write_padding_fd(&w, fd, &err))
		die("gguf tiny", &err);
	/* tensor bytes: leave zeros (ftruncate), the reader never reads them */
	if (ftruncate(fd, (off_t)w.layout.file_size))
		die("ftruncate", NULL);
	save("gguf", "ok-tiny.gguf", -1, fd, w.layout.file_size);
	hb_gguf_writer_release(&w);
	close(fd);
}

/* ------------------------------------------------------------ trace shards */

static uint64_t file_len(int fd)
{
	off_t end = lseek(fd, 0, SEEK_END);

	if (end < 0)
		die("lseek", NULL);
	return (uint64_t)end;
}

/* n records of top_k ids over `layers` layers and `experts` experts, in
 * chunks of `chunk`; lineage on every third record. */
static void trace_seed(const char *name, uint32_t top_k, uint32_t layers, uint32_t experts,
		       bool thread, uint32_t n, uint32_t chunk)
{
	struct hb_trace_header h;
	struct hb_trace_writer *w = NULL;
	struct hb_error err;
	int fd = new_memfd();

	memset(&h, 0, sizeof(h));
	h.top_k = top_k;
	h.layers = layers;
	h.experts = experts;
	h.record_bytes = hb_trace_record_bytes(top_k);
	memset(h.artifact, 0xa5, sizeof(h.artifact));
	h.owner = 7;
	h.generation = 3;
	h.has_thread = thread;
	h.thread = thread ? UINT64_C(0x8000000000001234) : 0;
	hb_error_clear(&err);
	if (hb_trace_writer_open(&w, fd, name, &h, chunk, &err))
		die(name, &err);
	for (uint32_t i = 0; i < n; i++) {
		struct hb_route r;

		memset(&r, 0, sizeof(r));
		r.sequence = i / layers;
		r.ordinal = i / layers;
		r.layer = i % layers;
		r.lineage = i % 3 == 0;
		r.proposal = r.lineage ? i + 100 : 0;
		r.candidate = r.lineage ? (int32_t)(i % 4) : 0;
		r.accepted = r.lineage ? (int32_t)(i % 2) : 0;
		for (uint32_t k = 0; k < top_k; k++) {
			r.ids[k] = (i * 7 + k * 13) % experts;
			r.weights[k] = 1.0f / (float)(k + 2);
		}
		if (hb_trace_write(w, &r, &err))
			die(name, &err);
	}
	if (hb_trace_writer_close(w, &err))
		die(name, &err);
	save("trace", name, -1, fd, file_len(fd));
	close(fd);
}

static void trace_seeds(void)
{
	trace_seed("ok-empty.hbtrace", 10, 4, 64, false, 0, 16);
	trace_seed("ok-v1-small.hbtrace", 10, 4, 64, false, 37, 8);
	trace_seed("ok-v2-thread.hbtrace", 2, 3, 8, true, 20, 64);
	trace_seed("ok-topk1.hbtrace", 1, 1, 2, false, 5, 2);
}

/* ------------------------------------------------- features and predictors */

/* The seed dir/files[0..n) joined with HB_FUZZ_SEP, flags byte in front
 * (fuzz_dir.h); a file that is absent becomes an empty part. */
static void joined_seed(const char *target, const char *name, int flags, const char *dir,
			const char *const *files, size_t n)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", seeds_dir, target, name);
	if (!(f = fopen(path, "wb")))
		die(path, NULL);
	if (flags >= 0)
		fputc(flags, f);
	for (size_t i = 0; i < n; i++) {
		uint8_t *b = NULL;
		size_t len = 0;

		if (i)
			fputs(HB_FUZZ_SEP, f);
		if (!hb_fuzz_get(dir, files[i], 64u << 20, &b, &len))
			fwrite(b, 1, len, f);
		free(b);
	}
	if (fclose(f) != 0)
		die(path, NULL);
}

static void fill_ident(struct hb_feature_ident *id, uint32_t layers, uint32_t width, const char *split)
{
	memset(id, 0, sizeof(*id));
	memset(id->artifact, 0xa5, 32);
	memset(id->text, 0x5a, 32);
	memset(id->projection, 0x3c, 32);
	memset(id->split_id, 0xc3, 32);
	id->projection_seed = 7;
	id->width = width;
	id->source_width = 2 * width;
	id->layers = layers;
	snprintf(id->split, sizeof(id->split), "%s", split);
	snprintf(id->tap, sizeof(id->tap), "pre-attention-mix");
}

static void feature_seed(const char *scratch, const char *name, uint32_t rows, uint64_t per_shard)
{
	static const char *const files[] = {"features.json", "features-000000.safetensors",
					    "features-000001.safetensors"};
	struct hb_feature_set s;
	struct hb_feature_ident id;
	struct hb_error err;
	char dir[1024];
	float x[2 * 4];

	snprintf(dir, sizeof(dir), "%s/%s", scratch, name);
	fill_ident(&id, 2, 4, "validation");
	hb_feature_set_init(&s, &id);
	hb_error_clear(&err);
	for (uint32_t i = 0; i < rows; i++) {
		for (size_t j = 0; j < 8; j++)
			x[j] = (float)(i * 8 + j) * 0.25f - 3.0f;
		if (hb_feature_append(&s, i / 2, i % 2, 11, 100 + i / 2, x, &err))
			die(name, &err);
	}
	if (hb_feature_dir_write(dir, &s, per_shard, NULL, &err))
		die(name, &err);
	hb_feature_set_release(&s);
	joined_seed("features", name, 0, dir, files, 3);
}

static void predictor_seed(const char *scratch)
{
	struct hb_predictor p;
	struct hb_error err;
	char path[1024];
	int fd;

	memset(&p, 0, sizeof(p));
	p.width = 4, p.rank = 2, p.layers = 2, p.experts = 8, p.top_k = 2;
	hb_error_clear(&err);
	if (hb_predictor_alloc(&p, &err))
		die("predictor", &err);
	fill_ident(&p.id, 2, 4, "train");
	for (size_t i = 0; i < 8; i++)
		p.trunk[i] = (float)i * 0.5f - 1.0f;
	for (size_t i = 0; i < 4; i++)
		p.layer[i] = (float)i;
	for (size_t i = 0; i < 16; i++)
		p.head[i] = (float)(i % 5) - 2.0f;
	for (size_t i = 0; i < 8; i++)
		p.bias[i] = (float)i * 0.125f;
	p.n_train_threads = 2;
	if (!(p.train_threads = malloc(2 * sizeof(uint64_t))) || !(p.training = strdup("{\"epochs\":1}")))
		die("predictor", NULL);
	p.train_threads[0] = 3, p.train_threads[1] = 7;
	snprintf(path, sizeof(path), "%s/predictor.safetensors", scratch);
	if (hb_predictor_save(path, &p, &err))
		die("predictor", &err);
	hb_predictor_release(&p);
	if ((fd = open(path, O_RDONLY)) < 0)
		die(path, NULL);
	save("predictor", "ok-small.safetensors", -1, fd, file_len(fd));
	close(fd);
}

static void predict_seeds(void)
{
	char scratch[] = "/tmp/hb-seeds-XXXXXX";

	if (!mkdtemp(scratch))
		die("mkdtemp", NULL);
	feature_seed(scratch, "ok-one-shard", 3, 0);
	feature_seed(scratch, "ok-two-shards", 3, 2);
	feature_seed(scratch, "ok-empty", 0, 0);
	predictor_seed(scratch);
	nftw(scratch, hb_fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
	rmdir(scratch);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: make-seeds SEEDS_DIR\n");
		return 2;
	}
	seeds_dir = argv[1];
	expert_seeds();
	ple_seeds();
	gguf_seeds();
	trace_seeds();
	predict_seeds();
	return 0;
}
