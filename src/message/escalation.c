/* escalation.c — a template's escalation steps (docs/time.md): when one falls due and its message
 * is still active, the step's roles join the message's toRoles.
 *
 * The fire is local only, one transaction: the message row's to_roles and escalated_at, the new
 * message_roles rows (role lists find it), the tallies moved from the old address to the new one
 * (counts), and a `created` change — the stream hub then offers the message to every stream whose
 * user may now see it, the new role members included. Everything else follows from toRoles:
 * visibility, lists and the action rules read the stored address, so the new members are
 * receivers like any other. A step whose roles the message already has only sets escalatedAt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "message/inbox_internal.h"
#include "message/time_internal.h"

static const char SQL_ESCALATE[] =
    "UPDATE messages SET to_roles = ?, escalated_at = ?, updated_at = ? "
    "WHERE id = ? AND tenant_id = ? AND action_state = 'active'";
static const char SQL_ESCALATE_ROLE[] =
    "INSERT INTO message_roles (message_id, role, archived, created_at, tenant_id) "
    "VALUES (?, ?, 0, ?, ?) ON CONFLICT DO NOTHING";

/* The step a timer "escalation:<message>:<n>" stands for, or NULL (the template changed). */
static const mv_escalation_def *step_of(const mv_template *tpl, const mv__timer *t) {
    const char *n = strrchr(t->id, ':');
    char *end;
    long i = n ? strtol(n + 1, &end, 10) : -1;
    return tpl && i >= 0 && (size_t)i < tpl->nescalations ? &tpl->escalations[i] : NULL;
}

static bool has_role(const json_t *roles, const char *r) {
    size_t i;
    const json_t *v;
    json_array_foreach(roles, i, v) {
        if (json_is_string(v) && strcmp(json_string_value(v), r) == 0) return true;
    }
    return false;
}

/* doc's toRoles readdressed with step's roles (after), the new ones in added. */
static mv_code readdress(mv_db *db, const mv__timer *t, json_t *doc, const json_t *after,
                         const json_t *added, int64_t now, mv_err *err) {
    char *text = mv_json_compact(after);
    if (!text) return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    int64_t changed = 0;
    mv_code rc =
        mv_db_execf(db, SQL_ESCALATE, &changed, err, "siiss", text, now, now, t->ref, t->tenant);
    free(text);
    if (rc != MV_OK || changed == 0 || json_array_size(added) == 0) return rc;
    size_t i;
    const json_t *r;
    json_array_foreach(added, i, r) {
        rc = mv_db_execf(db, SQL_ESCALATE_ROLE, NULL, err, "ssis", t->ref, json_string_value(r),
                         now, t->tenant);
        if (rc != MV_OK) return rc;
    }
    json_t *moved = json_deep_copy(doc);
    if (!moved || json_object_set(moved, "toRoles", (json_t *)after) != 0) {
        json_decref(moved);
        return mv_err_set(err, MV_NO_MEMORY, "out of memory");
    }
    rc = mv__tally_readdressed_tx(db, t->tenant, doc, moved, err);
    json_decref(moved);
    if (rc != MV_OK) return rc;
    return mv__change_add_tx(db, t->tenant, t->ref, MV_CHANGE_CREATED, NULL, now, err);
}

static mv_code escalation_local(void *ctx, mv_db *db, const mv__timer *t, int64_t now,
                                mv_err *err) {
    mv_service *svc = ctx;
    json_t *doc = NULL, *after = NULL, *added = json_array();
    mv_code rc = mv__doc_load(db, t->ref, t->tenant, &doc, err);
    mv_template *tpl = NULL;
    if (rc != MV_OK || !doc || strcmp(mv_json_str(doc, "actionState"), "active") != 0) goto done;
    tpl = mv_registry_find(svc->o.registry, mv_json_str(doc, "templateCd"));
    const mv_escalation_def *step = step_of(tpl, t);
    if (!step) goto done;
    const json_t *before = json_object_get(doc, "toRoles");
    after = json_is_array(before) ? json_copy((json_t *)before) : json_array();
    size_t i;
    const json_t *r;
    json_array_foreach(step->to_roles, i, r) {
        if (has_role(after, json_string_value(r)) || json_array_size(after) >= MV_MAX_ROLES)
            continue;
        json_array_append(after, (json_t *)r);
        json_array_append(added, (json_t *)r);
    }
    rc = readdress(db, t, doc, after, added, now, err);
done:
    mv_template_release(tpl);
    json_decref(after);
    json_decref(added);
    json_decref(doc);
    return rc;
}

mv_code mv__register_escalation(mv_service *svc, mv__timer_engine *engine, mv_err *err) {
    return mv__timer_engine_register(engine, "escalation", NULL, escalation_local, svc, err);
}
