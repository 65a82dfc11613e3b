build-prof/obj/src/http/metrics.o: src/http/metrics.c src/base/strbuf.h \
 src/http/metrics.h include/missive/error.h
src/base/strbuf.h:
src/http/metrics.h:
include/missive/error.h:
