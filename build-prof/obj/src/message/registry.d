build-prof/obj/src/message/registry.o: src/message/registry.c \
 include/missive/base.h include/missive/error.h \
 include/missive/template.h include/missive/jsonlogic.h \
 include/missive/mustache.h
include/missive/base.h:
include/missive/error.h:
include/missive/template.h:
include/missive/jsonlogic.h:
include/missive/mustache.h:
