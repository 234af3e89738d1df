/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms_mem_alloc/free/register/deregister (lib/mem.c): argument checks, the core's fallbacks (page-aligned host
 * memory, a no-op registration, no windows) over the fake CPU module and the bare fake CUDA module, a module's own
 * entries over "fakecuda", a registration outliving its communicator's destroy, and memory from every built CPU
 * backend used for an all_reduce on 2 ranks. */
#include <check.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>

#include "fake_calls.h"
#include "mrank.h"
#include "check_run.h"

#define JOB_S 60
#define NELEM (256 * 1024 + 3) /* a few pages and a partial one */

static char real_backend_path[4096];

static fake_calls_t *calls_of(const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/tcomms_%s.so", getenv("TCOMMS_TEST_MODULES"), name);
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    ck_assert_msg(h != NULL, "%s is not loaded: %s", path, dlerror());
    fake_calls_t *c = dlsym(h, "fake_calls");
    ck_assert_ptr_nonnull(c);
    dlclose(h);
    return c;
}

static tcomms_comm_t *fake_comm(const char *backend, int on_cuda)
{
    const char *dir = getenv("TCOMMS_TEST_MODULES");
    ck_assert_msg(dir != NULL, "TCOMMS_TEST_MODULES is not set");
    setenv("TCOMMS_BACKEND_PATH", dir, 1);
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_RANK | TCOMMS_COMM_PARAM_BACKEND;
    p.size = 1;
    p.backend = backend;
    if (on_cuda) {
        p.field_mask |= TCOMMS_COMM_PARAM_DEVICE;
        p.device = (tcomms_device_t){TCOMMS_DEVICE_CUDA, 0};
    }
    tcomms_comm_t *comm = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, &comm);
    ck_assert_msg(st == TCOMMS_SUCCESS, "create(%s) = %d: %s", backend, st, tcomms_last_error());
    return comm;
}

START_TEST(test_bad_arguments)
{
    tcomms_comm_t *comm = fake_comm("fakeok", 0);
    void *p = (void *)&p;
    tcomms_mem_reg_t *reg = (tcomms_mem_reg_t *)&reg;
    char buf[64];
    ck_assert_int_eq(tcomms_mem_alloc(NULL, TCOMMS_DEVICE_CPU, 8, &p), TCOMMS_ERR_INVALID_ARG);
    assert_message_has("comm");
    ck_assert_int_eq(tcomms_mem_alloc(comm, TCOMMS_DEVICE_CPU, 8, NULL), TCOMMS_ERR_INVALID_ARG);
    assert_message_has("ptr");
    ck_assert_int_eq(tcomms_mem_alloc(comm, (tcomms_device_type_t)77, 8, &p), TCOMMS_ERR_INVALID_ARG);
    ck_assert_ptr_null(p);
    assert_message_has("77");
    ck_assert_int_eq(tcomms_mem_alloc(comm, TCOMMS_DEVICE_CUDA, 8, &p), TCOMMS_ERR_NO_BACKEND_FOR_DEVICE);
    ck_assert_int_eq(tcomms_mem_free(NULL, TCOMMS_DEVICE_CPU, buf), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_mem_free(comm, TCOMMS_DEVICE_CUDA, buf), TCOMMS_ERR_NO_BACKEND_FOR_DEVICE);
    ck_assert_int_eq(tcomms_mem_free(comm, TCOMMS_DEVICE_CPU, NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_mem_register(NULL, TCOMMS_DEVICE_CPU, buf, 8, 0, &reg), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_mem_register(comm, TCOMMS_DEVICE_CPU, buf, 8, 0, NULL), TCOMMS_ERR_INVALID_ARG);
    assert_message_has("reg");
    ck_assert_int_eq(tcomms_mem_register(comm, TCOMMS_DEVICE_CPU, NULL, 8, 0, &reg), TCOMMS_ERR_INVALID_ARG);
    ck_assert_ptr_null(reg);
    assert_message_has("buf");
    ck_assert_int_eq(tcomms_mem_register(comm, TCOMMS_DEVICE_CPU, buf, 0, 0, &reg), TCOMMS_ERR_INVALID_ARG);
    assert_message_has("bytes");
    ck_assert_int_eq(tcomms_mem_register(comm, TCOMMS_DEVICE_CPU, buf, 8, 1u << 7, &reg), TCOMMS_ERR_INVALID_ARG);
    assert_message_has("0x80");
    ck_assert_int_eq(tcomms_mem_register(comm, TCOMMS_DEVICE_CUDA, buf, 8, 0, &reg),
                     TCOMMS_ERR_NO_BACKEND_FOR_DEVICE);
    ck_assert_int_eq(tcomms_mem_deregister(NULL), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
}
END_TEST

/* A CPU backend with no memory entries: page-aligned host memory, a no-op registration, no windows. */
START_TEST(test_cpu_fallbacks)
{
    tcomms_comm_t *comm = fake_comm("fakeok", 0);
    void *p = (void *)&p;
    ck_assert_int_eq(tcomms_mem_alloc(comm, TCOMMS_DEVICE_CPU, 0, &p), TCOMMS_SUCCESS);
    ck_assert_ptr_null(p);
    size_t sizes[] = {1, 4095, 4096, 3 * 4096 + 17};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        ck_assert_int_eq(tcomms_mem_alloc(comm, TCOMMS_DEVICE_CPU, sizes[i], &p), TCOMMS_SUCCESS);
        ck_assert_ptr_nonnull(p);
        ck_assert_msg((uintptr_t)p % 4096 == 0, "%zu bytes at %p: not page-aligned", sizes[i], p);
        memset(p, 0xab, sizes[i]); /* the whole extent is writable (ASan would catch an overrun) */
        tcomms_mem_reg_t *reg = NULL;
        ck_assert_int_eq(tcomms_mem_register(comm, TCOMMS_DEVICE_CPU, p, sizes[i], 0, &reg), TCOMMS_SUCCESS);
        ck_assert_ptr_nonnull(reg);
        ck_assert_int_eq(tcomms_mem_deregister(reg), TCOMMS_SUCCESS);
        reg = (tcomms_mem_reg_t *)&reg;
        ck_assert_int_eq(tcomms_mem_register(comm, TCOMMS_DEVICE_CPU, p, sizes[i], TCOMMS_MEM_REG_WINDOW, &reg),
                         TCOMMS_ERR_NOT_SUPPORTED);
        ck_assert_ptr_null(reg);
        assert_message_has("WINDOW");
        ck_assert_int_eq(tcomms_mem_free(comm, TCOMMS_DEVICE_CPU, p), TCOMMS_SUCCESS);
    }
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
}
END_TEST

/* A device backend with no memory entries: nothing to allocate with, registration still a no-op. */
START_TEST(test_device_fallbacks)
{
    tcomms_comm_t *comm = fake_comm("cuda:fakecudabare", 1);
    void *p = (void *)&p;
    ck_assert_int_eq(tcomms_mem_alloc(comm, TCOMMS_DEVICE_CUDA, 64, &p), TCOMMS_ERR_NOT_SUPPORTED);
    ck_assert_ptr_null(p);
    assert_message_has("fakecudabare");
    char buf[64];
    ck_assert_int_eq(tcomms_mem_free(comm, TCOMMS_DEVICE_CUDA, buf), TCOMMS_ERR_NOT_SUPPORTED);
    tcomms_mem_reg_t *reg = NULL;
    ck_assert_int_eq(tcomms_mem_register(comm, TCOMMS_DEVICE_CUDA, buf, sizeof(buf), 0, &reg), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_mem_deregister(reg), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_mem_register(comm, TCOMMS_DEVICE_CUDA, buf, sizeof(buf), TCOMMS_MEM_REG_WINDOW, &reg),
                     TCOMMS_ERR_NOT_SUPPORTED);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
}
END_TEST

/* A module's own entries are used, flags pass through, and the handle goes back to it. */
START_TEST(test_module_entries)
{
    tcomms_comm_t *comm = fake_comm("cpu:fakeok,cuda:fakecuda", 1);
    fake_calls_t *fc = calls_of("fakecuda");
    void *p = NULL;
    ck_assert_int_eq(tcomms_mem_alloc(comm, TCOMMS_DEVICE_CUDA, 0, &p), TCOMMS_SUCCESS);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(fc->mem_alloc, 0);
    ck_assert_int_eq(tcomms_mem_alloc(comm, TCOMMS_DEVICE_CUDA, 100, &p), TCOMMS_SUCCESS);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(fc->mem_alloc, 1);
    tcomms_mem_reg_t *reg = NULL, *win = NULL;
    ck_assert_int_eq(tcomms_mem_register(comm, TCOMMS_DEVICE_CUDA, p, 100, 0, &reg), TCOMMS_SUCCESS);
    ck_assert_uint_eq(fc->last_reg_flags, 0);
    ck_assert_int_eq(tcomms_mem_register(comm, TCOMMS_DEVICE_CUDA, p, 100, TCOMMS_MEM_REG_WINDOW, &win),
                     TCOMMS_SUCCESS);
    ck_assert_uint_eq(fc->last_reg_flags, TCOMMS_MEM_REG_WINDOW);
    ck_assert_int_eq(fc->mem_register, 2);
    ck_assert_int_eq(tcomms_mem_deregister(win), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_mem_deregister(reg), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->mem_deregister, 2);
    ck_assert_int_eq(tcomms_mem_free(comm, TCOMMS_DEVICE_CUDA, p), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->mem_free, 1);
    /* host memory on the same communicator comes from the CPU slot's fallback, not from the module */
    ck_assert_int_eq(tcomms_mem_alloc(comm, TCOMMS_DEVICE_CPU, 100, &p), TCOMMS_SUCCESS);
    ck_assert_msg((uintptr_t)p % 4096 == 0, "host memory at %p is not page-aligned", p);
    ck_assert_int_eq(tcomms_mem_free(comm, TCOMMS_DEVICE_CPU, p), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->mem_alloc + fc->mem_free, 2);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
}
END_TEST

/* A registration keeps the module's communicator alive past tcomms_comm_destroy: the deregistration still reaches
 * the module with its communicator, and then destroys it. */
START_TEST(test_outlives_destroy)
{
    tcomms_comm_t *comm = fake_comm("cpu:fakeok,cuda:fakecuda", 1);
    fake_calls_t *fc = calls_of("fakecuda");
    void *p = NULL;
    tcomms_mem_reg_t *reg = NULL, *host = NULL;
    char buf[64];
    ck_assert_int_eq(tcomms_mem_alloc(comm, TCOMMS_DEVICE_CUDA, 100, &p), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_mem_register(comm, TCOMMS_DEVICE_CUDA, p, 100, TCOMMS_MEM_REG_WINDOW, &reg),
                     TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_mem_register(comm, TCOMMS_DEVICE_CPU, buf, sizeof(buf), 0, &host), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_mem_free(comm, TCOMMS_DEVICE_CUDA, p), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_comm_destroy(comm), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->destroy, 0);
    ck_assert_int_eq(tcomms_mem_deregister(reg), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->mem_deregister, 1);
    ck_assert_int_eq(fc->destroy, 0); /* the host registration still holds it */
    ck_assert_int_eq(tcomms_mem_deregister(host), TCOMMS_SUCCESS);
    ck_assert_int_eq(fc->destroy, 1);
}
END_TEST

/* ---- real CPU backends ----------------------------------------------------------------------------------------- */

/* Each rank allocates both buffers with tcomms_mem_alloc, registers them, and all-reduces rank-dependent values;
 * the expected sum is a closed form. */
static int mem_rank(int rank, int size, void *arg)
{
    const char *backend = arg;
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_TIMEOUT;
    p.backend = backend;
    p.timeout_ms = 20000;
    tcomms_comm_t *comm = NULL;
    tcomms_status_t st = tcomms_comm_create(&p, &comm);
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL rank %d, %s: create: %s", rank, backend, tcomms_last_error());
    int fails = 0;
    int32_t *in = NULL, *out = NULL;
    tcomms_mem_reg_t *rin = NULL, *rout = NULL;
    const size_t bytes = NELEM * sizeof(int32_t);
    if (tcomms_mem_alloc(comm, TCOMMS_DEVICE_CPU, bytes, (void **)&in) != TCOMMS_SUCCESS ||
        tcomms_mem_alloc(comm, TCOMMS_DEVICE_CPU, bytes, (void **)&out) != TCOMMS_SUCCESS) {
        fails += mrank_failf("FAIL rank %d, %s: mem_alloc: %s", rank, backend, tcomms_last_error());
        goto done;
    }
    if ((uintptr_t)in % 4096 || (uintptr_t)out % 4096)
        fails += mrank_failf("FAIL rank %d, %s: buffers %p %p not page-aligned", rank, backend, (void *)in,
                             (void *)out);
    if (tcomms_mem_register(comm, TCOMMS_DEVICE_CPU, in, bytes, 0, &rin) != TCOMMS_SUCCESS ||
        tcomms_mem_register(comm, TCOMMS_DEVICE_CPU, out, bytes, 0, &rout) != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d, %s: mem_register: %s", rank, backend, tcomms_last_error());
    for (size_t i = 0; i < NELEM; i++)
        in[i] = (int32_t)((size_t)(rank + 1) * (i % 1000));
    st = tcomms_all_reduce(comm, in, out, NELEM, TCOMMS_INT32, TCOMMS_SUM, NULL, NULL);
    if (st != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL rank %d, %s: all_reduce: %s", rank, backend, tcomms_last_error());
    int64_t factor = (int64_t)size * (size + 1) / 2; /* sum of rank + 1 */
    for (size_t i = 0; st == TCOMMS_SUCCESS && i < NELEM; i++)
        if (out[i] != (int32_t)(factor * (int64_t)(i % 1000))) {
            fails += mrank_failf("FAIL rank %d, %s: out[%zu] = %d, expected %lld", rank, backend, i, out[i],
                                 (long long)(factor * (int64_t)(i % 1000)));
            break;
        }
done:
    tcomms_mem_deregister(rin);
    tcomms_mem_deregister(rout);
    tcomms_mem_free(comm, TCOMMS_DEVICE_CPU, in);
    tcomms_mem_free(comm, TCOMMS_DEVICE_CPU, out);
    tcomms_comm_destroy(comm);
    return fails;
}

START_TEST(test_cpu_backend_memory)
{
    setenv("TCOMMS_BACKEND_PATH", real_backend_path, 1);
    int failing = mrank_run(2, mem_rank, (void *)mrank_backend(_i), JOB_S);
    ck_assert_msg(failing == 0, "%s: %d rank(s) failed (see stderr)", mrank_backend(_i), failing);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "fake", 30);
    tcase_add_test(tc, test_bad_arguments);
    tcase_add_test(tc, test_cpu_fallbacks);
    tcase_add_test(tc, test_device_fallbacks);
    tcase_add_test(tc, test_module_entries);
    tcase_add_test(tc, test_outlives_destroy);
    if (nbackends > 0)
        tcase_add_loop_test(mrank_tcase(s, "cpu backends", JOB_S + 30), test_cpu_backend_memory, 0, nbackends);
    else
        printf("test_mem: TCOMMS_TEST_BACKENDS is empty: real CPU backends not tested\n");
}

int main(void)
{
    const char *path = getenv("TCOMMS_BACKEND_PATH");
    snprintf(real_backend_path, sizeof(real_backend_path), "%s", path ? path : "");
    return mrank_main("mem", MRANK_ANY, add_tests);
}
