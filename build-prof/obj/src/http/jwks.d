build-prof/obj/src/http/jwks.o: src/http/jwks.c src/deliver/transport.h \
 src/http/jwks.h src/http/jwk.h include/missive/error.h \
 include/missive/deliver.h include/missive/base.h include/missive/store.h \
 src/http/request.h src/http/http_server.h
src/deliver/transport.h:
src/http/jwks.h:
src/http/jwk.h:
include/missive/error.h:
include/missive/deliver.h:
include/missive/base.h:
include/missive/store.h:
src/http/request.h:
src/http/http_server.h:
