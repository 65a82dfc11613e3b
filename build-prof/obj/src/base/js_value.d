build-prof/obj/src/base/js_value.o: src/base/js_value.c \
 src/base/js_value.h src/base/strbuf.h
src/base/js_value.h:
src/base/strbuf.h:
