build-prof/obj/src/base/strbuf.o: src/base/strbuf.c src/base/strbuf.h
src/base/strbuf.h:
