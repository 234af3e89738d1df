/* SPDX-License-Identifier: BSD-3-Clause */
/* The README's first program: every rank contributes (rank + 1) * (i + 1) to an all_reduce and checks the sum
 * against the closed form size * (size + 1) / 2 * (i + 1). Run it with `tcomms-run -n 4 ./examples/allreduce`. */
#include <stdio.h>
#include <stdlib.h>

#include <tcomms/tcomms.h>

#define COUNT 1024

int main(void)
{
    tcomms_comm_t *comm;
    tcomms_status_t st = tcomms_comm_create(NULL, &comm);
    if (st != TCOMMS_SUCCESS) {
        fprintf(stderr, "tcomms_comm_create: %s: %s\n", tcomms_strerror(st), tcomms_last_error());
        return 1;
    }
    int rank, size;
    const char *backend;
    tcomms_comm_rank(comm, &rank);
    tcomms_comm_size(comm, &size);
    tcomms_comm_backend(comm, TCOMMS_DEVICE_CPU, &backend);
    static double buf[COUNT];
    for (int i = 0; i < COUNT; i++)
        buf[i] = (double)(rank + 1) * (i + 1);
    st = tcomms_all_reduce(comm, buf, buf, COUNT, TCOMMS_FLOAT64, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS) {
        fprintf(stderr, "tcomms_all_reduce: %s: %s\n", tcomms_strerror(st), tcomms_last_error());
        tcomms_comm_destroy(comm);
        return 1;
    }
    int wrong = 0;
    for (int i = 0; i < COUNT; i++)
        wrong += buf[i] != (double)size * (size + 1) / 2 * (i + 1);
    printf("rank %d of %d (%s): all_reduce of %d doubles: buf[%d] = %g, %s\n", rank, size, backend, COUNT,
           COUNT - 1, buf[COUNT - 1], wrong ? "WRONG" : "correct");
    tcomms_comm_destroy(comm);
    return wrong ? 1 : 0;
}
