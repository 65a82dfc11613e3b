/* jsonlogic.c — JsonLogic (jsonlogic.com): compile a rule once into a tree of nodes, evaluate it
 * many times over different data.
 *
 * Compilation resolves every operator name to an enum and checks argument counts and nesting
 * depth, so a bad rule fails when it is loaded (naming the operator) and evaluation is a switch
 * over the enum with no string compares. Every value flowing through evaluation is a jansson
 * reference owned by whoever received it; the compiled tree is never mutated by evaluation
 * (literals are copied out), so one mv_logic may be evaluated from several threads at once.
 * Operator semantics follow the JavaScript reference implementation (json-logic-js); the JS
 * coercions live in js_value.c. */
#include "missive/jsonlogic.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/js_value.h"

typedef enum {
    OP_LITERAL, /* a JSON value that is not an operation */
    OP_ARRAY,   /* an array literal: its elements are evaluated */
    OP_VAR,
    OP_MISSING,
    OP_MISSING_SOME,
    OP_IF,
    OP_EQ,
    OP_STRICT_EQ,
    OP_NE,
    OP_STRICT_NE,
    OP_NOT,
    OP_TRUTHY,
    OP_OR,
    OP_AND,
    OP_LT,
    OP_LE,
    OP_GT,
    OP_GE,
    OP_IN,
    OP_CAT,
    OP_SUBSTR,
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_MOD,
    OP_MIN,
    OP_MAX,
    OP_MERGE,
    OP_MAP,
    OP_FILTER,
    OP_REDUCE,
    OP_ALL,
    OP_NONE,
    OP_SOME,
} logic_op;

#define ANY -1

/* Operator names and how many arguments each accepts (max ANY = unbounded). */
static const struct {
    const char *name;
    logic_op op;
    int min_args, max_args;
} OPERATORS[] = {
    {"var", OP_VAR, 0, 2},
    {"missing", OP_MISSING, 0, ANY},
    {"missing_some", OP_MISSING_SOME, 2, 2},
    {"if", OP_IF, 0, ANY},
    {"?:", OP_IF, 0, ANY},
    {"==", OP_EQ, 2, 2},
    {"===", OP_STRICT_EQ, 2, 2},
    {"!=", OP_NE, 2, 2},
    {"!==", OP_STRICT_NE, 2, 2},
    {"!", OP_NOT, 1, 1},
    {"!!", OP_TRUTHY, 1, 1},
    {"or", OP_OR, 1, ANY},
    {"and", OP_AND, 1, ANY},
    {"<", OP_LT, 2, 3},
    {"<=", OP_LE, 2, 3},
    {">", OP_GT, 2, 2},
    {">=", OP_GE, 2, 2},
    {"in", OP_IN, 2, 2},
    {"cat", OP_CAT, 0, ANY},
    {"substr", OP_SUBSTR, 1, 3},
    {"+", OP_ADD, 0, ANY},
    {"-", OP_SUB, 1, 2},
    {"*", OP_MUL, 1, ANY},
    {"/", OP_DIV, 2, 2},
    {"%", OP_MOD, 2, 2},
    {"min", OP_MIN, 0, ANY},
    {"max", OP_MAX, 0, ANY},
    {"merge", OP_MERGE, 0, ANY},
    {"map", OP_MAP, 2, 2},
    {"filter", OP_FILTER, 2, 2},
    {"reduce", OP_REDUCE, 2, 3},
    {"all", OP_ALL, 2, 2},
    {"none", OP_NONE, 2, 2},
    {"some", OP_SOME, 2, 2},
};

typedef struct node {
    logic_op op;
    const char *name; /* operator name, for messages */
    json_t *literal;  /* OP_LITERAL only */
    size_t n;
    struct node *args[];
} node;

struct mv_logic {
    node *root;
};

static mv_code no_memory(mv_err *err) { return mv_err_set(err, MV_NO_MEMORY, "out of memory"); }

/* ---- compile ----------------------------------------------------------------------------- */

static void node_free(node *nd) {
    if (!nd) return;
    for (size_t i = 0; i < nd->n; i++)
        node_free(nd->args[i]);
    json_decref(nd->literal);
    free(nd);
}

static node *node_new(logic_op op, const char *name, size_t n) {
    node *nd = calloc(1, sizeof *nd + n * sizeof nd->args[0]);
    if (!nd) return NULL;
    nd->op = op;
    nd->name = name;
    nd->n = n;
    return nd;
}

static mv_code compile_node(const json_t *rule, int depth, node **out, mv_err *err);

/* Compiles the elements of an array (or the single non-array value) into nd->args. */
static mv_code compile_args(const json_t *args, node *nd, int depth, mv_err *err) {
    for (size_t i = 0; i < nd->n; i++) {
        const json_t *a = json_is_array(args) ? json_array_get(args, i) : args;
        mv_code rc = compile_node(a, depth, &nd->args[i], err);
        if (rc != MV_OK) return rc;
    }
    return MV_OK;
}

static mv_code compile_node(const json_t *rule, int depth, node **out, mv_err *err) {
    *out = NULL;
    bool is_op = json_is_object(rule) && json_object_size(rule) == 1;
    if (!json_is_array(rule) && !is_op) {
        node *nd = node_new(OP_LITERAL, NULL, 0);
        if (!nd || !(nd->literal = json_deep_copy(rule))) {
            free(nd);
            return no_memory(err);
        }
        *out = nd;
        return MV_OK;
    }
    if (depth > MV_LOGIC_MAX_DEPTH)
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "rule nests operations and arrays deeper than %d levels",
                          MV_LOGIC_MAX_DEPTH);
    if (json_is_array(rule)) {
        node *nd = node_new(OP_ARRAY, NULL, json_array_size(rule));
        if (!nd) return no_memory(err);
        mv_code rc = compile_args(rule, nd, depth + 1, err);
        if (rc != MV_OK) {
            node_free(nd);
            return rc;
        }
        *out = nd;
        return MV_OK;
    }

    void *it = json_object_iter((json_t *)rule);
    const char *name = json_object_iter_key(it);
    const json_t *args = json_object_iter_value(it);
    size_t k = 0, nops = sizeof OPERATORS / sizeof OPERATORS[0];
    while (k < nops && strcmp(OPERATORS[k].name, name) != 0)
        k++;
    if (k == nops) return mv_err_set(err, MV_INVALID_ARGUMENT, "unknown operator \"%s\"", name);
    size_t n = json_is_array(args) ? json_array_size(args) : 1;
    int lo = OPERATORS[k].min_args, hi = OPERATORS[k].max_args;
    if (n < (size_t)lo || (hi != ANY && n > (size_t)hi)) {
        if (hi == ANY)
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "operator \"%s\" takes at least %d argument%s, got %zu", name, lo,
                              lo == 1 ? "" : "s", n);
        if (lo == hi)
            return mv_err_set(err, MV_INVALID_ARGUMENT,
                              "operator \"%s\" takes %d argument%s, got %zu", name, lo,
                              lo == 1 ? "" : "s", n);
        return mv_err_set(err, MV_INVALID_ARGUMENT,
                          "operator \"%s\" takes %d to %d arguments, got %zu", name, lo, hi, n);
    }
    node *nd = node_new(OPERATORS[k].op, OPERATORS[k].name, n);
    if (!nd) return no_memory(err);
    mv_code rc = compile_args(args, nd, depth + 1, err);
    if (rc != MV_OK) {
        node_free(nd);
        return rc;
    }
    *out = nd;
    return MV_OK;
}

mv_code mv_logic_compile(const json_t *rule, mv_logic **out, mv_err *err) {
    *out = NULL;
    mv_logic *logic = calloc(1, sizeof *logic);
    if (!logic) return no_memory(err);
    mv_code rc = compile_node(rule ? rule : json_null(), 1, &logic->root, err);
    if (rc != MV_OK) {
        free(logic);
        return rc;
    }
    *out = logic;
    return MV_OK;
}

void mv_logic_free(mv_logic *logic) {
    if (!logic) return;
    node_free(logic->root);
    free(logic);
}

/* ---- evaluate ---------------------------------------------------------------------------- */

/* The work one evaluation may do (DESIGN "Bounded work and memory"): operations evaluated, and
 * bytes of strings and arrays it builds. A reduce or map over a large payload that concatenates
 * as it goes would otherwise take seconds and gigabytes per call. */
typedef struct eval_ctx {
    mv_err *err;
    unsigned long steps;
    size_t bytes;
} eval_ctx;

static mv_code eval(const node *nd, const json_t *data, int depth, json_t **out, eval_ctx *c);

/* Sets *out to v (a new reference, possibly NULL from a failed allocation). */
static mv_code give(json_t *v, json_t **out, mv_err *err) {
    *out = v;
    return v ? MV_OK : no_memory(err);
}

static json_t *boolean(bool b) { return b ? json_true() : json_false(); }

/* Byte offset of code point i in the UTF-8 string s of n bytes (n when past the end). */
static size_t utf8_offset(const char *s, size_t n, size_t i) {
    size_t off = 0;
    while (off < n && i > 0) {
        off++;
        while (off < n && ((unsigned char)s[off] & 0xC0) == 0x80)
            off++;
        i--;
    }
    return off;
}

static size_t utf8_length(const char *s, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) count++;
    return count;
}

/* A canonical array index ("0", "17"; not "01", "-1", "1.0") or SIZE_MAX. */
static size_t segment_index(const char *seg, size_t n) {
    if (n == 0 || n > 18 || (seg[0] == '0' && n > 1)) return SIZE_MAX;
    size_t i = 0;
    for (size_t j = 0; j < n; j++) {
        if (seg[j] < '0' || seg[j] > '9') return SIZE_MAX;
        i = i * 10 + (size_t)(seg[j] - '0');
    }
    return i;
}

/* JS cur[seg] for one path segment: object members, array elements, characters of a string
 * (counted in code points) and the "length" of arrays and strings. New reference or NULL when
 * JS would give undefined. */
static json_t *member(const json_t *cur, const char *seg, size_t n) {
    if (json_is_object(cur)) return json_incref(json_object_getn(cur, seg, n));
    bool is_length = n == 6 && memcmp(seg, "length", 6) == 0;
    size_t i = segment_index(seg, n);
    if (json_is_array(cur)) {
        if (is_length) return json_integer((json_int_t)json_array_size(cur));
        return i == SIZE_MAX ? NULL : json_incref(json_array_get(cur, i));
    }
    if (json_is_string(cur)) {
        const char *s = json_string_value(cur);
        size_t bytes = json_string_length(cur), chars = utf8_length(s, bytes);
        if (is_length) return json_integer((json_int_t)chars);
        if (i == SIZE_MAX || i >= chars) return NULL;
        size_t a = utf8_offset(s, bytes, i);
        return json_stringn(s + a, utf8_offset(s + a, bytes - a, 1));
    }
    return NULL;
}

/* The value at a dotted path ("a.b.0"); def when a step is missing (JS undefined) or would step
 * through null. A null found at the end is returned as null. New reference. */
static json_t *var_lookup(const json_t *data, const json_t *path, const json_t *def) {
    if (!def) def = json_null();
    if (!data) data = json_null();
    if (!path || json_is_null(path) || (json_is_string(path) && json_string_length(path) == 0))
        return json_incref((json_t *)data);
    size_t len;
    char *p = mv_js_to_string(path, &len);
    if (!p) return NULL;
    json_t *cur = json_incref((json_t *)data);
    const char *seg = p, *end = p + len;
    for (;;) {
        const char *dot = memchr(seg, '.', (size_t)(end - seg));
        size_t n = dot ? (size_t)(dot - seg) : (size_t)(end - seg);
        json_t *next = json_is_null(cur) ? NULL : member(cur, seg, n);
        json_decref(cur);
        if (!next) {
            cur = json_incref((json_t *)def);
            break;
        }
        cur = next;
        if (!dot) break;
        seg = dot + 1;
    }
    free(p);
    return cur;
}

/* JsonLogic "missing": the keys (an array as first argument, or the arguments themselves) whose
 * value is null or "". */
static json_t *missing_keys(json_t *const *vals, size_t n, const json_t *data) {
    json_t *const *keys = vals;
    if (n > 0 && json_is_array(vals[0])) {
        keys = NULL;
        n = json_array_size(vals[0]);
    }
    json_t *missing = json_array();
    if (!missing) return NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *key = keys ? keys[i] : json_array_get(vals[0], i);
        json_t *v = var_lookup(data, key, NULL);
        if (!v) goto fail;
        bool absent = json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0);
        json_decref(v);
        if (absent && json_array_append(missing, key) != 0) goto fail;
    }
    return missing;
fail:
    json_decref(missing);
    return NULL;
}

/* JS ToIntegerOrInfinity, clamped to the range that matters for a string of size chars. */
static double to_integer(double d) { return isnan(d) ? 0 : trunc(d); }

/* JS String.prototype.substr(start, length) counted in code points (JS counts UTF-16 units). */
static json_t *js_substr(const char *s, size_t bytes, double start, bool has_length,
                         double length) {
    double size = (double)utf8_length(s, bytes);
    double from = to_integer(start);
    if (from < 0)
        from = fmax(size + from, 0);
    else
        from = fmin(from, size);
    double count = has_length ? fmin(fmax(to_integer(length), 0), size) : size;
    double to = fmin(from + count, size);
    if (to <= from) return json_string("");
    size_t a = utf8_offset(s, bytes, (size_t)from);
    size_t b = a + utf8_offset(s + a, bytes - a, (size_t)(to - from));
    return json_stringn(s + a, b - a);
}

/* JsonLogic "substr": a negative length counts from the end of the remainder. */
static json_t *op_substr(json_t *const *vals, size_t n) {
    size_t bytes;
    char *s = mv_js_to_string(vals[0], &bytes);
    if (!s) return NULL;
    double start = n > 1 ? mv_js_to_number(vals[1]) : 0;
    json_t *r;
    if (n > 2 && mv_js_to_number(vals[2]) < 0) {
        double size = (double)utf8_length(s, bytes);
        double from = to_integer(start);
        from = from < 0 ? fmax(size + from, 0) : fmin(from, size);
        r = js_substr(s, bytes, start, true, size - from + mv_js_to_number(vals[2]));
    } else {
        r = js_substr(s, bytes, start, n > 2, n > 2 ? mv_js_to_number(vals[2]) : 0);
    }
    free(s);
    return r;
}

static json_t *op_in(const json_t *needle, const json_t *hay) {
    if (json_is_string(hay) && json_string_length(hay) > 0) { /* "" is falsy: never contains */
        size_t n;
        char *s = mv_js_to_string(needle, &n);
        if (!s) return NULL;
        bool found = memmem(json_string_value(hay), json_string_length(hay), s, n) != NULL;
        free(s);
        return boolean(found);
    }
    if (json_is_array(hay)) {
        size_t i;
        json_t *v;
        json_array_foreach(hay, i, v) {
            if (mv_js_strict_equal(needle, v)) return json_true();
        }
    }
    return json_false();
}

static json_t *op_merge(json_t *const *vals, size_t n) {
    json_t *r = json_array();
    for (size_t i = 0; r && i < n; i++) {
        int rc =
            json_is_array(vals[i]) ? json_array_extend(r, vals[i]) : json_array_append(r, vals[i]);
        if (rc != 0) {
            json_decref(r);
            r = NULL;
        }
    }
    return r;
}

static json_t *op_arith(logic_op op, json_t *const *vals, size_t n) {
    double acc;
    switch (op) {
    case OP_ADD: /* + and * coerce with parseFloat, as the reference does */
        acc = 0;
        for (size_t i = 0; i < n; i++)
            acc += mv_js_parse_float(vals[i]);
        break;
    case OP_MUL:
        acc = 1;
        for (size_t i = 0; i < n; i++)
            acc *= mv_js_parse_float(vals[i]);
        break;
    case OP_SUB:
        acc = n == 1 ? -mv_js_to_number(vals[0])
                     : mv_js_to_number(vals[0]) - mv_js_to_number(vals[1]);
        break;
    case OP_DIV: acc = mv_js_to_number(vals[0]) / mv_js_to_number(vals[1]); break;
    case OP_MOD: acc = fmod(mv_js_to_number(vals[0]), mv_js_to_number(vals[1])); break;
    case OP_MIN:
    case OP_MAX:
        acc = op == OP_MIN ? INFINITY : -INFINITY;
        for (size_t i = 0; i < n; i++) {
            double d = mv_js_to_number(vals[i]);
            if (isnan(d)) return json_null();
            acc = op == OP_MIN ? fmin(acc, d) : fmax(acc, d);
        }
        break;
    default: acc = NAN; break;
    }
    return mv_js_number(acc);
}

/* Operators whose arguments are all evaluated first, in order, with the same data. */
static json_t *apply_eager(const node *nd, json_t *const *v, const json_t *data) {
    size_t n = nd->n;
    switch (nd->op) {
    case OP_ARRAY: {
        json_t *r = json_array();
        for (size_t i = 0; r && i < n; i++)
            if (json_array_append(r, v[i]) != 0) {
                json_decref(r);
                r = NULL;
            }
        return r;
    }
    case OP_VAR: return var_lookup(data, n > 0 ? v[0] : NULL, n > 1 ? v[1] : NULL);
    case OP_MISSING: return missing_keys(v, n, data);
    case OP_MISSING_SOME: {
        json_t *options = v[1];
        json_t *missing = missing_keys(&options, 1, data);
        if (!missing) return NULL;
        double have = (double)(json_is_array(options) ? json_array_size(options) : 1) -
                      (double)json_array_size(missing);
        if (have >= mv_js_to_number(v[0])) json_array_clear(missing);
        return missing;
    }
    case OP_EQ: return boolean(mv_js_loose_equal(v[0], v[1]));
    case OP_NE: return boolean(!mv_js_loose_equal(v[0], v[1]));
    case OP_STRICT_EQ: return boolean(mv_js_strict_equal(v[0], v[1]));
    case OP_STRICT_NE: return boolean(!mv_js_strict_equal(v[0], v[1]));
    case OP_NOT: return boolean(!mv_js_truthy(v[0]));
    case OP_TRUTHY: return boolean(mv_js_truthy(v[0]));
    case OP_LT:
    case OP_LE: {
        bool eq = nd->op == OP_LE;
        bool r = mv_js_less(v[0], v[1], eq) && (n < 3 || mv_js_less(v[1], v[2], eq));
        return boolean(r);
    }
    case OP_GT: return boolean(mv_js_less(v[1], v[0], false));
    case OP_GE: return boolean(mv_js_less(v[1], v[0], true));
    case OP_IN: return op_in(v[0], v[1]);
    case OP_CAT: {
        size_t len;
        char *s = mv_js_join(v, n, &len);
        json_t *r = s ? json_stringn(s, len) : NULL;
        free(s);
        return r;
    }
    case OP_SUBSTR: return op_substr(v, n);
    case OP_ADD:
    case OP_SUB:
    case OP_MUL:
    case OP_DIV:
    case OP_MOD:
    case OP_MIN:
    case OP_MAX: return op_arith(nd->op, v, n);
    case OP_MERGE: return op_merge(v, n);
    default: return json_null(); /* lazy operators never get here */
    }
}

static mv_code eval_eager(const node *nd, const json_t *data, int depth, json_t **out,
                          eval_ctx *c) {
    mv_code rc = MV_OK;
    json_t *small[4] = {0};
    json_t **vals = nd->n <= 4 ? small : calloc(nd->n, sizeof *vals);
    if (!vals) return no_memory(c->err);
    size_t done = 0;
    for (; done < nd->n; done++) {
        rc = eval(nd->args[done], data, depth + 1, &vals[done], c);
        if (rc != MV_OK) goto out;
    }
    rc = give(apply_eager(nd, vals, data), out, c->err);
out:
    for (size_t i = 0; i < done; i++)
        json_decref(vals[i]);
    if (vals != small) free(vals);
    return rc;
}

static mv_code eval_if(const node *nd, const json_t *data, int depth, json_t **out, eval_ctx *c) {
    size_t i = 0;
    for (; i + 1 < nd->n; i += 2) {
        json_t *cond;
        mv_code rc = eval(nd->args[i], data, depth + 1, &cond, c);
        if (rc != MV_OK) return rc;
        bool yes = mv_js_truthy(cond);
        json_decref(cond);
        if (yes) return eval(nd->args[i + 1], data, depth + 1, out, c);
    }
    if (i < nd->n) return eval(nd->args[i], data, depth + 1, out, c);
    *out = json_null();
    return MV_OK;
}

/* "and" returns the first falsy value (or the last), "or" the first truthy one (or the last). */
static mv_code eval_and_or(const node *nd, const json_t *data, int depth, json_t **out,
                           eval_ctx *c) {
    bool stop_on = nd->op == OP_OR;
    json_t *cur = NULL;
    for (size_t i = 0; i < nd->n; i++) {
        json_decref(cur);
        mv_code rc = eval(nd->args[i], data, depth + 1, &cur, c);
        if (rc != MV_OK) return rc;
        if (mv_js_truthy(cur) == stop_on) break;
    }
    *out = cur;
    return MV_OK;
}

/* map, filter, reduce, all, none, some: the second argument is evaluated once per element of
 * the first, with that element (for reduce: {"current", "accumulator"}) as its data. */
static mv_code eval_scoped(const node *nd, const json_t *data, int depth, json_t **out,
                           eval_ctx *c) {
    json_t *list = NULL, *acc = NULL, *result = NULL, *scope = NULL, *v = NULL;
    if (nd->n < 2) /* compile never builds one (min_args is 2); whatever built the tree, as above */
        return mv_err_set(c->err, MV_INTERNAL, "operator \"%s\" has %zu arguments", nd->name,
                          nd->n);
    mv_code rc = eval(nd->args[0], data, depth + 1, &list, c);
    if (rc != MV_OK) return rc;
    if (nd->op == OP_REDUCE) {
        if (nd->n > 2)
            rc = eval(nd->args[2], data, depth + 1, &acc, c);
        else
            acc = json_null();
        if (rc != MV_OK) goto fail;
    } else if (nd->op == OP_MAP || nd->op == OP_FILTER) {
        if (!(result = json_array())) goto oom;
    }
    size_t count = json_is_array(list) ? json_array_size(list) : 0, passed = 0;
    for (size_t i = 0; i < count; i++) {
        json_t *item = json_array_get(list, i);
        if (nd->op == OP_REDUCE) {
            if (!(scope = json_object()) || json_object_set(scope, "current", item) != 0 ||
                json_object_set(scope, "accumulator", acc) != 0)
                goto oom;
            rc = eval(nd->args[1], scope, depth + 1, &v, c);
            json_decref(scope);
            scope = NULL;
            if (rc != MV_OK) goto fail;
            json_decref(acc);
            acc = v;
            v = NULL;
            continue;
        }
        rc = eval(nd->args[1], item, depth + 1, &v, c);
        if (rc != MV_OK) goto fail;
        if (nd->op == OP_MAP) {
            if (json_array_append(result, v) != 0) goto oom;
        } else if (mv_js_truthy(v)) {
            passed++;
            if (nd->op == OP_FILTER && json_array_append(result, item) != 0) goto oom;
            if (nd->op == OP_SOME || nd->op == OP_NONE) {
                json_decref(v);
                v = NULL;
                break; /* the answer is known */
            }
        } else if (nd->op == OP_ALL) {
            json_decref(v);
            v = NULL;
            break;
        }
        json_decref(v);
        v = NULL;
    }
    switch (nd->op) {
    case OP_REDUCE:
        result = acc;
        acc = NULL;
        break;
    case OP_ALL: result = boolean(count > 0 && passed == count); break;
    case OP_NONE: result = boolean(passed == 0); break;
    case OP_SOME: result = boolean(passed > 0); break;
    default: break;
    }
    json_decref(list);
    *out = result;
    return MV_OK;
oom:
    rc = no_memory(c->err);
fail:
    json_decref(v);
    json_decref(scope);
    json_decref(result);
    json_decref(acc);
    json_decref(list);
    return rc;
}

/* Bytes a value built by an operation holds (strings by length, arrays by element slots). */
static size_t built_bytes(logic_op op, const json_t *v) {
    switch (op) {
    case OP_CAT:
    case OP_SUBSTR: return json_string_length(v);
    case OP_ARRAY:
    case OP_MAP:
    case OP_FILTER:
    case OP_MERGE:
    case OP_MISSING:
    case OP_MISSING_SOME: return json_array_size(v) * sizeof(void *);
    default: return 0;
    }
}

static mv_code eval_op(const node *nd, const json_t *data, int depth, json_t **out, eval_ctx *c) {
    switch (nd->op) {
    case OP_LITERAL: return give(json_deep_copy(nd->literal), out, c->err);
    case OP_IF: return eval_if(nd, data, depth, out, c);
    case OP_AND:
    case OP_OR: return eval_and_or(nd, data, depth, out, c);
    case OP_MAP:
    case OP_FILTER:
    case OP_REDUCE:
    case OP_ALL:
    case OP_NONE:
    case OP_SOME: return eval_scoped(nd, data, depth, out, c);
    default: return eval_eager(nd, data, depth, out, c);
    }
}

static mv_code eval(const node *nd, const json_t *data, int depth, json_t **out, eval_ctx *c) {
    *out = NULL;
    /* compile already bounds the nesting of operations and arrays; checked again here so that
     * evaluation stays bounded whatever built the tree */
    if (nd->op != OP_LITERAL && depth > MV_LOGIC_MAX_DEPTH)
        return mv_err_set(c->err, MV_INVALID_ARGUMENT,
                          "rule evaluation exceeds the depth limit of %d", MV_LOGIC_MAX_DEPTH);
    if (++c->steps > MV_LOGIC_MAX_STEPS)
        return mv_err_set(c->err, MV_PAYLOAD_TOO_LARGE,
                          "rule evaluation stopped after %lu steps (too much work for the data)",
                          (unsigned long)MV_LOGIC_MAX_STEPS);
    mv_code rc = eval_op(nd, data, depth, out, c);
    if (rc != MV_OK) return rc;
    c->bytes += built_bytes(nd->op, *out);
    if (c->bytes > MV_LOGIC_MAX_BYTES) {
        json_decref(*out);
        *out = NULL;
        return mv_err_set(
            c->err, MV_PAYLOAD_TOO_LARGE,
            "rule evaluation stopped after building %lu bytes (too much for the data)",
            (unsigned long)MV_LOGIC_MAX_BYTES);
    }
    return MV_OK;
}

/* ---- public ------------------------------------------------------------------------------ */

mv_code mv_logic_eval(const mv_logic *logic, const json_t *data, json_t **result, mv_err *err) {
    eval_ctx c = {.err = err};
    return eval(logic->root, data ? data : json_null(), 1, result, &c);
}

bool mv_logic_test(const mv_logic *logic, const json_t *data, mv_err *err) {
    json_t *r;
    if (mv_logic_eval(logic, data, &r, err) != MV_OK) return false;
    bool yes = mv_js_truthy(r);
    json_decref(r);
    return yes;
}

bool mv_logic_truthy(const json_t *v) { return mv_js_truthy(v); }

mv_code mv_logic_apply(const json_t *rule, const json_t *data, json_t **result, mv_err *err) {
    mv_logic *logic;
    *result = NULL;
    mv_code rc = mv_logic_compile(rule, &logic, err);
    if (rc != MV_OK) return rc;
    rc = mv_logic_eval(logic, data, result, err);
    mv_logic_free(logic);
    return rc;
}
