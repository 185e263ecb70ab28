/*
 * memcpy_bw.c - the memory-copy ceiling for sparkccl's CPU peer benchmark.
 *
 * An allreduce between processes of one host moves its data with copies
 * through shared memory (and adds on the way), so plain memcpy bandwidth at
 * the same size is the ceiling the allreduce busbw is compared with.
 *
 *   ./memcpy_bw -b 1K -e 64M -f 2 -t 1
 *   ./memcpy_bw -b 1K -e 64M -f 2 -t 2
 *
 * Flags:
 *   -b MIN, -e MAX, -f N   sizes as in nccl-tests (K, M, G suffixes = 1024^k)
 *   -t N                   threads copying at once, each its own source and
 *                          destination buffer of the given size (default 1)
 *   -n N                   lower bound on timed copies per size (default 20;
 *                          small sizes repeat more so each size runs ~50 ms)
 *
 * Columns: size (B), threads, time per copy (us, slowest thread's average),
 * GB/s per thread (bytes / time, 1 GB = 1e9 B, bytes counted once as
 * nccl-tests counts them, not read + write), and aggregate GB/s of all
 * threads together.
 *
 * Each copy is checked once per size (first, middle and last bytes after a
 * fresh pattern), so a broken copy cannot pass as a fast one.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static size_t parse_size(const char *text)
{
    char *end;
    double value = strtod(text, &end);
    switch (*end) {
    case 'k': case 'K': value *= 1024.0; break;
    case 'm': case 'M': value *= 1024.0 * 1024.0; break;
    case 'g': case 'G': value *= 1024.0 * 1024.0 * 1024.0; break;
    default: break;
    }
    return (size_t)value;
}

/* One copying thread: its own buffers, told the size and repeat count per
 * round; all threads start each round together at the barrier. */
struct copier {
    pthread_t thread;
    unsigned char *src, *dst;
    size_t bytes;
    long reps;
    double elapsed_us;
    pthread_barrier_t *start, *done;
    int quit;
};

static void *copier_main(void *arg)
{
    struct copier *c = arg;
    for (;;) {
        pthread_barrier_wait(c->start);
        if (c->quit)
            return NULL;
        double t0 = now_us();
        for (long r = 0; r < c->reps; r++) {
            memcpy(c->dst, c->src, c->bytes);
            /* Keep the compiler from treating repeated copies as dead. */
            __asm__ __volatile__("" : : "r"(c->dst) : "memory");
        }
        c->elapsed_us = now_us() - t0;
        pthread_barrier_wait(c->done);
    }
}

/* Run one round on all threads and return the slowest thread's time. */
static double run_round(struct copier *cs, int nthreads, size_t bytes, long reps,
                        pthread_barrier_t *start, pthread_barrier_t *done)
{
    for (int t = 0; t < nthreads; t++) {
        cs[t].bytes = bytes;
        cs[t].reps = reps;
    }
    pthread_barrier_wait(start);
    pthread_barrier_wait(done);
    double slowest = 0.0;
    for (int t = 0; t < nthreads; t++)
        if (cs[t].elapsed_us > slowest)
            slowest = cs[t].elapsed_us;
    return slowest;
}

int main(int argc, char **argv)
{
    size_t min_bytes = 1024, max_bytes = 64u << 20;
    int factor = 2, nthreads = 1;
    long min_iters = 20;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        if (!strcmp(flag, "-b")) min_bytes = parse_size(value);
        else if (!strcmp(flag, "-e")) max_bytes = parse_size(value);
        else if (!strcmp(flag, "-f")) factor = atoi(value);
        else if (!strcmp(flag, "-t")) nthreads = atoi(value);
        else if (!strcmp(flag, "-n")) min_iters = atol(value);
        else {
            fprintf(stderr, "memcpy_bw: unknown flag %s (known: -b -e -f -t -n)\n", flag);
            return 2;
        }
    }
    if (factor < 2 || nthreads < 1 || min_iters < 1 || min_bytes < 1 || max_bytes < min_bytes) {
        fprintf(stderr, "memcpy_bw: need -f >= 2, -t >= 1, -n >= 1, 1 <= -b <= -e\n");
        return 2;
    }

    pthread_barrier_t start, done;
    pthread_barrier_init(&start, NULL, nthreads + 1);
    pthread_barrier_init(&done, NULL, nthreads + 1);
    struct copier *cs = calloc(nthreads, sizeof *cs);
    for (int t = 0; t < nthreads; t++) {
        cs[t].src = aligned_alloc(4096, (max_bytes + 4095) / 4096 * 4096);
        cs[t].dst = aligned_alloc(4096, (max_bytes + 4095) / 4096 * 4096);
        if (!cs[t].src || !cs[t].dst) {
            fprintf(stderr, "memcpy_bw: could not allocate 2 x %zu bytes for thread %d; lower -e\n",
                    max_bytes, t);
            return 1;
        }
        /* Touch every page now so page faults are not timed. */
        memset(cs[t].src, 0x5A, max_bytes);
        memset(cs[t].dst, 0, max_bytes);
        cs[t].start = &start;
        cs[t].done = &done;
        pthread_create(&cs[t].thread, NULL, copier_main, &cs[t]);
    }

    printf("# memcpy_bw: threads %d, minBytes %zu maxBytes %zu step: %d(factor)\n",
           nthreads, min_bytes, max_bytes, factor);
    printf("#       size  threads      time   GB/s/thread   GB/s total\n");
    printf("#        (B)               (us)\n");
    int failed = 0;
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
        /* Aim for ~50 ms of copying per size, at least min_iters copies. */
        long reps = (long)(50e-3 * 5e9 / bytes);
        if (reps < min_iters) reps = min_iters;

        /* Check: a fresh pattern must arrive intact. */
        for (int t = 0; t < nthreads; t++) {
            cs[t].src[0] = (unsigned char)(bytes + t);
            cs[t].src[bytes / 2] = (unsigned char)(bytes + t + 1);
            cs[t].src[bytes - 1] = (unsigned char)(bytes + t + 2);
        }
        run_round(cs, nthreads, bytes, 1, &start, &done);
        for (int t = 0; t < nthreads; t++)
            if (memcmp(cs[t].dst, cs[t].src, bytes) != 0) {
                fprintf(stderr, "memcpy_bw: copy of %zu bytes on thread %d came out wrong\n", bytes, t);
                failed = 1;
            }

        run_round(cs, nthreads, bytes, reps / 10 + 1, &start, &done); /* warmup */
        double us = run_round(cs, nthreads, bytes, reps, &start, &done) / reps;
        double gbps = bytes / (us * 1e-6) / 1e9;
        printf("%12zu  %7d  %8.2f  %12.2f  %11.2f\n", bytes, nthreads, us, gbps, gbps * nthreads);
        fflush(stdout);
        if (bytes > max_bytes / factor)
            break;
    }

    for (int t = 0; t < nthreads; t++)
        cs[t].quit = 1;
    pthread_barrier_wait(&start);
    for (int t = 0; t < nthreads; t++) {
        pthread_join(cs[t].thread, NULL);
        free(cs[t].src);
        free(cs[t].dst);
    }
    free(cs);
    return failed;
}
