/*
 * hb_ple_reader.c: opening a PLE v1 store and reading verified rows.
 *
 * This file owns the runtime side of AFN-003: open reads the manifest
 * (header, directory, digest table, padding) and never a page; a row read
 * takes ONE snapshot of its page (one pread into a bounded buffer), checks
 * the duplicated page header, the zero fill and the page digest in that
 * buffer, and only then copies the row out, so the bytes the caller gets are
 * the bytes that were hashed (a verify-then-reread design would leave a
 * time-of-check/time-of-use window).  It also owns page and whole-payload
 * verification.  It does not own the layout arithmetic (hb_ple_layout.c)
 * nor any caching or scheduling of page reads.
 */
#include "hb_base.h"
#include "codec/hb_affine4.h"
#include "hb_checked.h"
#include "hb_half.h"
#include "hb_io.h"
#include "hb_ple_store.h"
#include "hb_sha256.h"

#define DIAG(err, d, code, field, has_off, off, ...)                        \
	hb_error_diag(err, hb_ple_diag_id(d), code, field, has_off, off, __VA_ARGS__)

struct hb_ple_store {
	int fd;
	uint64_t base;
	struct hb_ple_layout l;
	uint8_t payload_sha[HB_PLE_DIGEST_BYTES];
	uint8_t manifest_sha[HB_PLE_DIGEST_BYTES];
	uint8_t *digests;   /* the authenticated digest table */
	uint64_t meta_read;
	struct hb_ple_scratch own;
};

/* pread whose failure carries the ple-read id and a field path. */
static int read_at(int fd, void *buf, size_t len, uint64_t off,
		   const char *field, struct hb_error *err)
{
	int rc = hb_pread_full(fd, buf, len, off, field, err);

	if (rc && err && err->code == rc && !err->id)
		err->id = hb_ple_diag_id(HB_PLE_DIAG_READ);
	return rc;
}

static int check_extent(int fd, uint64_t base, uint64_t extent,
			struct hb_error *err)
{
	uint64_t fsize, end;
	int rc;

	if (base % HB_PLE_PAGE_ALIGNMENT != 0)
		return DIAG(err, HB_PLE_DIAG_EXTENT, HB_ERR_FORMAT, "ple.extent.base",
			    true, base, "the store does not start on a %u-byte boundary",
			    HB_PLE_PAGE_ALIGNMENT);
	if (hb_add_u64(base, extent, &end) || !hb_offset_ok(base, extent))
		return DIAG(err, HB_PLE_DIAG_OVERFLOW, HB_ERR_OVERFLOW, "ple.extent.size",
			    true, base, "extent of %" PRIu64 " bytes overflows the file "
			    "offset range", extent);
	if (extent < HB_PLE_HEADER_BYTES)
		return DIAG(err, HB_PLE_DIAG_EXTENT, HB_ERR_SHORT, "ple.extent.size",
			    true, base, "extent of %" PRIu64 " bytes cannot hold the "
			    "%u-byte manifest", extent, HB_PLE_HEADER_BYTES);
	rc = hb_file_size(fd, &fsize, "ple.extent", err);
	if (rc)
		return rc;
	if (fsize < end)
		return DIAG(err, HB_PLE_DIAG_EXTENT, HB_ERR_SHORT, "ple.extent.size",
			    true, fsize, "the file has %" PRIu64 " bytes, the extent ends "
			    "at %" PRIu64, fsize, end);
	return HB_OK;
}

/* The manifest digest streams: header (its digest field zeroed) and
 * directory, then the digest table chunk by chunk as it is read (hashed
 * while the chunk is in cache), then the padding.  Measured on the real
 * geometry's 40 MB table: 68 ms read whole into fresh memory and hashed
 * after, against the hashing alone when the table is not kept
 * (hb_ple_store_open_manifest: one reused chunk, no 40 MB of page
 * faults). */
#define TABLE_CHUNK (1u << 20)

static int read_manifest(struct hb_ple_store *s, uint64_t extent, bool keep,
			 struct hb_error *err)
{
	uint8_t hdr[HB_PLE_HEADER_BYTES], hz[HB_PLE_HEADER_BYTES];
	uint8_t dir[HB_PLE_MAX_TABLES * HB_PLE_DIR_ENTRY_BYTES];
	uint8_t pad[HB_PLE_PAGE_ALIGNMENT];
	uint8_t man[HB_PLE_DIGEST_BYTES];
	struct hb_ple_layout *l = &s->l;
	struct hb_sha256 h;
	uint64_t pad_off;
	uint8_t *chunk = NULL;
	size_t dlen, pad_len, nz;
	int rc;

	rc = read_at(s->fd, hdr, sizeof(hdr), s->base, "ple.manifest", err);
	if (rc)
		return rc;
	s->meta_read += sizeof(hdr);
	rc = hb_ple_header_decode(hdr, s->base, l, s->payload_sha, s->manifest_sha, err);
	if (rc)
		return rc;
	/* header_decode closed dir_bytes to 32 * (1..64). */
	if (l->dir_bytes > extent - HB_PLE_HEADER_BYTES)
		return DIAG(err, HB_PLE_DIAG_EXTENT, HB_ERR_SHORT, "ple.table_directory",
			    true, s->base + HB_PLE_HEADER_BYTES,
			    "the extent ends inside the table directory");
	rc = read_at(s->fd, dir, (size_t)l->dir_bytes, s->base + l->dir_offset,
		     "ple.table_directory", err);
	if (rc)
		return rc;
	s->meta_read += l->dir_bytes;
	rc = hb_ple_directory_decode(dir, s->base, l, err);
	if (rc)
		return rc;
	if (extent != l->store_size)
		return DIAG(err, HB_PLE_DIAG_EXTENT, HB_ERR_FORMAT, "ple.manifest.store_size",
			    true, s->base + 136, extent > l->store_size ?
			    "the extent has %" PRIu64 " bytes, %" PRIu64 " past the store's" :
			    "the extent has %" PRIu64 " bytes, the store needs %" PRIu64 " more",
			    extent, extent > l->store_size ? extent - l->store_size
							   : l->store_size - extent);
	if (hb_size_from_u64(l->digest_bytes, &dlen))
		return DIAG(err, HB_PLE_DIAG_OVERFLOW, HB_ERR_OVERFLOW,
			    "ple.manifest.digest_table_bytes", true, s->base + 112,
			    "digest table does not fit in memory");
	if (keep)
		s->digests = malloc(dlen);
	else
		chunk = malloc(dlen < TABLE_CHUNK ? dlen : TABLE_CHUNK);
	if (keep ? !s->digests : !chunk)
		return hb_error_set(err, HB_ERR_NOMEM, "ple.digest_table",
				    "cannot allocate %zu bytes", keep ? dlen : (size_t)TABLE_CHUNK);
	memcpy(hz, hdr, sizeof(hz));
	memset(hz + HB_PLE_OFF_MANIFEST_SHA256, 0, HB_PLE_DIGEST_BYTES);
	hb_sha256_init(&h);
	hb_sha256_update(&h, hz, sizeof(hz));
	hb_sha256_update(&h, dir, (size_t)l->dir_bytes);
	for (size_t done = 0; done < dlen;) {
		size_t n = dlen - done < TABLE_CHUNK ? dlen - done : TABLE_CHUNK;
		uint8_t *dst = keep ? s->digests + done : chunk;
		rc = read_at(s->fd, dst, n, s->base + l->digest_offset + done,
			     "ple.digest_table", err);
		if (rc) {
			free(chunk);
			return rc;
		}
		hb_sha256_update(&h, dst, n);
		done += n;
	}
	free(chunk);
	s->meta_read += dlen;
	pad_off = l->digest_offset + l->digest_bytes;
	pad_len = (size_t)(l->payload_offset - pad_off); /* < 4096 by derivation */
	rc = read_at(s->fd, pad, pad_len, s->base + pad_off, "ple.padding", err);
	if (rc)
		return rc;
	s->meta_read += pad_len;
	nz = 0;
	while (nz < pad_len && pad[nz] == 0)
		nz++;
	if (nz != pad_len)
		return DIAG(err, HB_PLE_DIAG_RESERVED, HB_ERR_FORMAT, "ple.padding",
			    true, s->base + pad_off + nz, "alignment padding is not zero");
	hb_sha256_update(&h, pad, pad_len);
	hb_sha256_final(&h, man);
	if (memcmp(man, s->manifest_sha, sizeof(man)) != 0)
		return DIAG(err, HB_PLE_DIAG_MANIFEST_DIGEST, HB_ERR_DIGEST,
			    "ple.manifest.manifest_sha256", true,
			    s->base + HB_PLE_OFF_MANIFEST_SHA256,
			    "the manifest (header, table directory, digest table, "
			    "padding) does not match its SHA-256");
	return HB_OK;
}

static int store_open(struct hb_ple_store **out, int fd, uint64_t base,
		      uint64_t extent_size, bool keep, struct hb_error *err)
{
	struct hb_ple_store *s;
	int rc;

	*out = NULL;
	if ((rc = hb_crypto_start(err)))
		return rc;
	rc = check_extent(fd, base, extent_size, err);
	if (rc)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return hb_error_set(err, HB_ERR_NOMEM, "ple", "out of memory");
	s->fd = fd;
	s->base = base;
	rc = read_manifest(s, extent_size, keep, err);
	if (rc) {
		hb_ple_store_close(s);
		return rc;
	}
	*out = s;
	return HB_OK;
}

int hb_ple_store_open(struct hb_ple_store **out, int fd, uint64_t base,
		      uint64_t extent_size, struct hb_error *err)
{
	return store_open(out, fd, base, extent_size, true, err);
}

int hb_ple_store_open_manifest(struct hb_ple_store **out, int fd, uint64_t base,
			       uint64_t extent_size, struct hb_error *err)
{
	return store_open(out, fd, base, extent_size, false, err);
}

void hb_ple_store_close(struct hb_ple_store *s)
{
	if (!s)
		return;
	hb_ple_scratch_release(&s->own);
	free(s->digests);
	free(s);
}

const struct hb_ple_layout *hb_ple_store_layout(const struct hb_ple_store *s)
{
	return &s->l;
}

void hb_ple_store_digests(const struct hb_ple_store *s,
			  uint8_t payload_sha[HB_PLE_DIGEST_BYTES],
			  uint8_t manifest_sha[HB_PLE_DIGEST_BYTES])
{
	if (payload_sha)
		memcpy(payload_sha, s->payload_sha, HB_PLE_DIGEST_BYTES);
	if (manifest_sha)
		memcpy(manifest_sha, s->manifest_sha, HB_PLE_DIGEST_BYTES);
}

uint64_t hb_ple_store_meta_bytes_read(const struct hb_ple_store *s)
{
	return s->meta_read;
}

/* ------------------------------------------------------------ scratch */

int hb_ple_scratch_init(struct hb_ple_scratch *sc, const struct hb_ple_store *s,
			struct hb_error *err)
{
	memset(sc, 0, sizeof(*sc));
	sc->page = malloc((size_t)s->l.page_stride);
	sc->row_f32 = malloc((size_t)s->l.row_width * sizeof(float));
	if (!sc->page || !sc->row_f32) {
		hb_ple_scratch_release(sc);
		return hb_error_set(err, HB_ERR_NOMEM, "ple.scratch", "out of memory");
	}
	sc->page_cap = (size_t)s->l.page_stride;
	sc->row_cap = s->l.row_width;
	return HB_OK;
}

void hb_ple_scratch_release(struct hb_ple_scratch *sc)
{
	free(sc->page);
	free(sc->row_f32);
	memset(sc, 0, sizeof(*sc));
}

static int pick_scratch(struct hb_ple_store *s, struct hb_ple_scratch **sc,
			struct hb_error *err)
{
	int rc;

	if (!*sc) {
		if (!s->own.page && (rc = hb_ple_scratch_init(&s->own, s, err)))
			return rc;
		*sc = &s->own;
	}
	if ((*sc)->page_cap < s->l.page_stride || (*sc)->row_cap < s->l.row_width)
		return hb_error_set(err, HB_ERR_INVALID, "ple.scratch",
				    "scratch was sized for another store");
	return HB_OK;
}

/* ------------------------------------------------------------ pages */

static uint64_t page_offset(const struct hb_ple_store *s, uint64_t page)
{
	/* page < page_count and open proved base + store_size fits. */
	return s->base + s->l.payload_offset + page * s->l.page_stride;
}

/* Check a page snapshot already in buf: header, zero fill, digest.  The
 * computed digest goes to found (may be NULL) when it was computed; when
 * given is not NULL it is the caller's digest of buf and nothing is hashed
 * here. */
static int check_page_with(const struct hb_ple_store *s, uint64_t page,
			   const uint8_t *buf, const uint8_t *given, uint8_t *found,
			   struct hb_error *err)
{
	const struct hb_ple_layout *l = &s->l;
	uint64_t at = page_offset(s, page);
	uint8_t local[HB_PLE_DIGEST_BYTES];
	uint8_t *digest = found ? found : local;
	char field[64];
	size_t used, i;
	int rc;

	rc = hb_ple_page_header_check(l, page, buf, at, err);
	if (rc)
		return rc;
	used = HB_PLE_PAGE_HEADER_BYTES +
	       (size_t)hb_ple_page_valid_rows(l, page) * l->encoded_row_bytes;
	for (i = used; i < l->page_stride; i++)
		if (buf[i])
			break;
	if (i != l->page_stride) {
		snprintf(field, sizeof(field), "ple.page[%" PRIu64 "].fill", page);
		return DIAG(err, HB_PLE_DIAG_RESERVED, HB_ERR_FORMAT, field, true,
			    at + i, "byte %zu of the page is past its rows and not zero", i);
	}
	if (given)
		memcpy(digest, given, HB_PLE_DIGEST_BYTES);
	else
		hb_sha256_buf(buf, (size_t)l->page_stride, digest);
	if (!s->digests) { /* opened for the manifest only: nothing to check against */
		snprintf(field, sizeof(field), "ple.page[%" PRIu64 "]", page);
		return DIAG(err, HB_PLE_DIAG_PAGE_DIGEST, HB_ERR_DIGEST, field, true, at,
			    "the store was opened for its manifest only; its digest table was not kept");
	}
	if (memcmp(digest, s->digests + page * HB_PLE_DIGEST_BYTES, HB_PLE_DIGEST_BYTES) != 0) {
		snprintf(field, sizeof(field), "ple.page[%" PRIu64 "]", page);
		return DIAG(err, HB_PLE_DIAG_PAGE_DIGEST, HB_ERR_DIGEST, field, true, at,
			    "the page does not match its digest-table entry");
	}
	return HB_OK;
}

static int check_page(const struct hb_ple_store *s, uint64_t page,
		      const uint8_t *buf, struct hb_error *err)
{
	return check_page_with(s, page, buf, NULL, NULL, err);
}

int hb_ple_page_check_buf(const struct hb_ple_store *s, uint64_t page, const uint8_t *buf,
			  uint8_t found[HB_PLE_DIGEST_BYTES], struct hb_error *err)
{
	if (page >= s->l.page_count)
		return DIAG(err, HB_PLE_DIAG_ROW_RANGE, HB_ERR_INVALID, "ple.page", false, 0,
			    "page %" PRIu64 " of %" PRIu64, page, s->l.page_count);
	memset(found, 0, HB_PLE_DIGEST_BYTES);
	return check_page_with(s, page, buf, NULL, found, err);
}

int hb_ple_page_check_digest(const struct hb_ple_store *s, uint64_t page, const uint8_t *buf,
			     const uint8_t digest[HB_PLE_DIGEST_BYTES], struct hb_error *err)
{
	if (page >= s->l.page_count)
		return DIAG(err, HB_PLE_DIAG_ROW_RANGE, HB_ERR_INVALID, "ple.page", false, 0,
			    "page %" PRIu64 " of %" PRIu64, page, s->l.page_count);
	return check_page_with(s, page, buf, digest, NULL, err);
}

void hb_ple_store_page_digest(const struct hb_ple_store *s, uint64_t page,
			      uint8_t out[HB_PLE_DIGEST_BYTES])
{
	if (page < s->l.page_count && s->digests)
		memcpy(out, s->digests + page * HB_PLE_DIGEST_BYTES, HB_PLE_DIGEST_BYTES);
	else
		memset(out, 0, HB_PLE_DIGEST_BYTES);
}

uint64_t hb_ple_store_base(const struct hb_ple_store *s)
{
	return s->base;
}

static int read_page(const struct hb_ple_store *s, uint64_t page, uint8_t *buf,
		     struct hb_error *err)
{
	char field[64];

	snprintf(field, sizeof(field), "ple.page[%" PRIu64 "]", page);
	return read_at(s->fd, buf, (size_t)s->l.page_stride, page_offset(s, page),
		       field, err);
}

/* The one snapshot: read the page once, check it, leave it in sc->page,
 * held only once it has passed. */
static int snapshot_page(struct hb_ple_store *s, uint64_t page,
			 struct hb_ple_scratch *sc, struct hb_error *err)
{
	int rc;

	sc->held = false;
	if ((rc = read_page(s, page, sc->page, err)) ||
	    (rc = check_page(s, page, sc->page, err)))
		return rc;
	sc->held_page = page, sc->held = true;
	return HB_OK;
}

static int snapshot_row(struct hb_ple_store *s, uint64_t row,
			struct hb_ple_scratch **sc, struct hb_ple_loc *loc,
			struct hb_error *err)
{
	int rc;

	if ((rc = hb_ple_locate(&s->l, row, loc, err)) ||
	    (rc = pick_scratch(s, sc, err)))
		return rc;
	return snapshot_page(s, loc->page, *sc, err);
}

int hb_ple_row_read(struct hb_ple_store *s, uint64_t row,
		    struct hb_ple_scratch *sc, void *out, size_t out_len,
		    struct hb_error *err)
{
	struct hb_ple_loc loc;
	int rc;

	if (out_len < s->l.encoded_row_bytes)
		return hb_error_set(err, HB_ERR_INVALID, "ple.row",
				    "output holds %zu bytes, a row has %" PRIu32,
				    out_len, s->l.encoded_row_bytes);
	rc = snapshot_row(s, row, &sc, &loc, err);
	if (rc)
		return rc;
	memcpy(out, sc->page + loc.row_offset, s->l.encoded_row_bytes);
	return HB_OK;
}

/* row (at loc) decoded from the snapshot in sc to out */
static int decode_row_f32(const struct hb_ple_store *s, struct hb_ple_scratch *sc,
			  const struct hb_ple_loc *loc, float *out, struct hb_error *err)
{
	const struct hb_ple_layout *l = &s->l;
	const uint8_t *src = sc->page + loc->row_offset;
	char what[64];
	int rc;

	/* Decode into scratch first: a refused scale must not leave the
	 * caller's buffer half written. */
	if (l->codec_id == HB_PLE_CODEC_BF16) {
		for (uint32_t k = 0; k < l->row_width; k++)
			sc->row_f32[k] = hb_bf16_to_f32((uint16_t)(src[2 * k] |
								   (src[2 * k + 1] << 8)));
	} else {
		snprintf(what, sizeof(what), "ple.page[%" PRIu64 "].row[%" PRIu64 "]",
			 loc->page, loc->slot);
		rc = hb_affine4_decode(src, l->encoded_row_bytes, l->group_size,
				       sc->row_f32, l->row_width, what, err);
		if (rc) {
			if (err && err->code == rc && !err->id)
				err->id = hb_ple_diag_id(HB_PLE_DIAG_ROW_VALUE);
			return rc;
		}
	}
	memcpy(out, sc->row_f32, (size_t)l->row_width * sizeof(float));
	return HB_OK;
}

static int out_fits(const struct hb_ple_store *s, size_t n, struct hb_error *err)
{
	if (n < s->l.row_width)
		return hb_error_set(err, HB_ERR_INVALID, "ple.row",
				    "output holds %zu values, a row has %" PRIu32,
				    n, s->l.row_width);
	return HB_OK;
}

int hb_ple_row_read_f32(struct hb_ple_store *s, uint64_t row,
			struct hb_ple_scratch *sc, float *out, size_t n,
			struct hb_error *err)
{
	struct hb_ple_loc loc;
	int rc;

	if ((rc = out_fits(s, n, err)) || (rc = snapshot_row(s, row, &sc, &loc, err)))
		return rc;
	return decode_row_f32(s, sc, &loc, out, err);
}

int hb_ple_snapshot_row_f32(const struct hb_ple_store *s, struct hb_ple_scratch *sc,
			    uint64_t row, float *out, size_t n, struct hb_error *err)
{
	struct hb_ple_loc loc;
	int rc;

	if ((rc = out_fits(s, n, err)) || (rc = hb_ple_locate(&s->l, row, &loc, err)))
		return rc;
	if (!sc || !sc->held || sc->held_page != loc.page)
		return hb_error_set(err, HB_ERR_INVALID, "ple.row",
				    "row %" PRIu64 " is on page %" PRIu64 ", not on the snapshot held",
				    row, loc.page);
	if (sc->page_cap < s->l.page_stride || sc->row_cap < s->l.row_width)
		return hb_error_set(err, HB_ERR_INVALID, "ple.scratch",
				    "scratch was sized for another store");
	return decode_row_f32(s, sc, &loc, out, err);
}

int hb_ple_page_verify(struct hb_ple_store *s, uint64_t page,
		       struct hb_ple_scratch *sc, struct hb_error *err)
{
	int rc;

	if (sc)
		sc->held = false;
	if (page >= s->l.page_count)
		return DIAG(err, HB_PLE_DIAG_ROW_RANGE, HB_ERR_INVALID, "ple.page",
			    false, 0, "page %" PRIu64 " is not below the %" PRIu64
			    " pages", page, s->l.page_count);
	if ((rc = pick_scratch(s, &sc, err)))
		return rc;
	return snapshot_page(s, page, sc, err);
}

int hb_ple_payload_verify(struct hb_ple_store *s, struct hb_ple_scratch *sc,
			  hb_ple_finding_fn cb, void *ctx,
			  struct hb_ple_verify_report *rep,
			  struct hb_error *err)
{
	struct hb_ple_verify_report r = { 0, 0, false };
	uint8_t digest[HB_PLE_DIGEST_BYTES];
	struct hb_sha256 h;
	struct hb_error finding, first_finding;
	int first = HB_OK, rc;

	if ((rc = pick_scratch(s, &sc, err)))
		return rc;
	sc->held = false; /* the page buffer is the walk's from here on */
	hb_error_clear(&first_finding);
	hb_sha256_init(&h);
	for (uint64_t p = 0; p < s->l.page_count; p++) {
		/* An unreadable file is fatal: nothing later can be trusted, and
		 * the error returned describes the read, not earlier findings
		 * (those went to cb). */
		rc = read_page(s, p, sc->page, err);
		if (rc) {
			if (rep)
				*rep = r;
			return rc;
		}
		hb_sha256_update(&h, sc->page, (size_t)s->l.page_stride);
		r.pages_checked++;
		hb_error_clear(&finding);
		rc = check_page(s, p, sc->page, &finding);
		if (rc) {
			r.bad_pages++;
			if (cb)
				cb(ctx, p, &finding);
			if (!first) {
				first = rc;
				first_finding = finding;
			}
		}
	}
	hb_sha256_final(&h, digest);
	r.payload_ok = memcmp(digest, s->payload_sha, sizeof(digest)) == 0;
	if (!r.payload_ok) {
		hb_error_clear(&finding);
		rc = DIAG(&finding, HB_PLE_DIAG_PAYLOAD_DIGEST, HB_ERR_DIGEST,
			  "ple.manifest.payload_sha256", true,
			  s->base + HB_PLE_OFF_PAYLOAD_SHA256,
			  "the pages in order do not match the payload SHA-256");
		if (cb)
			cb(ctx, UINT64_MAX, &finding);
		if (!first) {
			first = rc;
			first_finding = finding;
		}
	}
	if (rep)
		*rep = r;
	if (first && err && err->code == HB_OK)
		*err = first_finding;
	return first;
}
