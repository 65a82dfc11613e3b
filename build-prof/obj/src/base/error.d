build-prof/obj/src/base/error.o: src/base/error.c include/missive/error.h
include/missive/error.h:
