/* SPDX-License-Identifier: BSD-3-Clause */
/* The exchanges through rank 0 (lib/store/coll.c) on a real store server, one thread per rank with its own
 * client: every rank gets every rank's value (lengths 0 to a few KiB, compared with what each thread made), a
 * missing rank is named on rank 0 and the others name rank 0, and a malformed table is a protocol error, not a
 * crash. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "check_run.h"

#define MAX_RANKS 5
#define TIMEOUT_MS 5000u
#define SHORT_MS 300u

static tc_store_server_t *server;
static int port;

static void setup(void)
{
    ck_assert_int_eq(tc_store_server_start("127.0.0.1", 0, NULL, &server), TCOMMS_SUCCESS);
    port = tc_store_server_port(server);
}

static void teardown(void)
{
    tc_store_server_stop(server);
    server = NULL;
}

/* Rank r's value: r * 700 bytes (rank 0 sends nothing), byte i being (r * 31 + i) % 251. */
static size_t value_len(int r)
{
    return (size_t)r * 700;
}

static unsigned char value_byte(int r, size_t i)
{
    return (unsigned char)((r * 31 + (int)(i % 251)) % 251);
}

typedef struct rank_job {
    int rank, size;
    const char *prefix;
    uint32_t timeout_ms;
    tcomms_status_t st;
    int missing, bad;
} rank_job_t;

static void *run_rank(void *arg)
{
    rank_job_t *j = arg;
    tcomms_store_t *s = NULL;
    j->st = tc_store_connect("127.0.0.1", port, NULL, TIMEOUT_MS, &s);
    if (j->st != TCOMMS_SUCCESS)
        return NULL;
    size_t len = value_len(j->rank);
    unsigned char *mine = malloc(len + 1);
    if (mine == NULL) {
        j->st = TCOMMS_ERR_NO_MEMORY;
        tc_store_free(s);
        return NULL;
    }
    for (size_t i = 0; i < len; i++)
        mine[i] = value_byte(j->rank, i);
    void *vals[MAX_RANKS];
    size_t lens[MAX_RANKS];
    j->st = tc_store_allgather(s, j->prefix, j->rank, j->size, mine, len, j->timeout_ms, vals, lens, &j->missing);
    for (int r = 0; r < j->size && j->st == TCOMMS_SUCCESS; r++) {
        if (lens[r] != value_len(r))
            j->bad++;
        for (size_t i = 0; i < lens[r] && lens[r] == value_len(r); i++)
            j->bad += ((unsigned char *)vals[r])[i] != value_byte(r, i);
    }
    if (j->st == TCOMMS_SUCCESS)
        tc_store_free_values(vals, j->size);
    free(mine);
    tc_store_free(s);
    return NULL;
}

/* Run `size` ranks (leaving out rank `skip`, or -1), each on its own thread and client. */
static void run_ranks(int size, int skip, const char *prefix, uint32_t timeout_ms, rank_job_t *jobs)
{
    pthread_t t[MAX_RANKS];
    for (int r = 0; r < size; r++) {
        jobs[r] = (rank_job_t){r, size, prefix, timeout_ms, TCOMMS_SUCCESS, -2, 0};
        if (r != skip)
            ck_assert_int_eq(pthread_create(&t[r], NULL, run_rank, &jobs[r]), 0);
    }
    for (int r = 0; r < size; r++)
        if (r != skip)
            pthread_join(t[r], NULL);
}

START_TEST(every_rank_gets_every_value)
{
    for (int size = 1; size <= MAX_RANKS; size++) {
        rank_job_t jobs[MAX_RANKS];
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "ag%d/", size);
        run_ranks(size, -1, prefix, TIMEOUT_MS, jobs);
        for (int r = 0; r < size; r++) {
            ck_assert_msg(jobs[r].st == TCOMMS_SUCCESS, "size %d rank %d: %d (%s)", size, r, jobs[r].st,
                          tcomms_last_error());
            ck_assert_msg(jobs[r].bad == 0, "size %d rank %d: %d wrong lengths or bytes", size, r, jobs[r].bad);
        }
    }
}
END_TEST

START_TEST(a_missing_rank_is_named)
{
    rank_job_t jobs[4];
    run_ranks(4, 2, "miss/", SHORT_MS, jobs);
    ck_assert_int_eq(jobs[0].st, TCOMMS_ERR_TIMEOUT);
    ck_assert_int_eq(jobs[0].missing, 2); /* rank 0 waited for rank 2 */
    for (int r = 1; r < 4; r += 2) {
        ck_assert_int_eq(jobs[r].st, TCOMMS_ERR_TIMEOUT);
        ck_assert_int_eq(jobs[r].missing, 0); /* the others waited for rank 0's table */
    }
}
END_TEST

START_TEST(a_malformed_table_is_refused)
{
    tcomms_store_t *s = NULL;
    ck_assert_int_eq(tc_store_connect("127.0.0.1", port, NULL, TIMEOUT_MS, &s), TCOMMS_SUCCESS);
    /* Rank 0's table as a broken or hostile rank 0 might leave it: one length claims more than there is. */
    uint64_t table[3] = {8, UINT64_MAX / 2, 0};
    ck_assert_int_eq(tc_store_set(s, "bad/all", table, sizeof(table)), TCOMMS_SUCCESS);
    void *vals[2] = {NULL, NULL};
    size_t lens[2];
    int missing = -2;
    tcomms_status_t st = tc_store_allgather(s, "bad/", 1, 2, "x", 1, TIMEOUT_MS, vals, lens, &missing);
    ck_assert_int_eq(st, TCOMMS_ERR_PROTOCOL);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "malformed"));
    ck_assert_ptr_null(vals[0]);
    ck_assert_ptr_null(vals[1]);
    tc_store_free(s);
}
END_TEST

int main(void)
{
    Suite *su = suite_create("store_coll");
    TCase *tc = tcase_create("store_coll");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, every_rank_gets_every_value);
    tcase_add_test(tc, a_missing_rank_is_named);
    tcase_add_test(tc, a_malformed_table_is_refused);
    suite_add_tcase(su, tc);
    return check_run(su);
}
