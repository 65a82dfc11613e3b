build-prof/obj/src/cmd/cli_args.o: src/cmd/cli_args.c src/cmd/cli.h
src/cmd/cli.h:
