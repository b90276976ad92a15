/*
 * hb_fault.h: deterministic fault injection, a test seam.
 *
 * The I/O and publication code asks hb_fault_check() at each injection site;
 * tests arm a site so that its Nth call (1-based) fails with a chosen errno
 * (or, for the SHORT sites, transfers fewer bytes than asked).  Nothing in a
 * normal run arms a site; the cost is one atomic load per call.  No binary
 * exposes a flag for this (AFN-013: a test seam is not a product feature).
 */
#ifndef HB_FAULT_H
#define HB_FAULT_H

#include "hb_base.h"

enum hb_fault_site {
	HB_FAULT_WRITE,       /* pwrite/write fails */
	HB_FAULT_SHORT_WRITE, /* pwrite/write transfers fewer bytes */
	HB_FAULT_READ,        /* pread fails */
	HB_FAULT_SHORT_READ,  /* pread transfers fewer bytes */
	HB_FAULT_FSYNC,       /* fsync of a file fails */
	HB_FAULT_DIRSYNC,     /* fsync of a directory fails */
	HB_FAULT_RENAME,      /* the publishing rename fails */
	HB_FAULT_OPEN,        /* open of a new file fails */
	HB_FAULT_SITE_COUNT
};

/* Arm site so that its nth call from now fails with errno_value. */
void hb_fault_arm(enum hb_fault_site site, unsigned nth, int errno_value);
/* Disarm every site and reset the counters. */
void hb_fault_reset(void);
/* Returns 0 normally, or the errno to inject when the armed call is reached. */
int hb_fault_check(enum hb_fault_site site);
/* The crash seam from inside a (forked) test: SIGKILL at the nth call of
 * hb_fault_check from now; 0 disarms it. */
void hb_fault_arm_kill(unsigned long long nth);
/* How many injection-site calls the process has made (the crash seam's
 * count, never reset). */
unsigned long long hb_fault_events(void);
/* How many times a site has been reached since the last reset. */
unsigned hb_fault_calls(enum hb_fault_site site);

#endif
