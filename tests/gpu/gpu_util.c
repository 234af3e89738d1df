/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared helpers of the GPU tests (see gpu_util.h). The probe runs cudaGetDeviceCount in a child process because
 * the ranks are forked later and must each start CUDA afresh. */
#include "gpu_util.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../mrank.h"

#define PROBE_TIMEOUT_S 60.0

int gpu_count;

typedef struct probe_result {
    int done;
    int count;
    char why[256];
} probe_result_t;

static void probe_child(probe_result_t *res)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess)
        snprintf(res->why, sizeof res->why, "cudaGetDeviceCount failed: %s (%s)", cudaGetErrorString(e),
                 cudaGetErrorName(e));
    else if (n == 0)
        snprintf(res->why, sizeof res->why, "cudaGetDeviceCount found no CUDA device");
    res->count = e == cudaSuccess ? n : 0;
    __atomic_store_n(&res->done, 1, __ATOMIC_SEQ_CST);
    _exit(0);
}

int gpu_probe(char *why, size_t len)
{
    probe_result_t *res = mrank_shared_alloc(sizeof *res);
    if (!res) {
        snprintf(why, len, "GPU probe: no shared memory");
        return 0;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        probe_child(res);
    int count = 0;
    if (pid < 0) {
        snprintf(why, len, "GPU probe: fork failed");
    } else {
        double deadline = mrank_now() + PROBE_TIMEOUT_S;
        int status = 0;
        while (waitpid(pid, &status, WNOHANG) == 0) {
            if (mrank_now() > deadline) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                break;
            }
            mrank_sleep_ms(10);
        }
        if (!__atomic_load_n(&res->done, __ATOMIC_SEQ_CST))
            snprintf(why, len, "GPU probe: the child calling cudaGetDeviceCount did not finish (status %d)", status);
        else if ((count = res->count) == 0)
            snprintf(why, len, "%s", res->why);
    }
    mrank_shared_free(res, sizeof *res);
    return count;
}

int gpu_check(int code, const char *call, const char *file, int line)
{
    if (code == 0)
        return 0;
    cudaError_t e = (cudaError_t)code;
    mrank_logf("FAIL %s:%d: %s returned %d (%s: %s)", file, line, call, code, cudaGetErrorName(e),
               cudaGetErrorString(e));
    return 1;
}

int gpu_bind(int device)
{
    return CU(cudaSetDevice(device));
}

int gpu_nccl_version(void)
{
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -1;
    int version = -1;
    int (*get)(int *) = NULL;
    *(void **)&get = dlsym(h, "ncclGetVersion");
    if (!get || get(&version) != 0)
        version = -1;
    dlclose(h);
    return version;
}

int gpu_alloc_f32(float **dev, size_t n)
{
    *dev = NULL;
    return CU(cudaMalloc((void **)dev, (n ? n : 1) * sizeof(float)));
}

int gpu_fill_f32(float *dev, size_t n, gpu_value_fn fn, const void *arg)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (!h)
        return mrank_failf("FAIL gpu_fill_f32: out of memory");
    for (size_t i = 0; i < n; i++)
        h[i] = (float)fn(i, arg);
    /* A pageable copy may return before its DMA ends: wait for it, so any stream may use the data next. */
    int bad = CU(cudaMemcpy(dev, h, n * sizeof *h, cudaMemcpyHostToDevice)) || CU(cudaStreamSynchronize(0));
    free(h);
    return bad;
}

int gpu_expect_f32(const float *dev, size_t n, gpu_value_fn fn, const void *arg, const char *what)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (!h)
        return mrank_failf("FAIL gpu_expect_f32: out of memory");
    int bad = CU(cudaMemcpy(h, dev, n * sizeof *h, cudaMemcpyDeviceToHost));
    int shown = 0;
    for (size_t i = 0; !bad && i < n; i++) {
        double want = fn(i, arg);
        if ((double)h[i] == want)
            continue;
        if (shown++ < 3)
            mrank_logf("FAIL %s: element %zu = %g, expected %g", what, i, (double)h[i], want);
    }
    free(h);
    return bad || shown > 0;
}

int gpu_run_case(const char *prog, const char *what, int nranks, mrank_fn_t fn, void *arg, int timeout_s,
                 unsigned expect_killed)
{
    printf("%s: case %s on %d ranks: started\n", prog, what, nranks);
    fflush(stdout);
    double t0 = mrank_now();
    int failing = mrank_run_ex(nranks, fn, arg, timeout_s, expect_killed);
    printf("%s: case %s on %d ranks: %s in %.1f s\n", prog, what, nranks, failing ? "FAILED" : "passed",
           mrank_now() - t0);
    fflush(stdout);
    return failing;
}
