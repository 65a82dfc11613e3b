build-prof/obj/src/message/template.o: src/message/template.c \
 include/missive/base.h include/missive/error.h src/base/js_value.h \
 include/missive/template.h include/missive/jsonlogic.h \
 include/missive/mustache.h
include/missive/base.h:
include/missive/error.h:
src/base/js_value.h:
include/missive/template.h:
include/missive/jsonlogic.h:
include/missive/mustache.h:
