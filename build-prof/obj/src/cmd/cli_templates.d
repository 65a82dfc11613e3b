build-prof/obj/src/cmd/cli_templates.o: src/cmd/cli_templates.c \
 src/cmd/cli.h include/missive/template.h include/missive/error.h \
 include/missive/jsonlogic.h include/missive/mustache.h
src/cmd/cli.h:
include/missive/template.h:
include/missive/error.h:
include/missive/jsonlogic.h:
include/missive/mustache.h:
