build-prof/obj/src/cmd/config.o: src/cmd/config.c src/cmd/config.h \
 include/missive/deliver.h include/missive/base.h include/missive/error.h \
 include/missive/store.h src/http/http_server.h
src/cmd/config.h:
include/missive/deliver.h:
include/missive/base.h:
include/missive/error.h:
include/missive/store.h:
src/http/http_server.h:
