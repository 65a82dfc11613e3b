build-prof/obj/src/http/request.o: src/http/request.c src/http/request.h \
 src/http/http_server.h include/missive/error.h include/missive/base.h
src/http/request.h:
src/http/http_server.h:
include/missive/error.h:
include/missive/base.h:
