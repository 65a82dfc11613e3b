build-prof/obj/src/cmd/cli_render.o: src/cmd/cli_render.c src/cmd/cli.h \
 include/missive/base.h include/missive/error.h \
 include/missive/mustache.h
src/cmd/cli.h:
include/missive/base.h:
include/missive/error.h:
include/missive/mustache.h:
