build-prof/obj/src/http/ops.o: src/http/ops.c src/http/ops.h \
 src/http/metrics.h include/missive/error.h src/http/router.h \
 src/http/http_server.h src/http/request.h
src/http/ops.h:
src/http/metrics.h:
include/missive/error.h:
src/http/router.h:
src/http/http_server.h:
src/http/request.h:
