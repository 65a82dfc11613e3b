/* registry.c — the set of registered templates, shared by every request thread.
 *
 * A mutex guards a small array kept in registration order (the reference's Map order: replacing a
 * code keeps its original position). The registry holds one reference per template; find() hands
 * out another, so a template replaced or removed while a request uses it lives until that request
 * releases it. Loading a directory registers every good file and reports every bad one. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_files.h"
#include "missive/base.h"
#include "missive/template.h"

struct mv_registry {
    pthread_mutex_t mu;
    mv_template **items; /* registration order */
    size_t n, cap;
};

mv_registry *mv_registry_new(void) {
    mv_registry *reg = calloc(1, sizeof *reg);
    if (!reg) return NULL;
    if (pthread_mutex_init(&reg->mu, NULL) != 0) {
        free(reg);
        return NULL;
    }
    return reg;
}

void mv_registry_free(mv_registry *reg) {
    if (!reg) return;
    for (size_t i = 0; i < reg->n; i++)
        mv_template_release(reg->items[i]);
    free(reg->items);
    pthread_mutex_destroy(&reg->mu);
    free(reg);
}

/* Index of template_cd, or reg->n. Call with the lock held. */
static size_t index_of(const mv_registry *reg, const char *template_cd) {
    size_t i = 0;
    while (i < reg->n && strcmp(reg->items[i]->template_cd, template_cd) != 0)
        i++;
    return i;
}

static mv_code put(mv_registry *reg, mv_template *t, mv_err *err) {
    mv_template *old = NULL;
    mv_code rc = MV_OK;
    mv_template_retain(t);
    pthread_mutex_lock(&reg->mu);
    size_t i = index_of(reg, t->template_cd);
    if (i < reg->n) {
        old = reg->items[i];
        reg->items[i] = t;
    } else {
        if (reg->n == reg->cap) {
            size_t cap = reg->cap ? reg->cap * 2 : 16;
            mv_template **items = realloc(reg->items, cap * sizeof *items);
            if (!items) {
                old = t; /* drop the reference we took */
                rc = mv_err_set(err, MV_NO_MEMORY, "out of memory registering template \"%s\"",
                                t->template_cd);
                goto unlock;
            }
            reg->items = items;
            reg->cap = cap;
        }
        reg->items[reg->n++] = t;
    }
unlock:
    pthread_mutex_unlock(&reg->mu);
    mv_template_release(old); /* outside the lock: it may free */
    return rc;
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
    mv_template *t = NULL;
    pthread_mutex_lock(&reg->mu);
    size_t i = index_of(reg, template_cd);
    if (i < reg->n) t = mv_template_retain(reg->items[i]);
    pthread_mutex_unlock(&reg->mu);
    return t;
}

bool mv_registry_has(mv_registry *reg, const char *template_cd) {
    if (!reg || !template_cd) return false;
    pthread_mutex_lock(&reg->mu);
    bool found = index_of(reg, template_cd) < reg->n;
    pthread_mutex_unlock(&reg->mu);
    return found;
}

size_t mv_registry_count(mv_registry *reg) {
    if (!reg) return 0;
    pthread_mutex_lock(&reg->mu);
    size_t n = reg->n;
    pthread_mutex_unlock(&reg->mu);
    return n;
}

json_t *mv_registry_codes(mv_registry *reg) {
    json_t *codes = json_array();
    if (!codes || !reg) return codes;
    pthread_mutex_lock(&reg->mu);
    for (size_t i = 0; i < reg->n; i++) {
        if (json_array_append_new(codes, json_string(reg->items[i]->template_cd)) != 0) {
            json_decref(codes);
            codes = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&reg->mu);
    return codes;
}

bool mv_registry_remove(mv_registry *reg, const char *template_cd) {
    if (!reg || !template_cd) return false;
    mv_template *old = NULL;
    pthread_mutex_lock(&reg->mu);
    size_t i = index_of(reg, template_cd);
    if (i < reg->n) {
        old = reg->items[i];
        memmove(reg->items + i, reg->items + i + 1, (reg->n - i - 1) * sizeof *reg->items);
        reg->n--;
    }
    pthread_mutex_unlock(&reg->mu);
    mv_template_release(old);
    return old != NULL;
}

void mv_registry_swap(mv_registry *reg, mv_registry *other) {
    if (!reg || !other || reg == other) return;
    /* always in address order, so two swaps of the same pair cannot deadlock */
    mv_registry *first = reg < other ? reg : other, *second = reg < other ? other : reg;
    pthread_mutex_lock(&first->mu);
    pthread_mutex_lock(&second->mu);
    mv_registry tmp = *reg;
    reg->items = other->items, reg->n = other->n, reg->cap = other->cap;
    other->items = tmp.items, other->n = tmp.n, other->cap = tmp.cap;
    pthread_mutex_unlock(&second->mu);
    pthread_mutex_unlock(&first->mu);
}

void mv_registry_clear(mv_registry *reg) {
    if (!reg) return;
    pthread_mutex_lock(&reg->mu);
    mv_template **items = reg->items;
    size_t n = reg->n;
    reg->items = NULL;
    reg->n = reg->cap = 0;
    pthread_mutex_unlock(&reg->mu);
    for (size_t i = 0; i < n; i++)
        mv_template_release(items[i]);
    free(items);
}
