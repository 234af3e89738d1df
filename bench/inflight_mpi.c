/* SPDX-License-Identifier: BSD-3-Clause */
/* inflight_mpi: Open MPI's side of issue 29's many-operations-in-flight comparison (docs/perf.md), run by hand:
 * `mpicc -O2 -o inflight_mpi bench/inflight_mpi.c && mpirun -np 2 ./inflight_mpi N K`. Each of K cycles posts N
 * MPI_Iallreduce of one double (8 bytes), then MPI_Waitall; it prints the median, over the cycles after the first, of
 * the cycle's time / N in us a call: tcomms-perf's figure for `-z 0 -c 0 -n N -N K`. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc < 3 || atoi(argv[1]) < 1 || atoi(argv[2]) < 2) {
        fprintf(stderr, "usage: inflight_mpi N K (N >= 1 operations in flight, K >= 2 cycles)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int n = atoi(argv[1]), k = atoi(argv[2]), me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    double *s = calloc((size_t)n, 8), *r = calloc((size_t)n, 8), *t = calloc((size_t)k, sizeof(double));
    MPI_Request *q = malloc((size_t)n * sizeof *q);
    for (int c = 0; c < k; c++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < n; i++)
            MPI_Iallreduce(s + i, r + i, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q[i]);
        MPI_Waitall(n, q, MPI_STATUSES_IGNORE);
        t[c] = (MPI_Wtime() - t0) * 1e6 / n;
    }
    if (me == 0) {
        qsort(t + 1, (size_t)(k - 1), sizeof(double), cmp);
        printf("N %d K %d us_per_call %.3f\n", n, k, t[1 + (k - 1) / 2]);
    }
    MPI_Finalize();
    return 0;
}
