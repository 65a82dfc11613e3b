build-prof/obj/src/base/json.o: src/base/json.c include/missive/base.h \
 include/missive/error.h
include/missive/base.h:
include/missive/error.h:
