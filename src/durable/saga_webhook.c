/* saga_webhook.c — saga definitions written as JSON files whose steps and compensations are
 * webhooks (DESIGN "Sagas and approvals over HTTP"), adapted to mv_saga_definition and kept in a
 * book by name.
 *
 * The adapter adds no state of its own: each step is one mv_saga_step() whose executor POSTs the
 * step call and maps the webhook outcome onto what the engine must know — 2xx committed, 4xx or
 * never sent conclusively not committed (MV_SAGA_STEP_FAILED: the saga compensates), anything
 * else ambiguous (the saga goes to manual review). The saga input is stored as the step's
 * compensation arguments, so a compensation run days later (or by another process) sends the
 * same input without re-reading anything. A definition is validated completely when loaded, so a
 * bad file stops the daemon at start, never a saga halfway. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/callctx.h"
#include "base/json_files.h"
#include "durable/durable_internal.h"
#include "missive/saga_webhook.h"

#define MAX_ATTEMPTS_LIMIT 1000

typedef struct wh_def wh_def;

typedef struct wh_step {
    wh_def *def;
    char *name, *run_url, *compensate_url;
} wh_step;

struct wh_def {
    mv_saga_definition def; /* what the engine sees; def.ctx is this struct */
    const mv_webhook_config *wh;
    char *name, *capability;
    int64_t backoff_initial, backoff_max;
    wh_step *steps;
    mv_saga_compensator *compensators;
    size_t nsteps;
};

struct mv_saga_book {
    const mv_webhook_config *wh;
    wh_def **defs;
    size_t n, cap;
};

/* ---- the webhook calls ------------------------------------------------------------------- */

typedef struct step_call {
    const wh_step *step;
    mv_saga_ctx *saga;
    const json_t *input;
} step_call;

static mv_code execute_step(mv_saga_step_call *call, void *p, json_t **result, mv_err *err) {
    step_call *sc = p;
    json_t *body = json_pack("{s:s, s:s, s:O, s:o, s:s}", "sagaId", call->saga_id, "step",
                             call->step, "input", (json_t *)sc->input, "results",
                             mv_saga_ctx_results(sc->saga), "effectId", call->effect_id);
    if (!body) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_webhook_response res = {0};
    mv_err werr = {0};
    mv__callctx_call("saga_step", NULL, NULL, call->saga_id);
    mv_webhook_post(sc->step->def->wh, sc->step->run_url, body, call->effect_id, &res, &werr);
    json_decref(body);
    mv_code rc = MV_OK;
    char code[65], words[256]; /* what the step said, without its URL (the log has that) */
    mv_webhook_failure_words(&res, code, words);
    switch (res.outcome) {
    case MV_WEBHOOK_OK:
        /* The far side said it is done: committed, whatever the body. A body that is not JSON
         * (or none) is kept as null rather than turning a done effect into an unknown one. */
        *result = res.json ? json_incref(res.json) : json_null();
        break;
    case MV_WEBHOOK_REJECTED:
    case MV_WEBHOOK_NOT_SENT:
        mv_strlcpy(call->error_code,
                   res.outcome == MV_WEBHOOK_REJECTED ? "step_rejected" : "step_not_sent",
                   sizeof call->error_code);
        rc = mv_err_set(err, MV_SAGA_STEP_FAILED, "saga step %s: %s", call->step, words);
        break;
    case MV_WEBHOOK_AMBIGUOUS:
        rc = mv_err_set(err, MV_UPSTREAM_FAILED, "saga step %s: %s", call->step, words);
        break;
    }
    mv_webhook_response_free(&res);
    return rc;
}

static mv_code compensate_step(const json_t *args, const mv_saga_compensation_call *call, void *p,
                               mv_err *err) {
    const wh_step *step = p;
    json_t *input = json_object_get(args, "input");
    json_t *body = json_pack("{s:s, s:s, s:O, s:O, s:s, s:i}", "sagaId", call->saga_id, "step",
                             call->step, "input", input ? input : json_null(), "result",
                             call->result ? (json_t *)call->result : json_null(),
                             "compensationEffectId", call->effect_id, "attempt", call->attempt);
    if (!body) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_webhook_response res = {0};
    mv_err werr = {0};
    mv__callctx_call("saga_compensation", NULL, NULL, call->saga_id);
    mv_code rc =
        mv_webhook_post(step->def->wh, step->compensate_url, body, call->effect_id, &res, &werr);
    json_decref(body);
    char code[65], words[256];
    mv_webhook_failure_words(&res, code, words);
    mv_webhook_response_free(&res);
    if (rc != MV_OK)
        return mv_err_set(err, MV_UPSTREAM_FAILED, "saga compensation %s: %s", call->step, words);
    return MV_OK;
}

static mv_code run_definition(mv_saga_ctx *ctx, const json_t *input, void *def_ctx, mv_err *err) {
    wh_def *d = def_ctx;
    json_t *args = json_pack("{s:O}", "input", (json_t *)input);
    if (!args) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    mv_code rc = MV_OK;
    for (size_t i = 0; i < d->nsteps && rc == MV_OK; i++) {
        step_call sc = {.step = &d->steps[i], .saga = ctx, .input = input};
        rc = mv_saga_step(ctx, d->steps[i].name, args, execute_step, &sc, NULL, err);
    }
    json_decref(args);
    return rc;
}

/* initial·2^(attempt−1), capped at max. */
static int64_t backoff(int attempt, void *def_ctx) {
    const wh_def *d = def_ctx;
    int64_t delay = d->backoff_initial;
    for (int i = 1; i < attempt && delay < d->backoff_max; i++)
        delay = delay > d->backoff_max / 2 ? d->backoff_max : delay * 2;
    return delay < d->backoff_max ? delay : d->backoff_max;
}

/* ---- parsing ----------------------------------------------------------------------------- */

static void def_free(wh_def *d) {
    if (!d) return;
    for (size_t i = 0; i < d->nsteps; i++) {
        free(d->steps[i].name);
        free(d->steps[i].run_url);
        free(d->steps[i].compensate_url);
    }
    free(d->steps);
    free(d->compensators);
    free(d->name);
    free(d->capability);
    free(d);
}

typedef struct parse {
    const char *source;
    mv_err *err;
} parse;

static mv_code fail(const parse *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static mv_code fail(const parse *p, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mv_err_set(p->err, MV_INVALID_CONFIG, "%s: %s", p->source, msg);
}

/* Fails on the first key of obj that is not in allowed (NULL-terminated); path prefixes it. */
static mv_code only_keys(const parse *p, const json_t *obj, const char *path,
                         const char *const *allowed) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        (void)v;
        const char *const *a = allowed;
        while (*a && strcmp(*a, key) != 0)
            a++;
        if (!*a) return fail(p, "unknown key \"%s%s\"", path, key);
    }
    return MV_OK;
}

static bool valid_url(const char *s) {
    size_t skip = strncmp(s, "http://", 7) == 0 ? 7 : strncmp(s, "https://", 8) == 0 ? 8 : 0;
    if (!skip || !s[skip] || s[skip] == '/') return false;
    for (const char *c = s; *c; c++)
        if ((unsigned char)*c <= 0x20 || *c == 0x7f) return false;
    return true;
}

/* {"webhook": URL} at path (e.g. "steps[0].run"); *out is a malloc'd copy. */
static mv_code read_call(const parse *p, const json_t *step, const char *key, const char *path,
                         char **out) {
    json_t *v = json_object_get(step, key);
    if (!json_is_object(v)) return fail(p, "%s.%s must be an object {\"webhook\": URL}", path, key);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s.%s.", path, key);
    static const char *const allowed[] = {"webhook", NULL};
    mv_code rc = only_keys(p, v, prefix, allowed);
    if (rc) return rc;
    const char *url = mv_json_str(v, "webhook");
    if (!url || !valid_url(url))
        return fail(p, "%s.%s.webhook must be an http:// or https:// URL%s%s%s", path, key,
                    url ? ", got \"" : "", url ? url : "", url ? "\"" : "");
    *out = strdup(url);
    return *out ? MV_OK : mv_err_set(p->err, MV_NO_MEMORY, "out of memory");
}

static bool get_int(const json_t *v, int64_t min, int64_t max, int64_t *out) {
    if (!json_is_integer(v)) return false;
    json_int_t i = json_integer_value(v);
    if (i < min || i > max) return false;
    *out = i;
    return true;
}

static mv_code read_retry(const parse *p, const json_t *root, wh_def *d) {
    d->def.max_attempts = MV_DEFAULT_SAGA_MAX_ATTEMPTS;
    d->backoff_initial = MV_DEFAULT_SAGA_BACKOFF_INITIAL_MS;
    d->backoff_max = MV_DEFAULT_SAGA_BACKOFF_MAX_MS;
    json_t *retry = json_object_get(root, "retry");
    if (!retry) return MV_OK;
    if (!json_is_object(retry)) return fail(p, "retry must be an object");
    static const char *const allowed[] = {"maxAttempts", "backoffMs", NULL};
    mv_code rc = only_keys(p, retry, "retry.", allowed);
    if (rc) return rc;
    json_t *v = json_object_get(retry, "maxAttempts");
    int64_t n;
    if (v) {
        if (!get_int(v, 1, MAX_ATTEMPTS_LIMIT, &n))
            return fail(p, "retry.maxAttempts must be an integer between 1 and %d",
                        MAX_ATTEMPTS_LIMIT);
        d->def.max_attempts = (int)n;
    }
    json_t *b = json_object_get(retry, "backoffMs");
    if (!b) return MV_OK;
    if (!json_is_object(b)) return fail(p, "retry.backoffMs must be an object");
    static const char *const ballowed[] = {"initial", "max", NULL};
    if ((rc = only_keys(p, b, "retry.backoffMs.", ballowed))) return rc;
    if ((v = json_object_get(b, "initial"))) {
        if (!get_int(v, 0, MV_MAX_SAFE_INT, &n))
            return fail(p, "retry.backoffMs.initial must be a non-negative integer");
        d->backoff_initial = n;
    }
    if ((v = json_object_get(b, "max"))) {
        if (!get_int(v, 0, MV_MAX_SAFE_INT, &n))
            return fail(p, "retry.backoffMs.max must be a non-negative integer");
        d->backoff_max = n;
    }
    if (d->backoff_max < d->backoff_initial)
        return fail(p, "retry.backoffMs.max must be at least retry.backoffMs.initial");
    return MV_OK;
}

static mv_code read_steps(const parse *p, const json_t *root, wh_def *d) {
    json_t *steps = json_object_get(root, "steps");
    if (!json_is_array(steps) || json_array_size(steps) == 0)
        return fail(p, "steps must be a non-empty array");
    size_t n = json_array_size(steps);
    d->steps = calloc(n, sizeof *d->steps);
    d->compensators = calloc(n, sizeof *d->compensators);
    if (!d->steps || !d->compensators) return mv_err_set(p->err, MV_NO_MEMORY, "out of memory");
    static const char *const allowed[] = {"name", "run", "compensate", NULL};
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(steps, i);
        char path[32];
        snprintf(path, sizeof path, "steps[%zu]", i);
        if (!json_is_object(s)) return fail(p, "%s must be an object", path);
        char prefix[40];
        snprintf(prefix, sizeof prefix, "%s.", path);
        mv_code rc = only_keys(p, s, prefix, allowed);
        if (rc) return rc;
        wh_step *st = &d->steps[i];
        st->def = d;
        d->nsteps = i + 1; /* owned from here: def_free releases what was read */
        const char *name = mv_json_str(s, "name");
        if (!mv_valid_token(name, 128))
            return fail(p,
                        "%s.name must be a string of 1 to 128 printable characters without "
                        "spaces",
                        path);
        for (size_t k = 0; k < i; k++)
            if (strcmp(d->steps[k].name, name) == 0)
                return fail(p, "%s.name \"%s\" is used by steps[%zu] as well", path, name, k);
        if (!(st->name = strdup(name))) return mv_err_set(p->err, MV_NO_MEMORY, "out of memory");
        if ((rc = read_call(p, s, "run", path, &st->run_url)) ||
            (rc = read_call(p, s, "compensate", path, &st->compensate_url)))
            return rc;
        d->compensators[i] = (mv_saga_compensator){st->name, compensate_step, st};
    }
    d->def.compensators = d->compensators;
    d->def.ncompensators = n;
    return MV_OK;
}

static mv_code parse_definition(const parse *p, const json_t *root, const mv_webhook_config *wh,
                                wh_def **out) {
    *out = NULL;
    if (!json_is_object(root)) return fail(p, "a saga definition must be a JSON object");
    static const char *const allowed[] = {"name", "capability", "retry", "steps", NULL};
    mv_code rc = only_keys(p, root, "", allowed);
    if (rc) return rc;
    wh_def *d = calloc(1, sizeof *d);
    if (!d) return mv_err_set(p->err, MV_NO_MEMORY, "out of memory");
    d->wh = wh;
    const char *name = mv_json_str(root, "name");
    json_t *cap = json_object_get(root, "capability");
    if (!mv_valid_token(name, 128)) {
        rc = fail(p, "name must be a string of 1 to 128 printable characters without spaces");
    } else if (cap && !json_is_null(cap) &&
               (!json_is_string(cap) || !mv_valid_capability(json_string_value(cap)) ||
                strlen(json_string_value(cap)) > 128)) {
        rc = fail(p, "capability must be a capability id such as \"orders.checkout\" (lowercase "
                     "letters and digits, parts joined by '.' or '-')");
    } else if (!(d->name = strdup(name)) ||
               (json_is_string(cap) && !(d->capability = strdup(json_string_value(cap))))) {
        rc = mv_err_set(p->err, MV_NO_MEMORY, "out of memory");
    } else if (!(rc = read_retry(p, root, d)) && !(rc = read_steps(p, root, d))) {
        d->def.name = d->name;
        d->def.capability = d->capability;
        d->def.run = run_definition;
        d->def.backoff = backoff;
        d->def.ctx = d;
        mv_err check = {0};
        if (mv_saga_definition_check(&d->def, &check) != MV_OK) rc = fail(p, "%s", check.message);
    }
    if (rc) {
        def_free(d);
        return rc;
    }
    *out = d;
    return MV_OK;
}

/* ---- the book ------------------------------------------------------------------------------ */

mv_saga_book *mv_saga_book_new(const mv_webhook_config *wh) {
    mv_saga_book *b = calloc(1, sizeof *b);
    if (b) b->wh = wh;
    return b;
}

void mv_saga_book_free(mv_saga_book *book) {
    if (!book) return;
    for (size_t i = 0; i < book->n; i++)
        def_free(book->defs[i]);
    free(book->defs);
    free(book);
}

static wh_def *find(const mv_saga_book *book, const char *name) {
    for (size_t i = 0; book && name && i < book->n; i++)
        if (strcmp(book->defs[i]->name, name) == 0) return book->defs[i];
    return NULL;
}

mv_code mv_saga_book_add_json(mv_saga_book *book, const json_t *json, const char *source_name,
                              mv_err *err) {
    parse p = {.source = source_name ? source_name : "saga definition", .err = err};
    wh_def *d = NULL;
    mv_code rc = parse_definition(&p, json, book->wh, &d);
    if (rc) return rc;
    if (!d) return mv_err_set(err, MV_INTERNAL, "%s: the definition was not built", p.source);
    if (find(book, d->name)) {
        rc = fail(&p, "saga definition \"%s\" is already defined", d->name);
        def_free(d);
        return rc;
    }
    if (book->n == book->cap) {
        size_t cap = book->cap ? book->cap * 2 : 8;
        wh_def **nd = realloc(book->defs, cap * sizeof *nd);
        if (!nd) {
            def_free(d);
            return mv_err_set(err, MV_NO_MEMORY, "out of memory");
        }
        book->defs = nd;
        book->cap = cap;
    }
    book->defs[book->n++] = d;
    return MV_OK;
}

mv_code mv_saga_book_load_file(mv_saga_book *book, const char *path, mv_err *err) {
    json_t *json = NULL;
    mv_code rc = mv_json_load_file(path, &json, err);
    if (rc == MV_INVALID_JSON) {
        if (err) err->code = MV_INVALID_CONFIG; /* a definition file that does not parse */
        return MV_INVALID_CONFIG;
    }
    if (rc) return rc;
    rc = mv_saga_book_add_json(book, json, path, err);
    json_decref(json);
    return rc;
}

mv_code mv_saga_book_load_dir(mv_saga_book *book, const char *dir, mv_err *err) {
    mv__json_files files;
    mv_code rc = mv__json_files_list(dir, "the saga directory", &files, err);
    if (rc != MV_OK) return rc;
    char report[sizeof err->message] = "";
    size_t used = 0, failed = 0, dropped = 0;
    for (size_t i = 0; i < files.n; i++) {
        mv_err e = {0};
        if (mv_saga_book_load_file(book, files.paths[i], &e) == MV_OK) continue;
        if (e.code == MV_NO_MEMORY) {
            rc = mv_err_copy(err, &e);
            goto done;
        }
        failed++;
        size_t need = strlen(e.message) + (used ? 1 : 0);
        if (dropped || used + need + 40 >= sizeof report) {
            dropped++;
            continue;
        }
        used += (size_t)snprintf(report + used, sizeof report - used, "%s%s", used ? "\n" : "",
                                 e.message);
    }
    if (failed) {
        if (dropped) snprintf(report + used, sizeof report - used, "\n… and %zu more", dropped);
        rc = mv_err_set(err, MV_INVALID_CONFIG, "%s", report);
    }
done:
    mv__json_files_free(&files);
    return rc;
}

const mv_saga_definition *mv_saga_book_find(const mv_saga_book *book, const char *name) {
    wh_def *d = find(book, name);
    return d ? &d->def : NULL;
}
