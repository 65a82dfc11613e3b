build-prof/obj/src/http/auth.o: src/http/auth.c src/http/auth.h \
 src/http/http_server.h include/missive/error.h src/http/jwt.h \
 src/http/jwk.h include/missive/base.h include/missive/deliver.h \
 include/missive/store.h src/http/request.h
src/http/auth.h:
src/http/http_server.h:
include/missive/error.h:
src/http/jwt.h:
src/http/jwk.h:
include/missive/base.h:
include/missive/deliver.h:
include/missive/store.h:
src/http/request.h:
