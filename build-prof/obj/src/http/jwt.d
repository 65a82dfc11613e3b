build-prof/obj/src/http/jwt.o: src/http/jwt.c src/http/jwks.h \
 src/http/jwk.h include/missive/error.h include/missive/deliver.h \
 include/missive/base.h include/missive/store.h src/http/jwt.h
src/http/jwks.h:
src/http/jwk.h:
include/missive/error.h:
include/missive/deliver.h:
include/missive/base.h:
include/missive/store.h:
src/http/jwt.h:
