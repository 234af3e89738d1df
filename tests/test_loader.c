/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests lib/loader.c (search path, dlopen failures, the ABI check by major, minor and size, declining modules,
 * listing, the default order by priority, selection syntax) and the core's routing in lib/comm.c and lib/coll.c
 * over the single-rank fake modules (tests/fake_backend.c). TCOMMS_TEST_MODULES names the directory holding them. */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loader.h"
#include "check_run.h"

static tcomms_comm_t *make_comm(const char *backend, tcomms_status_t want);

static char real_backend_path[4096]; /* TCOMMS_BACKEND_PATH as the Makefile set it, before the fakes replace it */

static void use_test_modules(void)
{
    const char *dir = getenv("TCOMMS_TEST_MODULES");
    ck_assert_msg(dir != NULL, "TCOMMS_TEST_MODULES is not set");
    setenv("TCOMMS_BACKEND_PATH", dir, 1);
    unsetenv("TCOMMS_BACKEND");
}

START_TEST(test_load)
{
    use_test_modules();
    const tcomms_backend_t *be;
    ck_assert_int_eq(tc_backend_load("fakeok", &be), TCOMMS_SUCCESS);
    ck_assert_str_eq(be->name, "fake");
    ck_assert_int_eq(tc_backend_load("nosuch", &be), TCOMMS_ERR_BACKEND_UNAVAILABLE);
    assert_message_has("tcomms_nosuch.so");
    ck_assert_int_eq(tc_backend_load("fakedecline", &be), TCOMMS_ERR_BACKEND_UNAVAILABLE);
    assert_message_has("no such hardware");
    ck_assert_int_eq(tc_backend_load("fakenosym", &be), TCOMMS_ERR_BACKEND_UNAVAILABLE);
    assert_message_has("tcomms_backend_module");
    ck_assert_int_eq(tc_backend_load("../etc/passwd", &be), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tc_backend_load("fakenopost", &be), TCOMMS_ERR_ABI);
    assert_message_has("lacks the required entry 'post'");
}
END_TEST

/* Another major, or a newer minor than the core's, is refused with TCOMMS_ERR_ABI and a message naming the module's
 * version and the core's. */
START_TEST(test_abi_refused)
{
    use_test_modules();
    char mine[32], theirs[32];
    snprintf(mine, sizeof(mine), "ABI %u.%u", TCOMMS_BACKEND_ABI_MAJOR, TCOMMS_BACKEND_ABI_MINOR);
    const tcomms_backend_t *be = NULL;
    ck_assert_int_eq(tc_backend_load("fakeabi", &be), TCOMMS_ERR_ABI);
    snprintf(theirs, sizeof(theirs), "ABI major %u,", TCOMMS_BACKEND_ABI_MAJOR + 1);
    assert_message_has(theirs);
    assert_message_has(mine);
    ck_assert_int_eq(tc_backend_open("fakeabi", &be), TCOMMS_ERR_ABI); /* not even its device types are read */
    ck_assert_int_eq(tc_backend_load("fakenewer", &be), TCOMMS_ERR_ABI);
    snprintf(theirs, sizeof(theirs), "ABI %u.%u,", TCOMMS_BACKEND_ABI_MAJOR, TCOMMS_BACKEND_ABI_MINOR + 1);
    assert_message_has(theirs);
    assert_message_has(mine);
    ck_assert_ptr_null(be);
}
END_TEST

/* A module built against an earlier minor (7.0) loads; the core reads its table only up to the size it declares,
 * so the fields later minors appended read as their defaults: fakeprev's object holds priority 1000 past that
 * size, which would make it every default. */
START_TEST(test_abi_previous_minor)
{
    use_test_modules();
    const tcomms_backend_t *be = NULL;
    ck_assert_msg(tc_backend_load("fakeprev", &be) == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    ck_assert_uint_eq(be->abi.major, TCOMMS_BACKEND_ABI_MAJOR);
    ck_assert_uint_eq(be->abi.minor, 0); /* 7.0: priority came with 7.1 (fake_backend.c) */
    ck_assert_uint_eq(be->abi.size, offsetof(tcomms_backend_t, priority));
    ck_assert_int_eq(be->priority, 0);
    ck_assert_str_eq(be->name, "fake");
    ck_assert_ptr_nonnull(be->post);
    tcomms_comm_t *comm = make_comm("fakeprev", TCOMMS_SUCCESS);
    double in[2] = {4, 5}, out[2] = {0};
    ck_assert_int_eq(tcomms_all_reduce(comm, in, out, 2, TCOMMS_FLOAT64, TCOMMS_SUM, NULL, NULL), TCOMMS_SUCCESS);
    ck_assert(out[0] == 4 && out[1] == 5);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
}
END_TEST

/* A search path longer than any fixed buffer: the directories at its end, the install directory last, are still
 * searched and named. */
START_TEST(test_long_path)
{
    const char *modules = getenv("TCOMMS_TEST_MODULES");
    ck_assert_ptr_nonnull(modules);
    size_t cap = 20000 + strlen(modules);
    char *path = malloc(cap);
    ck_assert_ptr_nonnull(path);
    size_t len = 0;
    while (len < 12000)
        len += (size_t)snprintf(path + len, cap - len, "/nonexistent/tcomms-test-dir-%05zu:", len);
    snprintf(path + len, cap - len, "%s", modules);
    setenv("TCOMMS_BACKEND_PATH", path, 1);
    const tcomms_backend_t *be = NULL;
    tcomms_status_t st = tc_backend_load("fakeok", &be);
    ck_assert_msg(st == TCOMMS_SUCCESS, "fakeok at the end of a %zu-character path: %d (%s)", strlen(path), st,
                  tcomms_last_error());
    ck_assert_int_eq(tc_backend_load("nosuch", &be), TCOMMS_ERR_BACKEND_UNAVAILABLE);
    assert_message_has(getenv("TCOMMS_TEST_PKGLIBDIR"));
    const tc_module_info_t *mods;
    size_t n = 0;
    ck_assert_int_eq(tc_backend_list(&mods, &n), TCOMMS_SUCCESS);
    int seen = 0;
    for (size_t i = 0; i < n; i++)
        seen |= strcmp(mods[i].name, "fakeok") == 0;
    ck_assert_msg(seen, "fakeok is not listed from the end of a %zu-character path", strlen(path));
    free(path);
}
END_TEST

/* The install directory searched last is the Makefile's $(pkglibdir) now, not the one of an earlier configure: a
 * configure with another --prefix rebuilds the loader (lib/paths.h). */
START_TEST(test_module_dir)
{
    const char *want = getenv("TCOMMS_TEST_PKGLIBDIR");
    ck_assert_msg(want != NULL && want[0] == '/', "TCOMMS_TEST_PKGLIBDIR is not set");
    unsetenv("TCOMMS_BACKEND_PATH");
    char *path = tc_backend_search_path();
    ck_assert_ptr_nonnull(path);
    const char *last = strrchr(path, ':');
    last = last ? last + 1 : path;
    ck_assert_msg(strcmp(last, want) == 0, "the loader searches %s last, configure's pkglibdir is %s (a stale "
                  "lib/loader.o?)", last, want);
    free(path);
}
END_TEST

/* This program runs from the build tree, so the loader also searches the modules built there, without
 * TCOMMS_BACKEND_PATH, after it and before the install directory. */
START_TEST(test_build_tree)
{
    const char *top = getenv("TCOMMS_TEST_BUILDDIR"), *built = getenv("TCOMMS_TEST_BACKENDS");
    ck_assert_msg(top != NULL && built != NULL, "TCOMMS_TEST_BUILDDIR or TCOMMS_TEST_BACKENDS is not set");
    setenv("TCOMMS_BACKEND_PATH", "/nonexistent/first", 1);
    char *path = tc_backend_search_path();
    ck_assert_ptr_nonnull(path);
    ck_assert_msg(strncmp(path, "/nonexistent/first:", 19) == 0, "TCOMMS_BACKEND_PATH is not first in %s", path);
    char names[256];
    snprintf(names, sizeof(names), "%s", built);
    char *save = NULL;
    for (char *name = strtok_r(names, " ", &save); name; name = strtok_r(NULL, " ", &save)) {
        char dir[4096];
        snprintf(dir, sizeof(dir), "/backends/%s/.libs:", name);
        ck_assert_msg(strstr(path, dir) != NULL, "%s is not searched: %s", dir, path);
    }
    free(path);
    unsetenv("TCOMMS_BACKEND_PATH");
    const tc_module_info_t *mods;
    size_t n = 0;
    ck_assert_int_eq(tc_backend_list(&mods, &n), TCOMMS_SUCCESS);
    snprintf(names, sizeof(names), "%s", built);
    for (char *name = strtok_r(names, " ", &save); name; name = strtok_r(NULL, " ", &save)) {
        size_t i = 0;
        while (i < n && strcmp(mods[i].name, name) != 0)
            i++;
        ck_assert_msg(i < n, "built backend %s is not listed without TCOMMS_BACKEND_PATH", name);
        ck_assert_msg(strstr(mods[i].path, top) == mods[i].path, "%s found at %s, not in %s", name, mods[i].path, top);
    }
}
END_TEST

START_TEST(test_list)
{
    use_test_modules();
    const tc_module_info_t *mods;
    size_t n;
    ck_assert_int_eq(tc_backend_list(&mods, &n), TCOMMS_SUCCESS);
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(mods[i].name, "fakeok") == 0) {
            seen |= 1;
            ck_assert_ptr_nonnull(mods[i].backend);
        }
        if (strcmp(mods[i].name, "fakeabi") == 0) {
            seen |= 2;
            ck_assert_int_eq(mods[i].status, TCOMMS_ERR_ABI);
        }
        if (strcmp(mods[i].name, "fakedecline") == 0) {
            seen |= 4;
            ck_assert_ptr_nonnull(strstr(mods[i].reason, "declined"));
            ck_assert_ptr_null(mods[i].backend);
            ck_assert_ptr_nonnull(mods[i].table); /* what it would serve is still known */
            ck_assert_int_eq(mods[i].table->priority, 200);
        }
        if (strcmp(mods[i].name, "foo") == 0) {
            seen |= 8;
            ck_assert_ptr_nonnull(mods[i].backend);
            ck_assert_int_eq(mods[i].backend->priority, 100);
        }
        if (strcmp(mods[i].name, "fakenewer") == 0) {
            seen |= 16;
            ck_assert_int_eq(mods[i].status, TCOMMS_ERR_ABI);
            ck_assert_ptr_null(mods[i].table);
        }
    }
    ck_assert_int_eq(seen, 31);
}
END_TEST

START_TEST(test_selection)
{
    use_test_modules();
    tc_selection_t sel;
    /* a bare name serves the device types its module declares */
    ck_assert_int_eq(tc_selection_parse("fakeok", &sel), TCOMMS_SUCCESS);
    ck_assert_str_eq(sel.names[TCOMMS_DEVICE_CPU], "fakeok");
    ck_assert_int_eq(sel.explicit_[TCOMMS_DEVICE_CUDA], 0);
    ck_assert_int_eq(tc_selection_parse("fakecuda", &sel), TCOMMS_SUCCESS);
    ck_assert_str_eq(sel.names[TCOMMS_DEVICE_CUDA], "fakecuda");
    ck_assert_int_eq(sel.explicit_[TCOMMS_DEVICE_CPU], 0);
    /* a device-qualified one opens nothing: these need not exist here */
    ck_assert_int_eq(tc_selection_parse("cpu:gloo,cuda:nccl", &sel), TCOMMS_SUCCESS);
    ck_assert_str_eq(sel.names[TCOMMS_DEVICE_CPU], "gloo");
    ck_assert_str_eq(sel.names[TCOMMS_DEVICE_CUDA], "nccl");
    ck_assert_int_eq(tc_selection_parse("cpu:ucx,cuda:nccl", &sel), TCOMMS_SUCCESS);
    ck_assert_str_eq(sel.names[TCOMMS_DEVICE_CPU], "ucx");
    ck_assert_int_eq(tc_selection_parse("", &sel), TCOMMS_SUCCESS);
    /* a bare name whose module does not open cannot be placed: its reason is given at once */
    ck_assert_int_eq(tc_selection_parse("nosuch", &sel), TCOMMS_ERR_BACKEND_UNAVAILABLE);
    assert_message_has("tcomms_nosuch.so");
    ck_assert_int_eq(tc_selection_parse("fakeabi", &sel), TCOMMS_ERR_ABI);
    assert_message_has("backend selection 'fakeabi'");
    const char *bad[] = {"gpu:nccl", "cpu:gloo,cpu:ucx", "cpu:", ",", "cpu:Gloo!"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(tc_selection_parse(bad[i], &sel) == TCOMMS_ERR_INVALID_ARG, "'%s' accepted", bad[i]);
}
END_TEST

static tcomms_comm_t *make_comm(const char *backend, tcomms_status_t want)
{
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_RANK;
    p.rank = 0;
    p.size = 1;
    p.local_rank = 0;
    if (backend != NULL) {
        p.field_mask |= TCOMMS_COMM_PARAM_BACKEND;
        p.backend = backend;
    }
    tcomms_comm_t *comm = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, &comm);
    ck_assert_msg(st == want, "create(%s) = %d: %s", backend, st, tcomms_last_error());
    return comm;
}

START_TEST(test_routing)
{
    use_test_modules();
    tcomms_comm_t *comm = make_comm("fakeok", TCOMMS_SUCCESS);
    const char *name;
    ck_assert_int_eq(tcomms_comm_backend(comm, TCOMMS_DEVICE_CPU, &name), TCOMMS_SUCCESS);
    ck_assert_str_eq(name, "fake");
    ck_assert_int_eq(tcomms_comm_backend(comm, TCOMMS_DEVICE_CUDA, &name), TCOMMS_ERR_NO_BACKEND_FOR_DEVICE);
    assert_message_has("device 'cuda' is not present");
    char buf[64];
    ck_assert_int_eq(tcomms_comm_hint(comm, TCOMMS_DEVICE_CPU, "maxCTAs", buf, sizeof(buf)), TCOMMS_SUCCESS);
    ck_assert_str_eq(buf, "7");
    ck_assert_int_eq(tcomms_comm_hint(comm, TCOMMS_DEVICE_CPU, "high_priority_stream", buf, sizeof(buf)),
                     TCOMMS_SUCCESS);
    ck_assert_str_eq(buf, "not applicable");
    ck_assert_int_eq(tcomms_comm_hint(comm, TCOMMS_DEVICE_CPU, "bogus", buf, sizeof(buf)), TCOMMS_ERR_INVALID_ARG);
    /* a module's key is asked as tcomms_hints_set takes it: for a module in the search path, else refused */
    ck_assert_int_eq(tcomms_comm_hint(comm, TCOMMS_DEVICE_CPU, "foo.color", buf, sizeof(buf)), TCOMMS_SUCCESS);
    ck_assert_str_eq(buf, "not applicable");
    ck_assert_int_eq(tcomms_comm_hint(comm, TCOMMS_DEVICE_CPU, "nosuchmod.x", buf, sizeof(buf)),
                     TCOMMS_ERR_INVALID_ARG);
    assert_message_has("nosuchmod");
    double in[3] = {1, 2, 3}, out[3] = {0};
    ck_assert_int_eq(tcomms_all_reduce(comm, in, out, 3, TCOMMS_FLOAT64, TCOMMS_SUM, NULL, NULL), TCOMMS_SUCCESS);
    ck_assert(out[0] == 1 && out[2] == 3);
    tcomms_op_opts_t opts = {.field_mask = TCOMMS_OP_OPT_DEVICE_TYPE, .device_type = TCOMMS_DEVICE_CUDA};
    ck_assert_int_eq(tcomms_all_reduce(comm, in, out, 3, TCOMMS_FLOAT64, TCOMMS_SUM, &opts, NULL),
                     TCOMMS_ERR_NO_BACKEND_FOR_DEVICE);
    opts.field_mask = 1u << 20;
    ck_assert_int_eq(tcomms_all_reduce(comm, in, out, 3, TCOMMS_FLOAT64, TCOMMS_SUM, &opts, NULL),
                     TCOMMS_ERR_INVALID_ARG);
    /* overlapping but not the in-place form */
    ck_assert_int_eq(tcomms_all_reduce(comm, in, in + 1, 2, TCOMMS_FLOAT64, TCOMMS_SUM, NULL, NULL),
                     TCOMMS_ERR_INVALID_ARG);
    assert_message_has("overlap");
    tcomms_work_t *w = NULL;
    ck_assert_int_eq(tcomms_barrier(comm, NULL, &w), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_work_test(w), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_work_wait(w, 0), TCOMMS_SUCCESS);
    tcomms_work_free(w);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
}
END_TEST

START_TEST(test_selection_errors)
{
    use_test_modules();
    make_comm("nosuch", TCOMMS_ERR_BACKEND_UNAVAILABLE);
    make_comm("fakeabi", TCOMMS_ERR_ABI);
    make_comm("cuda:fakeok", TCOMMS_ERR_NO_BACKEND_FOR_DEVICE);
    make_comm("cpu:fakeok,cuda:nosuch", TCOMMS_ERR_BACKEND_UNAVAILABLE);
    assert_message_has("nosuch");
    setenv("TCOMMS_BACKEND", "fakedecline", 1);
    make_comm(NULL, TCOMMS_ERR_BACKEND_UNAVAILABLE);
    assert_message_has("TCOMMS_BACKEND");
    tcomms_comm_destroy(make_comm("fakeok", TCOMMS_SUCCESS)); /* the argument overrides the env */
    setenv("TCOMMS_BACKEND", "fakeok", 1);
    tcomms_comm_destroy(make_comm(NULL, TCOMMS_SUCCESS));
}
END_TEST

static const char *cpu_backend_of(tcomms_comm_t *comm)
{
    const char *name = NULL;
    ck_assert_int_eq(tcomms_comm_backend(comm, TCOMMS_DEVICE_CPU, &name), TCOMMS_SUCCESS);
    return name;
}

/* No backend is named in the core: among the modules serving a device, the greatest priority is the default. Here
 * that is foo (100), an out-of-tree module, over the tree's ucx (20) and gloo (10) and the fakes (0), once
 * fakedecline (200) declined; foo takes hints of its own namespace; a selection still names anything. */
START_TEST(test_default_by_priority)
{
    use_test_modules();
    /* the order, against one written out from the priorities the modules declare */
    const char *list = getenv("TCOMMS_TEST_BACKENDS");
    ck_assert_ptr_nonnull(list);
    const char *want[8];
    size_t nwant = 0;
    want[nwant++] = "foo";
    if (strstr(list, "ucx") != NULL)
        want[nwant++] = "ucx";
    if (strstr(list, "gloo") != NULL)
        want[nwant++] = "gloo";
    want[nwant++] = "fakenccl"; /* 0, and first by name of the three at 0 */
    want[nwant++] = "fakeok";
    want[nwant++] = "fakeprev";
    const tc_module_info_t *mods;
    size_t n = 0, order[32];
    ck_assert_int_eq(tc_backend_list(&mods, &n), TCOMMS_SUCCESS);
    ck_assert_uint_le(n, 32);
    size_t k = tc_backend_order(mods, n, TCOMMS_DEVICE_CPU, 1, order);
    ck_assert_uint_eq(k, nwant);
    for (size_t j = 0; j < k; j++)
        ck_assert_msg(strcmp(mods[order[j]].name, want[j]) == 0, "default order %zu: %s, expected %s", j,
                      mods[order[j]].name, want[j]);
    k = tc_backend_order(mods, n, TCOMMS_DEVICE_CPU, 0, order); /* with those that decline: fakedecline first */
    ck_assert_str_eq(mods[order[0]].name, "fakedecline");

    tcomms_hints_t *h;
    ck_assert_int_eq(tcomms_hints_create(&h), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_hints_set(h, "foo.color", "blue"), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_hints_set(h, "bar.color", "red"), TCOMMS_ERR_INVALID_ARG); /* no module bar */
    assert_message_has("'bar'");
    assert_message_has("foo"); /* the modules that are there */
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_RANK | TCOMMS_COMM_PARAM_HINTS;
    p.size = 1;
    p.hints = h;
    tcomms_comm_t *comm = NULL;
    ck_assert_msg(tcomms_comm_create(&p, &comm) == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    ck_assert_str_eq(cpu_backend_of(comm), "foo");
    char buf[64];
    ck_assert_int_eq(tcomms_comm_hint(comm, TCOMMS_DEVICE_CPU, "foo.color", buf, sizeof(buf)), TCOMMS_SUCCESS);
    ck_assert_str_eq(buf, "blue");
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
    /* the core passes any foo.* key; foo refuses the ones it does not know */
    ck_assert_int_eq(tcomms_hints_set(h, "foo.shade", "dark"), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_create(&p, &comm), TCOMMS_ERR_INVALID_ARG);
    assert_message_has("foo.shade");
    tcomms_hints_free(h);
    /* explicit selections win over priority */
    tcomms_comm_t *c = make_comm("fakeok", TCOMMS_SUCCESS);
    ck_assert_str_eq(cpu_backend_of(c), "fake");
    tcomms_comm_destroy(c);
    c = make_comm("cpu:fakeprev", TCOMMS_SUCCESS);
    ck_assert_str_eq(cpu_backend_of(c), "fake");
    tcomms_comm_destroy(c);
    setenv("TCOMMS_BACKEND", "fakeok", 1);
    c = make_comm(NULL, TCOMMS_SUCCESS);
    ck_assert_msg(strcmp(cpu_backend_of(c), "fake") == 0, "TCOMMS_BACKEND=fakeok gave %s", cpu_backend_of(c));
    tcomms_comm_destroy(c);
    unsetenv("TCOMMS_BACKEND");
}
END_TEST

/* Without the fakes, the tree's priorities keep the default of before: ucx, else gloo, for CPU; and
 * TCOMMS_BACKEND=gloo still selects gloo. */
START_TEST(test_default_tree)
{
    const char *list = getenv("TCOMMS_TEST_BACKENDS");
    ck_assert_ptr_nonnull(list);
    if (*list == '\0')
        return; /* no CPU backend built */
    setenv("TCOMMS_BACKEND_PATH", real_backend_path, 1);
    unsetenv("TCOMMS_BACKEND");
    tcomms_comm_t *c = make_comm(NULL, TCOMMS_SUCCESS);
    ck_assert_str_eq(cpu_backend_of(c), strstr(list, "ucx") != NULL ? "ucx" : "gloo");
    tcomms_comm_destroy(c);
    if (strstr(list, "gloo") != NULL) {
        setenv("TCOMMS_BACKEND", "gloo", 1);
        c = make_comm(NULL, TCOMMS_SUCCESS);
        ck_assert_str_eq(cpu_backend_of(c), "gloo");
        tcomms_comm_destroy(c);
        unsetenv("TCOMMS_BACKEND");
    }
}
END_TEST

/* No module that opens serves the device: the error names the device and the reason of each module that did not
 * open (its device types unknown, it may have been the one meant). The search path holds fakeabi alone, plus the
 * modules of the build tree, which for cuda are at most nccl: where nccl runs, it is the default. */
START_TEST(test_default_none)
{
    const char *modules = getenv("TCOMMS_TEST_MODULES");
    ck_assert_ptr_nonnull(modules);
    char dir[] = "/tmp/tcomms-test-loader-XXXXXX", link[4096], target[4096];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(link, sizeof(link), "%s/tcomms_fakeabi.so", dir);
    snprintf(target, sizeof(target), "%s/tcomms_fakeabi.so", modules);
    ck_assert_int_eq(symlink(target, link), 0);
    setenv("TCOMMS_BACKEND_PATH", dir, 1);
    const tcomms_backend_t *be = NULL;
    tcomms_status_t st = tc_backend_default(TCOMMS_DEVICE_CUDA, &be);
    unlink(link);
    rmdir(dir);
    if (st == TCOMMS_SUCCESS) {
        ck_assert(be->device_types & (1u << TCOMMS_DEVICE_CUDA));
        return;
    }
    ck_assert_int_eq(st, TCOMMS_ERR_BACKEND_UNAVAILABLE);
    assert_message_has("device 'cuda'");
    assert_message_has("fakeabi: ");
    assert_message_has("ABI major");
}
END_TEST

/* A user store: a tiny in-memory table, counting calls, to check tcomms drives its rendezvous through it. */
static struct {
    char key[16][128];
    char value[16][64];
    size_t len[16];
    int used[16];
    int sets, gets, adds, dels;
} ustore;

static int ukey(const char *key, int create)
{
    for (int i = 0; i < 16; i++)
        if (ustore.used[i] && strcmp(ustore.key[i], key) == 0)
            return i;
    for (int i = 0; create && i < 16; i++)
        if (!ustore.used[i]) {
            ustore.used[i] = 1;
            ustore.len[i] = 0; /* a slot freed by u_del keeps the old value's length */
            snprintf(ustore.key[i], sizeof(ustore.key[i]), "%s", key);
            return i;
        }
    return -1;
}

static tcomms_status_t u_set(void *ctx, const char *key, const void *value, size_t len)
{
    (void)ctx;
    int i = ukey(key, 1);
    if (i < 0 || len > sizeof(ustore.value[0]))
        return TCOMMS_ERR_NO_MEMORY;
    memcpy(ustore.value[i], value, len);
    ustore.len[i] = len;
    ustore.sets++;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t u_get(void *ctx, const char *key, void *buf, size_t cap, size_t *len)
{
    (void)ctx;
    int i = ukey(key, 0);
    ustore.gets++;
    if (i < 0)
        return TCOMMS_ERR_NOT_FOUND;
    *len = ustore.len[i];
    if (cap < *len)
        return TCOMMS_ERR_INVALID_ARG;
    memcpy(buf, ustore.value[i], *len);
    return TCOMMS_SUCCESS;
}

static tcomms_status_t u_wait(void *ctx, const char *const *keys, size_t n, uint32_t timeout_ms)
{
    (void)ctx;
    (void)timeout_ms;
    for (size_t k = 0; k < n; k++)
        if (ukey(keys[k], 0) < 0)
            return TCOMMS_ERR_TIMEOUT; /* one process: a missing key never appears */
    return TCOMMS_SUCCESS;
}

static tcomms_status_t u_add(void *ctx, const char *key, int64_t delta, int64_t *result)
{
    (void)ctx;
    int i = ukey(key, 1);
    int64_t v = 0;
    if (ustore.len[i] == sizeof(v))
        memcpy(&v, ustore.value[i], sizeof(v));
    v += delta;
    memcpy(ustore.value[i], &v, sizeof(v));
    ustore.len[i] = sizeof(v);
    *result = v;
    ustore.adds++;
    return TCOMMS_SUCCESS;
}

static tcomms_status_t u_del(void *ctx, const char *key)
{
    (void)ctx;
    int i = ukey(key, 0);
    if (i >= 0)
        ustore.used[i] = 0;
    ustore.dels++;
    return TCOMMS_SUCCESS;
}

/* TCOMMS_HINTS and TCOMMS_TIMEOUT_MS are read at creation: malformed values are named; parameters override. */
START_TEST(test_env_at_creation)
{
    use_test_modules();
    setenv("TCOMMS_HINTS", "min_ctas=4,bogus=1", 1);
    make_comm("fakeok", TCOMMS_ERR_BAD_ENV);
    assert_message_has("TCOMMS_HINTS");
    assert_message_has("bogus");
    setenv("TCOMMS_HINTS", "min_ctas=8,max_ctas=2", 1);
    make_comm("fakeok", TCOMMS_ERR_INVALID_ARG);
    assert_message_has("min_ctas");
    tcomms_hints_t *h;
    ck_assert_int_eq(tcomms_hints_create(&h), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_hints_set(h, "minCTAs", "1"), TCOMMS_SUCCESS);
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_RANK | TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_HINTS;
    p.size = 1;
    p.backend = "fakeok";
    p.hints = h;
    tcomms_comm_t *comm = NULL;
    ck_assert_msg(tcomms_comm_create(&p, &comm) == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    tcomms_comm_destroy(comm);
    tcomms_hints_free(h);
    unsetenv("TCOMMS_HINTS");
    setenv("TCOMMS_TIMEOUT_MS", "soon", 1);
    make_comm("fakeok", TCOMMS_ERR_BAD_ENV);
    assert_message_has("TCOMMS_TIMEOUT_MS");
    p.field_mask = TCOMMS_COMM_PARAM_RANK | TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_TIMEOUT;
    p.timeout_ms = 1000; /* the parameter wins over the malformed variable */
    ck_assert_msg(tcomms_comm_create(&p, &comm) == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    tcomms_comm_destroy(comm);
}
END_TEST

START_TEST(test_user_store)
{
    use_test_modules();
    static const tcomms_store_ops_t ops = {u_set, u_get, u_wait, u_add, u_del};
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_RANK | TCOMMS_COMM_PARAM_STORE | TCOMMS_COMM_PARAM_BACKEND;
    p.size = 1;
    p.backend = "fakeok";
    p.store_ops = &ops;
    tcomms_comm_t *comm = NULL;
    ck_assert_msg(tcomms_comm_create(&p, &comm) == TCOMMS_SUCCESS, "%s", tcomms_last_error());
    /* creation counted its members through the user's store, then dropped the counter it cannot prefix-delete */
    ck_assert_int_ge(ustore.adds, 1);
    ck_assert_int_ge(ustore.dels, 1);
    for (int i = 0; i < 16; i++)
        ck_assert_msg(!ustore.used[i], "key '%s' left in the user store", ustore.key[i]);
    /* a split on a user store goes through it too (the child's creation counter), and leaves no key behind; one
     * rank agrees with itself without the store */
    int adds = ustore.adds;
    tcomms_comm_t *child = NULL;
    ck_assert_int_eq(tcomms_comm_split(comm, (int[]){0}, 1, "solo", NULL, &child), TCOMMS_SUCCESS);
    ck_assert_int_gt(ustore.adds, adds);
    for (int i = 0; i < 16; i++)
        ck_assert_msg(!ustore.used[i], "key '%s' left in the user store", ustore.key[i]);
    ck_assert_int_eq(tcomms_comm_destroy(child), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
    p.store_ops = NULL;
    ck_assert_int_eq(tcomms_comm_create(&p, &comm), TCOMMS_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "store_ops"));
}
END_TEST

/* The library never writes to stdout, and neither may the libraries under a backend: UCX prints its warnings there
 * unless the module reroutes them. Each built backend is created in a child whose stdout is a pipe, with UCX_TLS
 * naming a transport that does not exist (UCX warns about it); the pipe must stay empty. */
START_TEST(test_no_stdout)
{
    const char *list = getenv("TCOMMS_TEST_BACKENDS");
    if (list == NULL || *list == '\0')
        return;
    char names[256];
    snprintf(names, sizeof(names), "%s", list);
    char *save = NULL;
    for (char *name = strtok_r(names, " ,", &save); name; name = strtok_r(NULL, " ,", &save)) {
        int fds[2];
        ck_assert_int_eq(pipe(fds), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            dup2(fds[1], STDOUT_FILENO);
            close(fds[0]);
            setenv("TCOMMS_BACKEND_PATH", real_backend_path, 1);
            setenv("UCX_TLS", "posix,self,nosuchtransport", 1);
            tcomms_comm_params_t p = {0};
            p.field_mask = TCOMMS_COMM_PARAM_RANK | TCOMMS_COMM_PARAM_BACKEND;
            p.size = 1;
            p.backend = name;
            tcomms_comm_t *comm = NULL;
            tcomms_status_t st = tcomms_comm_create(&p, &comm);
            tcomms_comm_destroy(comm);
            fflush(stdout);
            _exit(st == TCOMMS_SUCCESS ? 0 : 1);
        }
        close(fds[1]);
        char out[512];
        ssize_t n, total = 0;
        while ((n = read(fds[0], out + total, sizeof(out) - 1 - (size_t)total)) > 0 && total < (ssize_t)sizeof(out) - 1)
            total += n;
        close(fds[0]);
        out[total] = '\0';
        int status = 0;
        waitpid(pid, &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: creating a 1-rank communicator failed", name);
        ck_assert_msg(total == 0, "%s wrote to stdout: '%s'", name, out);
    }
}
END_TEST

int main(void)
{
    const char *path = getenv("TCOMMS_BACKEND_PATH");
    snprintf(real_backend_path, sizeof(real_backend_path), "%s", path ? path : "");
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("loader");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_load);
    tcase_add_test(tc, test_abi_refused);
    tcase_add_test(tc, test_abi_previous_minor);
    tcase_add_test(tc, test_list);
    tcase_add_test(tc, test_long_path);
    tcase_add_test(tc, test_module_dir);
    tcase_add_test(tc, test_build_tree);
    tcase_add_test(tc, test_selection);
    tcase_add_test(tc, test_routing);
    tcase_add_test(tc, test_selection_errors);
    tcase_add_test(tc, test_default_by_priority);
    tcase_add_test(tc, test_default_tree);
    tcase_add_test(tc, test_default_none);
    tcase_add_test(tc, test_env_at_creation);
    tcase_add_test(tc, test_user_store);
    tcase_add_test(tc, test_no_stdout);
    suite_add_tcase(s, tc);
    return check_run(s);
}
