/* message/timers.h — the message layer's timer kinds (expiry), registered on a timer engine the
 * daemon (or an embedding program) runs. */
#ifndef MISSIVE_MESSAGE_TIMERS_H
#define MISSIVE_MESSAGE_TIMERS_H

#include "durable/timer.h"
#include "missive/message.h"

/* The principal an expiry acts as. */
#define MV_EXPIRY_PRINCIPAL "system:expiry"

/* Registers the message kinds on engine; svc must outlive the engine's last fire. */
mv_code mv__service_register_timers(mv_service *svc, mv__timer_engine *engine, mv_err *err);
/* The per-viewer `snooze` kind (snooze.c); mv__service_register_timers registers it. */
mv_code mv__snooze_register(mv_service *svc, mv__timer_engine *engine, mv_err *err);
/* The `send` kind of scheduled send (schedule.c); mv__service_register_timers registers it. */
mv_code mv__schedule_register(mv_service *svc, mv__timer_engine *engine, mv_err *err);
/* The `digest` kind of digests (digest.c); mv__service_register_timers registers it. */
mv_code mv__digest_register(mv_service *svc, mv__timer_engine *engine, mv_err *err);

#endif
