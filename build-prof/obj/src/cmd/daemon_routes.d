build-prof/obj/src/cmd/daemon_routes.o: src/cmd/daemon_routes.c \
 src/cmd/daemon.h src/cmd/config.h include/missive/deliver.h \
 include/missive/base.h include/missive/error.h include/missive/store.h \
 src/http/auth.h src/http/http_server.h src/http/jwt.h src/http/jwk.h \
 src/http/metrics.h src/http/ops.h src/http/router.h \
 src/http/routes_durable.h include/missive/durable.h \
 include/missive/saga_webhook.h src/http/routes_messages.h \
 include/missive/message.h include/missive/template.h \
 include/missive/jsonlogic.h include/missive/mustache.h \
 src/http/openapi.h
src/cmd/daemon.h:
src/cmd/config.h:
include/missive/deliver.h:
include/missive/base.h:
include/missive/error.h:
include/missive/store.h:
src/http/auth.h:
src/http/http_server.h:
src/http/jwt.h:
src/http/jwk.h:
src/http/metrics.h:
src/http/ops.h:
src/http/router.h:
src/http/routes_durable.h:
include/missive/durable.h:
include/missive/saga_webhook.h:
src/http/routes_messages.h:
include/missive/message.h:
include/missive/template.h:
include/missive/jsonlogic.h:
include/missive/mustache.h:
src/http/openapi.h:
