/* id.c — message ids in the ObjectId layout (time-ordered, unique per process by a counter) and
 * UUID v4 from the OS random source. The 5 per-process random bytes are drawn once. UUIDs take
 * their bytes from a per-thread buffer filled from the same source 256 bytes at a time: a request
 * draws two or three UUIDs, and one RAND_bytes call per UUID (its locks and DRBG setup) cost
 * more than the rest of the id. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "missive/base.h"

static unsigned char process_random[5];
static atomic_uint id_counter;
static pthread_once_t id_once = PTHREAD_ONCE_INIT;

static void id_init(void) {
    unsigned char seed[8];
    if (mv_random_bytes(seed, sizeof seed, NULL) != MV_OK) {
        /* The OS random source failing is near impossible; fall back to time so ids stay unique
         * within the process thanks to the counter. */
        uint64_t t = (uint64_t)mv_now_ms();
        for (int i = 0; i < 8; i++)
            seed[i] = (unsigned char)(t >> (i * 8));
    }
    for (int i = 0; i < 5; i++)
        process_random[i] = seed[i];
    atomic_store(&id_counter, (unsigned)seed[5] << 16 | (unsigned)seed[6] << 8 | seed[7]);
}

void mv_id_message(char out[25]) {
    pthread_once(&id_once, id_init);
    unsigned char b[12];
    uint32_t secs = (uint32_t)time(NULL);
    unsigned c = atomic_fetch_add(&id_counter, 1) & 0xffffffu;
    b[0] = (unsigned char)(secs >> 24);
    b[1] = (unsigned char)(secs >> 16);
    b[2] = (unsigned char)(secs >> 8);
    b[3] = (unsigned char)secs;
    for (int i = 0; i < 5; i++)
        b[4 + i] = process_random[i];
    b[9] = (unsigned char)(c >> 16);
    b[10] = (unsigned char)(c >> 8);
    b[11] = (unsigned char)c;
    mv_hex(b, 12, out);
}

#define UUID_POOL 256

static _Thread_local struct {
    unsigned char bytes[UUID_POOL];
    size_t used; /* 0 (or UUID_POOL) when empty; bytes before used were handed out and cleared */
    bool filled;
} uuid_pool;

static mv_code uuid_bytes(unsigned char b[16], mv_err *err) {
    if (!uuid_pool.filled || uuid_pool.used + 16 > UUID_POOL) {
        mv_code rc = mv_random_bytes(uuid_pool.bytes, UUID_POOL, err);
        if (rc != MV_OK) return rc;
        uuid_pool.filled = true;
        uuid_pool.used = 0;
    }
    memcpy(b, uuid_pool.bytes + uuid_pool.used, 16);
    memset(uuid_pool.bytes + uuid_pool.used, 0, 16); /* never handed out twice */
    uuid_pool.used += 16;
    return MV_OK;
}

static void uuid_text(unsigned char b[16], unsigned version, char out[37]) {
    b[6] = (unsigned char)((b[6] & 0x0f) | (version << 4));
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

mv_code mv_id_uuid(char out[37], mv_err *err) {
    unsigned char b[16];
    mv_code rc = uuid_bytes(b, err);
    if (rc == MV_OK) uuid_text(b, 4, out);
    return rc;
}

mv_code mv_id_uuid7(char out[37], mv_err *err) {
    unsigned char b[16];
    mv_code rc = uuid_bytes(b, err);
    if (rc != MV_OK) return rc;
    uint64_t ms = (uint64_t)mv_now_ms();
    for (int i = 0; i < 6; i++)
        b[i] = (unsigned char)(ms >> (40 - 8 * i));
    uuid_text(b, 7, out);
    return MV_OK;
}
