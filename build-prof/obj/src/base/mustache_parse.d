build-prof/obj/src/base/mustache_parse.o: src/base/mustache_parse.c \
 src/base/mustache_node.h include/missive/mustache.h \
 include/missive/error.h
src/base/mustache_node.h:
include/missive/mustache.h:
include/missive/error.h:
