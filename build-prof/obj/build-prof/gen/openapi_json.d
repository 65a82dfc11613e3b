build-prof/obj/build-prof/gen/openapi_json.o: \
 build-prof/gen/openapi_json.c
