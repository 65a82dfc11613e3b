build-prof/obj/src/http/gate.o: src/http/gate.c src/http/gate.h \
 src/http/http_server.h include/missive/error.h
src/http/gate.h:
src/http/http_server.h:
include/missive/error.h:
