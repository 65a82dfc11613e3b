build-prof/obj/src/http/work_pool.o: src/http/work_pool.c \
 src/http/work_pool.h
src/http/work_pool.h:
