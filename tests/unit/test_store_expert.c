/*
 * Unit tests: the ExpertMajor v2 store (layout, serialiser, validator,
 * writer, payload verification and record reads).
 *
 * The layout numbers of the real family-4 geometry are worked out by hand
 * in the comments; every validation failure is produced by editing one field
 * of a valid serialised store (and then re-sealing the manifest digest, so
 * that the edited field is the only defect) and must give its exact id.
 */
#include "hb_base.h"
#include "harness.h"
#include "codec/hb_affine4.h"
#include "expert/hb_expert_store.h"
#include "hb_fault.h"
#include "hb_half.h"
#include "hb_io.h"
#include "hb_sha256.h"

#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

static void get_real(struct hb_em_geometry *g)
{
	hb_em_geometry_qwen4exp(g);
}

/* affine4-capable development geometry: 4 layers of 6 experts, hidden 128
 * (2 groups), intermediate 64 (1 group); layers need alignment padding. */
static void get_dev_a4(struct hb_em_geometry *g)
{
	*g = (struct hb_em_geometry){4, 6, 2, 128, 64};
}

/* bf16 development geometry of the brief: 8 layers, 32 experts, hidden 64,
 * intermediate 16. */
static void get_dev_bf16(struct hb_em_geometry *g)
{
	*g = (struct hb_em_geometry){8, 32, 4, 64, 16};
}

/* ------------------------------------------------------------ layouts */

/*
 * Real geometry, bf16: gate = up = 2560 x 640 x 2 = 3,276,800 bytes, down
 * the same; record 9,830,400.  Layer = 9,830,400 x 512 = 5,033,164,800 =
 * 1,228,800 x 4096, so no padding between layers.  Data offset =
 * align4096(256 + 48 x 224 = 11,008) = 12,288.  Data size = 48 x
 * 5,033,164,800 = 241,591,910,400; store = 241,591,922,688.
 */
static void layout_real_bf16(void)
{
	struct hb_em_geometry g;
	struct hb_em_layout l;

	get_real(&g);
	CHECK_EQ_INT(hb_em_layout_plan(&l, &g, HB_EM_CODEC_BF16, NULL), 0);
	CHECK_EQ_U64(l.record_bytes, 9830400);
	CHECK_EQ_U64(l.layers[0].comp[HB_EM_GATE].expert_bytes, 3276800);
	CHECK_EQ_U64(l.layers[0].comp[HB_EM_UP].record_offset, 3276800);
	CHECK_EQ_U64(l.layers[0].comp[HB_EM_DOWN].record_offset, 6553600);
	CHECK_EQ_U64(l.layers[0].comp[HB_EM_DOWN].element_type, 30);
	CHECK_EQ_U64(l.layers[0].comp[HB_EM_DOWN].block_elements, 1);
	CHECK_EQ_U64(l.layers[0].comp[HB_EM_DOWN].dim[0], 640);
	CHECK_EQ_U64(l.layers[0].comp[HB_EM_DOWN].dim[1], 2560);
	CHECK_EQ_U64(l.layers[0].comp[HB_EM_GATE].dim[0], 2560);
	CHECK_EQ_U64(l.layers[0].comp[HB_EM_GATE].dim[2], 512);
	CHECK_EQ_U64(l.layers[0].data_size, UINT64_C(5033164800));
	CHECK_EQ_U64(l.data_offset, 12288);
	CHECK_EQ_U64(l.layers[1].data_offset, UINT64_C(12288) + UINT64_C(5033164800));
	CHECK_EQ_U64(l.data_size, UINT64_C(241591910400));
	CHECK_EQ_U64(l.store_size, UINT64_C(241591922688));
	CHECK_EQ_U64(l.storage_format, 0);
	CHECK_EQ_U64(l.group_size, 0);
	CHECK_EQ_U64(hb_em_layout_meta_bytes(&l), 11008);
	hb_em_layout_release(&l);
}

/*
 * Real geometry, affine4 g64: gate = (2560/64) x 36 x 640 = 921,600; down =
 * (640/64) x 36 x 2560 = 921,600; record 3 x 921,600 = 2,764,800 = 675 x
 * 4096.  Layer = 2,764,800 x 512 = 1,415,577,600, no padding.  Data size =
 * 48 x 1,415,577,600 = 67,947,724,800; store = 67,947,737,088.
 */
static void layout_real_affine4(void)
{
	struct hb_em_geometry g;
	struct hb_em_layout l;

	get_real(&g);
	CHECK_EQ_INT(hb_em_layout_plan(&l, &g, HB_EM_CODEC_AFFINE4_G64, NULL), 0);
	CHECK_EQ_U64(l.record_bytes, 2764800);
	CHECK_EQ_U64(l.layers[5].comp[HB_EM_GATE].expert_bytes, 921600);
	CHECK_EQ_U64(l.layers[5].comp[HB_EM_DOWN].expert_bytes, 921600);
	CHECK_EQ_U64(l.layers[5].comp[HB_EM_DOWN].record_offset, 1843200);
	CHECK_EQ_U64(l.layers[5].comp[HB_EM_UP].element_type, 12);
	CHECK_EQ_U64(l.layers[5].comp[HB_EM_UP].block_elements, 64);
	CHECK_EQ_U64(l.layers[47].layer, 47);
	CHECK_EQ_U64(l.layers[47].data_offset,
		     UINT64_C(12288) + 47 * UINT64_C(1415577600));
	CHECK_EQ_U64(l.data_size, UINT64_C(67947724800));
	CHECK_EQ_U64(l.store_size, UINT64_C(67947737088));
	CHECK_EQ_U64(l.storage_format, 1);
	CHECK_EQ_U64(l.group_size, 64);
	CHECK_STR(l.codec->label, "phase2-structural-not-release-qualified");
	hb_em_layout_release(&l);
}

/*
 * Development geometries.  bf16 8 x 32, hidden 64, intermediate 16: each
 * matrix 64 x 16 x 2 = 2048, record 6144, layer 196,608 = 48 x 4096; data
 * offset align4096(256 + 8 x 224 = 2048) = 4096; store 4096 + 8 x 196,608 =
 * 1,576,960.  affine4 4 x 6, hidden 128, intermediate 64: gate 2 x 36 x 64 =
 * 4608, down 1 x 36 x 128 = 4608, record 13,824, layer 82,944 = 20.25 pages,
 * so layers start at 4096, 90,112, 176,128, 262,144; store 345,088.
 */
static void layout_dev(void)
{
	struct hb_em_geometry g;
	struct hb_em_layout l;

	get_dev_bf16(&g);
	CHECK_EQ_INT(hb_em_layout_plan(&l, &g, HB_EM_CODEC_BF16, NULL), 0);
	CHECK_EQ_U64(l.record_bytes, 6144);
	CHECK_EQ_U64(l.layers[7].data_offset, 4096 + 7 * 196608);
	CHECK_EQ_U64(l.store_size, 1576960);
	CHECK_EQ_U64(l.family, 4);
	hb_em_layout_release(&l);

	get_dev_a4(&g);
	CHECK_EQ_INT(hb_em_layout_plan(&l, &g, HB_EM_CODEC_AFFINE4_G64, NULL), 0);
	CHECK_EQ_U64(l.record_bytes, 13824);
	CHECK_EQ_U64(l.layers[0].data_offset, 4096);
	CHECK_EQ_U64(l.layers[1].data_offset, 90112);
	CHECK_EQ_U64(l.layers[2].data_offset, 176128);
	CHECK_EQ_U64(l.layers[3].data_offset, 262144);
	CHECK_EQ_U64(l.data_size, 345088 - 4096);
	CHECK_EQ_U64(l.store_size, 345088);
	hb_em_layout_release(&l);
}

static void tiling_refused(void)
{
	struct hb_em_geometry g;
	struct hb_em_layout l;
	struct hb_error err;

	get_dev_a4(&g);
	g.intermediate = 40; /* down's input width: not a multiple of 64 */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_layout_plan(&l, &g, HB_EM_CODEC_AFFINE4_G64, &err),
		     HB_ERR_UNSUPPORTED);
	CHECK_STR(err.id, "em-codec-tiling");
	CHECK_STR(err.field, "expert_store.component[down].dim0");
	CHECK(l.layers == NULL);
	g.intermediate = 64;
	g.hidden = 100; /* gate's input width */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_layout_plan(&l, &g, HB_EM_CODEC_AFFINE4_G64, &err),
		     HB_ERR_UNSUPPORTED);
	CHECK_STR(err.field, "expert_store.component[gate].dim0");
	/* bf16 tiles everything */
	CHECK_EQ_INT(hb_em_layout_plan(&l, &g, HB_EM_CODEC_BF16, NULL), 0);
	hb_em_layout_release(&l);
	/* geometry limits */
	g = (struct hb_em_geometry){4, 513, 2, 128, 64};
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_layout_plan(&l, &g, HB_EM_CODEC_BF16, &err),
		     HB_ERR_CONTRACT);
	CHECK_STR(err.id, "em-expert-count");
	g = (struct hb_em_geometry){4, 8, 9, 128, 64};
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_layout_plan(&l, &g, HB_EM_CODEC_BF16, &err),
		     HB_ERR_CONTRACT);
	CHECK_STR(err.id, "em-experts-used");
	g = (struct hb_em_geometry){0, 8, 2, 128, 64};
	CHECK_EQ_INT(hb_em_layout_plan(&l, &g, HB_EM_CODEC_BF16, NULL),
		     HB_ERR_CONTRACT);
}

/* ------------------------------------------------------- writing helpers */

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15u;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
	return x ^ (x >> 31);
}

static uint64_t key(uint32_t l, uint32_t e, unsigned r, size_t i)
{
	return mix(((uint64_t)l << 48) ^ ((uint64_t)e << 36) ^
		   ((uint64_t)r << 32) ^ i);
}

/* A finite bf16 pattern (subnormals, signed zeros and all) for element i. */
static uint16_t bf16_at(uint32_t l, uint32_t e, unsigned r, size_t i)
{
	uint16_t h = (uint16_t)key(l, e, r, i);
	if ((h & 0x7f80u) == 0x7f80u)
		h &= 0xbfffu;
	return h;
}

static float f32_at(uint32_t l, uint32_t e, unsigned r, size_t i)
{
	double u = (double)(key(l, e, r, i) >> 11) / 9007199254740992.0;
	return (float)((u - 0.4) * (1.0 + r + (e % 3)));
}

static void fill_bf16(const struct hb_em_layout *lay, uint32_t l, uint32_t e,
		      uint8_t *m[3])
{
	for (unsigned r = 0; r < 3; r++) {
		const struct hb_em_component *k = &lay->layers[l].comp[r];
		for (size_t i = 0; i < k->dim[0] * k->dim[1]; i++) {
			uint16_t h = bf16_at(l, e, r, i);
			m[r][2 * i] = (uint8_t)h;
			m[r][2 * i + 1] = (uint8_t)(h >> 8);
		}
	}
}

static void fill_f32(const struct hb_em_layout *lay, uint32_t l, uint32_t e,
		     float *m[3])
{
	for (unsigned r = 0; r < 3; r++) {
		const struct hb_em_component *k = &lay->layers[l].comp[r];
		for (size_t i = 0; i < k->dim[0] * k->dim[1]; i++)
			m[r][i] = f32_at(l, e, r, i);
	}
}

static const uint8_t source_digest[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

/* Write a whole store for geometry g into fd at base; out gets the final
 * layout.  Returns 0 or the first error. */
static int write_store(int fd, uint64_t base, const struct hb_em_geometry *g,
		       enum hb_em_codec_id codec, struct hb_em_layout *out)
{
	struct hb_em_layout plan;
	struct hb_em_writer w;
	size_t max = 0;
	void *m[3];
	int rc = hb_em_layout_plan(&plan, g, codec, NULL);

	if (rc)
		return rc;
	rc = hb_em_writer_begin(&w, &plan, fd, base, 123456789, source_digest,
				77, NULL);
	if (rc)
		goto done;
	for (unsigned r = 0; r < 3; r++) {
		size_t n = (size_t)(plan.layers[0].comp[r].dim[0] *
				    plan.layers[0].comp[r].dim[1]);
		max = n > max ? n : max;
	}
	for (unsigned r = 0; r < 3; r++)
		m[r] = malloc(max * 4);
	for (uint32_t l = 0; l < plan.layer_count && !rc; l++)
		for (uint32_t e = 0; e < plan.expert_count && !rc; e++) {
			if (codec == HB_EM_CODEC_BF16) {
				fill_bf16(&plan, l, e, (uint8_t **)m);
				rc = hb_em_writer_put_bf16(&w, l, e, m[0], m[1],
							   m[2], NULL);
			} else {
				fill_f32(&plan, l, e, (float **)m);
				rc = hb_em_writer_put_f32(&w, l, e, m[0], m[1],
							  m[2], NULL);
			}
		}
	for (unsigned r = 0; r < 3; r++)
		free(m[r]);
	if (!rc)
		rc = hb_em_writer_finish(&w, out, NULL);
	hb_em_writer_release(&w);
done:
	hb_em_layout_release(&plan);
	return rc;
}

static int open_rw(const char *path)
{
	return open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

/* ------------------------------------------------------------ round trips */

static void roundtrip_bf16(void)
{
	struct hb_em_geometry g = {3, 5, 2, 64, 16}; /* layers need padding */
	struct hb_em_layout w, p;
	uint64_t base = 8192, nread = 0;
	uint8_t junk[8192], *rec, pad[4096];
	size_t got = 0;
	int fd = open_rw("store.bin");

	memset(junk, 0xee, sizeof(junk));
	CHECK(fd >= 0);
	CHECK_EQ_INT(hb_pwrite_full(fd, junk, sizeof(junk), 0, "junk", NULL), 0);
	CHECK_EQ_INT(write_store(fd, base, &g, HB_EM_CODEC_BF16, &w), 0);
	/* record 6144, layer 30,720 = 7.5 pages: layers at 4096, 36864, 69632 */
	CHECK_EQ_U64(w.layers[1].data_offset, 36864);
	CHECK_EQ_U64(w.store_size, 100352);
	CHECK_EQ_INT(hb_em_parse_fd(fd, base, w.store_size, &g, &p, &nread, NULL), 0);
	CHECK_EQ_U64(nread, 256 + 3 * 224);
	CHECK(memcmp(p.payload_sha256, w.payload_sha256, 32) == 0);
	CHECK(memcmp(p.manifest_sha256, w.manifest_sha256, 32) == 0);
	CHECK(memcmp(p.source_sha256, source_digest, 32) == 0);
	CHECK_EQ_U64(p.source_size, 123456789);
	CHECK_EQ_U64(p.source_tensors, 77);
	CHECK(p.codec && p.codec->id == HB_EM_CODEC_BF16);
	CHECK_EQ_INT(hb_em_verify_payload(fd, base, &p, NULL), 0);
	/* the padding after layer 0 and before the data is zero */
	CHECK_EQ_INT(hb_pread_full(fd, pad, 2048, base + 4096 + 30720, "pad", NULL), 0);
	for (int i = 0; i < 2048; i++)
		CHECK(pad[i] == 0);
	CHECK_EQ_INT(hb_pread_full(fd, pad, 4096 - 928, base + 928, "gap", NULL), 0);
	for (int i = 0; i < 4096 - 928; i++)
		CHECK(pad[i] == 0);
	/* every component bit-exact, whole records gate|up|down */
	rec = malloc(p.record_bytes);
	for (uint32_t l = 0; l < 3; l++)
		for (uint32_t e = 0; e < 5; e++) {
			CHECK_EQ_INT(hb_em_record_read(fd, base, &p, l, e, HB_EM_RECORD,
						       rec, p.record_bytes, &got, NULL), 0);
			CHECK_EQ_U64(got, 6144);
			for (unsigned r = 0; r < 3; r++) {
				uint8_t comp[2048];
				bool same = true;
				CHECK_EQ_INT(hb_em_record_read(fd, base, &p, l, e, (int)r,
							       comp, sizeof(comp), &got,
							       NULL), 0);
				for (size_t i = 0; i < 1024; i++) {
					uint16_t h = bf16_at(l, e, r, i);
					if (comp[2 * i] != (uint8_t)h ||
					    comp[2 * i + 1] != (uint8_t)(h >> 8))
						same = false;
				}
				CHECK(same);
				CHECK(memcmp(comp, rec + r * 2048, 2048) == 0);
			}
		}
	free(rec);
	hb_em_layout_release(&p);
	hb_em_layout_release(&w);
	close(fd);
}

/* bf16 codec fed float32: round to nearest even, as hb_f32_to_bf16. */
static void bf16_from_f32(void)
{
	struct hb_em_geometry g = {1, 1, 1, 64, 16};
	struct hb_em_layout plan, p;
	struct hb_em_writer w;
	float m[3][1024];
	uint8_t rec[6144];
	int fd = open_rw("s.bin");

	for (unsigned r = 0; r < 3; r++)
		for (int i = 0; i < 1024; i++)
			m[r][i] = 1.0f + (float)i * 1e-3f * (float)(r + 1);
	CHECK_EQ_INT(hb_em_layout_plan(&plan, &g, HB_EM_CODEC_BF16, NULL), 0);
	CHECK_EQ_INT(hb_em_writer_begin(&w, &plan, fd, 0, 1, source_digest, 1, NULL), 0);
	CHECK_EQ_INT(hb_em_writer_put_f32(&w, 0, 0, m[0], m[1], m[2], NULL), 0);
	CHECK_EQ_INT(hb_em_writer_finish(&w, NULL, NULL), 0);
	hb_em_writer_release(&w);
	CHECK_EQ_INT(hb_em_parse_fd(fd, 0, plan.store_size, &g, &p, NULL, NULL), 0);
	CHECK_EQ_INT(hb_em_record_read(fd, 0, &p, 0, 0, HB_EM_RECORD, rec,
				       sizeof(rec), NULL, NULL), 0);
	for (unsigned r = 0; r < 3; r++)
		for (int i = 0; i < 1024; i++) {
			uint16_t h = hb_f32_to_bf16(m[r][i]);
			CHECK(rec[r * 2048 + 2 * i] == (uint8_t)h);
			CHECK(rec[r * 2048 + 2 * i + 1] == (uint8_t)(h >> 8));
		}
	hb_em_layout_release(&p);
	hb_em_layout_release(&plan);
	close(fd);
}

static void roundtrip_affine4(void)
{
	struct hb_em_geometry g;
	struct hb_em_layout w, p;
	uint64_t nread = 0;
	uint8_t enc[4608], want[4608];
	float dec[128 * 64], src[128 * 64];
	int fd = open_rw("store.bin");

	get_dev_a4(&g);
	CHECK_EQ_INT(write_store(fd, 4096, &g, HB_EM_CODEC_AFFINE4_G64, &w), 0);
	CHECK_EQ_INT(hb_em_parse_fd(fd, 4096, w.store_size, &g, &p, &nread, NULL), 0);
	CHECK_EQ_U64(nread, 256 + 4 * 224);
	CHECK_EQ_INT(hb_em_verify_payload(fd, 4096, &p, NULL), 0);
	CHECK(p.codec && p.codec->id == HB_EM_CODEC_AFFINE4_G64);
	for (uint32_t l = 0; l < 4; l++)
		for (uint32_t e = 0; e < 6; e++)
			for (unsigned r = 0; r < 3; r++) {
				const struct hb_em_component *k = &p.layers[l].comp[r];
				size_t n = (size_t)(k->dim[0] * k->dim[1]);
				size_t got = 0;
				double worst = 0;

				CHECK_EQ_U64(n, 128 * 64);
				CHECK_EQ_INT(hb_em_record_read(fd, 4096, &p, l, e, (int)r,
							       enc, sizeof(enc), &got,
							       NULL), 0);
				CHECK_EQ_U64(got, 4608);
				for (size_t i = 0; i < n; i++)
					src[i] = f32_at(l, e, r, i);
				/* the same bytes as encoding the matrix directly */
				CHECK_EQ_INT(hb_affine4_encode(src, n, 64, want, 4608,
							       NULL, NULL), 0);
				CHECK(memcmp(enc, want, 4608) == 0);
				CHECK_EQ_INT(hb_affine4_decode(enc, 4608, 64, dec, n,
							       NULL, NULL), 0);
				for (size_t gi = 0; gi < n / 64; gi++) {
					float lo = src[gi * 64], hi = lo;
					for (int i = 0; i < 64; i++) {
						lo = fminf(lo, src[gi * 64 + i]);
						hi = fmaxf(hi, src[gi * 64 + i]);
					}
					for (int i = 0; i < 64; i++) {
						double d = fabs(dec[gi * 64 + i] -
								src[gi * 64 + i]);
						double b = hb_affine4_error_bound(lo, hi);
						worst = hb_test_max_nan(worst, d / b);
					}
				}
				CHECK(worst <= 1.0);
				CHECK(worst > 0.1); /* really quantised */
			}
	hb_em_layout_release(&p);
	hb_em_layout_release(&w);
	close(fd);
}

/* The parse demands the caller's geometry: a valid dev store is refused as
 * the real profile and as another config's geometry. */
static void parse_demands_expected_geometry(void)
{
	struct hb_em_geometry g, other;
	struct hb_em_layout w, p;
	struct hb_error err;
	int fd = open_rw("store.bin");

	get_dev_a4(&g);
	CHECK_EQ_INT(write_store(fd, 0, &g, HB_EM_CODEC_AFFINE4_G64, &w), 0);
	get_real(&other);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_parse_fd(fd, 0, w.store_size, &other, &p, NULL, &err),
		     HB_ERR_CONTRACT);
	CHECK_STR(err.id, "em-layer-count");
	other = g;
	other.hidden = 256;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_parse_fd(fd, 0, w.store_size, &other, &p, NULL, &err),
		     HB_ERR_CONTRACT);
	CHECK_STR(err.id, "em-geometry");
	CHECK_STR(err.field, "expert_store.descriptor[0].component[gate].dim0");
	CHECK_EQ_U64(err.offset, 256 + 32 + 16);
	other = g;
	other.intermediate = 32; /* expected geometry the codec cannot tile */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_parse_fd(fd, 0, w.store_size, &other, &p, NULL, &err),
		     HB_ERR_UNSUPPORTED);
	CHECK_STR(err.id, "em-codec-tiling");
	/* the file is shorter than the extent */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_parse_fd(fd, 4096, w.store_size, &g, &p, NULL, &err),
		     HB_ERR_SHORT);
	CHECK_STR(err.id, "em-truncated");
	hb_em_layout_release(&w);
	close(fd);
}

/* ------------------------------------------------------------ mutations */

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Recompute the manifest digest of a (mutated) header + descriptors. */
static void reseal(uint8_t *buf, size_t meta)
{
	uint8_t d[32];
	memset(buf + 168, 0, 32);
	hb_sha256_buf(buf, meta, d);
	memcpy(buf + 168, d, 32);
}

enum { W32, W64, BYTE };
#define D(l) (256 + 224 * (l))
#define C(l, r) (D(l) + 32 + 56 * (r))

struct mutation {
	unsigned off;
	int width;
	uint64_t value;    /* absolute value, or a delta when relative */
	bool relative;
	bool reseal;
	int64_t extent_delta;
	const char *id;
	int code;
	const char *field;
};

static void every_field_has_its_id(void)
{
	/* dev affine4 store: data offset 4096, layers at 4096, 90112,
	 * 176128, 262144, store 345088, record 13824 */
	static const struct mutation ms[] = {
		{0, BYTE, 'X', false, true, 0, "em-magic", HB_ERR_FORMAT, "expert_store.header.magic"},
		{8, W32, 3, false, true, 0, "em-version", HB_ERR_FORMAT, "expert_store.header.version"},
		{12, W32, 512, false, true, 0, "em-header-bytes", HB_ERR_FORMAT, "expert_store.header.header_bytes"},
		{16, W32, 3, false, true, 0, "em-family", HB_ERR_CONTRACT, "expert_store.header.family"},
		{20, W32, 3, false, true, 0, "em-experts-used", HB_ERR_CONTRACT, "expert_store.header.experts_used"},
		{24, W32, 5, false, true, 0, "em-layer-count", HB_ERR_CONTRACT, "expert_store.header.layer_count"},
		{28, W32, 7, false, true, 0, "em-expert-count", HB_ERR_CONTRACT, "expert_store.header.expert_count"},
		{28, W32, 513, false, true, 0, "em-expert-count", HB_ERR_CONTRACT, "expert_store.header.expert_count"},
		{40, W64, 5, false, true, 0, "em-descriptor-count", HB_ERR_FORMAT, "expert_store.header.descriptor_count"},
		{48, W64, 1, true, true, 0, "em-descriptor-bytes", HB_ERR_FORMAT, "expert_store.header.descriptor_bytes"},
		{56, W64, 512, false, true, 0, "em-descriptor-offset", HB_ERR_FORMAT, "expert_store.header.descriptor_offset"},
		{64, W64, 8192, false, true, 0, "em-data-offset", HB_ERR_FORMAT, "expert_store.header.data_offset"},
		{64, W64, 4097, false, true, 0, "em-data-offset", HB_ERR_FORMAT, "expert_store.header.data_offset"},
		{72, W64, UINT64_MAX, false, true, 0, "em-overflow", HB_ERR_OVERFLOW, "expert_store.header.data_size"},
		{80, W64, 1, true, true, 0, "em-store-size", HB_ERR_FORMAT, "expert_store.header.store_size"},
		{160, W32, 2, false, true, 0, "em-storage", HB_ERR_UNSUPPORTED, "expert_store.header.storage_format"},
		{164, W32, 32, false, true, 0, "em-storage", HB_ERR_UNSUPPORTED, "expert_store.header.storage_format"},
		{230, BYTE, 1, false, true, 0, "em-reserved-nonzero", HB_ERR_FORMAT, "expert_store.header.reserved"},
		{D(3), W32, 2, false, true, 0, "em-layer-index", HB_ERR_CONTRACT, "expert_store.descriptor[3].layer"},
		{D(1) + 4, W32, 5, false, true, 0, "em-layer-experts", HB_ERR_CONTRACT, "expert_store.descriptor[1].expert_count"},
		{D(2) + 210, BYTE, 7, false, true, 0, "em-reserved-nonzero", HB_ERR_FORMAT, "expert_store.descriptor[2].reserved"},
		{D(3) + 8, W64, 36, true, true, 0, "em-record-bytes", HB_ERR_CONTRACT, "expert_store.descriptor[3].record_bytes"},
		{D(1) + 24, W64, 1, true, true, 0, "em-layer-size", HB_ERR_CONTRACT, "expert_store.descriptor[1].data_size"},
		{D(2) + 16, W64, 1, true, true, 0, "em-descriptor-align", HB_ERR_FORMAT, "expert_store.descriptor[2].data_offset"},
		{D(3) + 16, W64, 348160, false, true, 0, "em-descriptor-extent", HB_ERR_FORMAT, "expert_store.descriptor[3].data_offset"},
		{D(0) + 16, W64, 0, false, true, 0, "em-descriptor-extent", HB_ERR_FORMAT, "expert_store.descriptor[0].data_offset"},
		{D(2) + 16, W64, 90112, false, true, 0, "em-descriptor-overlap", HB_ERR_FORMAT, "expert_store.descriptor[2].data_offset"},
		{D(2) + 16, W64, 4096, true, true, 0, "em-descriptor-gap", HB_ERR_FORMAT, "expert_store.descriptor[2].data_offset"},
		{C(0, 1), W32, 0, false, true, 0, "em-component", HB_ERR_CONTRACT, "expert_store.descriptor[0].component[up].role"},
		{C(0, 0) + 4, W32, 30, false, true, 0, "em-component", HB_ERR_CONTRACT, "expert_store.descriptor[0].component[gate].element_type"},
		{C(1, 2) + 8, W32, 2, false, true, 0, "em-component", HB_ERR_CONTRACT, "expert_store.descriptor[1].component[down].ndim"},
		{C(0, 2) + 12, W32, 256, false, true, 0, "em-component", HB_ERR_CONTRACT, "expert_store.descriptor[0].component[down].block_elements"},
		{C(3, 2) + 16, W64, 128, false, true, 0, "em-geometry", HB_ERR_CONTRACT, "expert_store.descriptor[3].component[down].dim0"},
		{C(1, 0) + 24, W64, 32, false, true, 0, "em-geometry", HB_ERR_CONTRACT, "expert_store.descriptor[1].component[gate].dim1"},
		{C(0, 1) + 32, W64, 5, false, true, 0, "em-geometry", HB_ERR_CONTRACT, "expert_store.descriptor[0].component[up].dim2"},
		{C(2, 1) + 40, W64, 36, true, true, 0, "em-component", HB_ERR_CONTRACT, "expert_store.descriptor[2].component[up].expert_bytes"},
		{C(0, 2) + 48, W64, 36, true, true, 0, "em-component", HB_ERR_CONTRACT, "expert_store.descriptor[0].component[down].record_offset"},
		/* edits without resealing: the digest is the only witness */
		{88, W64, 1, true, false, 0, "em-manifest-digest", HB_ERR_DIGEST, "expert_store.header.manifest_sha256"},
		{170, BYTE, 0x5a, false, false, 0, "em-manifest-digest", HB_ERR_DIGEST, "expert_store.header.manifest_sha256"},
		{100, BYTE, 0x80, false, false, 0, "em-manifest-digest", HB_ERR_DIGEST, "expert_store.header.manifest_sha256"},
		{140, BYTE, 0x80, false, false, 0, "em-manifest-digest", HB_ERR_DIGEST, "expert_store.header.manifest_sha256"},
		/* the container's extent disagrees */
		{0, -1, 0, false, true, 1, "em-store-size", HB_ERR_FORMAT, "expert_store.header.store_size"},
	};
	struct hb_em_geometry g;
	struct hb_em_layout plan, p;
	uint8_t good[256 + 4 * 224], buf[sizeof(good)];

	get_dev_a4(&g);
	CHECK_EQ_INT(hb_em_layout_plan(&plan, &g, HB_EM_CODEC_AFFINE4_G64, NULL), 0);
	CHECK_EQ_INT(hb_em_serialise(&plan, good, sizeof(good), NULL), 0);
	CHECK_EQ_INT(hb_em_parse_buf(good, sizeof(good), plan.store_size, &g, &p,
				     NULL), 0);
	hb_em_layout_release(&p);
	for (size_t i = 0; i < HB_ARRAY_LEN(ms); i++) {
		const struct mutation *m = &ms[i];
		struct hb_error err;
		int rc;

		memcpy(buf, good, sizeof(buf));
		if (m->width == W32)
			put32(buf + m->off, (uint32_t)(m->relative ?
				get64(buf + m->off) + m->value : m->value));
		else if (m->width == W64)
			put64(buf + m->off, m->relative ?
			      get64(buf + m->off) + m->value : m->value);
		else if (m->width == BYTE)
			buf[m->off] = (uint8_t)m->value;
		if (m->reseal)
			reseal(buf, sizeof(buf));
		hb_error_clear(&err);
		rc = hb_em_parse_buf(buf, sizeof(buf),
				     plan.store_size + (uint64_t)m->extent_delta,
				     &g, &p, &err);
		if (rc != m->code || !err.id || strcmp(err.id, m->id) != 0 ||
		    strcmp(err.field, m->field) != 0)
			hb_check_fail(__FILE__, __LINE__,
				      "mutation %zu at %u: got %d %s %s, want %d %s %s",
				      i, m->off, rc, err.id ? err.id : "(none)",
				      err.field, m->code, m->id, m->field);
		CHECK(p.layers == NULL);
	}
	hb_em_layout_release(&plan);
}

/* data size and store size both grown by a page (and the container with
 * them): the descriptors no longer reach the end of the data region. */
static void data_size_mismatch(void)
{
	struct hb_em_geometry g;
	struct hb_em_layout plan, p;
	uint8_t buf[256 + 4 * 224];
	struct hb_error err;

	get_dev_a4(&g);
	CHECK_EQ_INT(hb_em_layout_plan(&plan, &g, HB_EM_CODEC_AFFINE4_G64, NULL), 0);
	CHECK_EQ_INT(hb_em_serialise(&plan, buf, sizeof(buf), NULL), 0);
	put64(buf + 72, plan.data_size + 4096);
	put64(buf + 80, plan.store_size + 4096);
	reseal(buf, sizeof(buf));
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_parse_buf(buf, sizeof(buf), plan.store_size + 4096, &g,
				     &p, &err), HB_ERR_FORMAT);
	CHECK_STR(err.id, "em-data-size");
	CHECK_STR(err.field, "expert_store.header.data_size");
	/* bf16 storage ids on an affine4 store: the codec changes, so the
	 * first component's element type is what disagrees */
	CHECK_EQ_INT(hb_em_serialise(&plan, buf, sizeof(buf), NULL), 0);
	put32(buf + 160, 0);
	put32(buf + 164, 0);
	reseal(buf, sizeof(buf));
	hb_error_clear(&err);
	CHECK(hb_em_parse_buf(buf, sizeof(buf), plan.store_size, &g, &p, &err) != 0);
	CHECK_STR(err.id, "em-component");
	CHECK_STR(err.field, "expert_store.descriptor[0].component[gate].element_type");
	/* truncated inputs */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_parse_buf(buf, 255, plan.store_size, &g, &p, &err),
		     HB_ERR_SHORT);
	CHECK_STR(err.id, "em-truncated");
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_parse_buf(buf, 256 + 500, plan.store_size, &g, &p, &err),
		     HB_ERR_SHORT);
	CHECK_STR(err.id, "em-truncated");
	CHECK_STR(err.field, "expert_store.descriptors");
	hb_em_layout_release(&plan);
}

static void payload_digest_detects_edits(void)
{
	struct hb_em_geometry g = {3, 5, 2, 64, 16};
	struct hb_em_layout w;
	struct hb_error err;
	uint8_t b = 0;
	int fd = open_rw("store.bin");

	CHECK_EQ_INT(write_store(fd, 0, &g, HB_EM_CODEC_BF16, &w), 0);
	CHECK_EQ_INT(hb_em_verify_payload(fd, 0, &w, NULL), 0);
	/* one record byte */
	CHECK_EQ_INT(hb_pread_full(fd, &b, 1, 36864 + 777, "b", NULL), 0);
	b ^= 1;
	CHECK_EQ_INT(hb_pwrite_full(fd, &b, 1, 36864 + 777, "b", NULL), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_verify_payload(fd, 0, &w, &err), HB_ERR_DIGEST);
	CHECK_STR(err.id, "em-payload-digest");
	b ^= 1;
	CHECK_EQ_INT(hb_pwrite_full(fd, &b, 1, 36864 + 777, "b", NULL), 0);
	CHECK_EQ_INT(hb_em_verify_payload(fd, 0, &w, NULL), 0);
	/* one padding byte between layers 0 and 1: covered too */
	b = 1;
	CHECK_EQ_INT(hb_pwrite_full(fd, &b, 1, 36000, "b", NULL), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_verify_payload(fd, 0, &w, &err), HB_ERR_DIGEST);
	CHECK_STR(err.id, "em-payload-digest");
	/* a truncated file */
	CHECK(ftruncate(fd, (off_t)w.store_size - 1) == 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_verify_payload(fd, 0, &w, &err), HB_ERR_SHORT);
	CHECK_STR(err.id, "em-truncated");
	hb_em_layout_release(&w);
	close(fd);
}

/* ------------------------------------------------------------ the writer */

static void writer_refuses_disorder(void)
{
	struct hb_em_geometry g = {2, 3, 1, 64, 64};
	struct hb_em_layout plan;
	struct hb_em_writer w;
	struct hb_error err;
	static float m[3][64 * 64];
	static uint8_t raw[3][64 * 64 * 2];
	int fd = open_rw("s.bin");

	for (int i = 0; i < 64 * 64; i++)
		m[0][i] = m[1][i] = m[2][i] = (float)(i % 7) - 3.0f;
	CHECK_EQ_INT(hb_em_layout_plan(&plan, &g, HB_EM_CODEC_AFFINE4_G64, NULL), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_writer_begin(&w, &plan, fd, 100, 1, source_digest, 1,
					&err), HB_ERR_INVALID);
	CHECK_STR(err.id, "em-base-align");
	CHECK_EQ_INT(hb_em_writer_begin(&w, &plan, fd, 4096, 1, source_digest, 1,
					NULL), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_writer_put_f32(&w, 0, 1, m[0], m[1], m[2], &err),
		     HB_ERR_INVALID);
	CHECK_STR(err.id, "em-put-order");
	CHECK_EQ_INT(hb_em_writer_put_f32(&w, 1, 0, m[0], m[1], m[2], NULL),
		     HB_ERR_INVALID);
	CHECK_EQ_INT(hb_em_writer_put_f32(&w, 0, 0, m[0], m[1], m[2], NULL), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_writer_put_f32(&w, 0, 0, m[0], m[1], m[2], &err),
		     HB_ERR_INVALID);
	CHECK_STR(err.id, "em-put-order");
	/* a non-finite weight is refused and nothing is written */
	m[1][5] = NAN;
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_writer_put_f32(&w, 0, 1, m[0], m[1], m[2], &err),
		     HB_ERR_NONFINITE);
	CHECK_STR(err.field, "expert_store.layer[0].expert[1].up.weights[5]");
	m[1][5] = 0.0f;
	/* raw bf16 needs the bf16 codec */
	CHECK_EQ_INT(hb_em_writer_put_bf16(&w, 0, 1, raw[0], raw[1], raw[2], NULL),
		     HB_ERR_INVALID);
	/* finishing early is refused */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_writer_finish(&w, NULL, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "em-writer-state");
	for (uint32_t l = 0; l < 2; l++)
		for (uint32_t e = l ? 0 : 1; e < 3; e++)
			CHECK_EQ_INT(hb_em_writer_put_f32(&w, l, e, m[0], m[1],
							  m[2], NULL), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_writer_put_f32(&w, 2, 0, m[0], m[1], m[2], &err),
		     HB_ERR_INVALID);
	CHECK_STR(err.id, "em-put-order");
	CHECK_EQ_INT(hb_em_writer_finish(&w, NULL, NULL), 0);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_writer_finish(&w, NULL, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "em-writer-state");
	hb_em_writer_release(&w);
	hb_em_layout_release(&plan);
	close(fd);
}

/* hb_em_check_bf16_record's vectorised scan finds a non-finite value at
 * every position of every role (4-value words, 512-word blocks, odd tails),
 * names exactly that value, and passes the largest finite values. */
static void check_bf16_record_every_position(void)
{
	struct hb_em_geometry g = {1, 2, 1, 73, 61}; /* 4453 values a role: a 4096-value block, then 44 vectors and a 5-value tail */
	static const uint16_t bad[] = {0x7f80, 0xff80, 0x7fc1, 0xffff, 0x7f81};
	struct hb_em_layout plan;
	struct hb_error err;
	uint8_t *rec;
	int misses = 0, wrong = 0, checked = 0;

	CHECK_EQ_INT(hb_em_layout_plan(&plan, &g, HB_EM_CODEC_BF16, NULL), 0);
	rec = calloc(1, (size_t)plan.record_bytes);
	CHECK(rec != NULL);
	if (!rec) {
		hb_em_layout_release(&plan);
		return;
	}
	/* every value the largest finite magnitude, alternating sign */
	for (uint64_t i = 0; i < plan.record_bytes / 2; i++)
		rec[2 * i] = 0x7f, rec[2 * i + 1] = i & 1 ? 0xff : 0x7f;
	CHECK_EQ_INT(hb_em_check_bf16_record(&plan, 0, 1, rec, NULL), HB_OK);
	for (unsigned r = 0; r < HB_EM_ROLES; r++) {
		const struct hb_em_component *k = &plan.layers[0].comp[r];
		uint64_t n = k->expert_bytes / 2;
		for (uint64_t i = 0; i < n; i++) {
			uint8_t *v = rec + k->record_offset + 2 * i, save0 = v[0], save1 = v[1];
			uint16_t b = bad[i % HB_ARRAY_LEN(bad)];
			char want[HB_ERROR_FIELD_MAX];
			static const char *const roles[] = {"gate", "up", "down"};
			v[0] = (uint8_t)b, v[1] = (uint8_t)(b >> 8);
			hb_error_clear(&err);
			if (hb_em_check_bf16_record(&plan, 0, 1, rec, &err) != HB_ERR_NONFINITE)
				misses++;
			snprintf(want, sizeof(want), "expert_store.layer[0].expert[1].%s.weights[%" PRIu64 "]",
				 roles[r], i);
			wrong += strcmp(err.field, want) != 0;
			v[0] = save0, v[1] = save1;
			checked++;
		}
	}
	CHECK_EQ_INT(misses, 0);
	CHECK_EQ_INT(wrong, 0);
	CHECK_EQ_INT(checked, 3 * 73 * 61);
	free(rec);
	hb_em_layout_release(&plan);
}

static void writer_refuses_nonfinite_bf16(void)
{
	struct hb_em_geometry g = {1, 2, 1, 64, 16};
	struct hb_em_layout plan;
	struct hb_em_writer w;
	struct hb_error err;
	static uint8_t raw[3][64 * 16 * 2];
	int fd = open_rw("s.bin");

	CHECK_EQ_INT(hb_em_layout_plan(&plan, &g, HB_EM_CODEC_BF16, NULL), 0);
	CHECK_EQ_INT(hb_em_writer_begin(&w, &plan, fd, 0, 1, source_digest, 1,
					NULL), 0);
	raw[2][2 * 9] = 0xc1, raw[2][2 * 9 + 1] = 0xff; /* 0xffc1: NaN */
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_writer_put_bf16(&w, 0, 0, raw[0], raw[1], raw[2], &err),
		     HB_ERR_NONFINITE);
	CHECK_STR(err.field, "expert_store.layer[0].expert[0].down.weights[9]");
	raw[2][2 * 9] = 0x80, raw[2][2 * 9 + 1] = 0x7f; /* 0x7f80: +inf */
	CHECK_EQ_INT(hb_em_writer_put_bf16(&w, 0, 0, raw[0], raw[1], raw[2], NULL),
		     HB_ERR_NONFINITE);
	raw[2][2 * 9] = 0x7f, raw[2][2 * 9 + 1] = 0x7f; /* largest finite */
	CHECK_EQ_INT(hb_em_writer_put_bf16(&w, 0, 0, raw[0], raw[1], raw[2], NULL), 0);
	hb_em_writer_release(&w);
	hb_em_layout_release(&plan);
	close(fd);
}

/* An I/O failure poisons the writer: later calls are refused. */
static void writer_io_failure_poisons(void)
{
	struct hb_em_geometry g = {1, 2, 1, 64, 16};
	struct hb_em_layout plan;
	struct hb_em_writer w;
	struct hb_error err;
	static uint8_t raw[3][64 * 16 * 2];
	int fd = open_rw("s.bin");

	CHECK_EQ_INT(hb_em_layout_plan(&plan, &g, HB_EM_CODEC_BF16, NULL), 0);
	CHECK_EQ_INT(hb_em_writer_begin(&w, &plan, fd, 0, 1, source_digest, 1,
					NULL), 0);
	hb_fault_reset();
	hb_fault_arm(HB_FAULT_WRITE, 1, ENOSPC);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_writer_put_bf16(&w, 0, 0, raw[0], raw[1], raw[2], &err),
		     HB_ERR_IO);
	hb_fault_reset();
	CHECK_EQ_INT(err.sys_errno, ENOSPC);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_writer_put_bf16(&w, 0, 0, raw[0], raw[1], raw[2], &err),
		     HB_ERR_INVALID);
	CHECK_STR(err.id, "em-writer-state");
	CHECK_EQ_INT(hb_em_writer_finish(&w, NULL, NULL), HB_ERR_INVALID);
	hb_em_writer_release(&w);
	hb_em_layout_release(&plan);
	close(fd);
}

static void record_bounds(void)
{
	struct hb_em_geometry g;
	struct hb_em_layout w;
	struct hb_error err;
	uint8_t buf[13824];
	uint64_t off = 0, len = 0;
	int fd = open_rw("store.bin");

	get_dev_a4(&g);
	CHECK_EQ_INT(write_store(fd, 0, &g, HB_EM_CODEC_AFFINE4_G64, &w), 0);
	CHECK_EQ_INT(hb_em_record_span(&w, 3, 5, HB_EM_DOWN, &off, &len, NULL), 0);
	CHECK_EQ_U64(off + len, w.store_size);
	CHECK_EQ_U64(off, 262144 + 5 * 13824 + 9216);
	CHECK_EQ_INT(hb_em_record_span(&w, 1, 0, HB_EM_RECORD, &off, &len, NULL), 0);
	CHECK_EQ_U64(off, 90112);
	CHECK_EQ_U64(len, 13824);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_record_read(fd, 0, &w, 4, 0, HB_EM_RECORD, buf,
				       sizeof(buf), NULL, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "em-record-bounds");
	CHECK_EQ_INT(hb_em_record_read(fd, 0, &w, 0, 6, HB_EM_GATE, buf,
				       sizeof(buf), NULL, NULL), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_em_record_read(fd, 0, &w, 0, 0, 3, buf, sizeof(buf),
				       NULL, NULL), HB_ERR_INVALID);
	CHECK_EQ_INT(hb_em_record_read(fd, 0, &w, 0, 0, -2, buf, sizeof(buf),
				       NULL, NULL), HB_ERR_INVALID);
	hb_error_clear(&err);
	CHECK_EQ_INT(hb_em_record_read(fd, 0, &w, 0, 0, HB_EM_RECORD, buf, 13823,
				       NULL, &err), HB_ERR_INVALID);
	CHECK_STR(err.id, "em-record-bounds");
	hb_em_layout_release(&w);
	close(fd);
}

/* ------------------------------------------------- sparse real geometry */

/*
 * The real 48 x 512 geometry, both codecs: header and descriptors come from
 * the serialiser with a payload digest set by hand (no 68 or 242 GB digest
 * is computed), the payload is a hole (ftruncate), and the parse reads only
 * 256 + 48 x 224 = 11,008 bytes.
 */
static void sparse_real_store(void)
{
	static const enum hb_em_codec_id codecs[] = {HB_EM_CODEC_AFFINE4_G64,
						     HB_EM_CODEC_BF16};
	struct hb_em_geometry g, dev;
	uint8_t meta[11008];
	uint64_t base = 5 * 4096;

	get_real(&g);
	get_dev_a4(&dev);
	for (size_t c = 0; c < HB_ARRAY_LEN(codecs); c++) {
		struct hb_em_layout plan, p;
		struct hb_error err;
		uint64_t nread = 0, off = 0, len = 0;
		int fd = open_rw("sparse.bin");

		CHECK_EQ_INT(hb_em_layout_plan(&plan, &g, codecs[c], NULL), 0);
		memset(plan.payload_sha256, 0xab, 32);
		memset(plan.source_sha256, 0xcd, 32);
		plan.source_size = UINT64_C(359999963128);
		plan.source_tensors = 1294;
		CHECK_EQ_U64(hb_em_layout_meta_bytes(&plan), sizeof(meta));
		CHECK_EQ_INT(hb_em_serialise(&plan, meta, sizeof(meta), NULL), 0);
		CHECK(ftruncate(fd, (off_t)(base + plan.store_size)) == 0);
		CHECK_EQ_INT(hb_pwrite_full(fd, meta, sizeof(meta), base, "m", NULL), 0);
		CHECK_EQ_INT(hb_em_parse_fd(fd, base, plan.store_size, &g, &p,
					    &nread, NULL), 0);
		CHECK_EQ_U64(nread, 11008);
		CHECK_EQ_U64(p.layer_count, 48);
		CHECK_EQ_U64(p.expert_count, 512);
		CHECK_EQ_U64(p.experts_used, 10);
		CHECK_EQ_U64(p.store_size, plan.store_size);
		CHECK_EQ_U64(p.source_tensors, 1294);
		CHECK_EQ_U64(p.source_size, UINT64_C(359999963128));
		CHECK(p.payload_sha256[31] == 0xab);
		CHECK(memcmp(p.layers, plan.layers, 48 * sizeof(*p.layers)) == 0);
		CHECK_EQ_INT(hb_em_record_span(&p, 47, 511, HB_EM_DOWN, &off, &len,
					       NULL), 0);
		CHECK_EQ_U64(off + len, plan.store_size);
		CHECK_EQ_INT(hb_em_record_span(&p, 0, 0, HB_EM_UP, &off, &len, NULL), 0);
		CHECK_EQ_U64(off, 12288 + len);
		hb_em_layout_release(&p);
		/* a development geometry is refused for this store */
		hb_error_clear(&err);
		CHECK_EQ_INT(hb_em_parse_fd(fd, base, plan.store_size, &dev, &p,
					    NULL, &err), HB_ERR_CONTRACT);
		CHECK_STR(err.id, "em-layer-count");
		hb_em_layout_release(&p);
		hb_em_layout_release(&plan);
		close(fd);
		unlink("sparse.bin");
	}
}

/* ------------------------------------------------------------ the table */

static void diagnostic_ids_are_stable(void)
{
	static const char *const ids[] = {
		"em-truncated", "em-magic", "em-version", "em-header-bytes",
		"em-family", "em-experts-used", "em-layer-count",
		"em-expert-count", "em-descriptor-count", "em-descriptor-bytes",
		"em-descriptor-offset", "em-data-offset", "em-data-size",
		"em-store-size", "em-storage", "em-reserved-nonzero",
		"em-manifest-digest", "em-layer-index", "em-layer-experts",
		"em-record-bytes", "em-layer-size", "em-descriptor-align",
		"em-descriptor-extent", "em-descriptor-overlap",
		"em-descriptor-gap", "em-component", "em-geometry",
		"em-codec-tiling", "em-overflow", "em-payload-digest",
		"em-base-align", "em-put-order", "em-writer-state",
		"em-record-bounds",
	};

	CHECK_EQ_INT(HB_EM_DIAG_COUNT, HB_ARRAY_LEN(ids));
	for (size_t i = 0; i < HB_ARRAY_LEN(ids); i++) {
		CHECK_STR(hb_em_diag_id((enum hb_em_diag)i), ids[i]);
		CHECK(hb_em_diag_desc((enum hb_em_diag)i) != NULL);
	}
	CHECK(hb_em_diag_id(HB_EM_DIAG_COUNT) == NULL);
	CHECK(hb_em_codec_find(1, 64) == hb_em_codec_get(HB_EM_CODEC_AFFINE4_G64));
	CHECK(hb_em_codec_find(0, 0) == hb_em_codec_get(HB_EM_CODEC_BF16));
	CHECK(hb_em_codec_find(2, 32) == NULL);
	CHECK(hb_em_codec_find(1, 32) == NULL);
}

HB_TEST_MAIN(T(layout_real_bf16), T(check_bf16_record_every_position), T(layout_real_affine4), T(layout_dev),
	     T(tiling_refused), T(roundtrip_bf16), T(bf16_from_f32),
	     T(roundtrip_affine4), T(parse_demands_expected_geometry),
	     T(every_field_has_its_id), T(data_size_mismatch),
	     T(payload_digest_detects_edits), T(writer_refuses_disorder),
	     T(writer_refuses_nonfinite_bf16), T(writer_io_failure_poisons),
	     T(record_bounds), T(sparse_real_store),
	     T(diagnostic_ids_are_stable))
