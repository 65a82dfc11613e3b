/* missived.c — the daemon's entry point (placeholder until the daemon issue lands). */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: missived --config FILE [--listen HOST:PORT] [--store URL]\n"
               "       missived --check-config FILE\n");
        return 0;
    }
    fprintf(stderr, "missived: not available in this build\n");
    return 2;
}
