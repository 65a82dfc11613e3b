build-prof/obj/src/store/pg.o: src/store/pg.c \
 /usr/include/postgresql/libpq-fe.h \
 /usr/include/postgresql/postgres_ext.h \
 /usr/include/postgresql/pg_config_ext.h src/store/driver.h \
 src/store/db.h include/missive/store.h include/missive/error.h
/usr/include/postgresql/libpq-fe.h:
/usr/include/postgresql/postgres_ext.h:
/usr/include/postgresql/pg_config_ext.h:
src/store/driver.h:
src/store/db.h:
include/missive/store.h:
include/missive/error.h:
