build-prof/obj/src/store/migration_durable.o: \
 src/store/migration_durable.c src/store/driver.h src/store/db.h \
 include/missive/store.h include/missive/error.h
src/store/driver.h:
src/store/db.h:
include/missive/store.h:
include/missive/error.h:
