build-prof/obj/src/store/migration_messages.o: \
 src/store/migration_messages.c src/store/driver.h src/store/db.h \
 include/missive/store.h include/missive/error.h
src/store/driver.h:
src/store/db.h:
include/missive/store.h:
include/missive/error.h:
