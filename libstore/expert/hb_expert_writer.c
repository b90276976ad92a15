/*
 * hb_expert_writer.c: stream an ExpertMajor v2 store into a file, verify its
 * payload digest, and read records back.
 *
 * Owns the byte stream of the payload: records in layer-major,
 * expert-minor order, the zero padding between layers, the running payload
 * SHA-256, and the final pwrite of header and descriptors.  It does not own
 * the file (the caller opens, fsyncs and publishes it; the converter embeds
 * the store as a GGUF tensor at a 4096-aligned offset), nor the layout
 * rules (hb_expert_store.c) nor the codec math (hb_affine4.c).
 *
 * Memory is bounded by one encoded record: the three matrices of one expert
 * are encoded into it and written with one pwrite.  Because a record is
 * encoded completely before anything is written, a refused input leaves the
 * file and the writer exactly as they were.
 */
#include "hb_base.h"
#include "hb_expert_store.h"
#include "codec/hb_affine4.h"
#include "hb_checked.h"
#include "hb_half.h"
#include "hb_io.h"

#include <math.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define VERIFY_CHUNK (1u << 20)

static const char *const role_names[HB_EM_ROLES] = {"gate", "up", "down"};
static const uint8_t zeros[HB_EM_ALIGNMENT];

static int state_error(struct hb_error *err, const char *what)
{
	return hb_error_diag(err, hb_em_diag_id(HB_EM_DIAG_WRITER_STATE),
			     HB_ERR_INVALID, "expert_store.writer", false, 0,
			     "%s", what);
}

static const char *state_name(const struct hb_em_writer *w)
{
	return w->failed ? "writer failed earlier" :
	       w->finished ? "writer is finished" : "writer was not begun";
}

static int layout_copy(struct hb_em_layout *dst, const struct hb_em_layout *src,
		       struct hb_error *err)
{
	*dst = *src;
	dst->layers = calloc(src->layer_count ? src->layer_count : 1,
			     sizeof(*dst->layers));
	if (!dst->layers)
		return hb_error_set(err, HB_ERR_NOMEM, "expert_store.layers",
				    "cannot copy %" PRIu32 " descriptors",
				    src->layer_count);
	memcpy(dst->layers, src->layers,
	       sizeof(*dst->layers) * src->layer_count);
	return HB_OK;
}

int hb_em_writer_begin(struct hb_em_writer *w, const struct hb_em_layout *plan,
		       int fd, uint64_t base, uint64_t source_size,
		       const uint8_t source_sha256[HB_SHA256_BYTES],
		       uint64_t source_tensors, struct hb_error *err)
{
	size_t record;
	int rc;

	memset(w, 0, sizeof(*w));
	w->fd = -1;
	if (!plan->layers || !plan->codec || plan->layer_count == 0)
		return hb_error_set(err, HB_ERR_INVALID, "expert_store.layout",
				    "layout was not planned");
	if (base % HB_EM_ALIGNMENT != 0)
		return hb_error_diag(err, hb_em_diag_id(HB_EM_DIAG_BASE_ALIGN),
				     HB_ERR_INVALID, "expert_store.base", true,
				     base, "store offset %" PRIu64 " in the file "
				     "is not 4096-aligned", base);
	if (!hb_offset_ok(base, plan->store_size) ||
	    hb_size_from_u64(plan->record_bytes, &record))
		return hb_error_diag(err, hb_em_diag_id(HB_EM_DIAG_OVERFLOW),
				     HB_ERR_OVERFLOW, "expert_store.base", true,
				     base, "store of %" PRIu64 " bytes does not "
				     "fit at offset %" PRIu64, plan->store_size,
				     base);
	rc = layout_copy(&w->layout, plan, err);
	if (rc)
		return rc;
	w->record = malloc(record ? record : 1);
	if (!w->record) {
		hb_em_layout_release(&w->layout);
		return hb_error_set(err, HB_ERR_NOMEM, "expert_store.record",
				    "cannot allocate a %zu-byte record", record);
	}
	w->layout.source_size = source_size;
	memcpy(w->layout.source_sha256, source_sha256, HB_SHA256_BYTES);
	w->layout.source_tensors = source_tensors;
	memset(w->layout.payload_sha256, 0, HB_SHA256_BYTES);
	memset(w->layout.manifest_sha256, 0, HB_SHA256_BYTES);
	w->fd = fd;
	w->base = base;
	w->pos = plan->data_offset;
	hb_sha256_init(&w->payload);
	return HB_OK;
}

void hb_em_writer_release(struct hb_em_writer *w)
{
	if (!w)
		return;
	free(w->record);
	w->record = NULL;
	hb_em_layout_release(&w->layout);
}

/* Write and hash bytes at the current position; poisons on failure. */
static int emit(struct hb_em_writer *w, const uint8_t *p, size_t n,
		const char *what, struct hb_error *err)
{
	int rc = hb_pwrite_full(w->fd, p, n, w->base + w->pos, what, err);
	if (rc) {
		w->failed = true;
		return rc;
	}
	hb_sha256_update(&w->payload, p, n);
	w->pos += n;
	return HB_OK;
}

static int check_next(struct hb_em_writer *w, uint32_t layer, uint32_t expert,
		      struct hb_error *err)
{
	if (w->failed || w->finished || !w->record)
		return state_error(err, state_name(w));
	if (w->next_layer >= w->layout.layer_count)
		return hb_error_diag(err, hb_em_diag_id(HB_EM_DIAG_PUT_ORDER),
				     HB_ERR_INVALID, "expert_store.put", false, 0,
				     "every expert was already written; got "
				     "layer %" PRIu32 " expert %" PRIu32,
				     layer, expert);
	if (layer != w->next_layer || expert != w->next_expert)
		return hb_error_diag(err, hb_em_diag_id(HB_EM_DIAG_PUT_ORDER),
				     HB_ERR_INVALID, "expert_store.put", false, 0,
				     "got layer %" PRIu32 " expert %" PRIu32
				     ", expected layer %" PRIu32 " expert %"
				     PRIu32 " (layer-major, expert-minor)",
				     layer, expert, w->next_layer, w->next_expert);
	return HB_OK;
}

/* Pad to the layer's start, write the encoded record, advance. */
static int commit_record(struct hb_em_writer *w, struct hb_error *err)
{
	const struct hb_em_layer *ly = &w->layout.layers[w->next_layer];
	uint64_t at = ly->data_offset + (uint64_t)w->next_expert * ly->record_bytes;
	int rc;

	if (w->pos > at)
		return state_error(err, "write position passed a record");
	while (w->pos < at) {
		size_t n = at - w->pos < sizeof(zeros) ? (size_t)(at - w->pos)
						       : sizeof(zeros);
		rc = emit(w, zeros, n, "expert_store.padding", err);
		if (rc)
			return rc;
	}
	rc = emit(w, w->record, (size_t)ly->record_bytes, "expert_store.record",
		  err);
	if (rc)
		return rc;
	if (++w->next_expert == w->layout.expert_count) {
		w->next_expert = 0;
		w->next_layer++;
	}
	return HB_OK;
}

static void weights_field(char *buf, size_t len, uint32_t layer,
			  uint32_t expert, unsigned role)
{
	snprintf(buf, len, "expert_store.layer[%" PRIu32 "].expert[%" PRIu32
		 "].%s.weights", layer, expert, role_names[role]);
}

int hb_em_encode_record(const struct hb_em_layout *l, uint32_t layer,
			uint32_t expert, const float *gate, const float *up,
			const float *down, uint8_t *record, struct hb_error *err)
{
	const float *m[HB_EM_ROLES] = {gate, up, down};
	const struct hb_em_layer *ly;

	if (layer >= l->layer_count)
		return state_error(err, "layer outside the layout");
	ly = &l->layers[layer];
	for (unsigned r = 0; r < HB_EM_ROLES; r++) {
		const struct hb_em_component *k = &ly->comp[r];
		uint8_t *out = record + k->record_offset;
		size_t n = (size_t)(k->dim[0] * k->dim[1]); /* fits: bytes did */
		char field[HB_ERROR_FIELD_MAX];
		int rc;

		weights_field(field, sizeof(field), layer, expert, r);
		if (l->codec->id == HB_EM_CODEC_AFFINE4_G64) {
			rc = hb_affine4_encode(m[r], n, l->group_size, out,
					       (size_t)k->expert_bytes, field, err);
			if (rc)
				return rc;
			continue;
		}
		for (size_t i = 0; i < n; i++) {
			uint16_t h;
			if (!isfinite(m[r][i])) {
				char f[HB_ERROR_FIELD_MAX];
				snprintf(f, sizeof(f), "%s[%zu]", field, i);
				return hb_error_set(err, HB_ERR_NONFINITE, f,
						    "weight is not finite");
			}
			h = hb_f32_to_bf16(m[r][i]);
			out[2 * i] = (uint8_t)(h & 0xffu);
			out[2 * i + 1] = (uint8_t)(h >> 8);
		}
	}
	return HB_OK;
}

int hb_em_writer_put_f32(struct hb_em_writer *w, uint32_t layer,
			 uint32_t expert, const float *gate, const float *up,
			 const float *down, struct hb_error *err)
{
	int rc = check_next(w, layer, expert, err);

	if (!rc)
		rc = hb_em_encode_record(&w->layout, layer, expert, gate, up, down,
					 w->record, err);
	return rc ? rc : commit_record(w, err);
}

int hb_em_writer_put_record(struct hb_em_writer *w, uint32_t layer,
			    uint32_t expert, const uint8_t *record,
			    struct hb_error *err)
{
	int rc = check_next(w, layer, expert, err);

	if (rc)
		return rc;
	memcpy(w->record, record, (size_t)w->layout.layers[layer].record_bytes);
	return commit_record(w, err);
}

/* Whether any of the n bfloat16 values (little-endian) has its exponent all
 * ones.  Over 4096-value blocks without an early exit, so that it runs at
 * memory speed: SSE2 (x86-64's baseline) compares eight values at once,
 * 7.4 GB/s against 4.1 GB/s for the scalar 64-bit word test and under
 * 1 GB/s for the byte loop that finds the exact value (measured, one core of
 * the development VM); that loop runs only when a block is flagged. */
static bool any_nonfinite_bf16(const uint8_t *p, size_t n)
{
	size_t i = 0;
#if defined(__SSE2__)
	const __m128i m = _mm_set1_epi16(0x7f80);

	while (i + 8 <= n) {
		size_t end = n - i < 4096 ? n : i + 4096;
		__m128i hit = _mm_setzero_si128();
		for (; i + 8 <= end; i += 8) {
			__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + 2 * i));
			hit = _mm_or_si128(hit, _mm_cmpeq_epi16(_mm_and_si128(v, m), m));
		}
		if (_mm_movemask_epi8(hit))
			return true;
	}
#endif
	for (; i < n; i++)
		if ((p[2 * i + 1] & 0x7fu) == 0x7fu && (p[2 * i] & 0x80u))
			return true;
	return false;
}

int hb_em_check_bf16_record(const struct hb_em_layout *l, uint32_t layer,
			    uint32_t expert, const uint8_t *record,
			    struct hb_error *err)
{
	const struct hb_em_layer *ly;

	if (layer >= l->layer_count)
		return state_error(err, "layer outside the layout");
	if (l->codec->id != HB_EM_CODEC_BF16)
		return hb_error_set(err, HB_ERR_INVALID, "expert_store.codec",
				    "raw bf16 input needs the bf16 codec, the "
				    "layout uses %s", l->codec->name);
	ly = &l->layers[layer];
	for (unsigned r = 0; r < HB_EM_ROLES; r++) {
		const struct hb_em_component *k = &ly->comp[r];
		const uint8_t *m = record + k->record_offset;
		size_t bytes = (size_t)k->expert_bytes;

		if (!any_nonfinite_bf16(m, bytes / 2))
			continue;
		/* exponent all ones: infinity or NaN, refused as in put_f32 */
		for (size_t i = 1; i < bytes; i += 2) {
			if ((m[i] & 0x7fu) == 0x7fu && (m[i - 1] & 0x80u)) {
				char f[HB_ERROR_FIELD_MAX], field[HB_ERROR_FIELD_MAX];
				weights_field(field, sizeof(field), layer, expert, r);
				snprintf(f, sizeof(f), "%s[%zu]", field, i / 2);
				return hb_error_set(err, HB_ERR_NONFINITE, f,
						    "bfloat16 0x%02x%02x is not finite",
						    m[i], m[i - 1]);
			}
		}
	}
	return HB_OK;
}

int hb_em_writer_put_bf16(struct hb_em_writer *w, uint32_t layer,
			  uint32_t expert, const uint8_t *gate,
			  const uint8_t *up, const uint8_t *down,
			  struct hb_error *err)
{
	const uint8_t *m[HB_EM_ROLES] = {gate, up, down};
	const struct hb_em_layer *ly;
	int rc = check_next(w, layer, expert, err);

	if (rc)
		return rc;
	if (w->layout.codec->id != HB_EM_CODEC_BF16)
		return hb_error_set(err, HB_ERR_INVALID, "expert_store.codec",
				    "raw bf16 input needs the bf16 codec, the "
				    "layout uses %s", w->layout.codec->name);
	ly = &w->layout.layers[layer];
	/* w->record is scratch until commit_record: a refusal leaves the
	 * file and the writer's position as they were */
	for (unsigned r = 0; r < HB_EM_ROLES; r++)
		memcpy(w->record + ly->comp[r].record_offset, m[r],
		       (size_t)ly->comp[r].expert_bytes);
	rc = hb_em_check_bf16_record(&w->layout, layer, expert, w->record, err);
	return rc ? rc : commit_record(w, err);
}

int hb_em_writer_finish(struct hb_em_writer *w, struct hb_em_layout *out,
			struct hb_error *err)
{
	uint64_t meta = hb_em_layout_meta_bytes(&w->layout);
	uint8_t *buf;
	int rc;

	if (out)
		memset(out, 0, sizeof(*out));
	if (w->failed || w->finished || !w->record)
		return state_error(err, state_name(w));
	if (w->next_layer != w->layout.layer_count ||
	    w->pos != w->layout.store_size)
		return hb_error_diag(err, hb_em_diag_id(HB_EM_DIAG_WRITER_STATE),
				     HB_ERR_INVALID, "expert_store.writer", false,
				     0, "store incomplete: next is layer %" PRIu32
				     " expert %" PRIu32 " of %" PRIu32 " x %" PRIu32,
				     w->next_layer, w->next_expert,
				     w->layout.layer_count, w->layout.expert_count);
	hb_sha256_final(&w->payload, w->layout.payload_sha256);
	buf = calloc(1, (size_t)w->layout.data_offset);
	if (!buf) {
		w->failed = true;
		return hb_error_set(err, HB_ERR_NOMEM, "expert_store.header",
				    "cannot allocate %" PRIu64 " bytes",
				    w->layout.data_offset);
	}
	/* header, descriptors and the zero gap up to the data, in one write */
	rc = hb_em_serialise(&w->layout, buf, (size_t)meta, err);
	if (!rc)
		rc = hb_pwrite_full(w->fd, buf, (size_t)w->layout.data_offset,
				    w->base, "expert_store.header", err);
	free(buf);
	if (rc) {
		w->failed = true;
		return rc;
	}
	w->finished = true;
	return out ? layout_copy(out, &w->layout, err) : HB_OK;
}

int hb_em_verify_payload(int fd, uint64_t base, const struct hb_em_layout *l,
			 struct hb_error *err)
{
	uint8_t digest[HB_SHA256_BYTES];
	struct hb_sha256 s;
	uint64_t off, end;
	uint8_t *buf;
	int rc = HB_OK;

	if (!hb_offset_ok(base, l->store_size) || l->data_offset > l->store_size)
		return hb_error_diag(err, hb_em_diag_id(HB_EM_DIAG_OVERFLOW),
				     HB_ERR_OVERFLOW, "expert_store", false, 0,
				     "store extent overflows");
	buf = malloc(VERIFY_CHUNK);
	if (!buf)
		return hb_error_set(err, HB_ERR_NOMEM, "expert_store.payload",
				    "cannot allocate the read buffer");
	hb_sha256_init(&s);
	end = base + l->store_size;
	for (off = base + l->data_offset; off < end && !rc;) {
		size_t n = end - off < VERIFY_CHUNK ? (size_t)(end - off)
						    : VERIFY_CHUNK;
		rc = hb_pread_full(fd, buf, n, off, "expert_store.payload", err);
		if (!rc) {
			hb_sha256_update(&s, buf, n);
			off += n;
		}
	}
	free(buf);
	if (rc == HB_ERR_SHORT && err && err->code == HB_ERR_SHORT && !err->id)
		err->id = hb_em_diag_id(HB_EM_DIAG_TRUNCATED);
	if (rc)
		return rc;
	hb_sha256_final(&s, digest);
	if (memcmp(digest, l->payload_sha256, HB_SHA256_BYTES) != 0)
		return hb_error_diag(err, hb_em_diag_id(HB_EM_DIAG_PAYLOAD_DIGEST),
				     HB_ERR_DIGEST,
				     "expert_store.header.payload_sha256", true,
				     128, "payload SHA-256 does not match the "
				     "payload bytes");
	return HB_OK;
}

int hb_em_record_span(const struct hb_em_layout *l, uint32_t layer,
		      uint32_t expert, int role, uint64_t *offset,
		      uint64_t *len, struct hb_error *err)
{
	const struct hb_em_layer *ly;
	uint64_t at;

	if (!l->layers || layer >= l->layer_count || expert >= l->expert_count ||
	    role < HB_EM_RECORD || role >= HB_EM_ROLES)
		return hb_error_diag(err, hb_em_diag_id(HB_EM_DIAG_RECORD_BOUNDS),
				     HB_ERR_INVALID, "expert_store.record", false,
				     0, "layer %" PRIu32 " expert %" PRIu32
				     " role %d is outside %" PRIu32 " x %" PRIu32
				     " x 3", layer, expert, role, l->layer_count,
				     l->expert_count);
	ly = &l->layers[layer];
	if (hb_mul_u64(expert, ly->record_bytes, &at) ||
	    hb_add_u64(at, ly->data_offset, &at))
		return hb_error_diag(err, hb_em_diag_id(HB_EM_DIAG_OVERFLOW),
				     HB_ERR_OVERFLOW, "expert_store.record", false,
				     0, "record offset overflows");
	if (role == HB_EM_RECORD) {
		*offset = at;
		*len = ly->record_bytes;
	} else {
		*offset = at + ly->comp[role].record_offset; /* inside record */
		*len = ly->comp[role].expert_bytes;
	}
	return HB_OK;
}

int hb_em_record_read(int fd, uint64_t base, const struct hb_em_layout *l,
		      uint32_t layer, uint32_t expert, int role, void *buf,
		      size_t buf_len, size_t *got, struct hb_error *err)
{
	uint64_t off = 0, len = 0;
	int rc = hb_em_record_span(l, layer, expert, role, &off, &len, err);

	if (rc)
		return rc;
	if (len > buf_len)
		return hb_error_diag(err, hb_em_diag_id(HB_EM_DIAG_RECORD_BOUNDS),
				     HB_ERR_INVALID, "expert_store.record", false,
				     0, "buffer of %zu bytes, %" PRIu64 " needed",
				     buf_len, len);
	if (!hb_offset_ok(base, off))
		return hb_error_diag(err, hb_em_diag_id(HB_EM_DIAG_OVERFLOW),
				     HB_ERR_OVERFLOW, "expert_store.record", false,
				     0, "record offset overflows");
	rc = hb_pread_full(fd, buf, (size_t)len, base + off,
			   "expert_store.record", err);
	if (rc == HB_ERR_SHORT && err && err->code == HB_ERR_SHORT && !err->id)
		err->id = hb_em_diag_id(HB_EM_DIAG_TRUNCATED);
	if (!rc && got)
		*got = (size_t)len;
	return rc;
}
