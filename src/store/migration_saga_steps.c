/* migration_saga_steps.c — a saga's steps become rows of their own (issue 13): one row per step,
 * written when the step starts and updated by one small statement per transition, instead of the
 * whole `steps` JSON document of migration 3 rewritten on every save.
 *
 * Existing documents are moved into rows here and the document left as `[]`. The column stays (an
 * engine reading a non-empty document treats it as that saga's steps and converts it to rows on its
 * next save), so nothing written before this migration is lost or misread.
 *
 * compensation_args and result hold the value's compact JSON text, or the sealed text
 * ("enc:v1:…", not quoted) when the saga engine encrypts values at rest; result is NULL when the
 * step has none (a JSON null result is the text 'null'). Columns other than the key may be NULL:
 * the engine validates every loaded step, and a damaged document must not stop the migration. */
#include "store/driver.h"

#define SAGA_STEPS_TABLE                                                                           \
    "CREATE TABLE saga_steps ("                                                                    \
    " saga_id TEXT NOT NULL,"                                                                      \
    " idx INTEGER NOT NULL,"                                                                       \
    " name TEXT,"                                                                                  \
    " state TEXT,"                                                                                 \
    " effect_id TEXT,"                                                                             \
    " compensation_effect_id TEXT,"                                                                \
    " compensation_args TEXT,"                                                                     \
    " result TEXT,"                                                                                \
    " attempts INTEGER,"                                                                           \
    " error_code TEXT,"                                                                            \
    " next_attempt_at BIGINT,"                                                                     \
    " created_at BIGINT NOT NULL,"                                                                 \
    " updated_at BIGINT NOT NULL,"                                                                 \
    " PRIMARY KEY (saga_id, idx));"

/* A stored value: the sealed string itself, else the JSON text. */
#define PG_VALUE(key)                                                                              \
    "CASE WHEN json_typeof(e.v -> '" key "') = 'string' AND "                                      \
    "substr(e.v ->> '" key "', 1, 7) = 'enc:v1:' THEN e.v ->> '" key "' "                          \
    "ELSE (e.v -> '" key "')::text END"

static const char SAGA_STEPS_POSTGRES[] = SAGA_STEPS_TABLE
    "INSERT INTO saga_steps (saga_id, idx, name, state, effect_id, compensation_effect_id,"
    " compensation_args, result, attempts, error_code, next_attempt_at, created_at, updated_at) "
    "SELECT s.saga_id, (e.i - 1)::int, e.v ->> 'name', e.v ->> 'state', e.v ->> 'effectId',"
    " e.v ->> 'compensationEffectId', COALESCE(" PG_VALUE(
        "compensationArgs") ", 'null'), " PG_VALUE("result") ", (e.v ->> 'attempts')::int, e.v ->> "
                                                             "'errorCode',"
                                                             " (e.v ->> 'nextAttemptAt')::bigint, "
                                                             "s.updated_at, s.updated_at "
                                                             "FROM sagas s CROSS JOIN LATERAL "
                                                             "json_array_elements(s.steps::json) "
                                                             "WITH ORDINALITY AS e(v, i) "
                                                             "WHERE s.steps <> '[]';"
                                                             "UPDATE sagas SET steps = '[]' WHERE "
                                                             "steps <> '[]';";

#define SQLITE_VALUE(key)                                                                          \
    "CASE WHEN json_type(e.value, '$." key "') = 'text' AND "                                      \
    "substr(json_extract(e.value, '$." key "'), 1, 7) = 'enc:v1:' "                                \
    "THEN json_extract(e.value, '$." key "') ELSE e.value -> '$." key "' END"

static const char SAGA_STEPS_SQLITE[] = SAGA_STEPS_TABLE
    "INSERT INTO saga_steps (saga_id, idx, name, state, effect_id, compensation_effect_id,"
    " compensation_args, result, attempts, error_code, next_attempt_at, created_at, updated_at) "
    "SELECT s.saga_id, CAST(e.key AS INTEGER), json_extract(e.value, '$.name'),"
    " json_extract(e.value, '$.state'), json_extract(e.value, '$.effectId'),"
    " json_extract(e.value, '$.compensationEffectId'),"
    " COALESCE(" SQLITE_VALUE("compensationArgs") ", 'null'), " SQLITE_VALUE(
        "result") ","
                  " json_extract(e.value, '$.attempts'), json_extract(e.value, '$.errorCode'),"
                  " json_extract(e.value, '$.nextAttemptAt'), s.updated_at, s.updated_at "
                  "FROM sagas s, json_each(s.steps) e WHERE s.steps <> '[]';"
                  "UPDATE sagas SET steps = '[]' WHERE steps <> '[]';";

const mv_migration mv_migration_saga_steps = {
    .version = 10,
    .name = "saga_steps",
    .sqlite_sql = SAGA_STEPS_SQLITE,
    .postgres_sql = SAGA_STEPS_POSTGRES,
};
