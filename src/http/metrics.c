/* metrics.c — counters, gauges and histograms behind one mutex, rendered as Prometheus text.
 *
 * A series is found by its metric name and its rendered label string ({a="x",b="y"}), so the
 * label set is escaped once, at the update, and rendering is a plain walk. Families keep their
 * registration order, which keeps the output stable for people and tests. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "http/metrics.h"

static const double BUCKETS[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define NBUCKETS (sizeof BUCKETS / sizeof BUCKETS[0])

typedef struct series {
    char *labels; /* "" or "{a=\"x\"}" */
    double value; /* counter / gauge; histogram: sum */
    unsigned long long count;
    unsigned long long buckets[NBUCKETS];
} series;

typedef struct family {
    char *name, *type, *help;
    series *s;
    size_t n, cap;
} family;

struct mv_metrics {
    pthread_mutex_t mu;
    family *f;
    size_t n, cap;
    mv_metrics_collector collector;
    void *collector_ctx;
};

mv_metrics *mv_metrics_new(void) {
    mv_metrics *m = calloc(1, sizeof *m);
    if (m) pthread_mutex_init(&m->mu, NULL);
    return m;
}

void mv_metrics_free(mv_metrics *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) {
        for (size_t j = 0; j < m->f[i].n; j++)
            free(m->f[i].s[j].labels);
        free(m->f[i].s);
        free(m->f[i].name);
        free(m->f[i].type);
        free(m->f[i].help);
    }
    free(m->f);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void mv_metrics_set_collector(mv_metrics *m, mv_metrics_collector fn, void *ctx) {
    pthread_mutex_lock(&m->mu);
    m->collector = fn;
    m->collector_ctx = ctx;
    pthread_mutex_unlock(&m->mu);
}

/* ---- growable text ----------------------------------------------------------------------- */

static void buf_fmt(mv_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_fmt(mv_strbuf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) mv_strbuf_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static void buf_value(mv_strbuf *b, double v) {
    if (isnan(v))
        mv_strbuf_adds(b, "NaN");
    else if (isinf(v))
        mv_strbuf_adds(b, v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 1e15)
        buf_fmt(b, "%.0f", v);
    else
        buf_fmt(b, "%.15g", v);
}

/* {a="x",b="y"} with \, " and newline escaped; "" for no labels. */
static char *render_labels(const char *const *labels) {
    mv_strbuf b = {0};
    mv_strbuf_adds(&b, "");
    for (size_t i = 0; labels && labels[i] && labels[i + 1]; i += 2) {
        mv_strbuf_adds(&b, i ? "," : "{");
        mv_strbuf_adds(&b, labels[i]);
        mv_strbuf_adds(&b, "=\"");
        for (const char *v = labels[i + 1]; *v; v++) {
            if (*v == '\\')
                mv_strbuf_adds(&b, "\\\\");
            else if (*v == '"')
                mv_strbuf_adds(&b, "\\\"");
            else if (*v == '\n')
                mv_strbuf_adds(&b, "\\n");
            else
                mv_strbuf_add(&b, v, 1);
        }
        mv_strbuf_adds(&b, "\"");
        if (!labels[i + 2] || !labels[i + 3]) mv_strbuf_adds(&b, "}");
    }
    return mv_strbuf_take(&b, NULL);
}

/* ---- lookup (lock held) ------------------------------------------------------------------ */

static family *find_family(mv_metrics *m, const char *name, const char *type) {
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->f[i].name, name) == 0) return &m->f[i];
    if (m->n == m->cap) {
        size_t ncap = m->cap ? m->cap * 2 : 16;
        family *nf = realloc(m->f, ncap * sizeof *nf);
        if (!nf) return NULL;
        m->f = nf;
        m->cap = ncap;
    }
    family *f = &m->f[m->n];
    memset(f, 0, sizeof *f);
    f->name = strdup(name);
    f->type = strdup(type);
    if (!f->name || !f->type) {
        free(f->name);
        free(f->type);
        return NULL;
    }
    m->n++;
    return f;
}

static series *find_series(family *f, const char *l) {
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->s[i].labels, l) == 0) return &f->s[i];
    char *copy = strdup(l);
    if (!copy) return NULL;
    if (f->n == f->cap) {
        size_t ncap = f->cap ? f->cap * 2 : 8;
        series *ns = realloc(f->s, ncap * sizeof *ns);
        if (!ns) {
            free(copy);
            return NULL;
        }
        f->s = ns;
        f->cap = ncap;
    }
    series *s = &f->s[f->n++];
    memset(s, 0, sizeof *s);
    s->labels = copy;
    return s;
}

static series *lookup(mv_metrics *m, const char *name, const char *type, const char *labels) {
    family *f = find_family(m, name, type);
    return f ? find_series(f, labels) : NULL;
}

/* The label string of an update, rendered before the lock is taken: into the caller's buffer
 * (no allocation) when it fits, else onto the heap (*heap, freed by the caller). NULL when out of
 * memory. */
static const char *labels_of(const char *const *labels, char *buf, size_t cap, char **heap) {
    *heap = NULL;
    size_t n = 0;
    bool fits = true;
    for (size_t i = 0; fits && labels && labels[i] && labels[i + 1]; i += 2) {
        const char *parts[] = {i ? "," : "{", labels[i], "=\""};
        for (size_t k = 0; k < 3 && fits; k++) {
            size_t l = strlen(parts[k]);
            if (n + l >= cap)
                fits = false;
            else
                memcpy(buf + n, parts[k], l), n += l;
        }
        for (const char *v = labels[i + 1]; fits && *v; v++) {
            if (n + 3 >= cap)
                fits = false;
            else if (*v == '\\')
                buf[n++] = '\\', buf[n++] = '\\';
            else if (*v == '"')
                buf[n++] = '\\', buf[n++] = '"';
            else if (*v == '\n')
                buf[n++] = '\\', buf[n++] = 'n';
            else
                buf[n++] = *v;
        }
        if (fits && n + 3 >= cap) fits = false;
        if (fits) {
            buf[n++] = '"';
            if (!labels[i + 2] || !labels[i + 3]) buf[n++] = '}';
        }
    }
    if (fits) {
        buf[n] = '\0';
        return buf;
    }
    return *heap = render_labels(labels);
}

/* ---- updates ----------------------------------------------------------------------------- */

void mv_metrics_describe(mv_metrics *m, const char *name, const char *type, const char *help) {
    pthread_mutex_lock(&m->mu);
    family *f = find_family(m, name, type);
    if (f && help && !f->help) f->help = strdup(help);
    pthread_mutex_unlock(&m->mu);
}

void mv_metrics_counter_add(mv_metrics *m, const char *name, const char *const *labels, double v) {
    if (!m || !(v >= 0)) return;
    char buf[512], *heap;
    const char *l = labels_of(labels, buf, sizeof buf, &heap);
    if (!l) return;
    pthread_mutex_lock(&m->mu);
    series *s = lookup(m, name, "counter", l);
    if (s) s->value += v;
    pthread_mutex_unlock(&m->mu);
    free(heap);
}

void mv_metrics_gauge_set(mv_metrics *m, const char *name, const char *const *labels, double v) {
    if (!m) return;
    char buf[512], *heap;
    const char *l = labels_of(labels, buf, sizeof buf, &heap);
    if (!l) return;
    pthread_mutex_lock(&m->mu);
    series *s = lookup(m, name, "gauge", l);
    if (s) s->value = v;
    pthread_mutex_unlock(&m->mu);
    free(heap);
}

void mv_metrics_observe(mv_metrics *m, const char *name, const char *const *labels, double v) {
    if (!m || isnan(v)) return;
    char buf[512], *heap;
    const char *l = labels_of(labels, buf, sizeof buf, &heap);
    if (!l) return;
    pthread_mutex_lock(&m->mu);
    series *s = lookup(m, name, "histogram", l);
    if (s) {
        s->value += v;
        s->count++;
        for (size_t i = 0; i < NBUCKETS; i++)
            if (v <= BUCKETS[i]) s->buckets[i]++;
    }
    pthread_mutex_unlock(&m->mu);
    free(heap);
}

void mv_metrics_histogram_declare(mv_metrics *m, const char *name, const char *const *labels) {
    if (!m) return;
    char buf[512], *heap;
    const char *l = labels_of(labels, buf, sizeof buf, &heap);
    if (!l) return;
    pthread_mutex_lock(&m->mu);
    lookup(m, name, "histogram", l);
    pthread_mutex_unlock(&m->mu);
    free(heap);
}

double mv_metrics_value(mv_metrics *m, const char *name, const char *const *labels) {
    double v = 0;
    char *l = render_labels(labels);
    if (!l) return 0;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n; i++) {
        if (strcmp(m->f[i].name, name) != 0) continue;
        for (size_t j = 0; j < m->f[i].n; j++)
            if (strcmp(m->f[i].s[j].labels, l) == 0)
                v = strcmp(m->f[i].type, "histogram") == 0 ? (double)m->f[i].s[j].count
                                                           : m->f[i].s[j].value;
    }
    pthread_mutex_unlock(&m->mu);
    free(l);
    return v;
}

/* ---- rendering --------------------------------------------------------------------------- */

/* labels "{a=\"x\"}" + le → "{a=\"x\",le=\"0.5\"}" */
static void buf_labels_le(mv_strbuf *b, const char *labels, const char *le) {
    if (labels[0]) {
        mv_strbuf_add(b, labels, strlen(labels) - 1);
        mv_strbuf_adds(b, ",le=\"");
    } else {
        mv_strbuf_adds(b, "{le=\"");
    }
    mv_strbuf_adds(b, le);
    mv_strbuf_adds(b, "\"}");
}

char *mv_metrics_render(mv_metrics *m) {
    pthread_mutex_lock(&m->mu);
    mv_metrics_collector fn = m->collector;
    void *ctx = m->collector_ctx;
    pthread_mutex_unlock(&m->mu);
    if (fn) fn(m, ctx);

    mv_strbuf b = {0};
    mv_strbuf_adds(&b, "");
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n; i++) {
        family *f = &m->f[i];
        /* every family has a HELP line (promtool check metrics): the name when undescribed */
        mv_strbuf_adds(&b, "# HELP ");
        mv_strbuf_adds(&b, f->name);
        mv_strbuf_adds(&b, " ");
        mv_strbuf_adds(&b, f->help ? f->help : f->name);
        mv_strbuf_adds(&b, "\n");
        mv_strbuf_adds(&b, "# TYPE ");
        mv_strbuf_adds(&b, f->name);
        mv_strbuf_adds(&b, " ");
        mv_strbuf_adds(&b, f->type);
        mv_strbuf_adds(&b, "\n");
        bool hist = strcmp(f->type, "histogram") == 0;
        for (size_t j = 0; j < f->n; j++) {
            series *s = &f->s[j];
            if (!hist) {
                mv_strbuf_adds(&b, f->name);
                mv_strbuf_adds(&b, s->labels);
                mv_strbuf_adds(&b, " ");
                buf_value(&b, s->value);
                mv_strbuf_adds(&b, "\n");
                continue;
            }
            for (size_t k = 0; k < NBUCKETS; k++) {
                char le[32];
                snprintf(le, sizeof le, "%g", BUCKETS[k]);
                mv_strbuf_adds(&b, f->name);
                mv_strbuf_adds(&b, "_bucket");
                buf_labels_le(&b, s->labels, le);
                buf_fmt(&b, " %llu\n", s->buckets[k]);
            }
            mv_strbuf_adds(&b, f->name);
            mv_strbuf_adds(&b, "_bucket");
            buf_labels_le(&b, s->labels, "+Inf");
            buf_fmt(&b, " %llu\n", s->count);
            mv_strbuf_adds(&b, f->name);
            mv_strbuf_adds(&b, "_sum");
            mv_strbuf_adds(&b, s->labels);
            mv_strbuf_adds(&b, " ");
            buf_value(&b, s->value);
            mv_strbuf_adds(&b, "\n");
            mv_strbuf_adds(&b, f->name);
            mv_strbuf_adds(&b, "_count");
            mv_strbuf_adds(&b, s->labels);
            buf_fmt(&b, " %llu\n", s->count);
        }
    }
    pthread_mutex_unlock(&m->mu);
    return mv_strbuf_take(&b, NULL);
}
