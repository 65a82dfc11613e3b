build-prof/obj/src/store/migrations.o: src/store/migrations.c \
 src/store/driver.h src/store/db.h include/missive/store.h \
 include/missive/error.h
src/store/driver.h:
src/store/db.h:
include/missive/store.h:
include/missive/error.h:
