/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests the scratch that backends/ucx/engine.c lends a task (tcu_scratch), which starts at the user buffer's offset
 * within a 64-byte line: in-place all_to_all (every block lands in scratch) and in-place all_reduce (ring and
 * recursive doubling receive into scratch), int32, with the buffer at each 8-byte offset of a line, counts small
 * (eager) and of 64 KiB per message and more (rendezvous), growing and shrinking on one communicator, so that a kept
 * scratch serves later calls at another offset and grows under them. Every element is checked against values
 * computed here, and the bytes around the buffer must stay as they were. On every CPU backend in
 * TCOMMS_TEST_BACKENDS (gloo has no such scratch: the same results hold), 2 and 3 ranks. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>

#include "mrank.h"
#include "mrank_world.h"

#define JOB_S 120
#define OP_TIMEOUT_MS 20000u
#define LINE 64
#define GUARD 64 /* bytes before and after the buffer that must stay untouched */

/* Elements per block (all_to_all) or in all (all_reduce): eager, one 64 KiB message and more, back down. */
static const size_t counts[] = {5, 16384 + 3, 65536 + 7, 1000, 40000 + 1};
#define NCOUNTS ((int)(sizeof counts / sizeof counts[0]))

/* Rank r's element i of its block for rank q (q = 0 for all_reduce): small, so sums over 3 ranks stay exact. */
static int32_t value(int r, int q, size_t i)
{
    return (int32_t)((i * 7919u + (size_t)r * 131u + (size_t)q * 17u) % 100003u) - 50000;
}

typedef struct job {
    tcomms_comm_t *comm;
    int rank, size;
} job_t;

/* One call on a buffer `off` bytes into a line; the number of failures. */
static int run_case(const job_t *j, int alltoall, size_t count, size_t off)
{
    size_t n = alltoall ? count * (size_t)j->size : count, bytes = n * sizeof(int32_t);
    unsigned char *mem;
    if (posix_memalign((void **)&mem, LINE, GUARD + bytes + GUARD + LINE) != 0)
        return mrank_failf("FAIL rank %d: out of memory", j->rank);
    int32_t *buf = (int32_t *)(void *)(mem + GUARD + off);
    memset(mem, 0x5a, GUARD + bytes + GUARD + LINE);
    for (size_t i = 0; i < n; i++)
        buf[i] = alltoall ? value(j->rank, (int)(i / count), i % count) : value(j->rank, 0, i);
    tcomms_status_t st = alltoall ? tcomms_all_to_all(j->comm, buf, buf, count, TCOMMS_INT32, NULL, NULL)
                                  : tcomms_all_reduce(j->comm, buf, buf, count, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    char variant[64];
    snprintf(variant, sizeof variant, "buffer %zu bytes into a 64-byte line", off);
    const char *name = alltoall ? "all_to_all" : "all_reduce";
    mrank_case_t c = {name, "int32", alltoall ? NULL : "sum", variant, (long long)count, 1, -1, j->rank, 0};
    int fails = 0;
    if (st != TCOMMS_SUCCESS) {
        mrank_case_status(&c, name, st, tcomms_last_error());
        fails = 1;
    }
    for (size_t i = 0; st == TCOMMS_SUCCESS && i < n && !fails; i++) {
        int32_t want = 0;
        if (alltoall) /* block q now holds what rank q had for us */
            want = value((int)(i / count), j->rank, i % count);
        else
            for (int r = 0; r < j->size; r++)
                want += value(r, 0, i);
        if (buf[i] != want) {
            mrank_case_fail(&c, "buf", (long long)i, buf[i], want);
            fails = 1;
        }
    }
    const unsigned char *after = (unsigned char *)(buf + n);
    for (size_t b = 0; b < GUARD + off && !fails; b++)
        if (mem[b] != 0x5a) {
            mrank_case_fail(&c, "guard before the buffer", (long long)b, mem[b], 0x5a);
            fails = 1;
        }
    for (size_t b = 0; b < GUARD && !fails; b++)
        if (after[b] != 0x5a) {
            mrank_case_fail(&c, "guard after the buffer", (long long)b, after[b], 0x5a);
            fails = 1;
        }
    free(mem);
    return fails;
}

static int scratch_rank(int rank, int size, void *arg)
{
    job_t j = {mrank_world(arg, OP_TIMEOUT_MS, rank), rank, size};
    if (j.comm == NULL)
        return 1;
    int fails = 0;
    for (int k = 0; k < NCOUNTS && fails == 0; k++)
        for (size_t off = 0; off < LINE && fails == 0; off += 8)
            for (int alltoall = 0; alltoall < 2 && fails == 0; alltoall++)
                fails += run_case(&j, alltoall, counts[k], off);
    tcomms_comm_destroy(j.comm);
    return fails;
}

START_TEST(in_place_at_every_offset)
{
    for (int b = 0; b < mrank_nbackends(); b++)
        for (int size = 2; size <= 3; size++) {
            int failing = mrank_run(size, scratch_rank, (void *)mrank_backend(b), JOB_S);
            ck_assert_msg(failing == 0, "%s, %d ranks: %d rank(s) failed (see the lines above)", mrank_backend(b), size,
                          failing);
        }
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "scratch", 2 * JOB_S * (nbackends ? nbackends : 1) + 30);
    tcase_add_test(tc, in_place_at_every_offset);
}

int main(void)
{
    return mrank_main("ucx_scratch", MRANK_ANY, add_tests);
}
