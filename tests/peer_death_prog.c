/* SPDX-License-Identifier: BSD-3-Clause */
/* A tcomms program for test_peer_death: every rank records its pid, the job does one all_reduce, then the rank named
 * by argv[1] kills itself while the others enter a second all_reduce, which must fail rather than hang.
 * Usage: peer_death_prog DYING_RANK (under tcomms-run; pid files go to $TCOMMS_TEST_PIDDIR when set). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>
#include <unistd.h>

#define OP_TIMEOUT_MS 5000u

/* Write our pid to DIR/rankR.pid through a rename, so a reader never sees half a file. */
static void write_pid(int rank)
{
    const char *dir = getenv("TCOMMS_TEST_PIDDIR");
    char tmp[4096], path[4096];
    if (!dir)
        return;
    snprintf(tmp, sizeof tmp, "%s/.rank%d.tmp", dir, rank);
    snprintf(path, sizeof path, "%s/rank%d.pid", dir, rank);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "%ld\n", (long)getpid());
    if (fclose(f) == 0)
        rename(tmp, path);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: peer_death_prog DYING_RANK\n");
        return 2;
    }
    int dying = atoi(argv[1]);
    const char *rank_text = getenv("TCOMMS_RANK");
    write_pid(rank_text ? atoi(rank_text) : 0);

    char backend[32] = "";
    const char *list = getenv("TCOMMS_TEST_BACKENDS");
    if (list)
        sscanf(list, " %31[^ ,]", backend);
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_TIMEOUT | (backend[0] ? TCOMMS_COMM_PARAM_BACKEND : 0u);
    p.timeout_ms = OP_TIMEOUT_MS;
    p.backend = backend;
    tcomms_comm_t *comm = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, &comm);
    if (st != TCOMMS_SUCCESS) {
        fprintf(stderr, "peer_death_prog: tcomms_comm_create: %s\n", tcomms_last_error());
        return 1;
    }
    int rank = -1, size = -1;
    tcomms_comm_rank(comm, &rank);
    tcomms_comm_size(comm, &size);
    int32_t one = 1, sum = 0;
    st = tcomms_all_reduce(comm, &one, &sum, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS || sum != size) {
        fprintf(stderr, "peer_death_prog: first all_reduce: status %d, sum %d of %d (%s)\n", st, (int)sum, size,
                tcomms_last_error());
        return 1;
    }
    if (rank == dying)
        raise(SIGKILL);
    st = tcomms_all_reduce(comm, &one, &sum, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    fprintf(stderr, "peer_death_prog: rank %d: all_reduce after rank %d died: %d (%s)\n", rank, dying, st,
            tcomms_last_error());
    tcomms_comm_destroy(comm);
    return st == TCOMMS_SUCCESS ? 3 : 0;
}
