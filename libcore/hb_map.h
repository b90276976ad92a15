/*
 * hb_map.h: a file mapped read-only for weights used in place.
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
void hb_map_release(const uint8_t *map, size_t len);

/*
 * Bytes of the mapping that starts at `start` which the kernel maps with
 * page-directory entries, from the text of /proc/self/smaps (the
 * FilePmdMapped line of that area's entry, kB): 0 where the area or the
 * line is absent.  hb_map_pmd_bytes reads the process's own smaps (0 where
 * it cannot).
 */
uint64_t hb_smaps_pmd_bytes(const char *smaps, uintptr_t start);
uint64_t hb_map_pmd_bytes(const uint8_t *map);

#endif
