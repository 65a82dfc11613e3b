/* missive/version.h — the one place the version lives.
 *
 * The Makefile, the .pc file, the Debian package and `--version` all read MV_VERSION_STRING from
 * here. The macros say which headers a program was compiled against; mv_version() says which
 * library it runs with (they differ when a program built against one release loads another). */
#ifndef MISSIVE_VERSION_H
#define MISSIVE_VERSION_H

#define MV_VERSION_MAJOR 0
#define MV_VERSION_MINOR 2
#define MV_VERSION_PATCH 0
#define MV_VERSION_STRING "0.2.0"
/* MAJOR·1000000 + MINOR·1000 + PATCH, for #if comparisons (as SQLITE_VERSION_NUMBER). */
#define MV_VERSION_NUMBER (MV_VERSION_MAJOR * 1000000 + MV_VERSION_MINOR * 1000 + MV_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, "X.Y.Z" (static storage; never NULL). */
const char *mv_version(void);

#ifdef __cplusplus
}
#endif

#endif
