build-prof/obj/src/base/clock.o: src/base/clock.c include/missive/base.h \
 include/missive/error.h
include/missive/base.h:
include/missive/error.h:
