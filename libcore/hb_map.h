/*
 * hb_map.h: a file's bytes as read-only memory for weights used in place,
 * either mapped from the page cache (hb_map_read) or read into the
 * process's own memory (hb_map_load).
 *
 * The mapping starts on a 2 MiB boundary (file offset 0 there too) and is
 * advised MADV_HUGEPAGE, so a kernel whose page cache holds the file in
 * 2 MiB folios (ext4 with large folios, Linux 6.16 on; a sequential read
 * or a fault in such a mapping reads ahead in them) maps each folio with
 * one page-directory entry instead of 512 page-table entries.  Advice
 * only: where the kernel cannot, the pages are mapped 4 KiB at a time as
 * by a plain mmap, and every byte reads the same either way.
 */
#ifndef HB_MAP_H
#define HB_MAP_H

#include "hb_base.h"
#include "hb_err.h"

/* the boundary hb_map_read places a mapping on */
#define HB_MAP_ALIGN ((size_t)2 << 20)

/* Map len bytes of fd from offset 0, read-only and shared; *map is the
 * mapping (HB_MAP_ALIGN-aligned where the address space allowed it).
 * `what` names the file in the error. */
int hb_map_read(int fd, size_t len, const uint8_t **map, const char *what, struct hb_error *err);

/*
 * The same address-space shape (len bytes from an HB_MAP_ALIGN boundary,
 * released by hb_map_release), but anonymous memory advised MADV_HUGEPAGE
 * into which the file's bytes are read with pread, then made read-only: a
 * snapshot that no later change to the file reaches.  The whole
 * HB_MAP_ALIGN blocks inside each hole (ascending, not overlapping: byte
 * ranges the caller never reads through this memory) stay unreadable,
 * PROT_NONE, so that a read there faults instead of seeing zeros, and take
 * no memory; the rest of a hole is read with its neighbours, which so stay
 * in 2 MiB pages.  A file
 * shorter than len is an error naming the byte where it ends; on any
 * error nothing stays mapped.
 */
struct hb_map_hole {
	uint64_t off, len;
};
int hb_map_load(int fd, size_t len, const struct hb_map_hole *holes, size_t nholes, const uint8_t **map,
		const char *what, struct hb_error *err);
void hb_map_release(const uint8_t *map, size_t len);

/*
 * Bytes of the areas that start in [start, end) which the kernel maps with
 * page-directory entries, from the text of /proc/self/smaps: the sum of
 * their FilePmdMapped (a file mapping) and AnonHugePages (memory read by
 * hb_map_load, split into several areas by its holes and protections)
 * lines, kB; 0 where none.  hb_map_pmd_bytes reads the process's own smaps
 * for the len bytes at map (0 where it cannot).
 */
uint64_t hb_smaps_pmd_bytes(const char *smaps, uintptr_t start, uintptr_t end);
uint64_t hb_map_pmd_bytes(const uint8_t *map, size_t len);

#endif
