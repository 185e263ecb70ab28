/*
 * cma_read.c - what a single-copy read of another process's buffer costs on this machine, the way
 * OpenMPI's vader BTL reads large messages (CMA: process_vm_readv), and the same through
 * pread(/proc/PID/mem) (the one way a JVM could do it without native code).
 *
 * Why it exists: a plain-buffer all-reduce in sparkccl copies through shared memory (the owner
 * writes, the peer reads). Reading the peer's private buffer directly instead needs one of these
 * calls. On the 2-core CI VM (2026-11-29, after bench/cross_core_write.c's "slow state"), 1 MB:
 * memcpy 23 us; process_vm_readv in one call 54-86 us, in 32 KB calls 137-157 us; pread of
 * /proc/PID/mem 93-101 us in one call, 157-169 us in 32 KB calls; 16 MB in 64 KB calls 2.7-3.9 ms.
 * That is slower than writing through shared memory with BulkCopy (31-45 us per MB) and reading it
 * back (about 33 us per MB), so sparkccl does not use it (docs/perf/cpu-allreduce.md).
 *
 *   cc -O2 bench/cma_read.c -o /tmp/cma_read && /tmp/cma_read [BYTES [PIECE]]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 200

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    size_t bytes = argc > 1 ? strtoul(argv[1], NULL, 0) : (1 << 20);
    size_t piece = argc > 2 ? strtoul(argv[2], NULL, 0) : bytes;
    /* The child holds the source: a private copy after fork, as a peer rank's own buffer. */
    char *src = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(src, 7, bytes);
    pid_t child = fork();
    if (child == 0) {
        memset(src, 9, bytes); /* its own pages, not shared with the parent */
        for (;;)
            pause();
    }
    usleep(100000);
    char *dst = aligned_alloc(4096, bytes);
    memset(dst, 0, bytes);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)child);
    int mem = open(path, O_RDONLY);
    const char *names[] = {"memcpy (local, for scale)", "process_vm_readv", "pread /proc/PID/mem"};
    for (int mode = 0; mode < 3; mode++) {
        if (mode == 2 && mem < 0) {
            printf("%-26s cannot open %s\n", names[mode], path);
            continue;
        }
        double total = 0, best = 1e30;
        for (int r = 0; r < ROUNDS; r++) {
            double t0 = now_us();
            for (size_t at = 0; at < bytes; at += piece) {
                size_t n = bytes - at < piece ? bytes - at : piece;
                if (mode == 0) {
                    memcpy(dst + at, src + at, n);
                } else if (mode == 1) {
                    struct iovec local = {dst + at, n}, remote = {src + at, n};
                    if (process_vm_readv(child, &local, 1, &remote, 1, 0) != (ssize_t)n) {
                        perror("process_vm_readv");
                        kill(child, SIGKILL);
                        return 1;
                    }
                } else if (pread(mem, dst + at, n, (off_t)(src + at)) != (ssize_t)n) {
                    perror("pread");
                    kill(child, SIGKILL);
                    return 1;
                }
            }
            double d = now_us() - t0;
            total += d;
            if (d < best)
                best = d;
        }
        printf("%-26s %zu B in %zu B calls: mean %.1f us, best %.1f us (%.1f GB/s mean)\n", names[mode], bytes, piece,
               total / ROUNDS, best, bytes / (total / ROUNDS) / 1e3);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return 0;
}
