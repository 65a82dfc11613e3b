build-prof/obj/src/cmd/cli_logic.o: src/cmd/cli_logic.c src/cmd/cli.h \
 include/missive/base.h include/missive/error.h \
 include/missive/jsonlogic.h
src/cmd/cli.h:
include/missive/base.h:
include/missive/error.h:
include/missive/jsonlogic.h:
