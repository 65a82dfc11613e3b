build-prof/obj/src/cmd/cli_store.o: src/cmd/cli_store.c src/cmd/cli.h \
 include/missive/message.h include/missive/base.h include/missive/error.h \
 include/missive/deliver.h include/missive/store.h \
 include/missive/durable.h include/missive/template.h \
 include/missive/jsonlogic.h include/missive/mustache.h
src/cmd/cli.h:
include/missive/message.h:
include/missive/base.h:
include/missive/error.h:
include/missive/deliver.h:
include/missive/store.h:
include/missive/durable.h:
include/missive/template.h:
include/missive/jsonlogic.h:
include/missive/mustache.h:
