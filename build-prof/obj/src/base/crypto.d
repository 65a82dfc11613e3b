build-prof/obj/src/base/crypto.o: src/base/crypto.c \
 include/missive/base.h include/missive/error.h
include/missive/base.h:
include/missive/error.h:
