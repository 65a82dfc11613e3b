build-prof/obj/src/http/routes_durable.o: src/http/routes_durable.c \
 src/http/auth.h src/http/http_server.h include/missive/error.h \
 src/http/jwt.h src/http/jwk.h include/missive/base.h \
 include/missive/deliver.h include/missive/store.h src/http/request.h \
 src/http/routes_durable.h src/http/router.h include/missive/durable.h \
 include/missive/saga_webhook.h
src/http/auth.h:
src/http/http_server.h:
include/missive/error.h:
src/http/jwt.h:
src/http/jwk.h:
include/missive/base.h:
include/missive/deliver.h:
include/missive/store.h:
src/http/request.h:
src/http/routes_durable.h:
src/http/router.h:
include/missive/durable.h:
include/missive/saga_webhook.h:
