build-prof/obj/src/deliver/email.o: src/deliver/email.c \
 include/missive/deliver.h include/missive/base.h include/missive/error.h \
 include/missive/store.h
include/missive/deliver.h:
include/missive/base.h:
include/missive/error.h:
include/missive/store.h:
