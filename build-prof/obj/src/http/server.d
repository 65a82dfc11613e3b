build-prof/obj/src/http/server.o: src/http/server.c src/http/gate.h \
 src/http/jwt.h src/http/jwk.h include/missive/error.h \
 include/missive/base.h include/missive/deliver.h include/missive/store.h \
 src/http/request.h src/http/http_server.h src/http/router.h \
 src/http/work_pool.h
src/http/gate.h:
src/http/jwt.h:
src/http/jwk.h:
include/missive/error.h:
include/missive/base.h:
include/missive/deliver.h:
include/missive/store.h:
src/http/request.h:
src/http/http_server.h:
src/http/router.h:
src/http/work_pool.h:
