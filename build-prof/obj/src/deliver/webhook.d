build-prof/obj/src/deliver/webhook.o: src/deliver/webhook.c \
 src/deliver/transport.h include/missive/deliver.h include/missive/base.h \
 include/missive/error.h include/missive/store.h
src/deliver/transport.h:
include/missive/deliver.h:
include/missive/base.h:
include/missive/error.h:
include/missive/store.h:
