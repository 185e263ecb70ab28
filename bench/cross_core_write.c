/*
 * cross_core_write.c - what a write costs when another core has read the line before.
 *
 * Any all-reduce of buffers that are not shared must copy each rank's data through shared memory:
 * the owner writes it, a peer on another core reads it, and in the next call the owner overwrites
 * lines that now sit in the peer's cache, so every line of the write must first be taken back
 * from there. This program times a 1 MB memcpy into a buffer that a second thread reads between
 * the copies, against the same memcpy when the second thread leaves the buffer alone. On the
 * 2-core CPU machine (2026-11-29) the answer moves for minutes at a time: 24-35 us per MB in one
 * state, 120-200 us (5-8 GB/s) in the other, against 22-26 us untouched. In the slow state that
 * bounds a plain-buffer all-reduce of 2 ranks near 5-8 GB/s busbw however it is scheduled;
 * scripts/cpu-bench.sh runs this before every benchmark run (see docs/perf/cpu-allreduce.md).
 *
 *   cc -O2 -pthread bench/cross_core_write.c -o /tmp/cross_core_write && /tmp/cross_core_write
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BYTES (1 << 20)
#define ROUNDS 1000

static char *stage, *src;
static size_t piece = BYTES; /* bytes per memcpy call */
static atomic_int posted, consumed;
static int peer_reads;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* The peer: after each copy, reads the whole buffer (or not), then says it is done. */
static void *peer(void *unused)
{
    (void)unused;
    volatile float sink = 0;
    for (int round = 1; round <= ROUNDS; round++) {
        while (atomic_load(&posted) < round)
            ;
        if (peer_reads) {
            const float *f = (const float *)stage;
            float sum = 0;
            for (int i = 0; i < BYTES / 4; i++)
                sum += f[i];
            sink = sum;
        }
        atomic_store(&consumed, round);
    }
    (void)sink;
    return NULL;
}

static double time_copies(int reads)
{
    peer_reads = reads;
    atomic_store(&posted, 0);
    atomic_store(&consumed, 0);
    pthread_t t;
    pthread_create(&t, NULL, peer, NULL);
    double copying = 0;
    for (int round = 1; round <= ROUNDS; round++) {
        double t0 = now_us();
        for (size_t at = 0; at < BYTES; at += piece)
            memcpy(stage + at, src + at, piece);
        copying += now_us() - t0;
        atomic_store(&posted, round);
        while (atomic_load(&consumed) < round)
            ;
    }
    pthread_join(t, NULL);
    return copying / ROUNDS;
}

int main(void)
{
    stage = aligned_alloc(4096, BYTES);
    src = aligned_alloc(4096, BYTES);
    memset(stage, 1, BYTES);
    memset(src, 2, BYTES);
    double read_by_peer = time_copies(1);
    double left_alone = time_copies(0);
    printf("memcpy of 1 MB into a buffer the other core read since: %.1f us (%.1f GB/s)\n", read_by_peer,
           BYTES / read_by_peer / 1e3);
    printf("memcpy of 1 MB into a buffer no other core touched:     %.1f us (%.1f GB/s)\n", left_alone,
           BYTES / left_alone / 1e3);
    piece = 256 << 10;
    double pieces_read_by_peer = time_copies(1);
    printf("same, 256 KB memcpy calls (BulkCopy), the other core read: %.1f us (%.1f GB/s)\n", pieces_read_by_peer,
           BYTES / pieces_read_by_peer / 1e3);
    return 0;
}
