/* version.c — mv_version(): the version this library was built as, for programs that load it
 * dynamically and must not trust the MV_VERSION_* macros they were compiled against. */
#include "missive/version.h"

_Static_assert(MV_VERSION_MAJOR >= 0 && MV_VERSION_MINOR >= 0 && MV_VERSION_PATCH >= 0,
               "version components are non-negative");

const char *mv_version(void) { return MV_VERSION_STRING; }
