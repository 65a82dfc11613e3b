build-prof/obj/src/cmd/cli_durable.o: src/cmd/cli_durable.c src/cmd/cli.h \
 src/cmd/config.h include/missive/deliver.h include/missive/base.h \
 include/missive/error.h include/missive/store.h \
 include/missive/durable.h include/missive/reconcile.h \
 include/missive/saga_webhook.h
src/cmd/cli.h:
src/cmd/config.h:
include/missive/deliver.h:
include/missive/base.h:
include/missive/error.h:
include/missive/store.h:
include/missive/durable.h:
include/missive/reconcile.h:
include/missive/saga_webhook.h:
