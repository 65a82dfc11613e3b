build-prof/obj/src/durable/saga.o: src/durable/saga.c \
 src/durable/durable_internal.h include/missive/durable.h \
 include/missive/base.h include/missive/error.h include/missive/store.h \
 src/store/db.h
src/durable/durable_internal.h:
include/missive/durable.h:
include/missive/base.h:
include/missive/error.h:
include/missive/store.h:
src/store/db.h:
