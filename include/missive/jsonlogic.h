/* missive/jsonlogic.h — JsonLogic rules (jsonlogic.com) evaluated over a JSON document.
 *
 * A rule is compiled once: compilation checks every operator name (an unknown operator is an
 * error at load time, naming it) and the shape of its arguments; evaluation never fails on data
 * (missing variables are null) except when it exceeds the depth bound. Operators: var, missing,
 * missing_some, if, ?:, ==, ===, !=, !==, !, !!, or, and, <, <=, >, >= (with the 3-argument
 * "between" forms), in, cat, substr, + - * / %, min, max, merge, map, filter, reduce, all, none,
 * some. Truthiness and loose equality follow JavaScript, as the reference implementation. */
#ifndef MISSIVE_JSONLOGIC_H
#define MISSIVE_JSONLOGIC_H

#include <jansson.h>
#include <stdbool.h>

#include "missive/error.h"

typedef struct mv_logic mv_logic;

#define MV_LOGIC_MAX_DEPTH 64

/* Compiles rule (borrowed; the compiled form keeps what it needs). Errors: MV_INVALID_ARGUMENT
 * with "unknown operator \"foo\"" or a message naming the malformed part. *out owned by the
 * caller: free with mv_logic_free(). */
mv_code mv_logic_compile(const json_t *rule, mv_logic **out, mv_err *err);

/* Evaluates over data (NULL = null). *result is a new reference owned by the caller. */
mv_code mv_logic_eval(const mv_logic *logic, const json_t *data, json_t **result, mv_err *err);

/* Evaluates and reduces the result with JavaScript truthiness. Returns false on error (err set). */
bool mv_logic_test(const mv_logic *logic, const json_t *data, mv_err *err);

/* JavaScript truthiness of a JSON value (NULL counts as false; [] is truthy in JS but JsonLogic
 * treats an empty array as falsy — this follows JsonLogic). */
bool mv_logic_truthy(const json_t *v);

/* Compile + eval + free in one call. */
mv_code mv_logic_apply(const json_t *rule, const json_t *data, json_t **result, mv_err *err);

/* NULL-safe. */
void mv_logic_free(mv_logic *logic);

#endif
