build-prof/obj/src/deliver/outbox.o: src/deliver/outbox.c \
 src/deliver/transport.h include/missive/deliver.h include/missive/base.h \
 include/missive/error.h include/missive/store.h src/store/db.h
src/deliver/transport.h:
include/missive/deliver.h:
include/missive/base.h:
include/missive/error.h:
include/missive/store.h:
src/store/db.h:
