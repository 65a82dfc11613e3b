build-prof/obj/src/http/routes_messages.o: src/http/routes_messages.c \
 src/http/request.h src/http/http_server.h include/missive/error.h \
 src/http/routes_messages.h src/http/auth.h src/http/jwt.h src/http/jwk.h \
 include/missive/base.h include/missive/deliver.h include/missive/store.h \
 src/http/metrics.h src/http/router.h include/missive/message.h \
 include/missive/durable.h include/missive/template.h \
 include/missive/jsonlogic.h include/missive/mustache.h
src/http/request.h:
src/http/http_server.h:
include/missive/error.h:
src/http/routes_messages.h:
src/http/auth.h:
src/http/jwt.h:
src/http/jwk.h:
include/missive/base.h:
include/missive/deliver.h:
include/missive/store.h:
src/http/metrics.h:
src/http/router.h:
include/missive/message.h:
include/missive/durable.h:
include/missive/template.h:
include/missive/jsonlogic.h:
include/missive/mustache.h:
