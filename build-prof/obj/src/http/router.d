build-prof/obj/src/http/router.o: src/http/router.c src/http/auth.h \
 src/http/http_server.h include/missive/error.h src/http/jwt.h \
 src/http/jwk.h include/missive/base.h include/missive/deliver.h \
 include/missive/store.h src/http/metrics.h src/http/request.h \
 src/http/router.h
src/http/auth.h:
src/http/http_server.h:
include/missive/error.h:
src/http/jwt.h:
src/http/jwk.h:
include/missive/base.h:
include/missive/deliver.h:
include/missive/store.h:
src/http/metrics.h:
src/http/request.h:
src/http/router.h:
