build-prof/obj/src/http/openapi.o: src/http/openapi.c src/http/openapi.h \
 src/http/router.h src/http/http_server.h include/missive/error.h \
 src/http/request.h
src/http/openapi.h:
src/http/router.h:
src/http/http_server.h:
include/missive/error.h:
src/http/request.h:
