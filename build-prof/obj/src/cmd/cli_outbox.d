build-prof/obj/src/cmd/cli_outbox.o: src/cmd/cli_outbox.c src/cmd/cli.h \
 src/cmd/config.h include/missive/deliver.h include/missive/base.h \
 include/missive/error.h include/missive/store.h
src/cmd/cli.h:
src/cmd/config.h:
include/missive/deliver.h:
include/missive/base.h:
include/missive/error.h:
include/missive/store.h:
