build-prof/obj/src/store/store.o: src/store/store.c \
 include/missive/base.h include/missive/error.h src/store/driver.h \
 src/store/db.h include/missive/store.h
include/missive/base.h:
include/missive/error.h:
src/store/driver.h:
src/store/db.h:
include/missive/store.h:
