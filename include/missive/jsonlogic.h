/* missive/jsonlogic.h — JsonLogic rules (jsonlogic.com) evaluated over a JSON document.
 *
 * A rule is compiled once: compilation checks every operator name (an unknown operator is an
 * error at load time, naming it), the number of arguments of each operator and the nesting depth
 * (at most MV_LOGIC_MAX_DEPTH operations and arrays inside one another); evaluation fails on data
 * only when it passes its work bounds (MV_LOGIC_MAX_STEPS, MV_LOGIC_MAX_BYTES; missing variables
 * are null). An object with exactly one key is an operation, any other
 * object is a literal; arrays are evaluated element by element. Operators: var, missing,
 * missing_some, if, ?:, ==, ===, !=, !==, !, !!, or, and, <, <=, >, >= (with the 3-argument
 * "between" forms of < and <=), in, cat, substr, + - * / %, min, max, merge, map, filter, reduce,
 * all, none, some. Truthiness, loose equality and number coercion follow JavaScript, as the
 * reference implementation; a number JSON cannot hold (NaN, Infinity) becomes null.
 * A compiled rule is immutable: it may be evaluated from several threads at once. */
#ifndef MISSIVE_JSONLOGIC_H
#define MISSIVE_JSONLOGIC_H

#include <jansson.h>
#include <stdbool.h>

#include "missive/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mv_logic mv_logic;

#define MV_LOGIC_MAX_DEPTH 64
/* The work of one evaluation: operations evaluated, and bytes of the strings and arrays it
 * builds (concatenations, maps, merges). Beyond either, evaluation stops with
 * MV_PAYLOAD_TOO_LARGE naming the bound; a condition that stops is false. */
#define MV_LOGIC_MAX_STEPS 1000000
#define MV_LOGIC_MAX_BYTES (16u * 1024 * 1024)

/* Compiles rule (borrowed; the compiled form keeps what it needs). Errors: MV_INVALID_ARGUMENT
 * with "unknown operator \"foo\"", "operator \"==\" takes 2 arguments, got 1" or a message
 * naming the depth bound. *out owned by the caller: free with mv_logic_free(). */
mv_code mv_logic_compile(const json_t *rule, mv_logic **out, mv_err *err);

/* Evaluates over data (NULL = null). *result is a new reference owned by the caller (it may
 * share values with data, never with the rule). Fails on allocation failure and when the work
 * bounds above are passed (MV_PAYLOAD_TOO_LARGE). */
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

#ifdef __cplusplus
}
#endif

#endif
