/*
 * hb_base.h: the first include of every Hebrus source file.
 *
 * It pulls in the C library headers every file uses and then bans the string
 * and formatting functions whose misuse produces silent overflows
 * (the idea of git's banned.h).  A banned call becomes a compile error that
 * names the function; use snprintf, memcpy with an explicit length, or the
 * helpers in hb_parse.h instead.
 */
#ifndef HB_BASE_H
#define HB_BASE_H

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HB_BANNED(func) sorry_##func##_is_banned_in_hebrus

#undef strcpy
#define strcpy(x, y) HB_BANNED(strcpy)
#undef strcat
#define strcat(x, y) HB_BANNED(strcat)
#undef strncpy
#define strncpy(x, y, n) HB_BANNED(strncpy)
#undef strncat
#define strncat(x, y, n) HB_BANNED(strncat)
#undef sprintf
#define sprintf(...) HB_BANNED(sprintf)
#undef vsprintf
#define vsprintf(...) HB_BANNED(vsprintf)
#undef strtok
#define strtok(x, y) HB_BANNED(strtok)
#undef gets
#define gets(x) HB_BANNED(gets)
#undef atoi
#define atoi(x) HB_BANNED(atoi)
#undef atol
#define atol(x) HB_BANNED(atol)

#define HB_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
