build-prof/obj/src/base/validate.o: src/base/validate.c \
 include/missive/base.h include/missive/error.h
include/missive/base.h:
include/missive/error.h:
