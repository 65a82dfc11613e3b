/* registry.c — the set of registered templates, shared by every request thread.
 *
 * Readers take no lock: the set is an immutable table (registration order, the reference's Map
 * order: replacing a code keeps its original position) behind an atomic pointer. A change builds
 * a new table under the writers' mutex, publishes it, waits until no reader is inside a lookup
 * that began before (a count of readers in flight; a lookup is a short scan), and only then
 * releases the old table. Each table holds one reference per template; find() hands out
 * another, so a template replaced or removed while a request uses it lives until that request
 * releases it. Loading a directory registers every good file and reports every bad one. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_files.h"
#include "missive/base.h"
#include "missive/template.h"

typedef struct table {
    size_t n;
    mv_template *items[]; /* registration order, one reference each */
} table;

struct mv_registry {
    pthread_mutex_t mu;   /* writers */
    _Atomic(table *) cur; /* never NULL */
    atomic_long readers;  /* lookups in flight */
};

static table *table_new(size_t n) {
    table *t = calloc(1, sizeof *t + n * sizeof t->items[0]);
    if (t) t->n = n;
    return t;
}

static void table_free(table *t) {
    for (size_t i = 0; t && i < t->n; i++)
        mv_template_release(t->items[i]);
    free(t);
}

/* The current table for one lookup, between enter() and leave(). */
static const table *enter(mv_registry *reg) {
    atomic_fetch_add(&reg->readers, 1);
    return atomic_load(&reg->cur);
}

static void leave(mv_registry *reg) { atomic_fetch_sub(&reg->readers, 1); }

/* After a new table was published: returns once every lookup that could still see the old one
 * has left (a lookup that enters now sees the new one). */
static void wait_readers(mv_registry *reg) {
    while (atomic_load(&reg->readers) != 0)
        sched_yield();
}

/* Publishes t (the caller holds mu) and frees the table it replaces. */
static void publish(mv_registry *reg, table *t) {
    table *old = atomic_exchange(&reg->cur, t);
    wait_readers(reg);
    table_free(old);
}

mv_registry *mv_registry_new(void) {
    mv_registry *reg = calloc(1, sizeof *reg);
    table *t = table_new(0);
    if (!reg || !t || pthread_mutex_init(&reg->mu, NULL) != 0) {
        free(reg);
        free(t);
        return NULL;
    }
    atomic_init(&reg->cur, t);
    return reg;
}

void mv_registry_free(mv_registry *reg) {
    if (!reg) return;
    table_free(atomic_load(&reg->cur));
    pthread_mutex_destroy(&reg->mu);
    free(reg);
}

/* Index of template_cd in t, or t->n. */
static size_t index_of(const table *t, const char *template_cd) {
    size_t i = 0;
    while (i < t->n && strcmp(t->items[i]->template_cd, template_cd) != 0)
        i++;
    return i;
}

/* A copy of t with room for extra more entries (references taken), or NULL. */
static table *copy_of(const table *t, size_t extra) {
    table *c = table_new(t->n + extra);
    for (size_t i = 0; c && i < t->n; i++)
        c->items[i] = mv_template_retain(t->items[i]);
    return c;
}

static mv_code put(mv_registry *reg, mv_template *t, mv_err *err) {
    pthread_mutex_lock(&reg->mu);
    const table *cur = atomic_load(&reg->cur);
    size_t i = index_of(cur, t->template_cd);
    table *next = copy_of(cur, i < cur->n ? 0 : 1);
    if (!next) {
        pthread_mutex_unlock(&reg->mu);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory registering template \"%s\"",
                          t->template_cd);
    }
    if (i < cur->n) mv_template_release(next->items[i]);
    next->items[i] = mv_template_retain(t);
    publish(reg, next);
    pthread_mutex_unlock(&reg->mu);
    return MV_OK;
}

void mv_registry_put(mv_registry *reg, mv_template *t) {
    if (reg && t) put(reg, t, NULL);
}

mv_code mv_registry_register(mv_registry *reg, const json_t *json, const char *source_name,
                             mv_err *err) {
    mv_template *t;
    mv_code rc = mv_template_parse(json, source_name, &t, err);
    if (rc != MV_OK) return rc;
    rc = put(reg, t, err);
    mv_template_release(t);
    return rc;
}

mv_code mv_registry_load_file(mv_registry *reg, const char *path, mv_err *err) {
    mv_template *t;
    mv_code rc = mv_template_load_file(path, &t, err);
    if (rc != MV_OK) return rc;
    rc = put(reg, t, err);
    mv_template_release(t);
    return rc;
}

/* Appends one line to the combined report (fixed size: says how many did not fit). */
static void report_line(char *buf, size_t size, size_t *used, size_t *dropped, const char *line) {
    size_t need = strlen(line) + (*used ? 1 : 0);
    if (*dropped || *used + need + 40 >= size) {
        (*dropped)++;
        return;
    }
    *used += (size_t)snprintf(buf + *used, size - *used, "%s%s", *used ? "\n" : "", line);
}

mv_code mv_registry_load_dir(mv_registry *reg, const char *dir, mv_err *err) {
    mv__json_files files;
    mv_code rc = mv__json_files_list(dir, "template directory", &files, err);
    if (rc != MV_OK) return rc;
    size_t n = files.n;

    /* Templates loaded by this call, to catch two files defining the same code. */
    mv_template **loaded = n ? calloc(n, sizeof *loaded) : NULL;
    const char **loaded_from = n ? calloc(n, sizeof *loaded_from) : NULL;
    if (n && (!loaded || !loaded_from)) {
        free(loaded);
        free((void *)loaded_from);
        goto nomem;
    }
    size_t nloaded = 0, failed = 0, used = 0, dropped = 0;
    char report[sizeof err->message];
    report[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *path = files.paths[i];
        mv_err e;
        mv_err_clear(&e);
        mv_template *t;
        if (mv_template_load_file(path, &t, &e) == MV_OK) {
            for (size_t j = 0; j < nloaded; j++) {
                if (strcmp(loaded[j]->template_cd, t->template_cd) != 0) continue;
                mv_err_set(&e, MV_INVALID_TEMPLATE, "%s: template \"%s\" is already defined in %s",
                           path, t->template_cd, loaded_from[j]);
                mv_template_release(t);
                t = NULL;
                break;
            }
        } else {
            t = NULL;
        }
        if (t && put(reg, t, &e) == MV_OK) {
            loaded[nloaded] = t;
            loaded_from[nloaded++] = strrchr(path, '/') + 1; /* the file's name */
            continue;
        }
        mv_template_release(t);
        failed++;
        report_line(report, sizeof report, &used, &dropped, e.message);
    }
    for (size_t j = 0; j < nloaded; j++)
        mv_template_release(loaded[j]);
    free(loaded);
    free((void *)loaded_from);
    if (failed) {
        if (dropped) snprintf(report + used, sizeof report - used, "\n… and %zu more", dropped);
        rc = mv_err_set(err, MV_INVALID_TEMPLATE, "%s", report);
    }
    goto done;
nomem:
    rc = mv_err_set(err, MV_NO_MEMORY, "%s: out of memory listing templates", dir);
done:
    mv__json_files_free(&files);
    return rc;
}

mv_template *mv_registry_find(mv_registry *reg, const char *template_cd) {
    if (!reg || !template_cd) return NULL;
    const table *t = enter(reg);
    size_t i = index_of(t, template_cd);
    mv_template *found = i < t->n ? mv_template_retain(t->items[i]) : NULL;
    leave(reg);
    return found;
}

bool mv_registry_has(mv_registry *reg, const char *template_cd) {
    if (!reg || !template_cd) return false;
    const table *t = enter(reg);
    bool found = index_of(t, template_cd) < t->n;
    leave(reg);
    return found;
}

size_t mv_registry_count(mv_registry *reg) {
    if (!reg) return 0;
    size_t n = enter(reg)->n;
    leave(reg);
    return n;
}

json_t *mv_registry_codes(mv_registry *reg) {
    json_t *codes = json_array();
    if (!codes || !reg) return codes;
    const table *t = enter(reg);
    for (size_t i = 0; i < t->n; i++) {
        if (json_array_append_new(codes, json_string(t->items[i]->template_cd)) != 0) {
            json_decref(codes);
            codes = NULL;
            break;
        }
    }
    leave(reg);
    return codes;
}

bool mv_registry_remove(mv_registry *reg, const char *template_cd) {
    if (!reg || !template_cd) return false;
    pthread_mutex_lock(&reg->mu);
    const table *cur = atomic_load(&reg->cur);
    size_t i = index_of(cur, template_cd);
    table *next = i < cur->n ? table_new(cur->n - 1) : NULL;
    for (size_t k = 0, j = 0; next && k < cur->n; k++)
        if (k != i) next->items[j++] = mv_template_retain(cur->items[k]);
    if (next) publish(reg, next);
    pthread_mutex_unlock(&reg->mu);
    return next != NULL; /* out of memory: nothing removed */
}

void mv_registry_clear(mv_registry *reg) {
    if (!reg) return;
    table *empty = table_new(0);
    if (!empty) return;
    pthread_mutex_lock(&reg->mu);
    publish(reg, empty);
    pthread_mutex_unlock(&reg->mu);
}

void mv_registry_swap(mv_registry *reg, mv_registry *other) {
    if (!reg || !other || reg == other) return;
    /* always in address order, so two swaps of the same pair cannot deadlock */
    mv_registry *first = reg < other ? reg : other, *second = reg < other ? other : reg;
    pthread_mutex_lock(&first->mu);
    pthread_mutex_lock(&second->mu);
    table *mine = atomic_load(&reg->cur);
    atomic_store(&reg->cur, atomic_exchange(&other->cur, mine));
    /* the tables changed hands, none is freed: once the lookups that began before have left,
     * freeing either registry frees only what its own readers could see */
    wait_readers(reg);
    wait_readers(other);
    pthread_mutex_unlock(&second->mu);
    pthread_mutex_unlock(&first->mu);
}
