/* SPDX-License-Identifier: BSD-3-Clause */
/* Ranks whose splits disagree (lib/split.c, lib/split_agree.c), on every CPU backend: a call refused on one rank
 * fails that split on every rank and the ranks meet again in the next one; member lists that differ are
 * TCOMMS_ERR_MISMATCH on every rank well within the timeout; split_color with diverging color sequences, a refusal,
 * and a rank calling tcomms_comm_split meanwhile. Children are checked by collectives that depend on their members,
 * and the store must hold no more keys after a sequence than before it (the one use of the core's internals). */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <tcomms/tcomms.h>

#include "comm.h"
#include "mrank.h"
#include "mrank_world.h"
#include "split_verify.h"

#define MAX_RANKS 4
#define OP_TIMEOUT_MS 20000u
#define ERROR_BOUND_S 5.0 /* a failed split must say so this fast, with a 20 s timeout */
#define JOB_S 120
#define NO 0              /* not a member: nranks 0 */
#define BAD_COUNT (-1)    /* nranks -1: refused */
#define NULL_OUT (-2)     /* out NULL: refused (split_color steps) */
#define BY_LIST (-3)      /* this rank calls tcomms_comm_split over every rank (split_color steps) */

/* One rank's tcomms_comm_split: `n` ranks from `ranks` (NO, BAD_COUNT). */
typedef struct call {
    int n;
    int ranks[MAX_RANKS];
} call_t;

/* One split of a sequence: each parent rank's call, and what every rank must get. A successful member gets the
 * child of the list it passed; on failure every rank gets `expect` within ERROR_BOUND_S and *out = NULL, and the
 * message of every rank but `refuser` (whose message is its own) holds `names[0]` and `names[1]`. */
typedef struct list_step {
    const char *label;
    call_t call[MAX_RANKS];
    tcomms_status_t expect;
    int refuser;
    const char *names[2];
} list_step_t;

/* As list_step_t for split_color: each rank's color and key, or a color NULL_OUT / BY_LIST. */
typedef struct color_step {
    const char *label;
    int color[MAX_RANKS], key[MAX_RANKS];
    tcomms_status_t expect;
    int refuser;
    const char *names[2];
} color_step_t;

typedef struct job {
    int backend;
    int which;   /* index into sequences[] */
    int barrier; /* for mrank_host_barrier */
} job_t;

/* Rank 1 refuses first: on main its next split joined the others' refused one. Then rank 0 and rank 2 refuse. */
static const list_step_t refusals[] = {
    {"rank 1 passes an unsorted list", {{2, {0, 1}}, {2, {1, 0}}, {1, {2}}}, TCOMMS_ERR_INVALID_ARG, 1,
     {"parent rank 1", "sorted"}},
    {"{0,1} and {2} after rank 1's refusal", {{2, {0, 1}}, {2, {0, 1}}, {1, {2}}}, TCOMMS_SUCCESS, -1, {0}},
    {"rank 0 passes a rank out of range", {{2, {0, 7}}, {2, {1, 2}}, {2, {1, 2}}}, TCOMMS_ERR_INVALID_ARG, 0,
     {"parent rank 0", "out of range"}},
    {"{0,1,2} after rank 0's refusal", {{3, {0, 1, 2}}, {3, {0, 1, 2}}, {3, {0, 1, 2}}}, TCOMMS_SUCCESS, -1, {0}},
    {"rank 2 passes nranks -1", {{2, {0, 1}}, {2, {0, 1}}, {BAD_COUNT, {2}}}, TCOMMS_ERR_INVALID_ARG, 2,
     {"parent rank 2", "nranks"}},
    {"{1,2} after rank 2's refusal, rank 0 outside", {{NO}, {2, {1, 2}}, {2, {1, 2}}}, TCOMMS_SUCCESS, -1, {0}},
};

/* The case on 2 ranks: rank 1 got a working 1-rank child, rank 0 waited the whole timeout. */
static const list_step_t mismatch2[] = {
    {"rank 0 {0,1} against rank 1 {1}", {{2, {0, 1}}, {1, {1}}}, TCOMMS_ERR_MISMATCH, -1, {"{0, 1}", "{1}"}},
    {"{0,1} after the mismatch", {{2, {0, 1}}, {2, {0, 1}}}, TCOMMS_SUCCESS, -1, {0}},
    {"rank 0 {0,1} against rank 1 outside", {{2, {0, 1}}, {NO}}, TCOMMS_ERR_MISMATCH, -1, {"parent rank 1", 0}},
    {"{1}, rank 0 outside", {{NO}, {1, {1}}}, TCOMMS_SUCCESS, -1, {0}},
};

static const list_step_t mismatch4[] = {
    {"rank 0 {0,1} against rank 1 {1}, 2 and 3 outside", {{2, {0, 1}}, {1, {1}}, {NO}, {NO}}, TCOMMS_ERR_MISMATCH,
     -1, {"{0, 1}", "{1}"}},
    {"rank 3 outside a list naming it", {{4, {0, 1, 2, 3}}, {4, {0, 1, 2, 3}}, {4, {0, 1, 2, 3}}, {NO}},
     TCOMMS_ERR_MISMATCH, -1, {"parent rank 3", 0}},
    {"{0,1} overlapping {1,2,3}", {{2, {0, 1}}, {2, {0, 1}}, {3, {1, 2, 3}}, {3, {1, 2, 3}}}, TCOMMS_ERR_MISMATCH,
     -1, {"{1, 2, 3}", 0}},
    {"{0,1,2} against {0,1,3}", {{3, {0, 1, 2}}, {3, {0, 1, 2}}, {3, {0, 1, 2}}, {3, {0, 1, 3}}},
     TCOMMS_ERR_MISMATCH, -1, {"{0, 1, 3}", 0}},
    {"{0,1} and {2,3} after the mismatches", {{2, {0, 1}}, {2, {0, 1}}, {2, {2, 3}}, {2, {2, 3}}}, TCOMMS_SUCCESS,
     -1, {0}},
};

#define NC TCOMMS_SPLIT_NOCOLOR
static const color_step_t colors4[] = {
    {"rank 2 passes color -5", {0, 0, -5, 0}, {0, 1, 2, 3}, TCOMMS_ERR_INVALID_ARG, 2, {"parent rank 2", "-5"}},
    {"colors rank%2, keys reversed", {0, 1, 0, 1}, {3, 2, 1, 0}, TCOMMS_SUCCESS, -1, {0}},
    {"rank 0 NOCOLOR, key ties", {NC, 5, 5, 5}, {0, 1, 0, 0}, TCOMMS_SUCCESS, -1, {0}},
    {"rank 0 calls tcomms_comm_split", {BY_LIST, 0, 0, 0}, {0, 1, 2, 3}, TCOMMS_ERR_MISMATCH, -1,
     {"parent rank 0", "tcomms_comm_split_color"}},
    {"rank 3 passes out NULL", {1, 1, 1, NULL_OUT}, {0, 0, 0, 0}, TCOMMS_ERR_INVALID_ARG, 3, {"parent rank 3", 0}},
    {"one color, keys descending", {2, 2, 2, 2}, {4, 3, 2, 1}, TCOMMS_SUCCESS, -1, {0}},
    {"rank 1 NOCOLOR, two colors", {7, NC, 3, 7}, {0, 0, 0, -1}, TCOMMS_SUCCESS, -1, {0}},
};

typedef struct sequence {
    const char *name;
    int nranks;
    const list_step_t *lists; /* or */
    const color_step_t *colors;
    int nsteps;
} sequence_t;

#define SEQ_LIST(name, n, t) {name, n, t, NULL, (int)(sizeof(t) / sizeof(t[0]))}
#define SEQ_COLOR(name, n, t) {name, n, NULL, t, (int)(sizeof(t) / sizeof(t[0]))}
static const sequence_t sequences[] = {
    SEQ_LIST("refusals, 3 ranks", 3, refusals),
    SEQ_LIST("mismatched lists, 2 ranks", 2, mismatch2),
    SEQ_LIST("mismatched lists, 4 ranks", 4, mismatch4),
    SEQ_COLOR("split_color sequences, 4 ranks", 4, colors4),
};

/* A failed split: the expected status, fast, no child, and a message naming the culprit. */
static int check_failure(int rank, const char *label, tcomms_status_t st, double took, const tcomms_comm_t *child,
                         tcomms_status_t expect, int refuser, const char *const names[2])
{
    const char *msg = tcomms_last_error();
    mrank_logf("rank %d, %s: status %d after %.2f s: %s", rank, label, st, took, msg);
    int fails = 0;
    if (st != expect)
        fails += mrank_failf("FAIL rank %d, %s: status %d, expected %d (%s)", rank, label, st, expect, msg);
    if (took > ERROR_BOUND_S)
        fails += mrank_failf("FAIL rank %d, %s: the error took %.1f s (bound %.1f s, timeout %.1f s)", rank, label,
                            took, ERROR_BOUND_S, OP_TIMEOUT_MS / 1000.0);
    if (child != NULL)
        fails += mrank_failf("FAIL rank %d, %s: a failed split gave a communicator", rank, label);
    for (int k = 0; k < 2 && rank != refuser; k++)
        if (names[k] != NULL && strstr(msg, names[k]) == NULL)
            fails += mrank_failf("FAIL rank %d, %s: the message \"%s\" does not name \"%s\"", rank, label, msg,
                                names[k]);
    return fails;
}

static int run_list_step(tcomms_comm_t *root, int rank, const list_step_t *s)
{
    const call_t *c = &s->call[rank];
    tcomms_comm_t *child = (tcomms_comm_t *)&child; /* must be overwritten */
    double t0 = mrank_now();
    tcomms_status_t st = tcomms_comm_split(root, c->n == NO ? NULL : c->ranks, c->n, s->label, NULL, &child);
    double took = mrank_now() - t0;
    if (s->expect != TCOMMS_SUCCESS)
        return check_failure(rank, s->label, st, took, child, s->expect, s->refuser, s->names);
    if (st != TCOMMS_SUCCESS)
        return split_report(rank, s->label, "tcomms_comm_split", st);
    if (c->n == NO)
        return child == NULL ? 0 : mrank_failf("FAIL rank %d, %s: a non-member got a communicator", rank, s->label);
    int fails = split_verify_child(child, rank, c->ranks, c->n, s->label);
    tcomms_comm_destroy(child);
    return fails;
}

static int run_color_step(tcomms_comm_t *root, int rank, int size, const color_step_t *s)
{
    static const int everyone[MAX_RANKS] = {0, 1, 2, 3};
    int color = s->color[rank];
    tcomms_comm_t *child = (tcomms_comm_t *)&child;
    double t0 = mrank_now();
    tcomms_status_t st =
        color == BY_LIST    ? tcomms_comm_split(root, everyone, size, s->label, NULL, &child)
        : color == NULL_OUT ? tcomms_comm_split_color(root, 0, s->key[rank], s->label, NULL, NULL)
                            : tcomms_comm_split_color(root, color, s->key[rank], s->label, NULL, &child);
    double took = mrank_now() - t0;
    if (color == NULL_OUT)
        child = NULL;
    if (s->expect != TCOMMS_SUCCESS)
        return check_failure(rank, s->label, st, took, child, s->expect, s->refuser, s->names);
    if (st != TCOMMS_SUCCESS)
        return split_report(rank, s->label, "tcomms_comm_split_color", st);
    int members[MAX_RANKS], n = split_color_members(rank, size, s->color, s->key, members);
    if (n == 0)
        return child == NULL ? 0 : mrank_failf("FAIL rank %d, %s: NOCOLOR gave a communicator", rank, s->label);
    int fails = split_verify_child(child, rank, members, n, s->label);
    tcomms_comm_destroy(child);
    return fails;
}

/* The keys the store holds once every rank got here (rank 0 counts; the others report 0). */
static int count_keys(tcomms_comm_t *root, int rank, int size, job_t *job, int round, int64_t *keys)
{
    int fails = 0;
    *keys = 0;
    if (mrank_host_barrier(&job->barrier, size, 2 * round - 1, 30) != 0)
        fails += mrank_failf("FAIL rank %d: host barrier %d", rank, 2 * round - 1);
    if (rank == 0 && tc_store_num_keys(root->store->store, keys) != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank 0: counting the store's keys: %s", tcomms_last_error());
    if (mrank_host_barrier(&job->barrier, size, 2 * round, 30) != 0) /* no rank goes on before rank 0 counted */
        fails += mrank_failf("FAIL rank %d: host barrier %d", rank, 2 * round);
    return fails;
}

/* Every step in order on one root; a failed step does not stop the sequence, as later steps show whether the ranks
 * are still in step. */
static int sequence_rank(int rank, int size, void *arg)
{
    job_t *job = arg;
    const sequence_t *q = &sequences[job->which];
    tcomms_comm_t *root = mrank_world(mrank_backend(job->backend), OP_TIMEOUT_MS, rank);
    if (root == NULL)
        return 1;
    int64_t before = 0, after = 0;
    int fails = count_keys(root, rank, size, job, 1, &before);
    for (int k = 0; k < q->nsteps; k++)
        fails += q->lists ? run_list_step(root, rank, &q->lists[k]) : run_color_step(root, rank, size, &q->colors[k]);
    fails += count_keys(root, rank, size, job, 2, &after);
    if (after != before)
        fails += mrank_failf("FAIL rank 0, %s: the store holds %lld keys after the splits, %lld before", q->name,
                             (long long)after, (long long)before);
    tcomms_status_t st = tcomms_comm_destroy(root);
    if (st != TCOMMS_SUCCESS)
        fails += split_report(rank, q->name, "tcomms_comm_destroy", st);
    return fails;
}

/* _i runs over sequences x backends. */
START_TEST(test_split_sequence)
{
    job_t *job = mrank_shared_alloc(sizeof *job);
    ck_assert_ptr_nonnull(job);
    job->which = _i / mrank_nbackends();
    job->backend = _i % mrank_nbackends();
    const sequence_t *q = &sequences[job->which];
    int failing = mrank_run(q->nranks, sequence_rank, job, JOB_S);
    mrank_shared_free(job, sizeof *job);
    ck_assert_msg(failing == 0, "%s, %s: %d rank(s) failed (see stderr)", q->name,
                  mrank_backend(_i % mrank_nbackends()), failing);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    int nseq = (int)(sizeof(sequences) / sizeof(sequences[0]));
    tcase_add_loop_test(mrank_tcase(s, "split_agree", JOB_S + 30), test_split_sequence, 0, nseq * nbackends);
}

int main(void)
{
    return mrank_main("split_agree", MRANK_BACKEND, add_tests);
}
