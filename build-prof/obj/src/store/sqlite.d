build-prof/obj/src/store/sqlite.o: src/store/sqlite.c src/store/driver.h \
 src/store/db.h include/missive/store.h include/missive/error.h
src/store/driver.h:
src/store/db.h:
include/missive/store.h:
include/missive/error.h:
