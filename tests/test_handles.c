/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests lib/handle.c through the public API: communicators, work handles and hints used after their release, or
 * released twice, give TCOMMS_ERR_INVALID_ARG naming the call and the handle (on main they crashed, aborted in
 * glibc or read freed memory), on 1-rank communicators of every CPU backend in TCOMMS_TEST_BACKENDS. The library
 * keeps released handles aside for a while, so these uses touch no freed memory, under ASan too. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <tcomms/tcomms.h>

#include "mrank.h"

static void expect_bad(tcomms_status_t st, const char *call, const char *needle, const char *what)
{
    const char *msg = tcomms_last_error();
    ck_assert_msg(st == TCOMMS_ERR_INVALID_ARG, "%s: status %d (%s), expected TCOMMS_ERR_INVALID_ARG", what, st, msg);
    ck_assert_msg(strstr(msg, call) != NULL && strstr(msg, needle) != NULL, "%s: message \"%s\" lacks \"%s\" or "
                  "\"%s\"", what, msg, call, needle);
}

#define EXPECT_BAD(expr, call, needle) expect_bad((expr), (call), (needle), #expr)

static tcomms_comm_t *create_one_rank(const char *backend, const tcomms_hints_t *hints, tcomms_status_t *st)
{
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_RANK | TCOMMS_COMM_PARAM_TIMEOUT | TCOMMS_COMM_PARAM_NAME;
    p.size = 1;
    p.timeout_ms = 5000;
    p.name = "handles";
    if (backend[0] != '\0') { /* "": the library's default */
        p.field_mask |= TCOMMS_COMM_PARAM_BACKEND;
        p.backend = backend;
    }
    if (hints != NULL) {
        p.field_mask |= TCOMMS_COMM_PARAM_HINTS;
        p.hints = hints;
    }
    tcomms_comm_t *c = NULL;
    *st = tcomms_comm_create(&p, &c);
    return c;
}

static tcomms_comm_t *live_comm(int b)
{
    tcomms_status_t st;
    tcomms_comm_t *c = create_one_rank(mrank_backend(b), NULL, &st);
    ck_assert_msg(st == TCOMMS_SUCCESS, "creating a 1-rank communicator: %d (%s)", st, tcomms_last_error());
    return c;
}

START_TEST(destroyed_comm)
{
    for (int b = 0; b < mrank_nbackends(); b++) {
        tcomms_comm_t *c = live_comm(b), *child = NULL;
        ck_assert_int_eq(tcomms_comm_destroy(c), TCOMMS_SUCCESS);
        int v = 0, member = 0;
        void *mem = NULL;
        char text[32];
        tcomms_work_t *w = (tcomms_work_t *)&v;
        EXPECT_BAD(tcomms_comm_destroy(c), "tcomms_comm_destroy", "already destroyed");
        EXPECT_BAD(tcomms_all_reduce(c, &v, &v, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL), "tcomms_all_reduce",
                   "already destroyed");
        EXPECT_BAD(tcomms_barrier(c, NULL, &w), "tcomms_barrier", "already destroyed");
        ck_assert_ptr_null(w);
        EXPECT_BAD(tcomms_comm_rank(c, &v), "tcomms_comm_rank", "already destroyed");
        EXPECT_BAD(tcomms_comm_hint(c, TCOMMS_DEVICE_CPU, "blocking", text, sizeof text), "tcomms_comm_hint",
                   "already destroyed");
        EXPECT_BAD(tcomms_comm_split(c, &member, 1, NULL, NULL, &child), "tcomms_comm_split", "already destroyed");
        ck_assert_ptr_null(child);
        EXPECT_BAD(tcomms_comm_split_color(c, 0, 0, NULL, NULL, &child), "tcomms_comm_split_color",
                   "already destroyed");
        EXPECT_BAD(tcomms_comm_shrink(c, NULL, 0, NULL, NULL, &child), "tcomms_comm_shrink", "already destroyed");
        EXPECT_BAD(tcomms_mem_alloc(c, TCOMMS_DEVICE_CPU, 64, &mem), "tcomms_mem_alloc", "already destroyed");
        ck_assert_ptr_null(mem);
    }
}
END_TEST

/* A child communicator is a handle of its own: destroyed twice it is caught too, and its parent lives on. */
START_TEST(destroyed_child)
{
    tcomms_comm_t *c = live_comm(0), *child = NULL;
    int member = 0, v = 3;
    ck_assert_int_eq(tcomms_comm_split(c, &member, 1, "child", NULL, &child), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_destroy(child), TCOMMS_SUCCESS);
    EXPECT_BAD(tcomms_comm_destroy(child), "tcomms_comm_destroy", "already destroyed");
    EXPECT_BAD(tcomms_broadcast(child, &v, 1, TCOMMS_INT32, 0, NULL, NULL), "tcomms_broadcast", "already destroyed");
    ck_assert_int_eq(tcomms_all_reduce(c, &v, &v, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(v, 3);
    ck_assert_int_eq(tcomms_comm_destroy(c), TCOMMS_SUCCESS);
}
END_TEST

START_TEST(freed_work)
{
    for (int b = 0; b < mrank_nbackends(); b++) {
        tcomms_comm_t *c = live_comm(b);
        tcomms_work_t *w = NULL;
        int v = 5;
        ck_assert_int_eq(tcomms_all_reduce(c, &v, &v, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, &w), TCOMMS_SUCCESS);
        ck_assert_int_eq(tcomms_work_wait(w, 0), TCOMMS_SUCCESS);
        ck_assert_int_eq(tcomms_work_free(w), TCOMMS_SUCCESS);
        EXPECT_BAD(tcomms_work_free(w), "tcomms_work_free", "work handle");
        EXPECT_BAD(tcomms_work_free(w), "tcomms_work_free", "already freed");
        EXPECT_BAD(tcomms_work_wait(w, 1000), "tcomms_work_wait", "already freed");
        EXPECT_BAD(tcomms_work_test(w), "tcomms_work_test", "already freed");
        EXPECT_BAD(tcomms_work_synchronize(w, 1000), "tcomms_work_synchronize", "already freed");
        /* freed before completion was asked about: the same */
        ck_assert_int_eq(tcomms_barrier(c, NULL, &w), TCOMMS_SUCCESS);
        ck_assert_int_eq(tcomms_work_free(w), TCOMMS_SUCCESS);
        EXPECT_BAD(tcomms_work_wait(w, 0), "tcomms_work_wait", "already freed");
        ck_assert_int_eq(tcomms_all_reduce(c, &v, &v, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL), TCOMMS_SUCCESS);
        ck_assert_int_eq(v, 5);
        ck_assert_int_eq(tcomms_comm_destroy(c), TCOMMS_SUCCESS);
    }
}
END_TEST

START_TEST(freed_hints)
{
    tcomms_hints_t *h = NULL;
    const char *value = NULL, *key = NULL;
    size_t n = 0;
    ck_assert_int_eq(tcomms_hints_create(&h), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_hints_set(h, "blocking", "1"), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_hints_free(h), TCOMMS_SUCCESS);
    EXPECT_BAD(tcomms_hints_free(h), "tcomms_hints_free", "already freed");
    EXPECT_BAD(tcomms_hints_set(h, "blocking", "0"), "tcomms_hints_set", "already freed");
    EXPECT_BAD(tcomms_hints_parse(h, "blocking=0"), "tcomms_hints_parse", "already freed");
    EXPECT_BAD(tcomms_hints_get(h, "blocking", &value), "tcomms_hints_get", "already freed");
    EXPECT_BAD(tcomms_hints_count(h, &n), "tcomms_hints_count", "already freed");
    EXPECT_BAD(tcomms_hints_entry(h, 0, &key, &value), "tcomms_hints_entry", "already freed");
    tcomms_status_t st;
    tcomms_comm_t *c = create_one_rank(mrank_backend(0), h, &st);
    expect_bad(st, "hints", "already freed", "tcomms_comm_create with freed hints");
    ck_assert_ptr_null(c);
    c = live_comm(0);
    tcomms_comm_t *child = NULL;
    int member = 0;
    expect_bad(tcomms_comm_split(c, &member, 1, NULL, h, &child), "hints", "already freed",
               "tcomms_comm_split with freed hints");
    ck_assert_ptr_null(child);
    ck_assert_int_eq(tcomms_comm_destroy(c), TCOMMS_SUCCESS);
}
END_TEST

/* A handle released a few releases ago is still caught: the quarantine holds more than one of each kind. */
START_TEST(recent_releases)
{
    tcomms_hints_t *h[8];
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(tcomms_hints_create(&h[i]), TCOMMS_SUCCESS);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(tcomms_hints_free(h[i]), TCOMMS_SUCCESS);
    for (int i = 0; i < 8; i++)
        EXPECT_BAD(tcomms_hints_free(h[i]), "tcomms_hints_free", "already freed");
    tcomms_comm_t *c = live_comm(0);
    tcomms_work_t *w[16];
    for (int i = 0; i < 16; i++)
        ck_assert_int_eq(tcomms_barrier(c, NULL, &w[i]), TCOMMS_SUCCESS);
    for (int i = 0; i < 16; i++) {
        ck_assert_int_eq(tcomms_work_wait(w[i], 0), TCOMMS_SUCCESS);
        ck_assert_int_eq(tcomms_work_free(w[i]), TCOMMS_SUCCESS);
    }
    for (int i = 0; i < 16; i++)
        EXPECT_BAD(tcomms_work_test(w[i]), "tcomms_work_test", "already freed");
    ck_assert_int_eq(tcomms_comm_destroy(c), TCOMMS_SUCCESS);
}
END_TEST

/* Memory that never held a handle is refused without being taken for one (what it holds is readable here). */
START_TEST(not_a_handle)
{
    static uint64_t junk[128];
    tcomms_comm_t *c = (tcomms_comm_t *)junk;
    int v = 0;
    EXPECT_BAD(tcomms_all_reduce(c, &v, &v, 1, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL), "tcomms_all_reduce",
               "not a live communicator");
    EXPECT_BAD(tcomms_comm_destroy(c), "tcomms_comm_destroy", "not a live communicator");
    EXPECT_BAD(tcomms_work_wait((tcomms_work_t *)junk, 0), "tcomms_work_wait", "not a live work handle");
    EXPECT_BAD(tcomms_hints_set((tcomms_hints_t *)junk, "blocking", "1"), "tcomms_hints_set", "not a live hints");
    ck_assert_int_eq(tcomms_work_free(NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_hints_free(NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_destroy(NULL), TCOMMS_SUCCESS);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    (void)nbackends; /* the tests walk the backends themselves */
    TCase *tc = mrank_tcase(s, "handles", 30);
    tcase_add_test(tc, destroyed_comm);
    tcase_add_test(tc, destroyed_child);
    tcase_add_test(tc, freed_work);
    tcase_add_test(tc, freed_hints);
    tcase_add_test(tc, recent_releases);
    tcase_add_test(tc, not_a_handle);
}

int main(void)
{
    return mrank_main("handles", MRANK_DEFAULT, add_tests);
}
