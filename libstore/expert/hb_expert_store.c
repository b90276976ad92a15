/*
 * hb_expert_store.c: ExpertMajor v2 layout, serialisation and validation.
 *
 * Owns the codec table, the layout plan, the field-by-field serialiser and
 * the parser that reads header and descriptors and validates every field
 * against the plan its expected geometry and declared codec imply.  It does
 * not read payload bytes (hb_expert_writer.c verifies and reads records) and
 * does not decide which geometry is expected (the caller's profile does).
 *
 * Validation order is fixed so that one bad field gives one stable id: the
 * header's identity and counts, the codec, the data region, each descriptor
 * in position order (identity, reserved bytes, components, sizes,
 * placement), the data size, and the manifest digest last, since any edit
 * also breaks the digest and the specific cause is what the user needs.
 */
#include "hb_base.h"
#include "hb_expert_store.h"
#include "hb_checked.h"
#include "hb_io.h"

#include <sys/stat.h>

static const struct hb_em_codec codecs[] = {
	{HB_EM_CODEC_BF16, "bf16", "exact-reference", HB_EM_STORAGE_GGML, 0,
	 HB_EM_GGML_BF16, 1, 2},
	{HB_EM_CODEC_AFFINE4_G64, "mlx-affine4-g64",
	 "phase2-structural-not-release-qualified", HB_EM_STORAGE_MLX_AFFINE4,
	 64, HB_EM_GGML_Q4_K, 64, 36},
};

static const char *const role_names[HB_EM_ROLES] = {"gate", "up", "down"};

static const struct {
	const char *id;
	const char *desc;
} diags[] = {
#define HB_EM_ROW(e, id, desc) {id, desc},
	HB_EM_DIAGNOSTICS(HB_EM_ROW)
#undef HB_EM_ROW
};

const char *hb_em_diag_id(enum hb_em_diag d)
{
	return (unsigned)d < HB_EM_DIAG_COUNT ? diags[d].id : NULL;
}

const char *hb_em_diag_desc(enum hb_em_diag d)
{
	return (unsigned)d < HB_EM_DIAG_COUNT ? diags[d].desc : NULL;
}

/* Record diagnostic d at a store-relative byte offset. */
static int diag(struct hb_error *err, enum hb_em_diag d, int code,
		const char *field, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
static int diag(struct hb_error *err, enum hb_em_diag d, int code,
		const char *field, uint64_t off, const char *fmt, ...)
{
	char msg[HB_ERROR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return hb_error_diag(err, diags[d].id, code, field, off != UINT64_MAX,
			     off, "%s", msg);
}

const struct hb_em_codec *hb_em_codec_get(enum hb_em_codec_id id)
{
	for (size_t i = 0; i < HB_ARRAY_LEN(codecs); i++)
		if (codecs[i].id == id)
			return &codecs[i];
	return NULL;
}

const struct hb_em_codec *hb_em_codec_find(uint32_t storage_format,
					   uint32_t group_size)
{
	for (size_t i = 0; i < HB_ARRAY_LEN(codecs); i++)
		if (codecs[i].storage_format == storage_format &&
		    codecs[i].group_size == group_size)
			return &codecs[i];
	return NULL;
}

void hb_em_geometry_qwen4exp(struct hb_em_geometry *g)
{
	g->layers = 48;
	g->experts = 512;
	g->experts_used = 10;
	g->hidden = 2560;
	g->intermediate = 640;
}

int hb_em_geometry_check(const struct hb_em_geometry *g, struct hb_error *err)
{
	if (g->layers == 0 || g->layers > HB_EM_MAX_LAYERS)
		return diag(err, HB_EM_DIAG_LAYER_COUNT, HB_ERR_CONTRACT,
			    "expert_store.geometry.layers", UINT64_MAX,
			    "%" PRIu32 " layers; 1..%u supported", g->layers,
			    HB_EM_MAX_LAYERS);
	if (g->experts == 0 || g->experts > HB_EM_MAX_EXPERTS)
		return diag(err, HB_EM_DIAG_EXPERT_COUNT, HB_ERR_CONTRACT,
			    "expert_store.geometry.experts", UINT64_MAX,
			    "%" PRIu32 " experts; 1..%u supported", g->experts,
			    HB_EM_MAX_EXPERTS);
	if (g->experts_used == 0 || g->experts_used > g->experts)
		return diag(err, HB_EM_DIAG_EXPERTS_USED, HB_ERR_CONTRACT,
			    "expert_store.geometry.experts_used", UINT64_MAX,
			    "%" PRIu32 " experts used of %" PRIu32,
			    g->experts_used, g->experts);
	if (g->hidden == 0 || g->intermediate == 0)
		return diag(err, HB_EM_DIAG_GEOMETRY, HB_ERR_CONTRACT,
			    "expert_store.geometry", UINT64_MAX,
			    "hidden and intermediate widths must be non-zero");
	return HB_OK;
}

/* dim0/dim1 of a role: gate/up read hidden and write intermediate rows. */
static void role_dims(const struct hb_em_geometry *g, unsigned role,
		      uint64_t *dim0, uint64_t *dim1)
{
	*dim0 = role == HB_EM_DOWN ? g->intermediate : g->hidden;
	*dim1 = role == HB_EM_DOWN ? g->hidden : g->intermediate;
}

/* Bytes of one expert's matrix [dim1][dim0] in codec c; refuses a block
 * that does not tile dim0 exactly (never padded). */
static int matrix_bytes(const struct hb_em_codec *c, unsigned role,
			uint64_t dim0, uint64_t dim1, const char *field,
			uint64_t *out, struct hb_error *err)
{
	uint64_t row;

	if (dim0 % c->block_elements != 0)
		return diag(err, HB_EM_DIAG_CODEC_TILING, HB_ERR_UNSUPPORTED,
			    field, UINT64_MAX,
			    "%s input width %" PRIu64 " is not a multiple of "
			    "the %s block of %" PRIu32 " (never padded)",
			    role_names[role], dim0, c->name, c->block_elements);
	if (hb_mul_u64(dim0 / c->block_elements, c->block_bytes, &row) ||
	    hb_mul_u64(row, dim1, out))
		return diag(err, HB_EM_DIAG_OVERFLOW, HB_ERR_OVERFLOW, field,
			    UINT64_MAX, "%s matrix size overflows",
			    role_names[role]);
	return HB_OK;
}

int hb_em_layout_plan(struct hb_em_layout *out, const struct hb_em_geometry *g,
		      enum hb_em_codec_id codec_id, struct hb_error *err)
{
	const struct hb_em_codec *c = hb_em_codec_get(codec_id);
	struct hb_em_component comp[HB_EM_ROLES];
	uint64_t record = 0, layer_bytes, cursor;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!c)
		return hb_error_set(err, HB_ERR_INVALID, "expert_store.codec",
				    "unknown codec id %d", (int)codec_id);
	rc = hb_em_geometry_check(g, err);
	if (rc)
		return rc;
	for (unsigned r = 0; r < HB_EM_ROLES; r++) {
		char field[HB_ERROR_FIELD_MAX];
		struct hb_em_component *k = &comp[r];

		snprintf(field, sizeof(field), "expert_store.component[%s].dim0",
			 role_names[r]);
		memset(k, 0, sizeof(*k));
		k->role = r;
		k->element_type = c->element_type;
		k->ndim = 3;
		k->block_elements = c->block_elements;
		role_dims(g, r, &k->dim[0], &k->dim[1]);
		k->dim[2] = g->experts;
		rc = matrix_bytes(c, r, k->dim[0], k->dim[1], field,
				  &k->expert_bytes, err);
		if (rc)
			return rc;
		k->record_offset = record;
		if (hb_add_u64(record, k->expert_bytes, &record))
			return diag(err, HB_EM_DIAG_OVERFLOW, HB_ERR_OVERFLOW,
				    "expert_store.record_bytes", UINT64_MAX,
				    "record size overflows");
	}
	if (hb_mul_u64(record, g->experts, &layer_bytes))
		return diag(err, HB_EM_DIAG_OVERFLOW, HB_ERR_OVERFLOW,
			    "expert_store.layer_bytes", UINT64_MAX,
			    "layer size overflows");
	out->layers = calloc(g->layers, sizeof(*out->layers));
	if (!out->layers)
		return hb_error_set(err, HB_ERR_NOMEM, "expert_store.layers",
				    "cannot allocate %" PRIu32 " descriptors",
				    g->layers);
	out->family = HB_EM_FAMILY_QWEN4EXP;
	out->experts_used = g->experts_used;
	out->layer_count = g->layers;
	out->expert_count = g->experts;
	out->descriptor_count = g->layers;
	out->descriptor_bytes = (uint64_t)HB_EM_DESCRIPTOR_BYTES * g->layers;
	out->descriptor_offset = HB_EM_HEADER_BYTES;
	out->storage_format = c->storage_format;
	out->group_size = c->group_size;
	out->codec = c;
	out->record_bytes = record;
	/* Cannot overflow: layers <= HB_EM_MAX_LAYERS. */
	out->data_offset = HB_EM_HEADER_BYTES + out->descriptor_bytes;
	out->data_offset = (out->data_offset + HB_EM_ALIGNMENT - 1) /
			   HB_EM_ALIGNMENT * HB_EM_ALIGNMENT;
	cursor = out->data_offset;
	for (uint32_t l = 0; l < g->layers; l++) {
		struct hb_em_layer *ly = &out->layers[l];

		if (l > 0 && hb_align_up_u64(cursor, HB_EM_ALIGNMENT, &cursor))
			goto overflow;
		ly->layer = l;
		ly->expert_count = g->experts;
		ly->record_bytes = record;
		ly->data_offset = cursor;
		ly->data_size = layer_bytes;
		memcpy(ly->comp, comp, sizeof(comp));
		if (hb_add_u64(cursor, layer_bytes, &cursor))
			goto overflow;
	}
	out->store_size = cursor;
	out->data_size = cursor - out->data_offset;
	if (!hb_offset_ok(0, out->store_size))
		goto overflow;
	return HB_OK;
overflow:
	hb_em_layout_release(out);
	return diag(err, HB_EM_DIAG_OVERFLOW, HB_ERR_OVERFLOW,
		    "expert_store.store_size", UINT64_MAX,
		    "store size overflows");
}

void hb_em_layout_release(struct hb_em_layout *l)
{
	if (!l)
		return;
	free(l->layers);
	l->layers = NULL;
}

uint64_t hb_em_layout_meta_bytes(const struct hb_em_layout *l)
{
	return HB_EM_HEADER_BYTES + (uint64_t)HB_EM_DESCRIPTOR_BYTES * l->layer_count;
}

/* ---------------------------------------------------------------- bytes */

static void put32(uint8_t *p, uint32_t v)
{
	for (unsigned i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v = 0;
	for (unsigned i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void manifest_digest(const uint8_t *header, const uint8_t *desc,
			    uint64_t desc_bytes, uint8_t out[HB_SHA256_BYTES])
{
	uint8_t h[HB_EM_HEADER_BYTES];
	struct hb_sha256 s;

	memcpy(h, header, sizeof(h));
	memset(h + HB_EM_MANIFEST_DIGEST_OFFSET, 0, HB_SHA256_BYTES);
	hb_sha256_init(&s);
	hb_sha256_update(&s, h, sizeof(h));
	hb_sha256_update(&s, desc, (size_t)desc_bytes);
	hb_sha256_final(&s, out);
}

int hb_em_serialise(struct hb_em_layout *l, uint8_t *buf, size_t len,
		    struct hb_error *err)
{
	uint64_t meta = hb_em_layout_meta_bytes(l);
	uint8_t *h = buf;

	if (!l->layers || l->layer_count > HB_EM_MAX_LAYERS)
		return hb_error_set(err, HB_ERR_INVALID, "expert_store.layers",
				    "layout has no descriptors");
	if (len < meta)
		return hb_error_set(err, HB_ERR_INVALID, "expert_store.buffer",
				    "buffer of %zu bytes, %" PRIu64 " needed",
				    len, meta);
	memset(buf, 0, (size_t)meta);
	memcpy(h, HB_EM_MAGIC, 8);
	put32(h + 8, HB_EM_VERSION);
	put32(h + 12, HB_EM_HEADER_BYTES);
	put32(h + 16, l->family);
	put32(h + 20, l->experts_used);
	put32(h + 24, l->layer_count);
	put32(h + 28, l->expert_count);
	put64(h + 32, l->source_tensors);
	put64(h + 40, l->descriptor_count);
	put64(h + 48, l->descriptor_bytes);
	put64(h + 56, l->descriptor_offset);
	put64(h + 64, l->data_offset);
	put64(h + 72, l->data_size);
	put64(h + 80, l->store_size);
	put64(h + 88, l->source_size);
	memcpy(h + 96, l->source_sha256, HB_SHA256_BYTES);
	memcpy(h + 128, l->payload_sha256, HB_SHA256_BYTES);
	put32(h + 160, l->storage_format);
	put32(h + 164, l->group_size);
	/* 168..199 manifest digest (below), 200..255 reserved zero */
	for (uint32_t i = 0; i < l->layer_count; i++) {
		const struct hb_em_layer *ly = &l->layers[i];
		uint8_t *d = buf + HB_EM_HEADER_BYTES +
			     (size_t)HB_EM_DESCRIPTOR_BYTES * i;

		put32(d, ly->layer);
		put32(d + 4, ly->expert_count);
		put64(d + 8, ly->record_bytes);
		put64(d + 16, ly->data_offset);
		put64(d + 24, ly->data_size);
		for (unsigned r = 0; r < HB_EM_ROLES; r++) {
			const struct hb_em_component *k = &ly->comp[r];
			uint8_t *c = d + HB_EM_COMPONENT_OFFSET +
				     HB_EM_COMPONENT_BYTES * r;

			put32(c, k->role);
			put32(c + 4, k->element_type);
			put32(c + 8, k->ndim);
			put32(c + 12, k->block_elements);
			put64(c + 16, k->dim[0]);
			put64(c + 24, k->dim[1]);
			put64(c + 32, k->dim[2]);
			put64(c + 40, k->expert_bytes);
			put64(c + 48, k->record_offset);
		}
		/* 200..223 reserved zero */
	}
	manifest_digest(h, buf + HB_EM_HEADER_BYTES, l->descriptor_bytes,
			l->manifest_sha256);
	memcpy(h + HB_EM_MANIFEST_DIGEST_OFFSET, l->manifest_sha256,
	       HB_SHA256_BYTES);
	return HB_OK;
}

/* ---------------------------------------------------------------- parse */

static bool all_zero(const uint8_t *p, size_t n, size_t *first)
{
	for (size_t i = 0; i < n; i++)
		if (p[i]) {
			*first = i;
			return false;
		}
	return true;
}

/* Header fields that decide how many descriptor bytes to read. */
static int check_header(const uint8_t *h, const struct hb_em_geometry *exp,
			struct hb_error *err)
{
	uint32_t u;
	uint64_t v;
	size_t z;

	if (memcmp(h, HB_EM_MAGIC, 8) != 0)
		return diag(err, HB_EM_DIAG_MAGIC, HB_ERR_FORMAT,
			    "expert_store.header.magic", 0,
			    "magic is not \"DS4EXPV2\"");
	if ((u = get32(h + 8)) != HB_EM_VERSION)
		return diag(err, HB_EM_DIAG_VERSION, HB_ERR_FORMAT,
			    "expert_store.header.version", 8,
			    "version %" PRIu32 ", expected 2", u);
	if ((u = get32(h + 12)) != HB_EM_HEADER_BYTES)
		return diag(err, HB_EM_DIAG_HEADER_BYTES, HB_ERR_FORMAT,
			    "expert_store.header.header_bytes", 12,
			    "header bytes %" PRIu32 ", expected 256", u);
	if ((u = get32(h + 16)) != HB_EM_FAMILY_QWEN4EXP)
		return diag(err, HB_EM_DIAG_FAMILY, HB_ERR_CONTRACT,
			    "expert_store.header.family", 16,
			    "family %" PRIu32 ", expected 4 (Qwen4Exp)", u);
	if ((u = get32(h + 24)) != exp->layers || u > HB_EM_MAX_LAYERS)
		return diag(err, HB_EM_DIAG_LAYER_COUNT, HB_ERR_CONTRACT,
			    "expert_store.header.layer_count", 24,
			    "%" PRIu32 " layers, expected %" PRIu32, u,
			    exp->layers);
	if ((u = get32(h + 28)) != exp->experts || u > HB_EM_MAX_EXPERTS)
		return diag(err, HB_EM_DIAG_EXPERT_COUNT, HB_ERR_CONTRACT,
			    "expert_store.header.expert_count", 28,
			    "%" PRIu32 " experts, expected %" PRIu32, u,
			    exp->experts);
	if ((u = get32(h + 20)) != exp->experts_used)
		return diag(err, HB_EM_DIAG_EXPERTS_USED, HB_ERR_CONTRACT,
			    "expert_store.header.experts_used", 20,
			    "%" PRIu32 " experts used, expected %" PRIu32, u,
			    exp->experts_used);
	if ((v = get64(h + 40)) != exp->layers)
		return diag(err, HB_EM_DIAG_DESCRIPTOR_COUNT, HB_ERR_FORMAT,
			    "expert_store.header.descriptor_count", 40,
			    "%" PRIu64 " descriptors for %" PRIu32 " layers", v,
			    exp->layers);
	if ((v = get64(h + 48)) != (uint64_t)HB_EM_DESCRIPTOR_BYTES * exp->layers)
		return diag(err, HB_EM_DIAG_DESCRIPTOR_BYTES, HB_ERR_FORMAT,
			    "expert_store.header.descriptor_bytes", 48,
			    "%" PRIu64 " descriptor bytes, expected 224 x %" PRIu32,
			    v, exp->layers);
	if ((v = get64(h + 56)) != HB_EM_HEADER_BYTES)
		return diag(err, HB_EM_DIAG_DESCRIPTOR_OFFSET, HB_ERR_FORMAT,
			    "expert_store.header.descriptor_offset", 56,
			    "descriptor offset %" PRIu64 ", expected 256", v);
	if (!hb_em_codec_find(get32(h + 160), get32(h + 164)))
		return diag(err, HB_EM_DIAG_STORAGE, HB_ERR_UNSUPPORTED,
			    "expert_store.header.storage_format", 160,
			    "storage format %" PRIu32 " with group size %" PRIu32
			    " names no supported codec (bf16 is 0/0, MLX "
			    "affine4 is 1/64)", get32(h + 160), get32(h + 164));
	if (!all_zero(h + 200, HB_EM_HEADER_BYTES - 200, &z))
		return diag(err, HB_EM_DIAG_RESERVED_NONZERO, HB_ERR_FORMAT,
			    "expert_store.header.reserved", 200 + z,
			    "reserved header byte %zu is not zero", 200 + z);
	return HB_OK;
}

/* Fields of the data region; plan is the layout exp and the codec imply. */
static int check_region(const uint8_t *h, uint64_t extent,
			const struct hb_em_layout *plan, struct hb_error *err)
{
	uint64_t doff = get64(h + 64), dsize = get64(h + 72);
	uint64_t ssize = get64(h + 80), end;

	if (doff != plan->data_offset)
		return diag(err, HB_EM_DIAG_DATA_OFFSET, HB_ERR_FORMAT,
			    "expert_store.header.data_offset", 64,
			    "data offset %" PRIu64 ", expected %" PRIu64
			    " (the first 4096-aligned offset after the "
			    "descriptors)", doff, plan->data_offset);
	if (hb_add_u64(doff, dsize, &end))
		return diag(err, HB_EM_DIAG_OVERFLOW, HB_ERR_OVERFLOW,
			    "expert_store.header.data_size", 72,
			    "data offset + data size overflows");
	if (end != ssize)
		return diag(err, HB_EM_DIAG_STORE_SIZE, HB_ERR_FORMAT,
			    "expert_store.header.store_size", 80,
			    "store size %" PRIu64 " is not data offset + data "
			    "size = %" PRIu64, ssize, end);
	if (ssize != extent)
		return diag(err, HB_EM_DIAG_STORE_SIZE, HB_ERR_FORMAT,
			    "expert_store.header.store_size", 80,
			    "store size %" PRIu64 " differs from the %" PRIu64
			    " bytes the container gives the store", ssize,
			    extent);
	return HB_OK;
}

static int check_component(const uint8_t *c, uint32_t li, unsigned r,
			   const struct hb_em_component *want, uint64_t at,
			   struct hb_error *err)
{
	static const struct {
		const char *name;
		unsigned off;
		bool wide;
		bool geometry;
	} fields[] = {
		{"role", 0, false, false}, {"element_type", 4, false, false},
		{"ndim", 8, false, false}, {"block_elements", 12, false, false},
		{"dim0", 16, true, true}, {"dim1", 24, true, true},
		{"dim2", 32, true, true}, {"expert_bytes", 40, true, false},
		{"record_offset", 48, true, false},
	};
	const uint64_t wants[] = {
		want->role, want->element_type, want->ndim,
		want->block_elements, want->dim[0], want->dim[1], want->dim[2],
		want->expert_bytes, want->record_offset,
	};

	for (size_t i = 0; i < HB_ARRAY_LEN(fields); i++) {
		uint64_t got = fields[i].wide ? get64(c + fields[i].off)
					      : get32(c + fields[i].off);
		char field[HB_ERROR_FIELD_MAX];

		if (got == wants[i])
			continue;
		snprintf(field, sizeof(field),
			 "expert_store.descriptor[%" PRIu32 "].component[%s].%s",
			 li, role_names[r], fields[i].name);
		return diag(err,
			    fields[i].geometry ? HB_EM_DIAG_GEOMETRY
					       : HB_EM_DIAG_COMPONENT,
			    HB_ERR_CONTRACT, field, at + fields[i].off,
			    "%" PRIu64 ", expected %" PRIu64, got, wants[i]);
	}
	return HB_OK;
}

static int check_descriptor(const uint8_t *d, uint32_t li,
			    const uint8_t *h, const struct hb_em_layout *plan,
			    uint64_t *prev_end, struct hb_error *err)
{
	const struct hb_em_layer *want = &plan->layers[li];
	uint64_t at = HB_EM_HEADER_BYTES + (uint64_t)HB_EM_DESCRIPTOR_BYTES * li;
	uint64_t record = 0, size, off, expected_off, store = get64(h + 80);
	char field[HB_ERROR_FIELD_MAX];
	uint32_t u;
	size_t z;
	int rc;

#define FIELD(name) (snprintf(field, sizeof(field), \
		"expert_store.descriptor[%" PRIu32 "].%s", li, name), field)
	if ((u = get32(d)) != li)
		return diag(err, HB_EM_DIAG_LAYER_INDEX, HB_ERR_CONTRACT,
			    FIELD("layer"), at,
			    "layer index %" PRIu32 " at position %" PRIu32, u, li);
	if ((u = get32(d + 4)) != get32(h + 28))
		return diag(err, HB_EM_DIAG_LAYER_EXPERTS, HB_ERR_CONTRACT,
			    FIELD("expert_count"), at + 4,
			    "%" PRIu32 " experts, header says %" PRIu32, u,
			    get32(h + 28));
	if (!all_zero(d + 200, HB_EM_DESCRIPTOR_BYTES - 200, &z))
		return diag(err, HB_EM_DIAG_RESERVED_NONZERO, HB_ERR_FORMAT,
			    FIELD("reserved"), at + 200 + z,
			    "reserved descriptor byte %zu is not zero", 200 + z);
	for (unsigned r = 0; r < HB_EM_ROLES; r++) {
		uint64_t c = HB_EM_COMPONENT_OFFSET + HB_EM_COMPONENT_BYTES * r;
		rc = check_component(d + c, li, r, &want->comp[r], at + c, err);
		if (rc)
			return rc;
		record += want->comp[r].expert_bytes; /* checked by the plan */
	}
	if (get64(d + 8) != record)
		return diag(err, HB_EM_DIAG_RECORD_BYTES, HB_ERR_CONTRACT,
			    FIELD("record_bytes"), at + 8,
			    "record bytes %" PRIu64 ", components sum to %" PRIu64,
			    get64(d + 8), record);
	size = get64(d + 24);
	if (size != want->data_size)
		return diag(err, HB_EM_DIAG_LAYER_SIZE, HB_ERR_CONTRACT,
			    FIELD("data_size"), at + 24,
			    "data size %" PRIu64 ", record bytes x experts = %"
			    PRIu64, size, want->data_size);
	off = get64(d + 16);
	if (off % HB_EM_ALIGNMENT != 0)
		return diag(err, HB_EM_DIAG_DESCRIPTOR_ALIGN, HB_ERR_FORMAT,
			    FIELD("data_offset"), at + 16,
			    "data offset %" PRIu64 " is not 4096-aligned", off);
	if (off < get64(h + 64) || !hb_range_inside(off, size, store))
		return diag(err, HB_EM_DIAG_DESCRIPTOR_EXTENT, HB_ERR_FORMAT,
			    FIELD("data_offset"), at + 16,
			    "layer data [%" PRIu64 ", +%" PRIu64 ") is outside "
			    "the data region [%" PRIu64 ", %" PRIu64 ")", off,
			    size, get64(h + 64), store);
	if (off < *prev_end)
		return diag(err, HB_EM_DIAG_DESCRIPTOR_OVERLAP, HB_ERR_FORMAT,
			    FIELD("data_offset"), at + 16,
			    "layer data at %" PRIu64 " overlaps the previous "
			    "layer, which ends at %" PRIu64, off, *prev_end);
	/* prev_end + size stays inside store (checked above), so no overflow */
	expected_off = (*prev_end + HB_EM_ALIGNMENT - 1) / HB_EM_ALIGNMENT *
		       HB_EM_ALIGNMENT;
	if (off != expected_off)
		return diag(err, HB_EM_DIAG_DESCRIPTOR_GAP, HB_ERR_FORMAT,
			    FIELD("data_offset"), at + 16,
			    "layer data at %" PRIu64 ", expected %" PRIu64
			    " (only alignment padding may precede a layer)",
			    off, expected_off);
#undef FIELD
	*prev_end = off + size;
	return HB_OK;
}

/* Validate header h and descriptors d (desc bytes already bounded). */
static int parse_meta(const uint8_t *h, const uint8_t *d, uint64_t extent,
		      const struct hb_em_geometry *exp,
		      struct hb_em_layout *out, struct hb_error *err)
{
	const struct hb_em_codec *c = hb_em_codec_find(get32(h + 160),
						       get32(h + 164));
	uint8_t digest[HB_SHA256_BYTES];
	uint64_t prev_end;
	int rc;

	/* The plan of the expected geometry in the declared codec; it refuses
	 * a codec that does not tile the geometry (em-codec-tiling). */
	rc = hb_em_layout_plan(out, exp, c->id, err);
	if (rc)
		return rc;
	rc = check_region(h, extent, out, err);
	prev_end = out->data_offset;
	for (uint32_t l = 0; !rc && l < exp->layers; l++)
		rc = check_descriptor(d + (size_t)HB_EM_DESCRIPTOR_BYTES * l, l,
				      h, out, &prev_end, err);
	if (!rc && prev_end != get64(h + 80))
		rc = diag(err, HB_EM_DIAG_DATA_SIZE, HB_ERR_FORMAT,
			  "expert_store.header.data_size", 72,
			  "data size %" PRIu64 " but the last layer ends at %"
			  PRIu64 " of %" PRIu64, get64(h + 72), prev_end,
			  get64(h + 80));
	if (!rc) {
		manifest_digest(h, d, out->descriptor_bytes, digest);
		if (memcmp(digest, h + HB_EM_MANIFEST_DIGEST_OFFSET,
			   HB_SHA256_BYTES) != 0)
			rc = diag(err, HB_EM_DIAG_MANIFEST_DIGEST, HB_ERR_DIGEST,
				  "expert_store.header.manifest_sha256",
				  HB_EM_MANIFEST_DIGEST_OFFSET,
				  "manifest SHA-256 does not match the header "
				  "and descriptors");
	}
	if (rc) {
		hb_em_layout_release(out);
		return rc;
	}
	/* Every field equals the plan; the digests and source come from h. */
	out->source_tensors = get64(h + 32);
	out->source_size = get64(h + 88);
	memcpy(out->source_sha256, h + 96, HB_SHA256_BYTES);
	memcpy(out->payload_sha256, h + 128, HB_SHA256_BYTES);
	memcpy(out->manifest_sha256, h + HB_EM_MANIFEST_DIGEST_OFFSET,
	       HB_SHA256_BYTES);
	return HB_OK;
}

int hb_em_parse_buf(const uint8_t *buf, size_t len, uint64_t extent,
		    const struct hb_em_geometry *expect,
		    struct hb_em_layout *out, struct hb_error *err)
{
	int rc;

	memset(out, 0, sizeof(*out));
	rc = hb_em_geometry_check(expect, err);
	if (rc)
		return rc;
	if (len < HB_EM_HEADER_BYTES || extent < HB_EM_HEADER_BYTES)
		return diag(err, HB_EM_DIAG_TRUNCATED, HB_ERR_SHORT,
			    "expert_store.header", 0,
			    "%zu bytes (extent %" PRIu64 ") cannot hold the "
			    "256-byte header", len, extent);
	rc = check_header(buf, expect, err);
	if (rc)
		return rc;
	/* descriptor bytes were checked against exp->layers <= 128 */
	if (len - HB_EM_HEADER_BYTES < get64(buf + 48) ||
	    extent - HB_EM_HEADER_BYTES < get64(buf + 48))
		return diag(err, HB_EM_DIAG_TRUNCATED, HB_ERR_SHORT,
			    "expert_store.descriptors", HB_EM_HEADER_BYTES,
			    "%zu bytes cannot hold the descriptors", len);
	return parse_meta(buf, buf + HB_EM_HEADER_BYTES, extent, expect, out,
			  err);
}

/* pread that reports a short read as em-truncated and keeps a system
 * error as it is. */
static int read_meta(int fd, void *buf, size_t len, uint64_t base,
		     uint64_t rel, const char *field, struct hb_error *err)
{
	struct hb_error ioerr;
	int rc;

	hb_error_clear(&ioerr);
	rc = hb_pread_full(fd, buf, len, base + rel, field, &ioerr);
	if (rc == HB_ERR_SHORT)
		return diag(err, HB_EM_DIAG_TRUNCATED, HB_ERR_SHORT, field, rel,
			    "file ends inside the %zu bytes at %" PRIu64, len,
			    rel);
	if (rc && err && err->code == HB_OK)
		*err = ioerr;
	return rc;
}

static int parse_fd_relative(int fd, uint64_t base, uint64_t extent,
		   const struct hb_em_geometry *expect, struct hb_em_layout *out,
		   uint64_t *bytes_read, struct hb_error *err)
{
	uint8_t h[HB_EM_HEADER_BYTES];
	uint8_t *d = NULL;
	uint64_t fsize = 0, nd;
	int rc;

	memset(out, 0, sizeof(*out));
	if (bytes_read)
		*bytes_read = 0;
	rc = hb_em_geometry_check(expect, err);
	if (rc)
		return rc;
	rc = hb_file_size(fd, &fsize, "expert_store", err);
	if (rc)
		return rc;
	if (!hb_offset_ok(base, extent) || base > fsize || extent > fsize - base)
		return diag(err, HB_EM_DIAG_TRUNCATED, HB_ERR_SHORT,
			    "expert_store", UINT64_MAX,
			    "file of %" PRIu64 " bytes cannot hold a store of %"
			    PRIu64 " bytes at offset %" PRIu64, fsize, extent,
			    base);
	if (extent < HB_EM_HEADER_BYTES)
		return diag(err, HB_EM_DIAG_TRUNCATED, HB_ERR_SHORT,
			    "expert_store.header", 0,
			    "extent %" PRIu64 " cannot hold the header", extent);
	rc = read_meta(fd, h, sizeof(h), base, 0, "expert_store.header", err);
	if (rc)
		return rc;
	if (bytes_read)
		*bytes_read += sizeof(h);
	rc = check_header(h, expect, err);
	if (rc)
		return rc;
	nd = get64(h + 48); /* == 224 * layers, layers <= 128 */
	if (extent - HB_EM_HEADER_BYTES < nd)
		return diag(err, HB_EM_DIAG_TRUNCATED, HB_ERR_SHORT,
			    "expert_store.descriptors", HB_EM_HEADER_BYTES,
			    "extent %" PRIu64 " cannot hold the descriptors",
			    extent);
	d = malloc((size_t)nd);
	if (!d)
		return hb_error_set(err, HB_ERR_NOMEM, "expert_store.descriptors",
				    "cannot allocate %" PRIu64 " bytes", nd);
	rc = read_meta(fd, d, (size_t)nd, base, HB_EM_HEADER_BYTES,
		       "expert_store.descriptors", err);
	if (!rc) {
		if (bytes_read)
			*bytes_read += nd;
		rc = parse_meta(h, d, extent, expect, out, err);
	}
	free(d);
	return rc;
}

/* Offsets in diagnostics are absolute file offsets, as the PLE reader's. */
int hb_em_parse_fd(int fd, uint64_t base, uint64_t extent,
		   const struct hb_em_geometry *expect, struct hb_em_layout *out,
		   uint64_t *bytes_read, struct hb_error *err)
{
	bool fresh = !err || err->code == HB_OK;
	int rc = parse_fd_relative(fd, base, extent, expect, out, bytes_read, err);

	if (rc && fresh && err && err->has_offset)
		err->offset += base;
	return rc;
}
