/*
 * mpi_allreduce.c - the OpenMPI side of sparkccl's CPU peer benchmark.
 *
 * Times MPI_Allreduce (float32, sum) out-of-place and in-place over a range
 * of sizes and prints the same columns as nccl-tests' all_reduce_perf, so the
 * output can be laid beside bin/allreduce-perf's line for line.
 *
 *   mpirun -np 2 ./mpi_allreduce -b 1K -e 64M -f 2 -w 5 -n 20 -c 1
 *
 * Flags (same letters and meaning as nccl-tests):
 *   -b MIN   smallest size in bytes (suffix K, M, G = powers of 1024)
 *   -e MAX   largest size in bytes
 *   -f N     multiply the size by N each step
 *   -w N     warmup iterations per size (not timed)
 *   -n N     timed iterations per size
 *   -c 0|1   check results (default 1)
 *   -s SEED  seed of the data generator (default 1)
 *   -S 1     also print each rank's min/median/p90/max per call to stderr
 *            (as bin/allreduce-perf --call-stats)
 *
 * Bandwidths follow nccl-tests' definitions:
 *   algbw = bytes / time,  busbw = algbw * 2(n-1)/n  (GB/s, 1 GB = 1e9 B)
 * The time of one size is the average per iteration on each rank, then the
 * maximum of that over the ranks (the slowest rank decides when the
 * collective is done).
 *
 * Checking: every rank fills its input from a counter-based generator keyed
 * by (seed, rank, element index), so any rank can regenerate any other
 * rank's input without communication. After the timed loop, each rank runs
 * one fresh allreduce, recomputes the expected sum in float64 from all ranks'
 * regenerated inputs, and counts elements whose float32 result is further
 * from it than the rounding error a float32 sum of n terms can have. The
 * #wrong column is the count summed over ranks; the program exits 1 if any
 * element was wrong anywhere.
 */
#include <mpi.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64: a tiny, well-mixed hash; counter-based so element i of rank r
 * can be produced directly, without stepping a generator state. */
static uint64_t splitmix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Input value of element i on rank r: uniform in [-1, 1), exactly
 * representable in float32 (24 random bits scaled by 2^-23). */
static float input_value(uint64_t seed, int rank, size_t i)
{
    uint64_t h = splitmix64(seed * 0x100000001B3ull ^ ((uint64_t)rank << 40) ^ (uint64_t)i);
    int32_t bits24 = (int32_t)(h >> 40);          /* 0 .. 2^24-1 */
    return (float)(bits24 - (1 << 23)) * (1.0f / (float)(1 << 23));
}

static void fill_input(float *buf, size_t count, uint64_t seed, int rank)
{
    for (size_t i = 0; i < count; i++)
        buf[i] = input_value(seed, rank, i);
}

/* Count elements of result that differ from the float64 sum of all ranks'
 * inputs by more than float32 rounding allows. Each of the n-1 additions of
 * a float32 sum may round by half an ulp of the running partial sum, which is
 * at most sum|x| in magnitude, so n * FLT_EPSILON * sum|x| is a safe bound
 * whatever order the library adds in. */
static long count_wrong(const float *result, size_t count, uint64_t seed, int nranks)
{
    long wrong = 0;
    for (size_t i = 0; i < count; i++) {
        double sum = 0.0, sum_abs = 0.0;
        for (int r = 0; r < nranks; r++) {
            double v = input_value(seed, r, i);
            sum += v;
            sum_abs += fabs(v);
        }
        double tolerance = nranks * (double)FLT_EPSILON * sum_abs;
        if (!(fabs((double)result[i] - sum) <= tolerance)) /* also catches NaN */
            wrong++;
    }
    return wrong;
}

/* Parse "64M", "1K", "4096" into bytes. */
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

/* -S 1: per-call statistics on stderr, as allreduce-perf --call-stats. */
static int call_stats;

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* -S 1: one rank's call times of one size (us, sorted here) as allreduce-perf --call-stats prints them. */
static void print_call_stats(double *us, int iters, size_t count, int in_place)
{
    qsort(us, iters, sizeof(double), compare_doubles);
    int p90 = (int)((iters * 9 + 9) / 10) - 1; /* nearest rank, as CallStats */
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* Stalls as CallStats counts them: calls over 10x the median, and their excess over the
     * median spread over all calls (what they add to the row's average). */
    double median = us[iters / 2], excess = 0;
    int stalls = 0;
    for (int i = 0; i < iters; i++) {
        if (us[i] > 10 * median) {
            stalls++;
            excess += us[i] - median;
        }
    }
    fprintf(stderr,
            "# calls rank %d %zu B %s: min %.1f median %.1f p90 %.1f max %.1f us; %d stalls (> 10x median) add %.2f us"
            " to the average\n",
            rank, count * sizeof(float), in_place ? "in-place" : "out-of-place", us[0], median, us[p90],
            us[iters - 1], stalls, excess / iters);
}

/* Time `iters` allreduces after `warmup` untimed ones; returns the slowest
 * rank's average microseconds per iteration (on rank 0). In-place passes MPI_IN_PLACE
 * and reduces into recvbuf, exactly as an application doing in-place would. */
static double time_allreduce(const float *sendbuf, float *recvbuf, size_t count,
                             int in_place, int warmup, int iters)
{
    const void *src = in_place ? MPI_IN_PLACE : (const void *)sendbuf;
    for (int i = 0; i < warmup; i++)
        MPI_Allreduce(src, recvbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);

    double *us = call_stats ? malloc(iters * sizeof(double)) : NULL;
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    if (us) {
        double last = start;
        for (int i = 0; i < iters; i++) {
            MPI_Allreduce(src, recvbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double now = MPI_Wtime();
            us[i] = (now - last) * 1e6;
            last = now;
        }
    } else {
        for (int i = 0; i < iters; i++)
            MPI_Allreduce(src, recvbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double mine = (MPI_Wtime() - start) / iters * 1e6;
    if (us) {
        print_call_stats(us, iters, count, in_place);
        free(us);
    }

    double slowest = 0.0; /* meaningful on rank 0, the rank that prints */
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return slowest;
}

/* One fresh allreduce on known inputs, then count wrong elements on all ranks. */
static long check_allreduce(float *sendbuf, float *recvbuf, size_t count, int in_place,
                            uint64_t seed, int rank, int nranks)
{
    if (in_place) {
        fill_input(recvbuf, count, seed, rank);
        MPI_Allreduce(MPI_IN_PLACE, recvbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else {
        fill_input(sendbuf, count, seed, rank);
        memset(recvbuf, 0xFF, count * sizeof(float)); /* NaN: a skipped write shows up */
        MPI_Allreduce(sendbuf, recvbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    long mine = count_wrong(recvbuf, count, seed, nranks), total;
    MPI_Allreduce(&mine, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    size_t min_bytes = 1024, max_bytes = 64u << 20;
    int factor = 2, warmup = 5, iters = 20, check = 1;
    uint64_t seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *flag = argv[i], *value = argv[i + 1];
        if (!strcmp(flag, "-b")) min_bytes = parse_size(value);
        else if (!strcmp(flag, "-e")) max_bytes = parse_size(value);
        else if (!strcmp(flag, "-f")) factor = atoi(value);
        else if (!strcmp(flag, "-w")) warmup = atoi(value);
        else if (!strcmp(flag, "-n")) iters = atoi(value);
        else if (!strcmp(flag, "-c")) check = atoi(value);
        else if (!strcmp(flag, "-s")) seed = strtoull(value, NULL, 10);
        else if (!strcmp(flag, "-S")) call_stats = atoi(value);
        else {
            if (rank == 0)
                fprintf(stderr, "mpi_allreduce: unknown flag %s (known: -b -e -f -w -n -c -s -S)\n", flag);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (factor < 2 || iters < 1 || min_bytes < sizeof(float) || max_bytes < min_bytes
        || max_bytes / sizeof(float) > (size_t)2147483647) {
        if (rank == 0)
            fprintf(stderr, "mpi_allreduce: need -f >= 2, -n >= 1, 4 <= -b <= -e < 8 GiB\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    /* One pair of buffers at the largest size serves every size. */
    size_t max_count = max_bytes / sizeof(float);
    float *sendbuf = malloc(max_count * sizeof(float));
    float *recvbuf = malloc(max_count * sizeof(float));
    if (!sendbuf || !recvbuf) {
        fprintf(stderr, "mpi_allreduce: rank %d could not allocate 2 x %zu bytes; lower -e\n",
                rank, max_bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fill_input(sendbuf, max_count, seed, rank);
    fill_input(recvbuf, max_count, seed, rank);

    if (rank == 0) {
        printf("# mpi_allreduce: nranks %d, minBytes %zu maxBytes %zu step: %d(factor) warmup iters: %d iters: %d validation: %d\n",
               nranks, min_bytes, max_bytes, factor, warmup, iters, check);
        printf("#\n");
        printf("#                                                              out-of-place                       in-place          \n");
        printf("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n");
        printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n");
    }

    double bus_factor = 2.0 * (nranks - 1) / nranks;
    double busbw_sum = 0.0;
    int nsizes = 0;
    long wrong_total = 0;
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= factor) {
        size_t count = bytes / sizeof(float);
        size_t used = count * sizeof(float);
        double t[2], algbw[2], busbw[2];
        long wrong[2] = {-1, -1};
        for (int in_place = 0; in_place <= 1; in_place++) {
            /* Restore the input before timing so in-place starts from data,
             * not from the previous size's growing sums. */
            fill_input(recvbuf, count, seed, rank);
            t[in_place] = time_allreduce(sendbuf, recvbuf, count, in_place, warmup, iters);
            algbw[in_place] = used / (t[in_place] * 1e-6) / 1e9;
            busbw[in_place] = algbw[in_place] * bus_factor;
            if (check)
                wrong[in_place] = check_allreduce(sendbuf, recvbuf, count, in_place, seed, rank, nranks);
            if (wrong[in_place] > 0)
                wrong_total += wrong[in_place];
        }
        /* Put sendbuf back: the out-of-place check refilled it, but keep the
         * invariant explicit for the next size. */
        if (check)
            fill_input(sendbuf, count, seed, rank);
        busbw_sum += busbw[0] + busbw[1];
        nsizes += 2;
        if (rank == 0) {
            printf("%12zu  %12zu  %8s  %6s  %6d", used, count, "float", "sum", -1);
            for (int k = 0; k < 2; k++) {
                printf("  %7.2f  %6.2f  %6.2f", t[k], algbw[k], busbw[k]);
                if (check) printf("  %5ld", wrong[k]);
                else printf("  %5s", "N/A");
            }
            printf("\n");
            fflush(stdout);
        }
        if (bytes > max_bytes / factor)
            break; /* the next step would pass -e (and may overflow) */
    }

    if (rank == 0) {
        printf("# Out of bounds values : %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g \n", nsizes ? busbw_sum / nsizes : 0.0);
        printf("#\n");
    }
    free(sendbuf);
    free(recvbuf);
    MPI_Finalize();
    return wrong_total ? 1 : 0;
}
