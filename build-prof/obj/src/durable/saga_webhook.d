build-prof/obj/src/durable/saga_webhook.o: src/durable/saga_webhook.c \
 src/durable/durable_internal.h include/missive/durable.h \
 include/missive/base.h include/missive/error.h include/missive/store.h \
 include/missive/saga_webhook.h include/missive/deliver.h
src/durable/durable_internal.h:
include/missive/durable.h:
include/missive/base.h:
include/missive/error.h:
include/missive/store.h:
include/missive/saga_webhook.h:
include/missive/deliver.h:
