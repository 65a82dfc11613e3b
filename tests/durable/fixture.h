/* fixture.h — what every durable test needs: a fresh migrated store of a given kind (see
 * tests/support/stores.h) and a manual clock. Header-only so each test binary stays
 * self-contained. */
#ifndef MISSIVE_TESTS_DURABLE_FIXTURE_H
#define MISSIVE_TESTS_DURABLE_FIXTURE_H

#include "missive/base.h"
#include "missive/durable.h"
#include "missive/store.h"
#include "support/stores.h"

/* A fresh migrated store of that kind ("sqlite" or "postgres"); its URL goes to url_out. */
static inline mv_store *fixture_store(const char *kind, const char *name, char *url_out,
                                      size_t url_size) {
    const char *url = test_store_url(kind, name);
    if (!url) return NULL;
    if (url_out) snprintf(url_out, url_size, "%s", url);
    mv_store *s = NULL;
    mv_err err = {0};
    if (mv_store_open(url, NULL, &s, &err) != MV_OK || mv_store_migrate(s, NULL, &err) != MV_OK) {
        fprintf(stderr, "fixture store: %s\n", err.message);
        mv_store_close(s);
        return NULL;
    }
    return s;
}

#endif
