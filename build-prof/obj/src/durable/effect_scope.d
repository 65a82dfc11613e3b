build-prof/obj/src/durable/effect_scope.o: src/durable/effect_scope.c \
 src/durable/durable_internal.h include/missive/durable.h \
 include/missive/base.h include/missive/error.h include/missive/store.h
src/durable/durable_internal.h:
include/missive/durable.h:
include/missive/base.h:
include/missive/error.h:
include/missive/store.h:
