build-prof/obj/src/http/jwk.o: src/http/jwk.c src/http/jwk.h \
 include/missive/error.h include/missive/base.h
src/http/jwk.h:
include/missive/error.h:
include/missive/base.h:
