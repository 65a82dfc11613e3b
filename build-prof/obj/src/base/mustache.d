build-prof/obj/src/base/mustache.o: src/base/mustache.c \
 src/base/js_value.h src/base/strbuf.h src/base/mustache_node.h \
 include/missive/mustache.h include/missive/error.h
src/base/js_value.h:
src/base/strbuf.h:
src/base/mustache_node.h:
include/missive/mustache.h:
include/missive/error.h:
