/*
 * hb_ple_store.h: the PLE v1 fixed-page row store (`ds4.ple_rows.v1`).
 *
 * This header owns the byte layout of the store, its planner, its streaming
 * writer (embedded in a caller's file, or as a standalone transactional
 * file) and its reader (open, single-snapshot row reads, page and payload
 * verification).  It does not own the GGUF container around the store, the
 * n-gram hashing that chooses rows (the store only carries the 32-byte
 * hash-identity digest), nor the affine4 arithmetic (hb_affine4.h).
 *
 * Design (AFN-003): 320,001,536 rows of 160 values must be located without
 * a per-row index.  Rows live in fixed-stride pages: for global row r,
 * page = r / rows_per_page and slot = r % rows_per_page; every multiply and
 * add on the way to a file offset is checked.  Three digest levels:
 * manifest, page, whole payload.
 *
 * ON-DISK LAYOUT.  Little-endian, explicit widths, every offset relative to
 * the start of the store (the first byte of the GGUF tensor's data).
 *
 * Manifest header, 512 bytes:
 *
 *   off  size  field                      rule
 *     0     8  magic                      "DS4PLEV1"
 *     8  u32   version                    1
 *    12  u32   header bytes               512
 *    16  u32   family                     4 (Qwen4Exp)
 *    20  u32   codec id                   1 = bf16, 2 = affine4
 *    24  u32   codec version              1
 *    28  u32   group size                 bf16: 0; affine4: 32, 64 or 128,
 *                                         and it must tile the row width
 *    32  u32   row width (values)         >= 1
 *    36  u32   encoded row bytes          bf16: width*2;
 *                                         affine4: (width/G)*(G/2+4)
 *    40  u32   rows per page              >= 1
 *    44  u32   page header bytes          64
 *    48  u32   page alignment             4096
 *    52  u32   row alignment              1..2^20 (Qwen4Exp: 128, the
 *                                         checkpoint's
 *                                         make_ngram_vocab_size_divisible_by)
 *    56  u32   table count                1..HB_PLE_MAX_TABLES
 *    60  u32   reserved                   0
 *    64  u64   page stride                align_up(64 + rpp*row bytes, 4096),
 *                                         <= HB_PLE_MAX_PAGE_STRIDE
 *    72  u64   page count                 ceil(physical rows / rpp)
 *    80  u64   physical rows              sum of the tables' physical rows
 *    88  u64   table directory offset     512
 *    96  u64   table directory bytes      32 * table count
 *   104  u64   digest table offset        512 + directory bytes
 *   112  u64   digest table bytes         32 * page count
 *   120  u64   payload offset             align_up(digest table end, 4096)
 *   128  u64   payload size               page count * page stride
 *   136  u64   store size                 payload offset + payload size
 *   144    32  hash-identity digest       carried, not interpreted
 *   176    32  payload SHA-256            see DIGESTS
 *   208    32  manifest SHA-256           see DIGESTS
 *   240   272  reserved                   0
 *
 * Table directory at 512, one 32-byte entry per PLE layer table, tables
 * concatenated in the global row space in directory order:
 *
 *   +0  u32  ple layer id       one-indexed decoder layer, >= 1, strictly
 *                               increasing along the directory
 *   +4  u32  reserved           0
 *   +8  u64  first global row   sum of the physical rows of earlier tables
 *  +16  u64  physical rows      align_up(logical rows, row alignment)
 *  +24  u64  logical rows       >= 1 (the prime-head end, e.g. 320,001,446)
 *
 * Digest table: page count entries of 32 bytes, entry p = SHA-256 of page p.
 * Then zero bytes up to the payload offset.
 *
 * Page p at payload offset + p * page stride, page stride bytes:
 *
 *   +0    8  page magic         "DS4PLEPG"
 *   +8  u64  page index         p
 *  +16  u64  first row          p * rows per page
 *  +24  u32  valid rows         min(rpp, physical rows - first row)
 *  +28  u32  rows per page      as the manifest
 *  +32  u32  row width          as the manifest
 *  +36  u32  encoded row bytes  as the manifest
 *  +40  u32  codec id           as the manifest
 *  +44  u32  codec version      as the manifest
 *  +48  u32  group size         as the manifest
 *  +52  u32  family             as the manifest
 *  +56    8  reserved           0
 *  +64       valid rows * encoded row bytes, rows back to back
 *            then zero to the stride (unused slots and fill)
 *
 * Rows of a table at local index >= logical rows are padding rows; they are
 * addressable and stored like any other row (the converter copies them from
 * the checkpoint).
 *
 * DIGESTS.
 *   page digest     SHA-256 of the complete page (stride bytes: header,
 *                   rows, unused slots and fill);
 *   payload digest  SHA-256 of every page in order (the bytes from the
 *                   payload offset to the store end);
 *   manifest digest SHA-256 of, in file order: the 512-byte header with the
 *                   manifest-digest field (208..239) zeroed, the table
 *                   directory, the digest table and the alignment padding.
 *                   It covers the payload-digest field, so a tampered
 *                   payload digest fails at open (cheaply) rather than after
 *                   a full payload pass.  It does not cover pages, so a
 *                   store whose pages and their table entries were rewritten
 *                   consistently but whose payload digest is stale opens and
 *                   reads fine and fails only hb_ple_payload_verify (the
 *                   isolated end-to-end check of AFN-003).
 *
 * ERRORS.  Every failure fills struct hb_error with a stable id from
 * HB_PLE_DIAGS, a field path such as "ple.manifest.rows_per_page" or
 * "ple.page[17].header.first_row", and, where one applies, the ABSOLUTE
 * file offset (base + store offset) of the bytes at fault.
 */
#ifndef HB_PLE_STORE_H
#define HB_PLE_STORE_H

#include "hb_base.h"
#include "hb_err.h"

#define HB_PLE_MAGIC "DS4PLEV1"
#define HB_PLE_PAGE_MAGIC "DS4PLEPG"
#define HB_PLE_VERSION 1u
#define HB_PLE_HEADER_BYTES 512u
#define HB_PLE_FAMILY 4u
#define HB_PLE_PAGE_HEADER_BYTES 64u
#define HB_PLE_PAGE_ALIGNMENT 4096u
#define HB_PLE_ROW_ALIGNMENT 128u /* Qwen4Exp's; a store may declare another */
#define HB_PLE_MAX_ROW_ALIGNMENT (1u << 20)
#define HB_PLE_DIR_ENTRY_BYTES 32u
#define HB_PLE_DIGEST_BYTES 32u
#define HB_PLE_MAX_TABLES 64u
/* A page is read whole into memory: bound what a manifest may demand. */
#define HB_PLE_MAX_PAGE_STRIDE (16u << 20)
#define HB_PLE_MAX_ROW_WIDTH 65536u

#define HB_PLE_CODEC_BF16 1u
#define HB_PLE_CODEC_AFFINE4 2u
#define HB_PLE_CODEC_VERSION 1u

/* Byte offsets of manifest fields (for diagnostics and tests). */
#define HB_PLE_OFF_PAYLOAD_SHA256 176u
#define HB_PLE_OFF_MANIFEST_SHA256 208u

/*
 * Stable diagnostic ids (see STYLE.md 4).  X(enum, id, meaning).  The man
 * page ds4-ple-rows(5) lists exactly these; ids are never renamed.
 */
#define HB_PLE_DIAGS(X)                                                              \
	X(HB_PLE_DIAG_MAGIC, "ple-magic", "the store does not start with DS4PLEV1")   \
	X(HB_PLE_DIAG_VERSION, "ple-version", "the store version is not 1")          \
	X(HB_PLE_DIAG_FAMILY, "ple-family", "the family is not 4 (Qwen4Exp)")        \
	X(HB_PLE_DIAG_GEOMETRY, "ple-geometry",                                      \
	  "a geometry field disagrees with the value derived from the others")       \
	X(HB_PLE_DIAG_CODEC, "ple-codec", "unknown codec id, codec version or group") \
	X(HB_PLE_DIAG_CODEC_TILING, "ple-codec-tiling",                              \
	  "the codec group does not tile the row width exactly")                     \
	X(HB_PLE_DIAG_TABLE_DIRECTORY, "ple-table-directory",                        \
	  "a table directory entry is out of order, misaligned or inconsistent")     \
	X(HB_PLE_DIAG_RESERVED, "ple-reserved-nonzero",                              \
	  "a reserved, padding or fill byte is not zero")                            \
	X(HB_PLE_DIAG_EXTENT, "ple-extent",                                          \
	  "the store does not fill its extent exactly, or the file is too short")    \
	X(HB_PLE_DIAG_OVERFLOW, "ple-overflow", "offset arithmetic overflows")       \
	X(HB_PLE_DIAG_MANIFEST_DIGEST, "ple-manifest-digest",                        \
	  "the manifest SHA-256 does not match the manifest bytes")                  \
	X(HB_PLE_DIAG_PAGE_HEADER, "ple-page-header",                                \
	  "a page header does not match its position and the manifest")             \
	X(HB_PLE_DIAG_PAGE_DIGEST, "ple-page-digest",                                \
	  "a page does not match its digest-table entry")                            \
	X(HB_PLE_DIAG_PAYLOAD_DIGEST, "ple-payload-digest",                          \
	  "the pages in order do not match the payload SHA-256")                     \
	X(HB_PLE_DIAG_ROW_RANGE, "ple-row-range",                                    \
	  "a row, table or page index is outside the store")                         \
	X(HB_PLE_DIAG_READ, "ple-read", "the store could not be read")               \
	X(HB_PLE_DIAG_WRITE, "ple-write", "the store could not be written")          \
	X(HB_PLE_DIAG_WRITER, "ple-writer",                                          \
	  "rows were given in the wrong form or number")                             \
	X(HB_PLE_DIAG_ROW_VALUE, "ple-row-value", "a row value cannot be encoded")

enum hb_ple_diag {
#define HB_PLE_X_ENUM(e, id, what) e,
	HB_PLE_DIAGS(HB_PLE_X_ENUM)
#undef HB_PLE_X_ENUM
	HB_PLE_DIAG_COUNT
};

/* The id string of a diagnostic ("ple-magic"), or NULL out of range. */
const char *hb_ple_diag_id(enum hb_ple_diag d);
/* Its one-line meaning, or NULL out of range. */
const char *hb_ple_diag_what(enum hb_ple_diag d);

/* ------------------------------------------------------------ layout */

struct hb_ple_table {
	uint32_t layer_id;      /* one-indexed decoder layer */
	uint64_t first_row;     /* global row of local row 0 */
	uint64_t physical_rows; /* align_up(logical_rows, row_alignment) */
	uint64_t logical_rows;
};

/* What the planner needs; everything else is derived. */
struct hb_ple_spec {
	uint32_t codec_id;
	uint32_t codec_version;  /* HB_PLE_CODEC_VERSION */
	uint32_t group_size;     /* 0 for bf16 */
	uint32_t row_width;
	uint32_t rows_per_page;
	uint32_t row_alignment;  /* HB_PLE_ROW_ALIGNMENT for Qwen4Exp */
	uint32_t table_count;
	struct {
		uint32_t layer_id;
		uint64_t logical_rows;
	} tables[HB_PLE_MAX_TABLES];
	uint8_t hash_identity[HB_PLE_DIGEST_BYTES];
};

/* The complete, validated geometry of a store. */
struct hb_ple_layout {
	uint32_t family, codec_id, codec_version, group_size;
	uint32_t row_width, encoded_row_bytes, rows_per_page;
	uint32_t page_header_bytes, page_alignment, row_alignment, table_count;
	uint64_t page_stride, page_count, physical_rows;
	uint64_t dir_offset, dir_bytes, digest_offset, digest_bytes;
	uint64_t payload_offset, payload_size, store_size;
	struct hb_ple_table tables[HB_PLE_MAX_TABLES];
	uint8_t hash_identity[HB_PLE_DIGEST_BYTES];
};

/* Where a row lives; offsets relative to the start of the store. */
struct hb_ple_loc {
	uint64_t page, slot;
	uint64_t page_offset; /* payload_offset + page * stride */
	uint64_t row_offset;  /* inside the page: 64 + slot * encoded row bytes */
};

/*
 * Derive and check a layout from a spec without touching any file.
 * Refuses unknown codecs (ple-codec), a group that does not tile the width
 * (ple-codec-tiling), a bad directory (ple-table-directory) and any size
 * arithmetic that overflows (ple-overflow).
 */
int hb_ple_plan(const struct hb_ple_spec *spec, struct hb_ple_layout *out,
		struct hb_error *err);

/* Encoded bytes of one row (ple-codec, ple-codec-tiling, ple-geometry). */
int hb_ple_codec_row_bytes(uint32_t codec_id, uint32_t codec_version,
			   uint32_t group_size, uint32_t row_width,
			   uint32_t *row_bytes, struct hb_error *err);

/* Locate a global row (ple-row-range past the physical rows). */
int hb_ple_locate(const struct hb_ple_layout *l, uint64_t row,
		  struct hb_ple_loc *loc, struct hb_error *err);
/* Which table a global row belongs to and its local index. */
int hb_ple_table_of_row(const struct hb_ple_layout *l, uint64_t row,
			uint32_t *table, uint64_t *local, struct hb_error *err);
/* Global row of (table index, local row); local may be a padding row. */
int hb_ple_table_row(const struct hb_ple_layout *l, uint32_t table,
		     uint64_t local, uint64_t *row, struct hb_error *err);
/* Rows actually stored in page p (the last page may be partial). */
uint32_t hb_ple_page_valid_rows(const struct hb_ple_layout *l, uint64_t page);

/* Serialise (the digests go in as given). */
void hb_ple_header_encode(const struct hb_ple_layout *l,
			  const uint8_t payload_sha[HB_PLE_DIGEST_BYTES],
			  const uint8_t manifest_sha[HB_PLE_DIGEST_BYTES],
			  uint8_t out[HB_PLE_HEADER_BYTES]);
/* out has l->dir_bytes bytes. */
void hb_ple_directory_encode(const struct hb_ple_layout *l, uint8_t *out);
void hb_ple_page_header_encode(const struct hb_ple_layout *l, uint64_t page,
			       uint8_t out[HB_PLE_PAGE_HEADER_BYTES]);

/*
 * Parse and validate in two steps, as the reader does.  header_decode
 * checks the 512 header bytes on their own (magic, version, constants,
 * codec and tiling, reserved bytes, directory placement) and fills l with
 * the declared values, so that l->dir_bytes says how much directory to
 * read from offset 512.  directory_decode then checks the entries and
 * recomputes every derived field from the primary ones (codec, width, rows
 * per page, row alignment, logical rows per table), requiring equality;
 * on success l is the complete layout.  base is added to reported offsets.
 */
int hb_ple_header_decode(const uint8_t hdr[HB_PLE_HEADER_BYTES], uint64_t base,
			 struct hb_ple_layout *l,
			 uint8_t payload_sha[HB_PLE_DIGEST_BYTES],
			 uint8_t manifest_sha[HB_PLE_DIGEST_BYTES],
			 struct hb_error *err);
int hb_ple_directory_decode(const uint8_t *dir, uint64_t base,
			    struct hb_ple_layout *l, struct hb_error *err);
/* Check a page's duplicated header against page index p (ple-page-header). */
int hb_ple_page_header_check(const struct hb_ple_layout *l, uint64_t page,
			     const uint8_t *hdr, uint64_t abs_offset,
			     struct hb_error *err);

/*
 * The manifest digest of a header (its digest field is ignored), a
 * directory, a digest table and the zero padding, computed in memory.
 * For tests and tools that build a manifest by hand.
 */
void hb_ple_manifest_digest(const struct hb_ple_layout *l,
			    const uint8_t hdr[HB_PLE_HEADER_BYTES],
			    const uint8_t *dir, const uint8_t *digest_table,
			    uint8_t out[HB_PLE_DIGEST_BYTES]);

/* ------------------------------------------------------------ writer */

/*
 * Streaming writer into fd at base (a multiple of 4096).  fd must be open
 * for reading and writing: finish() re-reads the digest table it wrote to
 * hash the manifest without holding the table in memory.  Memory is one
 * page buffer plus one row of float32, whatever the store size.  Rows go in
 * global order, physical rows in all (padding rows included), in any
 * chunking.  The writer writes [base, base + store_size) only.
 */
struct hb_ple_writer;

int hb_ple_writer_begin(struct hb_ple_writer **out, int fd, uint64_t base,
			const struct hb_ple_layout *l, struct hb_error *err);
/* n rows of row_width bfloat16 values.  bf16 codec: copied bit-exactly;
 * affine4: widened exactly to float32 and encoded. */
int hb_ple_writer_put_bf16(struct hb_ple_writer *w, const uint16_t *rows,
			   uint64_t n, struct hb_error *err);
/* n rows of float32.  affine4 only: a bf16 store takes bf16 rows, so that
 * the writer never rounds (refused with ple-writer). */
int hb_ple_writer_put_f32(struct hb_ple_writer *w, const float *rows,
			  uint64_t n, struct hb_error *err);
/* Rows accepted so far. */
uint64_t hb_ple_writer_rows(const struct hb_ple_writer *w);
/* After every physical row: write the directory, digest table, padding and
 * header.  Digests out may be NULL. */
int hb_ple_writer_finish(struct hb_ple_writer *w,
			 uint8_t payload_sha[HB_PLE_DIGEST_BYTES],
			 uint8_t manifest_sha[HB_PLE_DIGEST_BYTES],
			 struct hb_error *err);
/* Free (after finish, or to abandon a write; the fd is not closed). */
void hb_ple_writer_free(struct hb_ple_writer *w);

/*
 * A store that is its own file, published transactionally through
 * hb_publish: sibling temp, the streaming writer at base 0, fsync, reopen,
 * open + verify every page and the payload digest (and that the digests
 * match what was written), directory fsync, rename, directory fsync.  Any
 * failure before the rename leaves no target change and no temp file.
 */
struct hb_ple_file;

int hb_ple_file_begin(struct hb_ple_file **out, const char *path,
		      unsigned publish_flags, const struct hb_ple_layout *l,
		      struct hb_error *err);
struct hb_ple_writer *hb_ple_file_writer(struct hb_ple_file *f);
/* Finish, verify and publish; frees f whatever the outcome. */
int hb_ple_file_commit(struct hb_ple_file *f, struct hb_error *err);
/* Abandon: removes the temp file; frees f. */
void hb_ple_file_abort(struct hb_ple_file *f);

/* ------------------------------------------------------------ reader */

struct hb_ple_store;

/*
 * Page-sized working memory for reads.  THREAD SAFETY: an open store is
 * immutable; any number of threads may read it concurrently provided each
 * passes its own scratch.  Passing scratch == NULL uses one buffer owned by
 * the store, which is then single-threaded.
 */
struct hb_ple_scratch {
	uint8_t *page;
	size_t page_cap;
	float *row_f32;
	size_t row_cap;
	/* the page whose checked snapshot `page` holds (hb_ple_page_verify),
	 * valid only while held is true */
	uint64_t held_page;
	bool held;
};

/*
 * Open the store occupying [base, base + extent_size) of fd.  Reads only the
 * header, the directory, the digest table and the padding (never a page),
 * validates their structure and the manifest digest, and keeps the digest
 * table in memory (32 bytes a page).  The fd stays the caller's; it must
 * remain open until close.  extent_size must equal the store size exactly
 * (bytes past the store are ple-extent) and the file must hold the extent.
 */
int hb_ple_store_open(struct hb_ple_store **out, int fd, uint64_t base,
		      uint64_t extent_size, struct hb_error *err);
/*
 * The same checks (the manifest digest over the whole digest table
 * included), with the table hashed as it streams through a reused chunk
 * and not kept: for a caller that needs the manifest alone (admission).
 * Page and row reads on such a store fail closed: every page is a
 * ple-page-digest finding.
 */
int hb_ple_store_open_manifest(struct hb_ple_store **out, int fd, uint64_t base,
			       uint64_t extent_size, struct hb_error *err);
void hb_ple_store_close(struct hb_ple_store *s);
const struct hb_ple_layout *hb_ple_store_layout(const struct hb_ple_store *s);
void hb_ple_store_digests(const struct hb_ple_store *s,
			  uint8_t payload_sha[HB_PLE_DIGEST_BYTES],
			  uint8_t manifest_sha[HB_PLE_DIGEST_BYTES]);
/* Bytes read by open (header + directory + digest table + padding). */
uint64_t hb_ple_store_meta_bytes_read(const struct hb_ple_store *s);

int hb_ple_scratch_init(struct hb_ple_scratch *sc, const struct hb_ple_store *s,
			struct hb_error *err);
void hb_ple_scratch_release(struct hb_ple_scratch *sc);

/*
 * Read one encoded row: one pread of its whole page into scratch, check the
 * duplicated page header and zero fill, check the page SHA-256 against the
 * digest table, then copy encoded_row_bytes to out (out_len must be at
 * least that).  On any failure out is untouched.
 */
int hb_ple_row_read(struct hb_ple_store *s, uint64_t row,
		    struct hb_ple_scratch *sc, void *out, size_t out_len,
		    struct hb_error *err);
/* The same, decoded to row_width float32 values (n >= row_width). */
int hb_ple_row_read_f32(struct hb_ple_store *s, uint64_t row,
			struct hb_ple_scratch *sc, float *out, size_t n,
			struct hb_error *err);
/*
 * hb_ple_row_read_f32 in its two steps, for a caller with several rows on
 * one page: hb_ple_page_verify (below) reads the page into sc with one
 * pread, checks it as a row read does and keeps it there as sc's held
 * snapshot; hb_ple_snapshot_row_f32 decodes a row of that page from that
 * snapshot, so every row copied out comes from bytes that were hashed
 * (AFN-003's one snapshot), and none from a second read.  A failed check,
 * or anything else written into sc's page, leaves sc holding nothing; a
 * row of another page than the one held, or with nothing held, is
 * refused (ple.row), out untouched.
 */
int hb_ple_snapshot_row_f32(const struct hb_ple_store *s, struct hb_ple_scratch *sc,
			    uint64_t row, float *out, size_t n, struct hb_error *err);
/*
 * Check a page snapshot the caller already read (page_stride bytes of page
 * `page`): duplicated header, zero fill, digest.  found receives the
 * computed SHA-256 when the header and fill passed (zeros otherwise), so a
 * verifier can print expected and found digests.  Thread-safe.
 */
int hb_ple_page_check_buf(const struct hb_ple_store *s, uint64_t page, const uint8_t *buf,
			  uint8_t found[HB_PLE_DIGEST_BYTES], struct hb_error *err);
/*
 * The same check when the caller already has the page's SHA-256 (computed
 * over the page_stride bytes of buf while it hashed them for something
 * else, the whole-payload digest say): header and fill are checked in buf,
 * digest is compared with the table and nothing is hashed again.
 * Thread-safe.
 */
int hb_ple_page_check_digest(const struct hb_ple_store *s, uint64_t page, const uint8_t *buf,
			     const uint8_t digest[HB_PLE_DIGEST_BYTES], struct hb_error *err);
/* The digest-table entry of a page (zeros past the last page). */
void hb_ple_store_page_digest(const struct hb_ple_store *s, uint64_t page,
			      uint8_t out[HB_PLE_DIGEST_BYTES]);
/* The file offset of the store's first byte. */
uint64_t hb_ple_store_base(const struct hb_ple_store *s);
/* Read and check one page (header, fill, digest); on success sc holds it
 * (hb_ple_snapshot_row_f32). */
int hb_ple_page_verify(struct hb_ple_store *s, uint64_t page,
		       struct hb_ple_scratch *sc, struct hb_error *err);

/* A finding of hb_ple_payload_verify: page is UINT64_MAX for the
 * whole-payload digest. */
typedef void (*hb_ple_finding_fn)(void *ctx, uint64_t page,
				  const struct hb_error *finding);

struct hb_ple_verify_report {
	uint64_t pages_checked;
	uint64_t bad_pages;
	bool payload_ok;
};

/*
 * Stream every page: check each page's header, fill and digest, and the
 * whole-payload digest.  A bad page is reported through cb (may be NULL)
 * and verification continues; a read failure stops at once (returned, and
 * not reported through cb).  Returns 0 when everything matched, otherwise
 * the code of the first finding, which err holds.
 */
int hb_ple_payload_verify(struct hb_ple_store *s, struct hb_ple_scratch *sc,
			  hb_ple_finding_fn cb, void *ctx,
			  struct hb_ple_verify_report *rep,
			  struct hb_error *err);

#endif
