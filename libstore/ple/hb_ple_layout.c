/*
 * hb_ple_layout.c: the PLE v1 manifest, page header and row location.
 *
 * This file owns the arithmetic of the store: planning a layout from a spec,
 * serialising the header, directory and page headers field by field,
 * parsing them back with every derived field recomputed and compared, the
 * manifest digest, and the checked row/page/table location.  It does no
 * I/O (hb_ple_reader.c and hb_ple_writer.c do) and no codec arithmetic
 * beyond sizes (hb_affine4.h).
 */
#include "hb_base.h"
#include "codec/hb_affine4.h"
#include "hb_checked.h"
#include "hb_ple_store.h"
#include "hb_sha256.h"

static const char *const diag_ids[] = {
#define HB_PLE_X_ID(e, id, what) id,
	HB_PLE_DIAGS(HB_PLE_X_ID)
#undef HB_PLE_X_ID
};
static const char *const diag_whats[] = {
#define HB_PLE_X_WHAT(e, id, what) what,
	HB_PLE_DIAGS(HB_PLE_X_WHAT)
#undef HB_PLE_X_WHAT
};

const char *hb_ple_diag_id(enum hb_ple_diag d)
{
	return (unsigned)d < HB_PLE_DIAG_COUNT ? diag_ids[d] : NULL;
}

const char *hb_ple_diag_what(enum hb_ple_diag d)
{
	return (unsigned)d < HB_PLE_DIAG_COUNT ? diag_whats[d] : NULL;
}

#define DIAG(err, d, code, field, has_off, off, ...)                        \
	hb_error_diag(err, diag_ids[d], code, field, has_off, off, __VA_ARGS__)

/* ------------------------------------------------------------ bytes */

static void put_u32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* First non-zero byte of [p, p+n), or n. */
static size_t first_nonzero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return i;
	return n;
}

/* ------------------------------------------------------------ codec sizes */

/*
 * at: where the manifest starts in the file, or NULL when the values come
 * from a spec and have no bytes to point at.
 */
static int codec_row_bytes(uint32_t codec_id, uint32_t codec_version,
			   uint32_t group_size, uint32_t row_width,
			   uint32_t *row_bytes, const uint64_t *at,
			   struct hb_error *err)
{
	uint64_t bytes;
	bool ho = at != NULL;
	uint64_t b = at ? *at : 0;

	if (row_width == 0 || row_width > HB_PLE_MAX_ROW_WIDTH)
		return DIAG(err, HB_PLE_DIAG_GEOMETRY, HB_ERR_FORMAT,
			    "ple.manifest.row_width", ho, b + 32,
			    "row width %" PRIu32 " is outside 1..%u", row_width,
			    HB_PLE_MAX_ROW_WIDTH);
	if (codec_id != HB_PLE_CODEC_BF16 && codec_id != HB_PLE_CODEC_AFFINE4)
		return DIAG(err, HB_PLE_DIAG_CODEC, HB_ERR_UNSUPPORTED,
			    "ple.manifest.codec_id", ho, b + 20,
			    "unknown codec id %" PRIu32 " (1 = bf16, 2 = affine4)",
			    codec_id);
	if (codec_version != HB_PLE_CODEC_VERSION)
		return DIAG(err, HB_PLE_DIAG_CODEC, HB_ERR_UNSUPPORTED,
			    "ple.manifest.codec_version", ho, b + 24,
			    "codec version %" PRIu32 " is not %u", codec_version,
			    HB_PLE_CODEC_VERSION);
	if (codec_id == HB_PLE_CODEC_BF16) {
		if (group_size != 0)
			return DIAG(err, HB_PLE_DIAG_CODEC, HB_ERR_UNSUPPORTED,
				    "ple.manifest.group_size", ho, b + 28,
				    "bf16 has no groups, group size must be 0, not %" PRIu32,
				    group_size);
		*row_bytes = row_width * 2u;
		return HB_OK;
	}
	if (!hb_affine4_group_ok(group_size))
		return DIAG(err, HB_PLE_DIAG_CODEC, HB_ERR_UNSUPPORTED,
			    "ple.manifest.group_size", ho, b + 28,
			    "affine4 group size %" PRIu32 " is not 32, 64 or 128",
			    group_size);
	if (row_width % group_size != 0)
		return DIAG(err, HB_PLE_DIAG_CODEC_TILING, HB_ERR_UNSUPPORTED,
			    "ple.manifest.group_size", ho, b + 28,
			    "affine4 group %" PRIu32 " does not tile row width %" PRIu32
			    " (rows are never padded)", group_size, row_width);
	if (hb_affine4_encoded_size(row_width, group_size, &bytes, NULL) ||
	    bytes > UINT32_MAX)
		return DIAG(err, HB_PLE_DIAG_CODEC, HB_ERR_INTERNAL,
			    "ple.manifest.group_size", ho, b + 28,
			    "affine4 cannot size a row of %" PRIu32, row_width);
	*row_bytes = (uint32_t)bytes;
	return HB_OK;
}

int hb_ple_codec_row_bytes(uint32_t codec_id, uint32_t codec_version,
			   uint32_t group_size, uint32_t row_width,
			   uint32_t *row_bytes, struct hb_error *err)
{
	return codec_row_bytes(codec_id, codec_version, group_size, row_width,
			       row_bytes, NULL, err);
}

/* ------------------------------------------------------------ planning */

#define OVF(err, field)                                                      \
	DIAG(err, HB_PLE_DIAG_OVERFLOW, HB_ERR_OVERFLOW, field, false, 0,     \
	     "size arithmetic overflows")

/* Directory entry i's field at +off, as an absolute offset. */
#define ENTRY_AT(i, off) (b + HB_PLE_HEADER_BYTES + (uint64_t)(i) * HB_PLE_DIR_ENTRY_BYTES + (off))

/* at as for codec_row_bytes: set when the spec was decoded from a file. */
static int plan(const struct hb_ple_spec *spec, struct hb_ple_layout *out,
		const uint64_t *at, struct hb_error *err)
{
	struct hb_ple_layout l;
	char field[64];
	uint64_t sum = 0, body, end;
	uint64_t b = at ? *at : 0;
	bool ho = at != NULL;
	uint32_t row_bytes;
	int rc;

	memset(&l, 0, sizeof(l));
	rc = codec_row_bytes(spec->codec_id, spec->codec_version,
			     spec->group_size, spec->row_width, &row_bytes, at, err);
	if (rc)
		return rc;
	if (spec->rows_per_page == 0)
		return DIAG(err, HB_PLE_DIAG_GEOMETRY, HB_ERR_FORMAT,
			    "ple.manifest.rows_per_page", ho, b + 40,
			    "rows per page must be at least 1");
	if (spec->row_alignment == 0 || spec->row_alignment > HB_PLE_MAX_ROW_ALIGNMENT)
		return DIAG(err, HB_PLE_DIAG_GEOMETRY, HB_ERR_FORMAT,
			    "ple.manifest.row_alignment", ho, b + 52,
			    "row alignment %" PRIu32 " is outside 1..%u",
			    spec->row_alignment, HB_PLE_MAX_ROW_ALIGNMENT);
	if (spec->table_count == 0 || spec->table_count > HB_PLE_MAX_TABLES)
		return DIAG(err, HB_PLE_DIAG_TABLE_DIRECTORY, HB_ERR_FORMAT,
			    "ple.manifest.table_count", ho, b + 56,
			    "table count %" PRIu32 " is outside 1..%u",
			    spec->table_count, HB_PLE_MAX_TABLES);
	for (uint32_t i = 0; i < spec->table_count; i++) {
		struct hb_ple_table *t = &l.tables[i];

		t->layer_id = spec->tables[i].layer_id;
		t->logical_rows = spec->tables[i].logical_rows;
		if (t->layer_id == 0 || (i > 0 && t->layer_id <= l.tables[i - 1].layer_id)) {
			snprintf(field, sizeof(field), "ple.table[%" PRIu32 "].layer_id", i);
			return DIAG(err, HB_PLE_DIAG_TABLE_DIRECTORY, HB_ERR_FORMAT,
				    field, ho, ENTRY_AT(i, 0),
				    "layer id %" PRIu32 " must be >= 1 and above the previous table's",
				    t->layer_id);
		}
		if (t->logical_rows == 0) {
			snprintf(field, sizeof(field), "ple.table[%" PRIu32 "].logical_rows", i);
			return DIAG(err, HB_PLE_DIAG_TABLE_DIRECTORY, HB_ERR_FORMAT,
				    field, ho, ENTRY_AT(i, 24), "a table has at least one row");
		}
		snprintf(field, sizeof(field), "ple.table[%" PRIu32 "].logical_rows", i);
		t->first_row = sum;
		if (hb_align_up_u64(t->logical_rows, spec->row_alignment, &t->physical_rows) ||
		    hb_add_u64(sum, t->physical_rows, &sum))
			return DIAG(err, HB_PLE_DIAG_OVERFLOW, HB_ERR_OVERFLOW, field, ho,
				    ENTRY_AT(i, 24), "the global row count overflows");
	}
	l.family = HB_PLE_FAMILY;
	l.codec_id = spec->codec_id;
	l.codec_version = spec->codec_version;
	l.group_size = spec->group_size;
	l.row_width = spec->row_width;
	l.encoded_row_bytes = row_bytes;
	l.rows_per_page = spec->rows_per_page;
	l.page_header_bytes = HB_PLE_PAGE_HEADER_BYTES;
	l.page_alignment = HB_PLE_PAGE_ALIGNMENT;
	l.row_alignment = spec->row_alignment;
	l.table_count = spec->table_count;
	l.physical_rows = sum;
	memcpy(l.hash_identity, spec->hash_identity, HB_PLE_DIGEST_BYTES);

	if (hb_mul_u64(l.rows_per_page, row_bytes, &body) ||
	    hb_add_u64(body, HB_PLE_PAGE_HEADER_BYTES, &body) ||
	    hb_align_up_u64(body, HB_PLE_PAGE_ALIGNMENT, &l.page_stride))
		return OVF(err, "ple.manifest.page_stride");
	if (l.page_stride > HB_PLE_MAX_PAGE_STRIDE)
		return DIAG(err, HB_PLE_DIAG_GEOMETRY, HB_ERR_UNSUPPORTED,
			    "ple.manifest.rows_per_page", ho, b + 40,
			    "page stride %" PRIu64 " exceeds the %u-byte limit "
			    "(fewer rows per page)", l.page_stride, HB_PLE_MAX_PAGE_STRIDE);
	l.page_count = sum / l.rows_per_page + (sum % l.rows_per_page != 0);
	l.dir_offset = HB_PLE_HEADER_BYTES;
	l.dir_bytes = (uint64_t)HB_PLE_DIR_ENTRY_BYTES * l.table_count;
	l.digest_offset = l.dir_offset + l.dir_bytes;
	if (hb_mul_u64(l.page_count, HB_PLE_DIGEST_BYTES, &l.digest_bytes) ||
	    hb_add_u64(l.digest_offset, l.digest_bytes, &end) ||
	    hb_align_up_u64(end, HB_PLE_PAGE_ALIGNMENT, &l.payload_offset))
		return OVF(err, "ple.manifest.digest_table_bytes");
	if (hb_mul_u64(l.page_count, l.page_stride, &l.payload_size))
		return OVF(err, "ple.manifest.payload_size");
	if (hb_add_u64(l.payload_offset, l.payload_size, &l.store_size) ||
	    !hb_offset_ok(0, l.store_size))
		return OVF(err, "ple.manifest.store_size");
	*out = l;
	return HB_OK;
}

int hb_ple_plan(const struct hb_ple_spec *spec, struct hb_ple_layout *out,
		struct hb_error *err)
{
	return plan(spec, out, NULL, err);
}

/* ------------------------------------------------------------ location */

int hb_ple_locate(const struct hb_ple_layout *l, uint64_t row,
		  struct hb_ple_loc *loc, struct hb_error *err)
{
	struct hb_ple_loc r;

	if (row >= l->physical_rows || l->rows_per_page == 0)
		return DIAG(err, HB_PLE_DIAG_ROW_RANGE, HB_ERR_INVALID, "ple.row",
			    false, 0, "row %" PRIu64 " is not below the %" PRIu64
			    " physical rows", row, l->physical_rows);
	r.page = row / l->rows_per_page;
	r.slot = row % l->rows_per_page;
	if (hb_mul_u64(r.page, l->page_stride, &r.page_offset) ||
	    hb_add_u64(r.page_offset, l->payload_offset, &r.page_offset) ||
	    hb_mul_u64(r.slot, l->encoded_row_bytes, &r.row_offset) ||
	    hb_add_u64(r.row_offset, l->page_header_bytes, &r.row_offset))
		return OVF(err, "ple.row");
	/* A validated layout cannot get here; a hand-built one must not read
	 * outside its own store. */
	if (!hb_range_inside(r.page_offset, l->page_stride, l->store_size) ||
	    !hb_range_inside(r.row_offset, l->encoded_row_bytes, l->page_stride))
		return OVF(err, "ple.row");
	*loc = r;
	return HB_OK;
}

int hb_ple_table_of_row(const struct hb_ple_layout *l, uint64_t row,
			uint32_t *table, uint64_t *local, struct hb_error *err)
{
	for (uint32_t i = 0; i < l->table_count && i < HB_PLE_MAX_TABLES; i++) {
		const struct hb_ple_table *t = &l->tables[i];
		if (row >= t->first_row && row - t->first_row < t->physical_rows) {
			*table = i;
			*local = row - t->first_row;
			return HB_OK;
		}
	}
	return DIAG(err, HB_PLE_DIAG_ROW_RANGE, HB_ERR_INVALID, "ple.row", false, 0,
		    "row %" PRIu64 " belongs to no table (%" PRIu64 " physical rows)",
		    row, l->physical_rows);
}

int hb_ple_table_row(const struct hb_ple_layout *l, uint32_t table,
		     uint64_t local, uint64_t *row, struct hb_error *err)
{
	const struct hb_ple_table *t;

	if (table >= l->table_count || table >= HB_PLE_MAX_TABLES)
		return DIAG(err, HB_PLE_DIAG_ROW_RANGE, HB_ERR_INVALID, "ple.table",
			    false, 0, "table %" PRIu32 " of %" PRIu32, table,
			    l->table_count);
	t = &l->tables[table];
	if (local >= t->physical_rows)
		return DIAG(err, HB_PLE_DIAG_ROW_RANGE, HB_ERR_INVALID, "ple.row",
			    false, 0, "local row %" PRIu64 " is not below the %" PRIu64
			    " physical rows of table %" PRIu32, local,
			    t->physical_rows, table);
	return hb_add_u64(t->first_row, local, row) ? OVF(err, "ple.row") : HB_OK;
}

uint32_t hb_ple_page_valid_rows(const struct hb_ple_layout *l, uint64_t page)
{
	uint64_t first, left;

	if (page >= l->page_count || hb_mul_u64(page, l->rows_per_page, &first) ||
	    first >= l->physical_rows)
		return 0;
	left = l->physical_rows - first;
	return left < l->rows_per_page ? (uint32_t)left : l->rows_per_page;
}

/* ------------------------------------------------------------ serialise */

void hb_ple_header_encode(const struct hb_ple_layout *l,
			  const uint8_t payload_sha[HB_PLE_DIGEST_BYTES],
			  const uint8_t manifest_sha[HB_PLE_DIGEST_BYTES],
			  uint8_t out[HB_PLE_HEADER_BYTES])
{
	memset(out, 0, HB_PLE_HEADER_BYTES);
	memcpy(out, HB_PLE_MAGIC, 8);
	put_u32(out + 8, HB_PLE_VERSION);
	put_u32(out + 12, HB_PLE_HEADER_BYTES);
	put_u32(out + 16, l->family);
	put_u32(out + 20, l->codec_id);
	put_u32(out + 24, l->codec_version);
	put_u32(out + 28, l->group_size);
	put_u32(out + 32, l->row_width);
	put_u32(out + 36, l->encoded_row_bytes);
	put_u32(out + 40, l->rows_per_page);
	put_u32(out + 44, l->page_header_bytes);
	put_u32(out + 48, l->page_alignment);
	put_u32(out + 52, l->row_alignment);
	put_u32(out + 56, l->table_count);
	put_u64(out + 64, l->page_stride);
	put_u64(out + 72, l->page_count);
	put_u64(out + 80, l->physical_rows);
	put_u64(out + 88, l->dir_offset);
	put_u64(out + 96, l->dir_bytes);
	put_u64(out + 104, l->digest_offset);
	put_u64(out + 112, l->digest_bytes);
	put_u64(out + 120, l->payload_offset);
	put_u64(out + 128, l->payload_size);
	put_u64(out + 136, l->store_size);
	memcpy(out + 144, l->hash_identity, HB_PLE_DIGEST_BYTES);
	if (payload_sha)
		memcpy(out + HB_PLE_OFF_PAYLOAD_SHA256, payload_sha, HB_PLE_DIGEST_BYTES);
	if (manifest_sha)
		memcpy(out + HB_PLE_OFF_MANIFEST_SHA256, manifest_sha, HB_PLE_DIGEST_BYTES);
}

void hb_ple_directory_encode(const struct hb_ple_layout *l, uint8_t *out)
{
	for (uint32_t i = 0; i < l->table_count; i++) {
		uint8_t *e = out + (size_t)i * HB_PLE_DIR_ENTRY_BYTES;
		put_u32(e, l->tables[i].layer_id);
		put_u32(e + 4, 0);
		put_u64(e + 8, l->tables[i].first_row);
		put_u64(e + 16, l->tables[i].physical_rows);
		put_u64(e + 24, l->tables[i].logical_rows);
	}
}

void hb_ple_page_header_encode(const struct hb_ple_layout *l, uint64_t page,
			       uint8_t out[HB_PLE_PAGE_HEADER_BYTES])
{
	memset(out, 0, HB_PLE_PAGE_HEADER_BYTES);
	memcpy(out, HB_PLE_PAGE_MAGIC, 8);
	put_u64(out + 8, page);
	put_u64(out + 16, page * l->rows_per_page);
	put_u32(out + 24, hb_ple_page_valid_rows(l, page));
	put_u32(out + 28, l->rows_per_page);
	put_u32(out + 32, l->row_width);
	put_u32(out + 36, l->encoded_row_bytes);
	put_u32(out + 40, l->codec_id);
	put_u32(out + 44, l->codec_version);
	put_u32(out + 48, l->group_size);
	put_u32(out + 52, l->family);
}

/* ------------------------------------------------------------ parse */

struct hdr_check {
	const uint8_t *buf;
	uint64_t base;
	struct hb_error *err;
};

static int want_u32(struct hdr_check *c, uint32_t off, uint32_t want,
		    enum hb_ple_diag d, int code, const char *name)
{
	char field[64];
	uint32_t got = get_u32(c->buf + off);

	if (got == want)
		return HB_OK;
	snprintf(field, sizeof(field), "ple.manifest.%s", name);
	return DIAG(c->err, d, code, field, true, c->base + off,
		    "is %" PRIu32 ", expected %" PRIu32, got, want);
}

int hb_ple_header_decode(const uint8_t hdr[HB_PLE_HEADER_BYTES], uint64_t base,
			 struct hb_ple_layout *l,
			 uint8_t payload_sha[HB_PLE_DIGEST_BYTES],
			 uint8_t manifest_sha[HB_PLE_DIGEST_BYTES],
			 struct hb_error *err)
{
	struct hdr_check c = { hdr, base, err };
	struct hb_ple_layout d;
	uint32_t version, row_bytes;
	size_t nz;
	int rc;

	memset(&d, 0, sizeof(d));
	if (memcmp(hdr, HB_PLE_MAGIC, 8) != 0)
		return DIAG(err, HB_PLE_DIAG_MAGIC, HB_ERR_FORMAT, "ple.manifest.magic",
			    true, base, "not a PLE v1 store (magic is not DS4PLEV1)");
	version = get_u32(hdr + 8);
	if (version != HB_PLE_VERSION)
		return DIAG(err, HB_PLE_DIAG_VERSION, HB_ERR_UNSUPPORTED,
			    "ple.manifest.version", true, base + 8,
			    "version %" PRIu32 " is not %u", version, HB_PLE_VERSION);
	if ((rc = want_u32(&c, 12, HB_PLE_HEADER_BYTES, HB_PLE_DIAG_GEOMETRY,
			   HB_ERR_FORMAT, "header_bytes")) ||
	    (rc = want_u32(&c, 16, HB_PLE_FAMILY, HB_PLE_DIAG_FAMILY,
			   HB_ERR_CONTRACT, "family")))
		return rc;
	d.family = HB_PLE_FAMILY;
	d.codec_id = get_u32(hdr + 20);
	d.codec_version = get_u32(hdr + 24);
	d.group_size = get_u32(hdr + 28);
	d.row_width = get_u32(hdr + 32);
	rc = codec_row_bytes(d.codec_id, d.codec_version, d.group_size,
			     d.row_width, &row_bytes, &base, err);
	if (rc)
		return rc;
	if ((rc = want_u32(&c, 36, row_bytes, HB_PLE_DIAG_GEOMETRY, HB_ERR_FORMAT,
			   "encoded_row_bytes")))
		return rc;
	d.encoded_row_bytes = row_bytes;
	d.rows_per_page = get_u32(hdr + 40);
	if (d.rows_per_page == 0)
		return DIAG(err, HB_PLE_DIAG_GEOMETRY, HB_ERR_FORMAT,
			    "ple.manifest.rows_per_page", true, base + 40,
			    "rows per page must be at least 1");
	if ((rc = want_u32(&c, 44, HB_PLE_PAGE_HEADER_BYTES, HB_PLE_DIAG_GEOMETRY,
			   HB_ERR_FORMAT, "page_header_bytes")) ||
	    (rc = want_u32(&c, 48, HB_PLE_PAGE_ALIGNMENT, HB_PLE_DIAG_GEOMETRY,
			   HB_ERR_FORMAT, "page_alignment")))
		return rc;
	d.page_header_bytes = HB_PLE_PAGE_HEADER_BYTES;
	d.page_alignment = HB_PLE_PAGE_ALIGNMENT;
	d.row_alignment = get_u32(hdr + 52); /* range-checked by the planner */
	d.table_count = get_u32(hdr + 56);
	if (d.table_count == 0 || d.table_count > HB_PLE_MAX_TABLES)
		return DIAG(err, HB_PLE_DIAG_TABLE_DIRECTORY, HB_ERR_FORMAT,
			    "ple.manifest.table_count", true, base + 56,
			    "table count %" PRIu32 " is outside 1..%u",
			    d.table_count, HB_PLE_MAX_TABLES);
	if (get_u32(hdr + 60) != 0)
		return DIAG(err, HB_PLE_DIAG_RESERVED, HB_ERR_FORMAT,
			    "ple.manifest.reserved0", true, base + 60,
			    "reserved field is not zero");
	nz = first_nonzero(hdr + 240, HB_PLE_HEADER_BYTES - 240);
	if (nz != HB_PLE_HEADER_BYTES - 240)
		return DIAG(err, HB_PLE_DIAG_RESERVED, HB_ERR_FORMAT,
			    "ple.manifest.reserved", true, base + 240 + nz,
			    "reserved byte %zu is not zero", 240 + nz);
	d.page_stride = get_u64(hdr + 64);
	d.page_count = get_u64(hdr + 72);
	d.physical_rows = get_u64(hdr + 80);
	d.dir_offset = get_u64(hdr + 88);
	d.dir_bytes = get_u64(hdr + 96);
	d.digest_offset = get_u64(hdr + 104);
	d.digest_bytes = get_u64(hdr + 112);
	d.payload_offset = get_u64(hdr + 120);
	d.payload_size = get_u64(hdr + 128);
	d.store_size = get_u64(hdr + 136);
	/* The directory is read next; its place must be closed now. */
	if (d.dir_offset != HB_PLE_HEADER_BYTES)
		return DIAG(err, HB_PLE_DIAG_GEOMETRY, HB_ERR_FORMAT,
			    "ple.manifest.table_directory_offset", true, base + 88,
			    "is %" PRIu64 ", expected %u", d.dir_offset, HB_PLE_HEADER_BYTES);
	if (d.dir_bytes != (uint64_t)HB_PLE_DIR_ENTRY_BYTES * d.table_count)
		return DIAG(err, HB_PLE_DIAG_GEOMETRY, HB_ERR_FORMAT,
			    "ple.manifest.table_directory_bytes", true, base + 96,
			    "is %" PRIu64 ", expected %" PRIu64, d.dir_bytes,
			    (uint64_t)HB_PLE_DIR_ENTRY_BYTES * d.table_count);
	memcpy(d.hash_identity, hdr + 144, HB_PLE_DIGEST_BYTES);
	if (payload_sha)
		memcpy(payload_sha, hdr + HB_PLE_OFF_PAYLOAD_SHA256, HB_PLE_DIGEST_BYTES);
	if (manifest_sha)
		memcpy(manifest_sha, hdr + HB_PLE_OFF_MANIFEST_SHA256, HB_PLE_DIGEST_BYTES);
	*l = d;
	return HB_OK;
}

/* Compare a declared u64 with the derived one. */
static int same_u64(struct hb_error *err, uint64_t base, uint32_t off,
		    const char *name, uint64_t got, uint64_t want)
{
	char field[64];

	if (got == want)
		return HB_OK;
	snprintf(field, sizeof(field), "ple.manifest.%s", name);
	return DIAG(err, HB_PLE_DIAG_GEOMETRY, HB_ERR_FORMAT, field, true,
		    base + off, "is %" PRIu64 ", derived %" PRIu64, got, want);
}

int hb_ple_directory_decode(const uint8_t *dir, uint64_t base,
			    struct hb_ple_layout *l, struct hb_error *err)
{
	struct hb_ple_spec spec;
	struct hb_ple_layout want;
	char field[64];
	int rc;

	memset(&spec, 0, sizeof(spec));
	spec.codec_id = l->codec_id;
	spec.codec_version = l->codec_version;
	spec.group_size = l->group_size;
	spec.row_width = l->row_width;
	spec.rows_per_page = l->rows_per_page;
	spec.row_alignment = l->row_alignment;
	spec.table_count = l->table_count;
	memcpy(spec.hash_identity, l->hash_identity, HB_PLE_DIGEST_BYTES);
	for (uint32_t i = 0; i < l->table_count; i++) {
		const uint8_t *e = dir + (size_t)i * HB_PLE_DIR_ENTRY_BYTES;
		uint64_t eoff = base + HB_PLE_HEADER_BYTES + (uint64_t)i * HB_PLE_DIR_ENTRY_BYTES;

		if (get_u32(e + 4) != 0) {
			snprintf(field, sizeof(field), "ple.table[%" PRIu32 "].reserved", i);
			return DIAG(err, HB_PLE_DIAG_RESERVED, HB_ERR_FORMAT, field,
				    true, eoff + 4, "reserved field is not zero");
		}
		l->tables[i].layer_id = get_u32(e);
		l->tables[i].first_row = get_u64(e + 8);
		l->tables[i].physical_rows = get_u64(e + 16);
		l->tables[i].logical_rows = get_u64(e + 24);
		spec.tables[i].layer_id = l->tables[i].layer_id;
		spec.tables[i].logical_rows = l->tables[i].logical_rows;
	}
	rc = plan(&spec, &want, &base, err);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < l->table_count; i++) {
		uint64_t eoff = base + HB_PLE_HEADER_BYTES + (uint64_t)i * HB_PLE_DIR_ENTRY_BYTES;
		if (l->tables[i].first_row != want.tables[i].first_row) {
			snprintf(field, sizeof(field), "ple.table[%" PRIu32 "].first_row", i);
			return DIAG(err, HB_PLE_DIAG_TABLE_DIRECTORY, HB_ERR_FORMAT, field,
				    true, eoff + 8, "is %" PRIu64 ", tables are concatenated "
				    "so it must be %" PRIu64, l->tables[i].first_row,
				    want.tables[i].first_row);
		}
		if (l->tables[i].physical_rows != want.tables[i].physical_rows) {
			snprintf(field, sizeof(field), "ple.table[%" PRIu32 "].physical_rows", i);
			return DIAG(err, HB_PLE_DIAG_TABLE_DIRECTORY, HB_ERR_FORMAT, field,
				    true, eoff + 16, "is %" PRIu64 ", align_up(logical rows, %" PRIu32 ") "
				    "is %" PRIu64, l->tables[i].physical_rows,
				    l->row_alignment, want.tables[i].physical_rows);
		}
	}
	if ((rc = same_u64(err, base, 64, "page_stride", l->page_stride, want.page_stride)) ||
	    (rc = same_u64(err, base, 80, "physical_rows", l->physical_rows, want.physical_rows)) ||
	    (rc = same_u64(err, base, 72, "page_count", l->page_count, want.page_count)) ||
	    (rc = same_u64(err, base, 104, "digest_table_offset", l->digest_offset, want.digest_offset)) ||
	    (rc = same_u64(err, base, 112, "digest_table_bytes", l->digest_bytes, want.digest_bytes)) ||
	    (rc = same_u64(err, base, 120, "payload_offset", l->payload_offset, want.payload_offset)) ||
	    (rc = same_u64(err, base, 128, "payload_size", l->payload_size, want.payload_size)) ||
	    (rc = same_u64(err, base, 136, "store_size", l->store_size, want.store_size)))
		return rc;
	*l = want;
	return HB_OK;
}

int hb_ple_page_header_check(const struct hb_ple_layout *l, uint64_t page,
			     const uint8_t *hdr, uint64_t abs_offset,
			     struct hb_error *err)
{
	struct {
		const char *name;
		uint32_t off, width;
		uint64_t want;
	} f[] = {
		{ "page_index", 8, 8, page },
		{ "first_row", 16, 8, page * l->rows_per_page },
		{ "valid_rows", 24, 4, hb_ple_page_valid_rows(l, page) },
		{ "rows_per_page", 28, 4, l->rows_per_page },
		{ "row_width", 32, 4, l->row_width },
		{ "encoded_row_bytes", 36, 4, l->encoded_row_bytes },
		{ "codec_id", 40, 4, l->codec_id },
		{ "codec_version", 44, 4, l->codec_version },
		{ "group_size", 48, 4, l->group_size },
		{ "family", 52, 4, l->family },
		{ "reserved", 56, 8, 0 },
	};
	char field[96];

	if (memcmp(hdr, HB_PLE_PAGE_MAGIC, 8) != 0) {
		snprintf(field, sizeof(field), "ple.page[%" PRIu64 "].header.magic", page);
		return DIAG(err, HB_PLE_DIAG_PAGE_HEADER, HB_ERR_FORMAT, field, true,
			    abs_offset, "page magic is not DS4PLEPG");
	}
	for (size_t i = 0; i < HB_ARRAY_LEN(f); i++) {
		uint64_t got = f[i].width == 8 ? get_u64(hdr + f[i].off)
					       : get_u32(hdr + f[i].off);
		if (got == f[i].want)
			continue;
		snprintf(field, sizeof(field), "ple.page[%" PRIu64 "].header.%s",
			 page, f[i].name);
		return DIAG(err, i + 1 == HB_ARRAY_LEN(f) ? HB_PLE_DIAG_RESERVED
							  : HB_PLE_DIAG_PAGE_HEADER,
			    HB_ERR_FORMAT, field, true, abs_offset + f[i].off,
			    "is %" PRIu64 ", expected %" PRIu64, got, f[i].want);
	}
	return HB_OK;
}

void hb_ple_manifest_digest(const struct hb_ple_layout *l,
			    const uint8_t hdr[HB_PLE_HEADER_BYTES],
			    const uint8_t *dir, const uint8_t *digest_table,
			    uint8_t out[HB_PLE_DIGEST_BYTES])
{
	static const uint8_t zeros[HB_PLE_PAGE_ALIGNMENT];
	uint8_t h[HB_PLE_HEADER_BYTES];
	struct hb_sha256 s;
	uint64_t pad = l->payload_offset - l->digest_offset - l->digest_bytes;

	memcpy(h, hdr, sizeof(h));
	memset(h + HB_PLE_OFF_MANIFEST_SHA256, 0, HB_PLE_DIGEST_BYTES);
	hb_sha256_init(&s);
	hb_sha256_update(&s, h, sizeof(h));
	hb_sha256_update(&s, dir, (size_t)l->dir_bytes);
	hb_sha256_update(&s, digest_table, (size_t)l->digest_bytes);
	hb_sha256_update(&s, zeros, (size_t)pad);
	hb_sha256_final(&s, out);
}
