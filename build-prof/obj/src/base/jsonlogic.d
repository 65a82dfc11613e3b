build-prof/obj/src/base/jsonlogic.o: src/base/jsonlogic.c \
 include/missive/jsonlogic.h include/missive/error.h src/base/js_value.h
include/missive/jsonlogic.h:
include/missive/error.h:
src/base/js_value.h:
