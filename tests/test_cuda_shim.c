/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests lib/cuda/shim.c without a GPU: the runtime half against the stand-in runtime (tools/perf/test_cudart.c), each
 * entry point compared with what dlsym finds in it on its own, and the messages for a library that does not load or
 * lacks an entry point; the driver half (built where configure found CUDA) as far as a machine without one allows. */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/shim.h"
#include "check_run.h"

static void assert_has(const char *s, const char *needle)
{
    ck_assert_msg(strstr(s, needle) != NULL, "'%s' lacks '%s'", s, needle);
}

/* One test, in this order: a table once loaded is kept, so the failures come first. */
START_TEST(test_runtime)
{
    char why[512], buf[256];
    ck_assert_str_eq(tc_cudart_describe(buf, sizeof buf, "cudaMalloc", (cudaError_t)2),
                     "cudaMalloc failed: CUDA error 2");

    ck_assert_ptr_null(tc_cudart_load("/nonexistent/libcudart.so.13", why, sizeof why));
    assert_has(why, "cannot load the CUDA runtime (tried /nonexistent/libcudart.so.13: ");
    assert_has(why, "No such file");

    /* A library that loads but is no CUDA runtime: named with the first entry point it lacks, and left unused. */
    ck_assert_ptr_null(tc_cudart_load("libm.so.6", why, sizeof why));
    ck_assert_str_eq(why, "the CUDA runtime libm.so.6 lacks cudaGetErrorString (older than this build of tcomms "
                          "needs?)");
    ck_assert_str_eq(tc_cudart_describe(buf, sizeof buf, "cudaFree", (cudaError_t)1), "cudaFree failed: CUDA error 1");

    const char *libs = getenv("TCOMMS_PERF_TEST_LIBS");
    ck_assert_msg(libs != NULL, "TCOMMS_PERF_TEST_LIBS is not set (make check sets it)");
    char path[1024];
    snprintf(path, sizeof path, "%s/perf_cudart.so", libs);
    const tc_cudart_t *rt = tc_cudart_load(path, why, sizeof why);
    ck_assert_msg(rt != NULL, "%s", why);

    /* Every entry point is the stand-in's own symbol of that name. */
    void *ref = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(ref);
#define SAME_SYMBOL(name, ret, params)                                                                                \
    {                                                                                                                 \
        void *f;                                                                                                      \
        memcpy(&f, &rt->name, sizeof f);                                                                              \
        ck_assert_msg(f != NULL && f == dlsym(ref, #name), #name " is not the stand-in's");                           \
    }
    TC_CUDART_CALLS(SAME_SYMBOL)
#undef SAME_SYMBOL

    /* Calls go through, and a failure reads as every CUDA failure does. */
    void *p = NULL;
    ck_assert_int_eq(rt->cudaMalloc(&p, 64), cudaSuccess);
    ck_assert_int_eq(rt->cudaFree(p), cudaSuccess);
    cudaError_t e = rt->cudaSetDevice(3);
    ck_assert_int_eq(e, 101);
    ck_assert_str_eq(tc_cudart_describe(buf, sizeof buf, "cudaSetDevice", e),
                     "cudaSetDevice failed: invalid device ordinal (perf_cudart) (cudaErrorInvalidDevice)");

    /* Kept: a later call, whatever it names, gets the same table. */
    ck_assert_ptr_eq(tc_cudart_load("/nonexistent/libcudart.so.13", why, sizeof why), rt);
    ck_assert_ptr_eq(tc_cudart_load(NULL, why, sizeof why), rt);
    dlclose(ref);
}
END_TEST

#ifdef TC_CUDA_HEADERS
/* With a driver (a GPU machine) every entry point is filled; without one the message says what was tried. */
START_TEST(test_driver)
{
    char why[512] = "", buf[256];
    ck_assert_str_eq(tc_cuda_driver_describe(buf, sizeof buf, "cuInit", CUDA_ERROR_NO_DEVICE),
                     "cuInit failed: CUDA error 100");
    const tc_cuda_driver_t *drv = tc_cuda_driver_load(why, sizeof why);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        ck_assert_ptr_null(drv);
        assert_has(why, "cannot load the CUDA driver (tried libcuda.so.1: ");
        return;
    }
    if (drv == NULL) { /* a driver but no usable GPU */
        assert_has(why, "cuInit failed: ");
        assert_has(why, "(CUDA_ERROR_");
    } else {
        /* Each entry point is the driver's symbol that cuda.h names it by, as a program linked against libcuda gets:
         * cuMemAlloc is cuMemAlloc_v2. */
        void *f;
#define NAME(name) NAME_(name)
#define NAME_(name) #name
#define SAME_SYMBOL(name)                                                                                             \
    memcpy(&f, &drv->name, sizeof f);                                                                                 \
    ck_assert_msg(f != NULL && f == dlsym(h, NAME(name)), NAME(name) " is not the driver's");
        TC_CUDA_DRIVER_CALLS(SAME_SYMBOL)
#undef SAME_SYMBOL
        memcpy(&f, &drv->cuMemAlloc, sizeof f);
        ck_assert_ptr_eq(f, dlsym(h, "cuMemAlloc_v2"));
        ck_assert_str_eq(tc_cuda_driver_describe(buf, sizeof buf, "cuMemAlloc", CUDA_ERROR_OUT_OF_MEMORY),
                         "cuMemAlloc failed: out of memory (CUDA_ERROR_OUT_OF_MEMORY)");
    }
    dlclose(h);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("cuda_shim");
    TCase *tc = tcase_create("cuda_shim");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_runtime);
#ifdef TC_CUDA_HEADERS
    tcase_add_test(tc, test_driver);
#endif
    suite_add_tcase(s, tc);
    return check_run(s);
}
