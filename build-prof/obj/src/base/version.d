build-prof/obj/src/base/version.o: src/base/version.c \
 include/missive/version.h
include/missive/version.h:
