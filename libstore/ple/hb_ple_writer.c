/*
 * hb_ple_writer.c: the streaming PLE v1 writer and its transactional file
 * mode.
 *
 * This file owns turning rows (given in global order, in any chunking) into
 * pages, page digests, the payload digest and finally the manifest, with
 * memory bounded by one page whatever the store size (the real table is
 * ~100 GB of bf16).  It does not own the layout arithmetic
 * (hb_ple_layout.c), the atomic publication protocol (libcore hb_publish)
 * nor the verification it runs before publishing (hb_ple_reader.c).
 *
 * Write order: pages (each followed by its digest-table entry) as they
 * fill, then at finish the directory and padding, then the header last, so
 * a writer that dies midway never leaves a store whose header is valid.
 */
#include "hb_base.h"
#include "codec/hb_affine4.h"
#include "hb_checked.h"
#include "hb_half.h"
#include "hb_io.h"
#include "hb_ple_store.h"
#include "hb_publish.h"
#include "hb_sha256.h"

#define DIAG(err, d, code, field, has_off, off, ...)                        \
	hb_error_diag(err, hb_ple_diag_id(d), code, field, has_off, off, __VA_ARGS__)

/* Re-read chunk for hashing the digest table at finish. */
#define REREAD_CHUNK (64u << 10)

struct hb_ple_writer {
	int fd;
	uint64_t base;
	struct hb_ple_layout l;
	uint8_t *page;      /* one page, stride bytes */
	float *row_f32;     /* one row, for bf16 -> affine4 */
	uint64_t rows;      /* rows accepted */
	uint64_t page_index;
	uint32_t slot;
	struct hb_sha256 payload;
	bool failed, finished;
};

/* Tag an I/O error record from libcore with this module's id. */
static int tag(struct hb_error *err, int rc, enum hb_ple_diag d)
{
	if (rc && err && err->code == rc && !err->id)
		err->id = hb_ple_diag_id(d);
	return rc;
}

/* The writer trusts a layout's offsets only if the planner derives them. */
static bool layout_is_planned(const struct hb_ple_layout *l)
{
	struct hb_ple_spec spec;
	struct hb_ple_layout want;

	if (l->table_count == 0 || l->table_count > HB_PLE_MAX_TABLES)
		return false;
	memset(&spec, 0, sizeof(spec));
	spec.codec_id = l->codec_id;
	spec.codec_version = l->codec_version;
	spec.group_size = l->group_size;
	spec.row_width = l->row_width;
	spec.rows_per_page = l->rows_per_page;
	spec.row_alignment = l->row_alignment;
	spec.table_count = l->table_count;
	for (uint32_t i = 0; i < l->table_count; i++) {
		spec.tables[i].layer_id = l->tables[i].layer_id;
		spec.tables[i].logical_rows = l->tables[i].logical_rows;
	}
	if (hb_ple_plan(&spec, &want, NULL))
		return false;
	for (uint32_t i = 0; i < l->table_count; i++)
		if (want.tables[i].first_row != l->tables[i].first_row ||
		    want.tables[i].physical_rows != l->tables[i].physical_rows)
			return false;
	return want.family == l->family && want.encoded_row_bytes == l->encoded_row_bytes &&
	       want.page_header_bytes == l->page_header_bytes &&
	       want.page_alignment == l->page_alignment &&
	       want.page_stride == l->page_stride && want.page_count == l->page_count &&
	       want.physical_rows == l->physical_rows && want.dir_offset == l->dir_offset &&
	       want.dir_bytes == l->dir_bytes && want.digest_offset == l->digest_offset &&
	       want.digest_bytes == l->digest_bytes &&
	       want.payload_offset == l->payload_offset &&
	       want.payload_size == l->payload_size && want.store_size == l->store_size;
}

int hb_ple_writer_begin(struct hb_ple_writer **out, int fd, uint64_t base,
			const struct hb_ple_layout *l, struct hb_error *err)
{
	struct hb_ple_writer *w;
	uint64_t end;

	*out = NULL;
	if (base % HB_PLE_PAGE_ALIGNMENT != 0)
		return DIAG(err, HB_PLE_DIAG_EXTENT, HB_ERR_INVALID, "ple.extent.base",
			    false, 0, "base offset %" PRIu64 " is not a multiple of %u",
			    base, HB_PLE_PAGE_ALIGNMENT);
	if (hb_add_u64(base, l->store_size, &end) || !hb_offset_ok(base, l->store_size))
		return DIAG(err, HB_PLE_DIAG_OVERFLOW, HB_ERR_OVERFLOW, "ple.extent.base",
			    false, 0, "store end overflows the file offset range");
	if (!layout_is_planned(l))
		return DIAG(err, HB_PLE_DIAG_GEOMETRY, HB_ERR_INVALID, "ple.manifest",
			    false, 0, "layout was not produced by hb_ple_plan");
	w = calloc(1, sizeof(*w));
	if (!w)
		return hb_error_set(err, HB_ERR_NOMEM, "ple.writer", "out of memory");
	w->page = calloc(1, (size_t)l->page_stride);
	w->row_f32 = calloc(l->row_width, sizeof(float));
	if (!w->page || !w->row_f32) {
		hb_ple_writer_free(w);
		return hb_error_set(err, HB_ERR_NOMEM, "ple.writer", "out of memory");
	}
	w->fd = fd;
	w->base = base;
	w->l = *l;
	hb_sha256_init(&w->payload);
	*out = w;
	return HB_OK;
}

void hb_ple_writer_free(struct hb_ple_writer *w)
{
	if (!w)
		return;
	free(w->page);
	free(w->row_f32);
	free(w);
}

uint64_t hb_ple_writer_rows(const struct hb_ple_writer *w)
{
	return w->rows;
}

/* The page is full (or the rows ran out): header, digest, write both. */
static int flush_page(struct hb_ple_writer *w, struct hb_error *err)
{
	uint8_t digest[HB_PLE_DIGEST_BYTES];
	uint64_t page_off, digest_off;
	int rc;

	hb_ple_page_header_encode(&w->l, w->page_index, w->page);
	hb_sha256_buf(w->page, (size_t)w->l.page_stride, digest);
	hb_sha256_update(&w->payload, w->page, (size_t)w->l.page_stride);
	/* Cannot overflow: begin checked base + store_size. */
	page_off = w->base + w->l.payload_offset + w->page_index * w->l.page_stride;
	digest_off = w->base + w->l.digest_offset + w->page_index * HB_PLE_DIGEST_BYTES;
	rc = hb_pwrite_full(w->fd, w->page, (size_t)w->l.page_stride, page_off,
			    "ple.page", err);
	if (!rc)
		rc = hb_pwrite_full(w->fd, digest, sizeof(digest), digest_off,
				    "ple.digest_table", err);
	if (rc)
		return tag(err, rc, HB_PLE_DIAG_WRITE);
	memset(w->page, 0, (size_t)w->l.page_stride);
	w->page_index++;
	w->slot = 0;
	return HB_OK;
}

static int admit(struct hb_ple_writer *w, uint64_t n, struct hb_error *err)
{
	if (w->failed || w->finished)
		return DIAG(err, HB_PLE_DIAG_WRITER, HB_ERR_INVALID, "ple.writer", false, 0,
			    w->failed ? "the writer already failed" : "the writer is finished");
	if (n > w->l.physical_rows - w->rows)
		return DIAG(err, HB_PLE_DIAG_WRITER, HB_ERR_INVALID, "ple.writer.rows",
			    false, 0, "%" PRIu64 " more rows would pass the %" PRIu64
			    " physical rows (%" PRIu64 " written)", n,
			    w->l.physical_rows, w->rows);
	return HB_OK;
}

/* The slot for the next row, in the page buffer. */
static uint8_t *next_slot(struct hb_ple_writer *w)
{
	return w->page + HB_PLE_PAGE_HEADER_BYTES +
	       (size_t)w->slot * w->l.encoded_row_bytes;
}

static int row_done(struct hb_ple_writer *w, struct hb_error *err)
{
	w->rows++;
	w->slot++;
	if (w->slot == hb_ple_page_valid_rows(&w->l, w->page_index))
		return flush_page(w, err);
	return HB_OK;
}

static int encode_f32(struct hb_ple_writer *w, const float *row,
		      struct hb_error *err)
{
	char what[64];
	int rc;

	snprintf(what, sizeof(what), "ple.row[%" PRIu64 "]", w->rows);
	rc = hb_affine4_encode(row, w->l.row_width, w->l.group_size, next_slot(w),
			       w->l.encoded_row_bytes, what, err);
	return tag(err, rc, HB_PLE_DIAG_ROW_VALUE);
}

int hb_ple_writer_put_bf16(struct hb_ple_writer *w, const uint16_t *rows,
			   uint64_t n, struct hb_error *err)
{
	int rc = admit(w, n, err);

	if (rc)
		return rc;
	for (uint64_t i = 0; !rc && i < n; i++) {
		const uint16_t *src = rows + i * w->l.row_width;
		if (w->l.codec_id == HB_PLE_CODEC_BF16) {
			uint8_t *dst = next_slot(w);
			for (uint32_t k = 0; k < w->l.row_width; k++) {
				dst[2 * k] = (uint8_t)(src[k] & 0xff);
				dst[2 * k + 1] = (uint8_t)(src[k] >> 8);
			}
		} else {
			/* Widening is exact; the codec sees the checkpoint's values. */
			hb_bf16_to_f32_n(src, w->row_f32, w->l.row_width);
			rc = encode_f32(w, w->row_f32, err);
		}
		if (!rc)
			rc = row_done(w, err);
	}
	if (rc)
		w->failed = true;
	return rc;
}

int hb_ple_writer_put_f32(struct hb_ple_writer *w, const float *rows,
			  uint64_t n, struct hb_error *err)
{
	int rc = admit(w, n, err);

	if (rc)
		return rc;
	if (w->l.codec_id != HB_PLE_CODEC_AFFINE4)
		return DIAG(err, HB_PLE_DIAG_WRITER, HB_ERR_INVALID, "ple.writer",
			    false, 0, "a bf16 store takes bf16 rows (float32 would be rounded)");
	for (uint64_t i = 0; !rc && i < n; i++) {
		rc = encode_f32(w, rows + i * w->l.row_width, err);
		if (!rc)
			rc = row_done(w, err);
	}
	if (rc)
		w->failed = true;
	return rc;
}

/* SHA-256 of the manifest domain, re-reading the digest table from fd. */
static int manifest_digest(struct hb_ple_writer *w, const uint8_t *hdr,
			   const uint8_t *dir, const uint8_t *pad, size_t pad_len,
			   uint8_t out[HB_PLE_DIGEST_BYTES], struct hb_error *err)
{
	uint8_t h[HB_PLE_HEADER_BYTES];
	struct hb_sha256 s;
	uint8_t *buf;
	uint64_t done = 0;
	int rc = HB_OK;

	buf = malloc(REREAD_CHUNK);
	if (!buf)
		return hb_error_set(err, HB_ERR_NOMEM, "ple.writer", "out of memory");
	memcpy(h, hdr, sizeof(h));
	memset(h + HB_PLE_OFF_MANIFEST_SHA256, 0, HB_PLE_DIGEST_BYTES);
	hb_sha256_init(&s);
	hb_sha256_update(&s, h, sizeof(h));
	hb_sha256_update(&s, dir, (size_t)w->l.dir_bytes);
	while (done < w->l.digest_bytes) {
		uint64_t left = w->l.digest_bytes - done;
		size_t n = left < REREAD_CHUNK ? (size_t)left : REREAD_CHUNK;
		rc = hb_pread_full(w->fd, buf, n, w->base + w->l.digest_offset + done,
				   "ple.digest_table", err);
		if (rc) {
			tag(err, rc, HB_PLE_DIAG_READ);
			break;
		}
		hb_sha256_update(&s, buf, n);
		done += n;
	}
	hb_sha256_update(&s, pad, pad_len);
	hb_sha256_final(&s, out);
	free(buf);
	return rc;
}

int hb_ple_writer_finish(struct hb_ple_writer *w,
			 uint8_t payload_sha[HB_PLE_DIGEST_BYTES],
			 uint8_t manifest_sha[HB_PLE_DIGEST_BYTES],
			 struct hb_error *err)
{
	uint8_t hdr[HB_PLE_HEADER_BYTES];
	uint8_t dir[HB_PLE_MAX_TABLES * HB_PLE_DIR_ENTRY_BYTES];
	uint8_t pay[HB_PLE_DIGEST_BYTES], man[HB_PLE_DIGEST_BYTES];
	uint64_t pad_off = w->l.digest_offset + w->l.digest_bytes;
	size_t pad_len = (size_t)(w->l.payload_offset - pad_off);
	int rc = admit(w, 0, err);

	if (rc)
		return rc;
	if (w->rows != w->l.physical_rows) {
		w->failed = true;
		return DIAG(err, HB_PLE_DIAG_WRITER, HB_ERR_INVALID, "ple.writer.rows",
			    false, 0, "%" PRIu64 " rows written of %" PRIu64 " physical rows",
			    w->rows, w->l.physical_rows);
	}
	hb_sha256_final(&w->payload, pay);
	hb_ple_directory_encode(&w->l, dir);
	hb_ple_header_encode(&w->l, pay, NULL, hdr);
	/* The padding is written explicitly: the caller's fd may hold old bytes. */
	memset(w->page, 0, pad_len);
	rc = hb_pwrite_full(w->fd, dir, (size_t)w->l.dir_bytes,
			    w->base + w->l.dir_offset, "ple.table_directory", err);
	if (!rc && pad_len)
		rc = hb_pwrite_full(w->fd, w->page, pad_len, w->base + pad_off,
				    "ple.padding", err);
	tag(err, rc, HB_PLE_DIAG_WRITE);
	if (!rc)
		rc = manifest_digest(w, hdr, dir, w->page, pad_len, man, err);
	if (!rc) {
		memcpy(hdr + HB_PLE_OFF_MANIFEST_SHA256, man, sizeof(man));
		rc = tag(err, hb_pwrite_full(w->fd, hdr, sizeof(hdr), w->base,
					     "ple.manifest", err), HB_PLE_DIAG_WRITE);
	}
	if (rc) {
		w->failed = true;
		return rc;
	}
	w->finished = true;
	if (payload_sha)
		memcpy(payload_sha, pay, sizeof(pay));
	if (manifest_sha)
		memcpy(manifest_sha, man, sizeof(man));
	return HB_OK;
}

/* ------------------------------------------------------------ file mode */

struct hb_ple_file {
	struct hb_publish pub;
	struct hb_ple_writer *w;
	uint8_t payload_sha[HB_PLE_DIGEST_BYTES];
	uint8_t manifest_sha[HB_PLE_DIGEST_BYTES];
};

int hb_ple_file_begin(struct hb_ple_file **out, const char *path,
		      unsigned publish_flags, const struct hb_ple_layout *l,
		      struct hb_error *err)
{
	struct hb_ple_file *f;
	int rc;

	*out = NULL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return hb_error_set(err, HB_ERR_NOMEM, "ple.writer", "out of memory");
	rc = hb_publish_begin(&f->pub, path, publish_flags, err);
	if (rc) {
		free(f);
		return rc;
	}
	rc = hb_ple_writer_begin(&f->w, f->pub.fd, 0, l, err);
	if (rc) {
		hb_publish_abort(&f->pub);
		free(f);
		return rc;
	}
	*out = f;
	return HB_OK;
}

struct hb_ple_writer *hb_ple_file_writer(struct hb_ple_file *f)
{
	return f->w;
}

/* Runs on the reopened temp file: the runtime reader must accept it whole. */
static int verify_published(int fd, void *ctx, struct hb_error *err)
{
	struct hb_ple_file *f = ctx;
	struct hb_ple_store *s = NULL;
	struct hb_ple_verify_report rep;
	uint8_t pay[HB_PLE_DIGEST_BYTES], man[HB_PLE_DIGEST_BYTES];
	uint64_t size;
	int rc;

	rc = hb_file_size(fd, &size, "ple.extent", err);
	if (rc)
		return tag(err, rc, HB_PLE_DIAG_READ);
	rc = hb_ple_store_open(&s, fd, 0, size, err);
	if (rc)
		return rc;
	hb_ple_store_digests(s, pay, man);
	if (memcmp(pay, f->payload_sha, sizeof(pay)) != 0 ||
	    memcmp(man, f->manifest_sha, sizeof(man)) != 0)
		rc = DIAG(err, HB_PLE_DIAG_MANIFEST_DIGEST, HB_ERR_CHANGED,
			  "ple.manifest", false, 0,
			  "the published digests differ from those written");
	if (!rc)
		rc = hb_ple_payload_verify(s, NULL, NULL, NULL, &rep, err);
	hb_ple_store_close(s);
	return rc;
}

int hb_ple_file_commit(struct hb_ple_file *f, struct hb_error *err)
{
	int rc;

	rc = hb_ple_writer_finish(f->w, f->payload_sha, f->manifest_sha, err);
	hb_ple_writer_free(f->w);
	f->w = NULL;
	if (rc) {
		hb_publish_abort(&f->pub);
		free(f);
		return rc;
	}
	rc = hb_publish_commit(&f->pub, verify_published, f, err);
	free(f);
	return rc;
}

void hb_ple_file_abort(struct hb_ple_file *f)
{
	if (!f)
		return;
	hb_ple_writer_free(f->w);
	hb_publish_abort(&f->pub);
	free(f);
}
