build-prof/obj/src/message/rules.o: src/message/rules.c \
 include/missive/base.h include/missive/error.h src/base/js_value.h \
 include/missive/template.h include/missive/jsonlogic.h \
 include/missive/mustache.h
include/missive/base.h:
include/missive/error.h:
src/base/js_value.h:
include/missive/template.h:
include/missive/jsonlogic.h:
include/missive/mustache.h:
