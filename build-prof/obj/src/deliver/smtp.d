build-prof/obj/src/deliver/smtp.o: src/deliver/smtp.c src/base/strbuf.h \
 src/deliver/transport.h include/missive/deliver.h include/missive/base.h \
 include/missive/error.h include/missive/store.h
src/base/strbuf.h:
src/deliver/transport.h:
include/missive/deliver.h:
include/missive/base.h:
include/missive/error.h:
include/missive/store.h:
