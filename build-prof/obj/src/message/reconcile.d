build-prof/obj/src/message/reconcile.o: src/message/reconcile.c \
 include/missive/base.h include/missive/error.h \
 include/missive/reconcile.h include/missive/store.h src/store/db.h
include/missive/base.h:
include/missive/error.h:
include/missive/reconcile.h:
include/missive/store.h:
src/store/db.h:
