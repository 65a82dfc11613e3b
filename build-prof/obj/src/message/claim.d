build-prof/obj/src/message/claim.o: src/message/claim.c \
 src/message/service.h include/missive/message.h include/missive/base.h \
 include/missive/error.h include/missive/deliver.h \
 include/missive/store.h include/missive/durable.h \
 include/missive/template.h include/missive/jsonlogic.h \
 include/missive/mustache.h src/store/db.h
src/message/service.h:
include/missive/message.h:
include/missive/base.h:
include/missive/error.h:
include/missive/deliver.h:
include/missive/store.h:
include/missive/durable.h:
include/missive/template.h:
include/missive/jsonlogic.h:
include/missive/mustache.h:
src/store/db.h:
