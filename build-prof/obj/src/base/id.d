build-prof/obj/src/base/id.o: src/base/id.c include/missive/base.h \
 include/missive/error.h
include/missive/base.h:
include/missive/error.h:
