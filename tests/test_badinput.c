/* SPDX-License-Identifier: BSD-3-Clause */
/* Bad input through the public API: every case must return the named status with a tcomms_last_error() message
 * that names the argument, hint or variable at fault, and none may crash (Check's fork mode would report it). Most
 * run on a 1-rank communicator; one overflow case needs 2 ranks and runs under mrank. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/backend.h>
#include <tcomms/tcomms.h>

#include "mrank.h"

static tcomms_comm_t *comm;
static double buf_a[16], buf_b[16];

static const char *test_backend(void)
{
    return mrank_nbackends() > 0 ? mrank_backend(0) : NULL;
}

/* `needles` holds alternatives separated by '|'; the message must contain one of them (case-insensitive). */
static int mentions(const char *msg, const char *needles)
{
    char alt[64];
    while (*needles) {
        size_t len = strcspn(needles, "|");
        snprintf(alt, sizeof alt, "%.*s", (int)len, needles);
        if (strcasestr(msg, alt))
            return 1;
        needles += len + (needles[len] == '|');
    }
    return 0;
}

static void expect_err(tcomms_status_t st, tcomms_status_t want, const char *needles, const char *call)
{
    const char *msg = tcomms_last_error();
    ck_assert_msg(st == want, "%s: status %d (%s), expected %d (%s)", call, st, msg ? msg : "(null)", want,
                  tcomms_strerror(want));
    ck_assert_msg(msg && *msg, "%s: tcomms_last_error() is empty", call);
    ck_assert_msg(!needles || mentions(msg, needles), "%s: message \"%s\" does not mention %s", call, msg, needles);
}

#define EXPECT(call, want, needles) expect_err((call), (want), (needles), #call)

static tcomms_status_t create_one_rank(const tcomms_hints_t *hints, const char *backend, tcomms_comm_t **out)
{
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_RANK | TCOMMS_COMM_PARAM_TIMEOUT | TCOMMS_COMM_PARAM_NAME;
    p.rank = 0;
    p.size = 1;
    p.local_rank = 0;
    p.timeout_ms = 5000;
    p.name = "badinput";
    if (backend) {
        p.field_mask |= TCOMMS_COMM_PARAM_BACKEND;
        p.backend = backend;
    }
    if (hints) {
        p.field_mask |= TCOMMS_COMM_PARAM_HINTS;
        p.hints = hints;
    }
    return tcomms_comm_create(&p, out);
}

static void setup(void)
{
    comm = NULL;
    tcomms_status_t st = create_one_rank(NULL, test_backend(), &comm);
    ck_assert_msg(st == TCOMMS_SUCCESS, "creating a 1-rank communicator: %d (%s)", st, tcomms_last_error());
}

static void teardown(void)
{
    tcomms_comm_destroy(comm);
    comm = NULL;
}

/* ---- operations on a 1-rank communicator ---------------------------------------------------------------------- */

START_TEST(null_comm)
{
    int r;
    tcomms_comm_t *child = NULL;
    EXPECT(tcomms_all_reduce(NULL, buf_a, buf_b, 4, TCOMMS_FLOAT64, TCOMMS_SUM, NULL, NULL), TCOMMS_ERR_INVALID_ARG,
           "comm");
    EXPECT(tcomms_barrier(NULL, NULL, NULL), TCOMMS_ERR_INVALID_ARG, "comm");
    EXPECT(tcomms_comm_rank(NULL, &r), TCOMMS_ERR_INVALID_ARG, "comm");
    EXPECT(tcomms_comm_split(NULL, NULL, 0, NULL, NULL, &child), TCOMMS_ERR_INVALID_ARG, "comm|parent");
    ck_assert_int_eq(tcomms_comm_destroy(NULL), TCOMMS_SUCCESS);
}
END_TEST

START_TEST(null_buffers)
{
    EXPECT(tcomms_all_reduce(comm, NULL, buf_b, 4, TCOMMS_FLOAT64, TCOMMS_SUM, NULL, NULL), TCOMMS_ERR_INVALID_ARG,
           "sendbuf");
    EXPECT(tcomms_all_reduce(comm, buf_a, NULL, 4, TCOMMS_FLOAT64, TCOMMS_SUM, NULL, NULL), TCOMMS_ERR_INVALID_ARG,
           "recvbuf");
    EXPECT(tcomms_broadcast(comm, NULL, 3, TCOMMS_INT32, 0, NULL, NULL), TCOMMS_ERR_INVALID_ARG, "buf");
    EXPECT(tcomms_all_gather(comm, buf_a, NULL, 2, TCOMMS_INT32, NULL, NULL), TCOMMS_ERR_INVALID_ARG, "recvbuf");
}
END_TEST

START_TEST(count_overflow)
{
    EXPECT(tcomms_all_reduce(comm, buf_a, buf_b, SIZE_MAX, TCOMMS_FLOAT64, TCOMMS_SUM, NULL, NULL),
           TCOMMS_ERR_INVALID_ARG, "count");
    EXPECT(tcomms_all_gather(comm, buf_a, buf_b, SIZE_MAX / 8 + 1, TCOMMS_FLOAT64, NULL, NULL),
           TCOMMS_ERR_INVALID_ARG, "count");
    EXPECT(tcomms_reduce_scatter(comm, buf_a, buf_b, SIZE_MAX / 2, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL),
           TCOMMS_ERR_INVALID_ARG, "count");
    EXPECT(tcomms_broadcast(comm, buf_a, SIZE_MAX / 2 + 1, TCOMMS_FLOAT16, 0, NULL, NULL), TCOMMS_ERR_INVALID_ARG,
           "count");
}
END_TEST

/* The v-variants name the count array and index whose block passes the address space. */
START_TEST(v_count_overflow)
{
    size_t huge = SIZE_MAX / 2, four = 4, at_end = SIZE_MAX - 2;
    EXPECT(tcomms_all_to_all_v(comm, buf_a, &huge, NULL, buf_b, &four, NULL, TCOMMS_INT32, NULL, NULL),
           TCOMMS_ERR_INVALID_ARG, "sendcounts[0]");
    EXPECT(tcomms_all_to_all_v(comm, buf_a, &four, NULL, buf_b, &huge, NULL, TCOMMS_INT32, NULL, NULL),
           TCOMMS_ERR_INVALID_ARG, "recvcounts[0]");
    EXPECT(tcomms_all_to_all_v(comm, buf_a, &four, &at_end, buf_b, &four, NULL, TCOMMS_INT8, NULL, NULL),
           TCOMMS_ERR_INVALID_ARG, "sdispls[0]");
    EXPECT(tcomms_all_gather_v(comm, buf_a, buf_b, &four, &at_end, TCOMMS_INT8, NULL, NULL), TCOMMS_ERR_INVALID_ARG,
           "displs[0]");
    EXPECT(tcomms_reduce_scatter_v(comm, buf_a, buf_b, &huge, TCOMMS_FLOAT64, TCOMMS_SUM, NULL, NULL),
           TCOMMS_ERR_INVALID_ARG, "recvcounts[0]");
}
END_TEST

START_TEST(bad_root)
{
    EXPECT(tcomms_broadcast(comm, buf_a, 2, TCOMMS_INT32, -1, NULL, NULL), TCOMMS_ERR_INVALID_ARG, "root");
    EXPECT(tcomms_broadcast(comm, buf_a, 2, TCOMMS_INT32, 1, NULL, NULL), TCOMMS_ERR_INVALID_ARG, "root");
    EXPECT(tcomms_reduce(comm, buf_a, buf_b, 2, TCOMMS_INT32, TCOMMS_SUM, 5, NULL, NULL), TCOMMS_ERR_INVALID_ARG,
           "root");
    EXPECT(tcomms_gather(comm, buf_a, buf_b, 2, TCOMMS_INT32, -3, NULL, NULL), TCOMMS_ERR_INVALID_ARG, "root");
    EXPECT(tcomms_scatter(comm, buf_a, buf_b, 2, TCOMMS_INT32, 1, NULL, NULL), TCOMMS_ERR_INVALID_ARG, "root");
}
END_TEST

START_TEST(bad_dtype_and_op)
{
    EXPECT(tcomms_all_reduce(comm, buf_a, buf_b, 2, (tcomms_dtype_t)99, TCOMMS_SUM, NULL, NULL),
           TCOMMS_ERR_INVALID_ARG, "dtype");
    EXPECT(tcomms_broadcast(comm, buf_a, 2, (tcomms_dtype_t)-1, 0, NULL, NULL), TCOMMS_ERR_INVALID_ARG, "dtype");
    EXPECT(tcomms_all_gather(comm, buf_a, buf_b, 1, TCOMMS_DTYPE_COUNT, NULL, NULL), TCOMMS_ERR_INVALID_ARG,
           "dtype");
    EXPECT(tcomms_all_reduce(comm, buf_a, buf_b, 2, TCOMMS_FLOAT32, (tcomms_op_t)99, NULL, NULL),
           TCOMMS_ERR_INVALID_ARG, "op");
    EXPECT(tcomms_reduce(comm, buf_a, buf_b, 2, TCOMMS_FLOAT32, TCOMMS_OP_COUNT, 0, NULL, NULL),
           TCOMMS_ERR_INVALID_ARG, "op");
}
END_TEST

START_TEST(bad_peer)
{
    EXPECT(tcomms_send(comm, buf_a, 2, TCOMMS_INT32, 1, NULL, NULL), TCOMMS_ERR_INVALID_ARG, "peer");
    EXPECT(tcomms_recv(comm, buf_a, 2, TCOMMS_INT32, -1, NULL, NULL), TCOMMS_ERR_INVALID_ARG, "peer");
    /* to itself: refused by the core on every backend (Gloo, which could not connect it, relies on that) */
    EXPECT(tcomms_send(comm, buf_a, 2, TCOMMS_INT32, 0, NULL, NULL), TCOMMS_ERR_INVALID_ARG, "caller itself");
    EXPECT(tcomms_recv(comm, buf_a, 2, TCOMMS_INT32, 0, NULL, NULL), TCOMMS_ERR_INVALID_ARG, "caller itself");
}
END_TEST

START_TEST(null_counts)
{
    size_t one = 1;
    EXPECT(tcomms_all_gather_v(comm, buf_a, buf_b, NULL, NULL, TCOMMS_INT32, NULL, NULL), TCOMMS_ERR_INVALID_ARG,
           "recvcounts");
    EXPECT(tcomms_reduce_scatter_v(comm, buf_a, buf_b, NULL, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL),
           TCOMMS_ERR_INVALID_ARG, "recvcounts");
    EXPECT(tcomms_all_to_all_v(comm, buf_a, NULL, NULL, buf_b, &one, NULL, TCOMMS_INT32, NULL, NULL),
           TCOMMS_ERR_INVALID_ARG, "sendcounts");
    EXPECT(tcomms_all_to_all_v(comm, buf_a, &one, NULL, buf_b, NULL, NULL, TCOMMS_INT32, NULL, NULL),
           TCOMMS_ERR_INVALID_ARG, "recvcounts");
    EXPECT(tcomms_all_gather_v(comm, NULL, buf_b, &one, NULL, TCOMMS_INT32, NULL, NULL), TCOMMS_ERR_INVALID_ARG,
           "sendbuf");
}
END_TEST

START_TEST(null_work)
{
    EXPECT(tcomms_work_wait(NULL, 0), TCOMMS_ERR_INVALID_ARG, "work");
    EXPECT(tcomms_work_test(NULL), TCOMMS_ERR_INVALID_ARG, "work");
    tcomms_work_free(NULL);
    /* a real handle still works after the bad calls */
    tcomms_work_t *w = NULL;
    ck_assert_int_eq(tcomms_barrier(comm, NULL, &w), TCOMMS_SUCCESS);
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(tcomms_work_wait(w, 0), TCOMMS_SUCCESS);
    tcomms_work_free(w);
}
END_TEST

START_TEST(bad_op_opts)
{
    tcomms_op_opts_t o = {TCOMMS_OP_OPT_DEVICE_TYPE, 0, NULL, (tcomms_device_type_t)99};
    EXPECT(tcomms_all_reduce(comm, buf_a, buf_b, 2, TCOMMS_FLOAT32, TCOMMS_SUM, &o, NULL), TCOMMS_ERR_INVALID_ARG,
           "device");
    o.device_type = TCOMMS_DEVICE_CUDA;
    EXPECT(tcomms_all_reduce(comm, buf_a, buf_b, 2, TCOMMS_FLOAT32, TCOMMS_SUM, &o, NULL),
           TCOMMS_ERR_NO_BACKEND_FOR_DEVICE, "cuda");
}
END_TEST

START_TEST(comm_queries)
{
    const char *name = NULL;
    char text[64];
    EXPECT(tcomms_comm_rank(comm, NULL), TCOMMS_ERR_INVALID_ARG, "rank");
    EXPECT(tcomms_comm_size(comm, NULL), TCOMMS_ERR_INVALID_ARG, "size");
    EXPECT(tcomms_comm_backend(comm, TCOMMS_DEVICE_CUDA, &name), TCOMMS_ERR_NO_BACKEND_FOR_DEVICE, "cuda");
    EXPECT(tcomms_comm_hint(comm, TCOMMS_DEVICE_CPU, "no_such_hint", text, sizeof text), TCOMMS_ERR_INVALID_ARG,
           "no_such_hint");
}
END_TEST

START_TEST(bad_split_lists)
{
    int dup[2] = {0, 0}, high[1] = {1}, negative[1] = {-1}, zero[1] = {0};
    tcomms_comm_t *child = NULL;
    EXPECT(tcomms_comm_split(comm, dup, 2, NULL, NULL, &child), TCOMMS_ERR_INVALID_ARG, "rank");
    EXPECT(tcomms_comm_split(comm, high, 1, NULL, NULL, &child), TCOMMS_ERR_INVALID_ARG, "rank");
    EXPECT(tcomms_comm_split(comm, negative, 1, NULL, NULL, &child), TCOMMS_ERR_INVALID_ARG, "rank");
    EXPECT(tcomms_comm_split(comm, zero, -1, NULL, NULL, &child), TCOMMS_ERR_INVALID_ARG, "nranks");
    EXPECT(tcomms_comm_split(comm, NULL, 1, NULL, NULL, &child), TCOMMS_ERR_INVALID_ARG, "ranks");
    EXPECT(tcomms_comm_split(comm, zero, 1, NULL, NULL, NULL), TCOMMS_ERR_INVALID_ARG, "out");
    EXPECT(tcomms_comm_split_color(NULL, 0, 0, NULL, NULL, &child), TCOMMS_ERR_INVALID_ARG, "comm|parent");
    EXPECT(tcomms_comm_shrink(NULL, NULL, 0, NULL, NULL, &child), TCOMMS_ERR_INVALID_ARG, "parent");
}
END_TEST

/* ---- communicator creation ------------------------------------------------------------------------------------ */

START_TEST(unknown_backend)
{
    tcomms_comm_t *c = NULL;
    EXPECT(create_one_rank(NULL, "nosuch", &c), TCOMMS_ERR_BACKEND_UNAVAILABLE, "nosuch");
    ck_assert_ptr_null(c);
}
END_TEST

START_TEST(unknown_param_bits)
{
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_RANK | (1ull << 20) | (1ull << 40);
    p.size = 1;
    tcomms_comm_t *c = NULL;
    EXPECT(tcomms_comm_create(&p, &c), TCOMMS_ERR_INVALID_ARG, "field_mask");
    ck_assert_msg(strstr(tcomms_last_error(), "0x10000100000") != NULL, "the bits are not named: %s",
                  tcomms_last_error());
    ck_assert_ptr_null(c);
}
END_TEST

/* A backend bit with nothing selected is a mistake, not a request for the default. */
START_TEST(empty_backend)
{
    tcomms_comm_t *c = NULL;
    EXPECT(create_one_rank(NULL, "", &c), TCOMMS_ERR_INVALID_ARG, "params.backend is empty");
    ck_assert_ptr_null(c);
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_RANK | TCOMMS_COMM_PARAM_BACKEND;
    p.size = 1;
    EXPECT(tcomms_comm_create(&p, &c), TCOMMS_ERR_INVALID_ARG, "params.backend is NULL");
    ck_assert_msg(strstr(tcomms_last_error(), "clear") != NULL, "no way out is said: %s", tcomms_last_error());
    ck_assert_ptr_null(c);
}
END_TEST

START_TEST(cuda_device_on_cpu_backend)
{
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_RANK | TCOMMS_COMM_PARAM_DEVICE | TCOMMS_COMM_PARAM_TIMEOUT;
    p.size = 1;
    p.device.type = TCOMMS_DEVICE_CUDA;
    p.device.index = 0;
    p.timeout_ms = 5000;
    if (test_backend()) {
        p.field_mask |= TCOMMS_COMM_PARAM_BACKEND;
        p.backend = test_backend();
    }
    tcomms_comm_t *c = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, &c);
    const char *msg = tcomms_last_error();
    ck_assert_msg(st == TCOMMS_ERR_NO_BACKEND_FOR_DEVICE || st == TCOMMS_ERR_BACKEND_UNAVAILABLE,
                  "cuda:0 with backend %s: status %d (%s)", p.backend ? p.backend : "(default)", st, msg);
    ck_assert_msg(msg && *msg && mentions(msg, "cuda|nccl"), "message \"%s\" names neither cuda nor nccl", msg);
    tcomms_comm_destroy(st == TCOMMS_SUCCESS ? c : NULL);
}
END_TEST

START_TEST(min_ctas_above_max_ctas)
{
    tcomms_hints_t *h = NULL;
    ck_assert_int_eq(tcomms_hints_create(&h), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_hints_set(h, "min_ctas", "8"), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_hints_set(h, "maxCTAs", "4"), TCOMMS_SUCCESS);
    tcomms_comm_t *c = NULL;
    EXPECT(create_one_rank(h, test_backend(), &c), TCOMMS_ERR_INVALID_ARG, "ctas");
    tcomms_hints_free(h);
}
END_TEST

/* Run tcomms_comm_create from the environment with up to four variables replaced, restoring them afterwards. */
static const char *const env_names[] = {"TCOMMS_RANK", "TCOMMS_SIZE", "TCOMMS_MASTER_ADDR", "TCOMMS_MASTER_PORT",
                                        "TCOMMS_LOCAL_RANK"};
#define NENV 5

static tcomms_status_t create_with_env(const char *rank, const char *size, const char *addr, const char *port)
{
    const char *values[NENV] = {rank, size, addr, port, NULL};
    char *saved[NENV];
    for (int k = 0; k < NENV; k++) {
        const char *old = getenv(env_names[k]);
        saved[k] = old ? strdup(old) : NULL;
        if (values[k])
            setenv(env_names[k], values[k], 1);
        else
            unsetenv(env_names[k]);
    }
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_TIMEOUT | TCOMMS_COMM_PARAM_NAME;
    p.timeout_ms = 3000; /* bounds the case if the variable is not checked before connecting */
    p.name = "envcase";
    if (test_backend()) {
        p.field_mask |= TCOMMS_COMM_PARAM_BACKEND;
        p.backend = test_backend();
    }
    tcomms_comm_t *c = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, &c);
    if (st == TCOMMS_SUCCESS)
        tcomms_comm_destroy(c);
    for (int k = 0; k < NENV; k++) {
        if (saved[k])
            setenv(env_names[k], saved[k], 1);
        else
            unsetenv(env_names[k]);
        free(saved[k]);
    }
    return st;
}

START_TEST(bad_env)
{
    EXPECT(create_with_env("abc", "2", "127.0.0.1", "29500"), TCOMMS_ERR_BAD_ENV, "TCOMMS_RANK");
    EXPECT(create_with_env("0", "0", "127.0.0.1", "29500"), TCOMMS_ERR_BAD_ENV, "TCOMMS_SIZE");
    EXPECT(create_with_env("2", "2", "127.0.0.1", "29500"), TCOMMS_ERR_BAD_ENV, "TCOMMS_RANK|TCOMMS_SIZE");
    EXPECT(create_with_env("0", "2", "127.0.0.1", "70000"), TCOMMS_ERR_BAD_ENV, "TCOMMS_MASTER_PORT");
    EXPECT(create_with_env("0", "2", "127.0.0.1", "12ab"), TCOMMS_ERR_BAD_ENV, "TCOMMS_MASTER_PORT");
}
END_TEST

/* all_gather with a count whose product with the size (2) overflows, on both ranks alike. */
static int overflow_rank(int rank, int size, void *arg)
{
    (void)arg;
    (void)size;
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_TIMEOUT;
    p.timeout_ms = 10000;
    if (test_backend()) {
        p.field_mask |= TCOMMS_COMM_PARAM_BACKEND;
        p.backend = test_backend();
    }
    tcomms_comm_t *c = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, &c);
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d: tcomms_comm_create: %d (%s)", rank, st, tcomms_last_error());
    char small[8] = {0}, out[16];
    int fails = 0;
    st = tcomms_all_gather(c, small, out, SIZE_MAX / 2 + 1, TCOMMS_INT8, NULL, NULL);
    const char *msg = tcomms_last_error();
    if (st != TCOMMS_ERR_INVALID_ARG || !mentions(msg, "count"))
        fails += mrank_failf("FAIL rank %d: all_gather with count*size overflowing: %d (%s)", rank, st, msg);
    size_t half[2] = {SIZE_MAX / 2 + 1, SIZE_MAX / 2 + 1}, one[2] = {1, 1};
    st = tcomms_all_to_all_v(c, small, half, NULL, out, one, NULL, TCOMMS_INT8, NULL, NULL);
    msg = tcomms_last_error();
    if (st != TCOMMS_ERR_INVALID_ARG || !mentions(msg, "sendcounts[0..1]"))
        fails += mrank_failf("FAIL rank %d: all_to_all_v with packed sendcounts overflowing: %d (%s)", rank, st, msg);
    st = tcomms_all_reduce(c, small, out, 1, TCOMMS_INT8, TCOMMS_SUM, NULL, NULL); /* still in step */
    if (st != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d: all_reduce after the bad call: %d (%s)", rank, st, tcomms_last_error());
    tcomms_comm_destroy(c);
    return fails;
}

START_TEST(all_gather_size_overflow)
{
    ck_assert_int_eq(mrank_run(2, overflow_rank, NULL, 40), 0);
}
END_TEST

/* ---- no communicator needed ----------------------------------------------------------------------------------- */

START_TEST(bad_hints)
{
    tcomms_hints_t *h = NULL;
    ck_assert_int_eq(tcomms_hints_create(&h), TCOMMS_SUCCESS);
    EXPECT(tcomms_hints_set(h, "no_such_hint", "1"), TCOMMS_ERR_INVALID_ARG, "no_such_hint");
    EXPECT(tcomms_hints_set(h, "min_ctas", "abc"), TCOMMS_ERR_INVALID_ARG, "min_ctas|minCTAs");
    EXPECT(tcomms_hints_set(h, "minCTAs", "0"), TCOMMS_ERR_INVALID_ARG, "min_ctas|minCTAs");
    EXPECT(tcomms_hints_set(h, "max_ctas", "65"), TCOMMS_ERR_INVALID_ARG, "max_ctas");
    EXPECT(tcomms_hints_set(h, "cga_cluster_size", "99"), TCOMMS_ERR_INVALID_ARG, "cga_cluster_size");
    EXPECT(tcomms_hints_set(h, "high_priority_stream", "maybe"), TCOMMS_ERR_INVALID_ARG, "high_priority_stream");
    EXPECT(tcomms_hints_set(NULL, "blocking", "1"), TCOMMS_ERR_INVALID_ARG, "hints");
    EXPECT(tcomms_hints_set(h, NULL, "1"), TCOMMS_ERR_INVALID_ARG, "key");
    size_t n = 99;
    ck_assert_int_eq(tcomms_hints_count(h, &n), TCOMMS_SUCCESS);
    ck_assert_msg(n == 0, "rejected hints were stored (%zu entries)", n);
    tcomms_hints_free(h);
}
END_TEST

START_TEST(malformed_hint_specs)
{
    static const char *const specs[] = {"min_ctas", "=4", "min_ctas=2,=3", "blocking=1,,max_ctas"};
    tcomms_hints_t *h = NULL;
    ck_assert_int_eq(tcomms_hints_create(&h), TCOMMS_SUCCESS);
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++)
        expect_err(tcomms_hints_parse(h, specs[k]), TCOMMS_ERR_INVALID_ARG, NULL, specs[k]);
    EXPECT(tcomms_hints_parse(h, "blocking=1,bogus_key=2"), TCOMMS_ERR_INVALID_ARG, "bogus_key");
    EXPECT(tcomms_hints_parse(h, "min_ctas=x"), TCOMMS_ERR_INVALID_ARG, "min_ctas");
    tcomms_hints_free(h);
}
END_TEST

/* The operation table answers NULL outside the enumeration; inside it, every row names its public call and its
 * flags agree with themselves: a root and a peer exclude each other, count arrays come with a per-rank buffer. */
START_TEST(coll_info_rows)
{
    ck_assert_ptr_null(tcomms_coll_info(TCOMMS_COLL_TYPE_COUNT));
    ck_assert_ptr_null(tcomms_coll_info((tcomms_coll_type_t)-1));
    for (int t = 0; t < TCOMMS_COLL_TYPE_COUNT; t++) {
        const tcomms_coll_info_t *info = tcomms_coll_info((tcomms_coll_type_t)t);
        ck_assert_ptr_nonnull(info);
        ck_assert_ptr_nonnull(info->name);
        char api[64];
        snprintf(api, sizeof(api), "tcomms_%s", info->name);
        ck_assert_str_eq(info->api, api);
        ck_assert_msg(!((info->flags & TCOMMS_COLL_ROOTED) && (info->flags & TCOMMS_COLL_P2P)), "%s", info->name);
        ck_assert_msg(info->count_arrays == 0 ||
                          (info->flags & (TCOMMS_COLL_SEND_PER_RANK | TCOMMS_COLL_RECV_PER_RANK)), "%s", info->name);
    }
}
END_TEST

START_TEST(bad_names)
{
    tcomms_device_t d;
    tcomms_dtype_t dt;
    tcomms_op_t op;
    EXPECT(tcomms_device_parse("gpu:1", &d), TCOMMS_ERR_INVALID_ARG, "gpu:1");
    EXPECT(tcomms_device_parse("cuda:x", &d), TCOMMS_ERR_INVALID_ARG, "cuda:x");
    EXPECT(tcomms_device_parse("cuda:-2", &d), TCOMMS_ERR_INVALID_ARG, "cuda:-2");
    EXPECT(tcomms_device_parse("cpu", NULL), TCOMMS_ERR_INVALID_ARG, "out");
    EXPECT(tcomms_dtype_parse("nosuch_type", &dt), TCOMMS_ERR_INVALID_ARG, "nosuch_type");
    EXPECT(tcomms_op_parse("nosuch_op", &op), TCOMMS_ERR_INVALID_ARG, "nosuch_op");
    ck_assert_ptr_null(tcomms_dtype_name((tcomms_dtype_t)99));
    ck_assert_ptr_null(tcomms_op_name((tcomms_op_t)99));
    ck_assert_ptr_null(tcomms_device_type_name((tcomms_device_type_t)99));
    ck_assert_uint_eq(tcomms_dtype_size((tcomms_dtype_t)99), 0);
    ck_assert_ptr_nonnull(tcomms_strerror((tcomms_status_t)-99));
    ck_assert_ptr_nonnull(tcomms_strerror((tcomms_status_t)42));
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    (void)nbackends; /* the first backend listed, or the library's default (test_backend) */
    TCase *ops = mrank_tcase(s, "ops", 30);
    tcase_add_checked_fixture(ops, setup, teardown);
    tcase_add_test(ops, null_comm);
    tcase_add_test(ops, null_buffers);
    tcase_add_test(ops, count_overflow);
    tcase_add_test(ops, v_count_overflow);
    tcase_add_test(ops, bad_root);
    tcase_add_test(ops, bad_dtype_and_op);
    tcase_add_test(ops, bad_peer);
    tcase_add_test(ops, null_counts);
    tcase_add_test(ops, null_work);
    tcase_add_test(ops, bad_op_opts);
    tcase_add_test(ops, comm_queries);
    tcase_add_test(ops, bad_split_lists);
    TCase *create = mrank_tcase(s, "create", 60);
    tcase_add_test(create, unknown_backend);
    tcase_add_test(create, unknown_param_bits);
    tcase_add_test(create, empty_backend);
    tcase_add_test(create, cuda_device_on_cpu_backend);
    tcase_add_test(create, min_ctas_above_max_ctas);
    tcase_add_test(create, bad_env);
    tcase_add_test(create, all_gather_size_overflow);
    TCase *plain = mrank_tcase(s, "no_comm", 10);
    tcase_add_test(plain, bad_hints);
    tcase_add_test(plain, malformed_hint_specs);
    tcase_add_test(plain, bad_names);
    tcase_add_test(plain, coll_info_rows);
}

int main(void)
{
    return mrank_main("badinput", MRANK_ANY, add_tests);
}
