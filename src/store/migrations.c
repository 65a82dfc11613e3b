/* migrations.c — the ordered schema history. A migration never changes once released; each has
 * the SQL of both dialects side by side so the differences are visible in one place. */
#include "store/driver.h"

extern const mv_migration mv_migration_messages;
extern const mv_migration mv_migration_outbox;
extern const mv_migration mv_migration_durable;
extern const mv_migration mv_migration_tenants;
extern const mv_migration mv_migration_inbox;
extern const mv_migration mv_migration_operations;
extern const mv_migration mv_migration_changes;
extern const mv_migration mv_migration_saga_steps;
extern const mv_migration mv_migration_partial_indexes;
extern const mv_migration mv_migration_saga_hot;
extern const mv_migration mv_migration_request_scan;
extern const mv_migration mv_migration_tally_key;
extern const mv_migration mv_migration_preferences;
extern const mv_migration mv_migration_timers;
extern const mv_migration mv_migration_snooze;
extern const mv_migration mv_migration_reminders;
extern const mv_migration mv_migration_send_at;
extern const mv_migration mv_migration_saga_wake;
extern const mv_migration mv_migration_digest;
extern const mv_migration mv_migration_request_ids;
extern const mv_migration mv_migration_outbox_checks;
extern const mv_migration mv_migration_deliveries;

/* One per line, in version order, so that a new migration is a one-line change. */
/* clang-format off */
const mv_migration *const mv_migrations[] = {
    &mv_migration_messages,
    &mv_migration_outbox,
    &mv_migration_durable,
    &mv_migration_tenants,
    &mv_migration_inbox,
    &mv_migration_operations,
    &mv_migration_changes,
    &mv_migration_saga_steps,
    &mv_migration_partial_indexes,
    &mv_migration_saga_hot,
    &mv_migration_request_scan,
    &mv_migration_tally_key,
    &mv_migration_preferences,
    &mv_migration_timers,
    &mv_migration_snooze,
    &mv_migration_reminders,
    &mv_migration_send_at,
    &mv_migration_saga_wake,
    &mv_migration_digest,
    &mv_migration_request_ids,
    &mv_migration_outbox_checks,
    &mv_migration_deliveries,
    NULL,
};
/* clang-format on */
