/* message/time_internal.h — reminders and escalation (docs/time.md): the template keys
 * (template_time.c) and the timers a visible message gets (reminders.c, escalation.c). */
#ifndef MISSIVE_MESSAGE_TIME_INTERNAL_H
#define MISSIVE_MESSAGE_TIME_INTERNAL_H

#include "durable/timer.h"
#include "missive/template.h"
#include "store/db.h"

typedef struct mv_service mv_service;

/* Reads "reminders" and "escalation" of a template JSON into t (MV_INVALID_TEMPLATE prefixed with
 * source and the template); t->template_cd must be set. */
mv_code mv__template_read_time(const json_t *json, const char *source, mv_template *t, mv_err *err);
void mv__template_free_time(mv_template *t);

/* Schedules, in the caller's write transaction, the reminders and escalation steps of tpl for
 * message_id, counted from visible_at: the moment its receivers could first see it. A create
 * calls it with the message's createdAt; a scheduled send calls it when the message is sent. */
mv_code mv__message_time_schedule_tx(mv_db *db, const char *tenant, const mv_template *tpl,
                                     const char *message_id, int64_t visible_at, int64_t now,
                                     mv_err *err);

/* The reminder and escalation timer kinds on engine. */
mv_code mv__register_reminders(mv_service *svc, mv__timer_engine *engine, mv_err *err);
mv_code mv__register_escalation(mv_service *svc, mv__timer_engine *engine, mv_err *err);

#endif
