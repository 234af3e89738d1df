/* SPDX-License-Identifier: BSD-3-Clause */
/* Binding, device routing, split non-members, groups and work_synchronize in the core (lib/comm.c, lib/split.c,
 * lib/coll.c, lib/group.c, lib/work.c), over single-rank fake modules: "fakeok" serves cpu, "fakecuda" serves
 * cuda with every optional ABI entry and counts the core's calls into it (tests/fake_calls.h), "fakecudabare"
 * serves cuda with none. TCOMMS_TEST_MODULES names the directory holding them. Also tcomms_comm_abort where the
 * module has no comm_abort, and the failure state a failed wait leaves (lib/comm_state.c). */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/backend.h> /* TCOMMS_COLL_FLAG_BLOCKING, as the fake module sees it */

#include "fake_calls.h"
#include "check_run.h"

/* The counters of module `name`, which the loader has already loaded. */
static fake_calls_t *calls_of(const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/tcomms_%s.so", getenv("TCOMMS_TEST_MODULES"), name);
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    ck_assert_msg(h != NULL, "%s is not loaded: %s", path, dlerror());
    fake_calls_t *c = dlsym(h, "fake_calls");
    ck_assert_ptr_nonnull(c);
    dlclose(h); /* drops only the reference taken here */
    return c;
}

/* A 1-rank communicator on `backend`, bound to cuda:`index` (index < 0: cpu). */
static tcomms_comm_t *make_comm(const char *backend, int cuda_index, const tcomms_hints_t *hints)
{
    const char *dir = getenv("TCOMMS_TEST_MODULES");
    ck_assert_msg(dir != NULL, "TCOMMS_TEST_MODULES is not set");
    setenv("TCOMMS_BACKEND_PATH", dir, 1);
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_RANK | TCOMMS_COMM_PARAM_BACKEND;
    p.size = 1;
    p.backend = backend;
    if (cuda_index >= 0) {
        p.field_mask |= TCOMMS_COMM_PARAM_DEVICE;
        p.device = (tcomms_device_t){TCOMMS_DEVICE_CUDA, cuda_index};
    }
    if (hints != NULL) {
        p.field_mask |= TCOMMS_COMM_PARAM_HINTS;
        p.hints = hints;
    }
    tcomms_comm_t *comm = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, &comm);
    ck_assert_msg(st == TCOMMS_SUCCESS, "create(%s) = %d: %s", backend, st, tcomms_last_error());
    return comm;
}

static const tcomms_op_opts_t on_cuda = {.field_mask = TCOMMS_OP_OPT_DEVICE_TYPE, .device_type = TCOMMS_DEVICE_CUDA};
static const tcomms_op_opts_t on_cpu = {.field_mask = TCOMMS_OP_OPT_DEVICE_TYPE, .device_type = TCOMMS_DEVICE_CPU};

/* A blocking 1-rank all_reduce of `n` floats (the fakes copy sendbuf to recvbuf); returns its status and checks the
 * copy on success. */
static tcomms_status_t reduce_n(tcomms_comm_t *comm, size_t n, const tcomms_op_opts_t *opts)
{
    float in[16], out[16];
    ck_assert_uint_le(n, 16);
    for (size_t i = 0; i < n; i++) {
        in[i] = (float)i * 0.5f + 1;
        out[i] = -1;
    }
    tcomms_status_t st = tcomms_all_reduce(comm, in, out, n, TCOMMS_FLOAT32, TCOMMS_SUM, opts, NULL);
    for (size_t i = 0; st == TCOMMS_SUCCESS && i < n; i++)
        ck_assert_msg(out[i] == (float)i * 0.5f + 1, "out[%zu] = %g", i, (double)out[i]);
    return st;
}

/* A cpu-bound communicator with a cuda backend: loaded, never created; every cuda use is NOT_BOUND. */
START_TEST(test_not_bound)
{
    tcomms_comm_t *comm = make_comm("cpu:fakeok,cuda:fakecuda", -1, NULL);
    fake_calls_t *fc = calls_of("fakecuda"); /* each test runs in a fresh child: all counts start at 0 */
    const char *name = NULL;
    ck_assert_int_eq(tcomms_comm_backend(comm, TCOMMS_DEVICE_CUDA, &name), TCOMMS_SUCCESS);
    ck_assert_str_eq(name, "fakecuda");
    char buf[32];
    ck_assert_int_eq(tcomms_comm_hint(comm, TCOMMS_DEVICE_CUDA, "max_ctas", buf, sizeof(buf)), TCOMMS_ERR_NOT_BOUND);
    ck_assert_int_eq(tcomms_comm_hint(comm, TCOMMS_DEVICE_CPU, "max_ctas", buf, sizeof(buf)), TCOMMS_SUCCESS);
    ck_assert_int_eq(reduce_n(comm, 4, &on_cuda), TCOMMS_ERR_NOT_BOUND);
    assert_message_has("cuda:0");
    assert_message_has("fakecuda");
    ck_assert_int_eq(reduce_n(comm, 4, NULL), TCOMMS_SUCCESS); /* host buffers still work */
    tcomms_work_t *w = (tcomms_work_t *)&w;
    ck_assert_int_eq(tcomms_barrier(comm, &on_cuda, &w), TCOMMS_ERR_NOT_BOUND);
    ck_assert_ptr_null(w);
    /* split fails alike on members and non-members, before any traffic */
    tcomms_comm_t *child = (tcomms_comm_t *)&child;
    ck_assert_int_eq(tcomms_comm_split(comm, (int[]){0}, 1, NULL, NULL, &child), TCOMMS_ERR_NOT_BOUND);
    ck_assert_ptr_null(child);
    ck_assert_int_eq(tcomms_comm_split(comm, NULL, 0, NULL, NULL, &child), TCOMMS_ERR_NOT_BOUND);
    ck_assert_int_eq(tcomms_comm_split_color(comm, 0, 0, NULL, NULL, &child), TCOMMS_ERR_NOT_BOUND);
    ck_assert_int_eq(tcomms_comm_split_color(comm, TCOMMS_SPLIT_NOCOLOR, 0, NULL, NULL, &child),
                     TCOMMS_ERR_NOT_BOUND);
    assert_message_has("tcomms_comm_split_color");
    ck_assert_int_eq(tcomms_comm_shrink(comm, NULL, 0, NULL, NULL, &child), TCOMMS_ERR_NOT_BOUND);
    assert_message_has("tcomms_comm_shrink");
    /* inside a group, the error is immediate and nothing is bracketed on the unbound backend */
    ck_assert_int_eq(tcomms_group_start(), TCOMMS_SUCCESS);
    ck_assert_int_eq(reduce_n(comm, 4, &on_cuda), TCOMMS_ERR_NOT_BOUND);
    ck_assert_int_eq(tcomms_group_end(), TCOMMS_SUCCESS);
    void *mem = (void *)&mem;
    ck_assert_int_eq(tcomms_mem_alloc(comm, TCOMMS_DEVICE_CUDA, 64, &mem), TCOMMS_ERR_NOT_BOUND);
    ck_assert_ptr_null(mem);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->create + fc->destroy + fc->post + fc->group_start + fc->group_end + fc->nonmember +
                         fc->mem_alloc, 0);
    tcomms_strerror(TCOMMS_ERR_NOT_BOUND);
    ck_assert_ptr_nonnull(strstr(tcomms_strerror(TCOMMS_ERR_NOT_BOUND), "TCOMMS_ERR_NOT_BOUND"));
}
END_TEST

/* Bound to cuda:0 with "cpu:fakeok,cuda:fakecuda": device buffers go to fakecuda by default, host buffers to
 * fakeok with opts.device_type = cpu; blocking calls carry TCOMMS_COLL_FLAG_BLOCKING and the caller's stream, and
 * TCOMMS_COLL_FLAG_INLINE outside a group only. */
START_TEST(test_mixed_routing)
{
    tcomms_comm_t *comm = make_comm("cpu:fakeok,cuda:fakecuda", 0, NULL);
    fake_calls_t *fc = calls_of("fakecuda");
    ck_assert_int_eq(fc->create, 1);
    ck_assert_int_eq(fc->create_device_type, TCOMMS_DEVICE_CUDA);
    ck_assert_int_eq(fc->create_device_index, 0);
    ck_assert_int_eq(fc->create_has_parent, 0);
    const char *name = NULL;
    ck_assert_int_eq(tcomms_comm_backend(comm, TCOMMS_DEVICE_CPU, &name), TCOMMS_SUCCESS);
    ck_assert_str_eq(name, "fake");
    ck_assert_int_eq(tcomms_comm_backend(comm, TCOMMS_DEVICE_CUDA, &name), TCOMMS_SUCCESS);
    ck_assert_str_eq(name, "fakecuda");
    char buf[32];
    ck_assert_int_eq(tcomms_comm_hint(comm, TCOMMS_DEVICE_CUDA, "max_ctas", buf, sizeof(buf)), TCOMMS_SUCCESS);
    ck_assert_str_eq(buf, "7");
    int posts = fc->post;
    ck_assert_int_eq(reduce_n(comm, 5, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->post, posts + 1);
    ck_assert_uint_eq(fc->last_flags, TCOMMS_COLL_FLAG_BLOCKING | TCOMMS_COLL_FLAG_INLINE);
    ck_assert_ptr_null(fc->last_stream);
    ck_assert_int_eq(reduce_n(comm, 5, &on_cpu), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->post, posts + 1);
    /* an async call: no BLOCKING flag, the caller's stream passed through, wait and synchronize reach the module */
    int stream_token;
    tcomms_op_opts_t o = {.field_mask = TCOMMS_OP_OPT_STREAM, .stream = &stream_token};
    float x[2] = {1, 2}, y[2] = {0, 0};
    tcomms_work_t *w = NULL;
    ck_assert_int_eq(tcomms_all_reduce(comm, x, y, 2, TCOMMS_FLOAT32, TCOMMS_SUM, &o, &w), TCOMMS_SUCCESS);
    ck_assert_uint_eq(fc->last_flags, 0);
    ck_assert_ptr_eq(fc->last_stream, &stream_token);
    int waits = fc->wait, syncs = fc->synchronize;
    ck_assert_int_eq(tcomms_work_synchronize(w, 0), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->synchronize, syncs + 1);
    ck_assert_int_eq(fc->wait, waits);
    ck_assert_int_eq(tcomms_work_wait(w, 0), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->wait, waits + 1);
    tcomms_work_free(w);
    ck_assert_int_eq(fc->live_works, 0);
    ck_assert(y[0] == 1 && y[1] == 2);
    ck_assert_int_eq(tcomms_work_synchronize(NULL, 0), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->destroy, 1);
    /* bound to cuda with no cpu backend named: host buffers have none */
    comm = make_comm("cuda:fakecuda", 0, NULL);
    ck_assert_int_eq(reduce_n(comm, 3, &on_cpu), TCOMMS_ERR_NO_BACKEND_FOR_DEVICE);
    ck_assert_int_eq(reduce_n(comm, 3, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
}
END_TEST

/* A backend without work_synchronize: the core falls back to its wait. */
START_TEST(test_synchronize_fallback)
{
    tcomms_comm_t *comm = make_comm("cuda:fakecudabare", 0, NULL);
    fake_calls_t *fc = calls_of("fakecudabare");
    float x = 3, y = 0;
    tcomms_work_t *w = NULL;
    ck_assert_int_eq(tcomms_all_reduce(comm, &x, &y, 1, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, &w), TCOMMS_SUCCESS);
    int waits = fc->wait;
    ck_assert_int_eq(tcomms_work_synchronize(w, 1000), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->wait, waits + 1);
    tcomms_work_free(w);
    ck_assert(y == 3);
    /* a failed operation reports the same through either call */
    static float big[FAKE_FAIL_WAIT_COUNT];
    ck_assert_int_eq(tcomms_all_reduce(comm, big, big, FAKE_FAIL_WAIT_COUNT, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, &w),
                     TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_work_synchronize(w, 0), TCOMMS_ERR_REMOTE);
    ck_assert_int_eq(tcomms_work_wait(w, 0), TCOMMS_ERR_REMOTE);
    tcomms_work_free(w);
    ck_assert_int_eq(fc->live_works, 0);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
}
END_TEST

/* Non-members of a split are handed to comm_split_nonmember with the child's hints and name, rank -1, size 0 and
 * no member list; members get comm_create with the parent. */
START_TEST(test_split_nonmember)
{
    tcomms_comm_t *comm = make_comm("cpu:fakeok,cuda:fakecuda", 0, NULL);
    fake_calls_t *fc = calls_of("fakecuda");
    memset(fc, 0, sizeof(*fc));
    tcomms_hints_t *h = NULL;
    ck_assert_int_eq(tcomms_hints_create(&h), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_hints_set(h, "max_ctas", "3"), TCOMMS_SUCCESS);
    tcomms_comm_t *child = (tcomms_comm_t *)&child;
    ck_assert_int_eq(tcomms_comm_split(comm, NULL, 0, "kid", h, &child), TCOMMS_SUCCESS);
    ck_assert_ptr_null(child);
    ck_assert_int_eq(fc->nonmember, 1);
    ck_assert_int_eq(fc->nonmember_rank, -1);
    ck_assert_int_eq(fc->nonmember_size, 0);
    ck_assert_int_eq(fc->nonmember_has_ranks, 0);
    ck_assert_int_eq(fc->nonmember_has_parent, 1);
    ck_assert_str_eq(fc->nonmember_name, "kid");
    ck_assert_str_eq(fc->nonmember_max_ctas, "3");
    ck_assert_int_eq(tcomms_comm_split_color(comm, TCOMMS_SPLIT_NOCOLOR, 0, NULL, NULL, &child), TCOMMS_SUCCESS);
    ck_assert_ptr_null(child);
    ck_assert_int_eq(fc->nonmember, 2);
    ck_assert_str_eq(fc->nonmember_max_ctas, ""); /* hints are the child's own, not inherited */
    /* invalid child hints fail on a non-member too, before the backend is called */
    ck_assert_int_eq(tcomms_hints_set(h, "min_ctas", "9"), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_split(comm, NULL, 0, "kid", h, &child), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(fc->nonmember, 2);
    /* members: comm_create with the parent, and no non-member call */
    ck_assert_int_eq(tcomms_comm_split(comm, (int[]){0}, 1, "member", NULL, &child), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->create, 1);
    ck_assert_int_eq(fc->create_has_parent, 1);
    ck_assert_int_eq(fc->nonmember, 2);
    ck_assert_int_eq(reduce_n(child, 2, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_destroy(child), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_split_color(comm, 4, 0, NULL, NULL, &child), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->create, 2);
    ck_assert_int_eq(tcomms_comm_destroy(child), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
    tcomms_hints_free(h);
    /* a backend without the entry: non-members simply get no child */
    comm = make_comm("cuda:fakecudabare", 0, NULL);
    ck_assert_int_eq(tcomms_comm_split(comm, NULL, 0, NULL, NULL, &child), TCOMMS_SUCCESS);
    ck_assert_ptr_null(child);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
}
END_TEST

/* Groups bracket the backend once (lazily), keep blocking calls until the outermost end, call the backend's
 * group_end before waiting for them, and free every one of them whatever fails. */
START_TEST(test_group_bracketing)
{
    tcomms_comm_t *comm = make_comm("cpu:fakeok,cuda:fakecuda", 0, NULL);
    fake_calls_t *fc = calls_of("fakecuda");
    memset(fc, 0, sizeof(*fc));
    ck_assert_int_eq(tcomms_group_end(), TCOMMS_ERR_INVALID_ARG);
    assert_message_has("unbalanced");
    /* host-only group: the cuda backend is not bracketed */
    ck_assert_int_eq(tcomms_group_start(), TCOMMS_SUCCESS);
    ck_assert_int_eq(reduce_n(comm, 2, &on_cpu), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_group_end(), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->group_start + fc->group_end, 0);
    /* two blocking calls: one group_start, no wait before the end, group_end before the waits */
    ck_assert_int_eq(tcomms_group_start(), TCOMMS_SUCCESS);
    float a[4] = {1, 2, 3, 4}, b[4] = {0}, c[4] = {0};
    ck_assert_int_eq(tcomms_all_reduce(comm, a, b, 4, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL), TCOMMS_SUCCESS);
    ck_assert_uint_eq(fc->last_flags, TCOMMS_COLL_FLAG_BLOCKING);
    ck_assert_int_eq(tcomms_all_reduce(comm, a, c, 4, TCOMMS_FLOAT32, TCOMMS_SUM, NULL, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(reduce_n(comm, 2, &on_cpu), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->group_start, 1);
    ck_assert_int_eq(fc->wait, 0);
    ck_assert_int_eq(fc->live_works, 2);
    ck_assert_int_eq(tcomms_group_end(), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->group_end, 1);
    ck_assert_int_eq(fc->waits_at_group_end, 0);
    ck_assert_int_eq(fc->wait, 2);
    ck_assert_int_eq(fc->live_works, 0);
    ck_assert(b[3] == 4 && c[0] == 1);
    /* nested: only the outermost end issues and completes */
    ck_assert_int_eq(tcomms_group_start(), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_group_start(), TCOMMS_SUCCESS);
    ck_assert_int_eq(reduce_n(comm, 1, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_group_end(), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->group_end, 1);
    ck_assert_int_eq(fc->wait, 2);
    ck_assert_int_eq(reduce_n(comm, 1, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_group_end(), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->group_start, 2);
    ck_assert_int_eq(fc->group_end, 2);
    ck_assert_int_eq(fc->wait, 4);
    ck_assert_int_eq(tcomms_group_end(), TCOMMS_ERR_INVALID_ARG);
    /* an error at post is returned at once; the group goes on */
    ck_assert_int_eq(tcomms_group_start(), TCOMMS_SUCCESS);
    ck_assert_int_eq(reduce_n(comm, FAKE_FAIL_POST_COUNT, NULL), TCOMMS_ERR_NOT_SUPPORTED);
    ck_assert_int_eq(reduce_n(comm, 2, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_group_end(), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->live_works, 0);
    /* a failing blocking call: reported by the end, after every kept call was waited for and freed */
    float big[FAKE_FAIL_WAIT_COUNT];
    memset(big, 0, sizeof(big));
    int waits = fc->wait;
    ck_assert_int_eq(tcomms_group_start(), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_all_reduce(comm, big, big, FAKE_FAIL_WAIT_COUNT, TCOMMS_FLOAT32, TCOMMS_SUM, NULL,
                                       NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(reduce_n(comm, 2, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_group_end(), TCOMMS_ERR_REMOTE);
    assert_message_has("tcomms_group_end");
    ck_assert_int_eq(fc->wait, waits + 2);
    ck_assert_int_eq(fc->live_works, 0);
    /* that failure broke the communicator for good (lib/comm_state.c): later calls are refused, naming it, before
     * the backend sees them; the rest goes on with a new one */
    int posts = fc->post;
    ck_assert_int_eq(reduce_n(comm, 2, NULL), TCOMMS_ERR_ABORTED);
    assert_message_has("TCOMMS_ERR_REMOTE");
    ck_assert_int_eq(fc->post, posts);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
    comm = make_comm("cpu:fakeok,cuda:fakecuda", 0, NULL);
    /* a backend's group_end failing: still every kept call completes */
    fc->fail_group_end = 1;
    ck_assert_int_eq(tcomms_group_start(), TCOMMS_SUCCESS);
    ck_assert_int_eq(reduce_n(comm, 2, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(reduce_n(comm, 3, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_group_end(), TCOMMS_ERR_REMOTE);
    assert_message_has("fakecuda");
    ck_assert_int_eq(fc->live_works, 0);
    fc->fail_group_end = 0;
    /* a work handle from inside a group stays valid after it */
    tcomms_work_t *w = NULL;
    ck_assert_int_eq(tcomms_group_start(), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_barrier(comm, NULL, &w), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_group_end(), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->live_works, 1);
    ck_assert_int_eq(tcomms_work_wait(w, 0), TCOMMS_SUCCESS);
    tcomms_work_free(w);
    ck_assert_int_eq(fc->live_works, 0);
    /* outside a group, blocking calls complete at once again */
    waits = fc->wait;
    ck_assert_int_eq(reduce_n(comm, 2, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->wait, waits + 1);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
}
END_TEST

/* A backend with no group entries still gets its blocking calls deferred to the end. */
START_TEST(test_group_without_entries)
{
    tcomms_comm_t *comm = make_comm("cuda:fakecudabare", 0, NULL);
    fake_calls_t *fc = calls_of("fakecudabare");
    int waits = fc->wait;
    ck_assert_int_eq(tcomms_group_start(), TCOMMS_SUCCESS);
    ck_assert_int_eq(reduce_n(comm, 2, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(reduce_n(comm, 3, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->wait, waits);
    ck_assert_int_eq(tcomms_group_end(), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->wait, waits + 2);
    ck_assert_int_eq(fc->live_works, 0);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
}
END_TEST

/* tcomms_comm_abort on a module without comm_abort (lib/comm.c): the core still refuses every later operation
 * before the backend sees it, a handle posted before outlives the communicator with its own status, and a second
 * abort is a no-op. */
START_TEST(test_abort_without_entry)
{
    tcomms_comm_t *comm = make_comm("cuda:fakecudabare", 0, NULL);
    fake_calls_t *fc = calls_of("fakecudabare");
    tcomms_work_t *w = NULL;
    ck_assert_int_eq(tcomms_barrier(comm, NULL, &w), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_abort(comm), TCOMMS_SUCCESS);
    int posts = fc->post;
    ck_assert_int_eq(reduce_n(comm, 2, NULL), TCOMMS_ERR_ABORTED);
    assert_message_has("tcomms_comm_abort");
    ck_assert_int_eq(tcomms_barrier(comm, NULL, NULL), TCOMMS_ERR_ABORTED);
    ck_assert_int_eq(fc->post, posts);
    ck_assert_int_eq(tcomms_comm_abort(comm), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_work_wait(w, 0), TCOMMS_SUCCESS); /* it had completed: the abort keeps its status */
    ck_assert_int_eq(tcomms_work_free(w), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->live_works, 0);
    ck_assert_int_eq(tcomms_comm_abort(NULL), TCOMMS_ERR_INVALID_ARG);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bind");
    TCase *tc = tcase_create("bind");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_not_bound);
    tcase_add_test(tc, test_mixed_routing);
    tcase_add_test(tc, test_synchronize_fallback);
    tcase_add_test(tc, test_split_nonmember);
    tcase_add_test(tc, test_group_bracketing);
    tcase_add_test(tc, test_group_without_entries);
    tcase_add_test(tc, test_abort_without_entry);
    suite_add_tcase(s, tc);
    return check_run(s);
}
