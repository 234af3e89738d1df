/* SPDX-License-Identifier: BSD-3-Clause */
/* The FSDP runtime's CUDA path (lib/fsdp/cuda.c), one forked rank per GPU on communicators holding NCCL alone, 2
 * ranks and 4 when 4 GPUs are visible: every strategy (HSDP and hybrid sharding on 4) in bfloat16 and float32 compute
 * with float32 main params, 2 microbatches, prefetch 1. Weights, reduced gradients, read_param (into host and device
 * memory) and installed weights are compared with values computed here in double; then a step runs while a host
 * function holds the stream, and must return without waiting for it. Without 2 GPUs it exits 77 (skip). */
#include <check.h>
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/fsdp.h>

#include "../fsdp_values.h"
#include "../mrank.h"
#include "gpu_util.h"

#define JOB_TIMEOUT_S 240
#define OP_TIMEOUT_MS 30000u
#define SCALE 0.5
#define MB 2
#define GATE_LIMIT_S 10.0 /* the longest a held stream waits for its release */

static int sizes[2], nsizes;

/* Three units with odd shapes (padding), and a float32 parameter beside the compute-dtype ones (two buckets). */
typedef struct pdef {
    const char *name;
    int64_t shape[2];
    int unit, compute; /* compute: 1 = the case's compute dtype, 0 = float32 */
} pdef_t;

static const pdef_t model[] = {
    {"u0.w", {13, 17}, 0, 1}, {"u0.b", {5, 1}, 0, 1}, {"u1.w", {3, 7}, 1, 1},
    {"u1.norm", {13, 1}, 1, 0}, {"u2.w", {13, 17}, 2, 1},
};
#define NPARAMS ((int)(sizeof(model) / sizeof(model[0])))
#define NUNITS 3
#define MAXN (13 * 17)

static size_t numel(int p)
{
    return (size_t)(model[p].shape[0] * model[p].shape[1]);
}

typedef struct scen {
    const char *label;
    tcomms_fsdp_strategy_t strategy;
    tcomms_fsdp_outer_t outer;
    int min_ranks;
    int casts; /* config.optimizer_casts: the test writes the weights of its pieces */
    tcomms_dtype_t rd; /* config.reduce_dtype (0: float32); the gradients are small integers, exact in bfloat16 */
} scen_t;

static const scen_t scens[] = {
    {"zero0", TCOMMS_FSDP_NO_SHARD, TCOMMS_FSDP_OUTER_NONE, 2, 0, 0},
    {"zero1", TCOMMS_FSDP_OPTIM, TCOMMS_FSDP_OUTER_NONE, 2, 0, 0},
    {"zero2", TCOMMS_FSDP_OPTIM_GRADS, TCOMMS_FSDP_OUTER_NONE, 2, 0, 0},
    {"zero3", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_NONE, 2, 0, 0},
    {"hsdp-zero3", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_REPLICATE, 4, 0, 0},
    {"hybrid-zero2", TCOMMS_FSDP_OPTIM_GRADS, TCOMMS_FSDP_OUTER_OPTIM, 4, 0, 0},
    {"zero1-casts", TCOMMS_FSDP_OPTIM, TCOMMS_FSDP_OUTER_NONE, 2, 1, 0},
    {"zero3-casts", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_NONE, 2, 1, 0},
    {"zero2-reduce-bf16", TCOMMS_FSDP_OPTIM_GRADS, TCOMMS_FSDP_OUTER_NONE, 2, 0, TCOMMS_BFLOAT16},
    {"zero3-reduce-bf16", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_NONE, 2, 1, TCOMMS_BFLOAT16},
};
#define NSCENS ((int)(sizeof(scens) / sizeof(scens[0])))

/* One rank's case: its communicators, stream and runtime. */
typedef struct ctx {
    const scen_t *s;
    tcomms_dtype_t cd;
    int rank, size;
    char what[96];
    tcomms_comm_t *world;
    tcomms_fsdp_layout_t *layout;
    tcomms_fsdp_groups_t groups;
    cudaStream_t stream;
    tcomms_fsdp_t *f;
    uint32_t timeout_ms; /* the communicators' and the runtime's; 0: OP_TIMEOUT_MS */
    int big;             /* register BIG_UNITS units of one BIG_N float parameter each instead of model[] */
} ctx_t;

/* Big enough for NCCL's copy-engine all-gathers on 2 ranks: 8 MiB a rank's block, as test_nccl's copy_engine. */
#define BIG_UNITS 2
#define BIG_N 2048

#define CALL(x)                                                                                                       \
    do {                                                                                                              \
        tcomms_status_t st_ = (x);                                                                                    \
        if (st_ != TCOMMS_SUCCESS)                                                                                    \
            return mrank_failf("FAIL %s rank %d: %s returned %d: %s", c->what, c->rank, #x, st_,                    \
                               tcomms_last_error());                                                                  \
    } while (0)
#define CUDA(x)                                                                                                       \
    do {                                                                                                              \
        if (CU(x))                                                                                                    \
            return mrank_failf("FAIL %s rank %d: CUDA call failed (above)", c->what, c->rank);                       \
    } while (0)

static tcomms_dtype_t dtype_of(const ctx_t *c, int p)
{
    return model[p].compute ? c->cd : TCOMMS_FLOAT32;
}

/* Device memory read into `host` on the runtime's stream (it is non-blocking: cudaMemcpy would not wait for it). */
static int fetch(ctx_t *c, void *host, const void *dev, size_t bytes)
{
    CUDA(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, c->stream));
    CUDA(cudaStreamSynchronize(c->stream));
    return 0;
}

static int put(ctx_t *c, void *dev, const void *host, size_t bytes)
{
    CUDA(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, c->stream));
    CUDA(cudaStreamSynchronize(c->stream));
    return 0;
}

static int open_case(ctx_t *c)
{
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_TIMEOUT | TCOMMS_COMM_PARAM_DEVICE;
    p.backend = "nccl";
    p.timeout_ms = c->timeout_ms ? c->timeout_ms : OP_TIMEOUT_MS;
    p.device.type = TCOMMS_DEVICE_CUDA;
    p.device.index = c->rank;
    tcomms_fsdp_layout_params_t lp = {0};
    lp.dp = c->size;
    lp.outer_dp = c->s->outer != TCOMMS_FSDP_OUTER_NONE ? 2 : 1;
    CUDA(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CALL(tcomms_comm_create(&p, &c->world));
    CALL(tcomms_fsdp_layout_create(&lp, &c->layout));
    CALL(tcomms_fsdp_groups_create(c->world, c->layout, &c->groups));
    tcomms_fsdp_config_t cfg = {0};
    cfg.strategy = c->s->strategy;
    cfg.outer = c->s->outer;
    cfg.main_dtype = TCOMMS_FLOAT32;
    cfg.prefetch_forward = cfg.prefetch_backward = 1;
    cfg.optimizer_casts = c->s->casts;
    cfg.reduce_dtype = c->s->rd;
    cfg.grad_scale = SCALE;
    cfg.timeout_ms = p.timeout_ms;
    cfg.stream = c->stream;
    CALL(tcomms_fsdp_create(&c->groups, &cfg, &c->f));
    for (int i = 0; i < (c->big ? BIG_UNITS : NPARAMS); i++) {
        static const int64_t big_shape[2] = {BIG_N, BIG_N};
        char name[16];
        snprintf(name, sizeof(name), "big%d.w", i);
        CALL(c->big ? tcomms_fsdp_register_param(c->f, name, big_shape, 2, TCOMMS_FLOAT32, i, 0, NULL)
                    : tcomms_fsdp_register_param(c->f, model[i].name, model[i].shape, 2, dtype_of(c, i),
                                                 model[i].unit, 0, NULL));
    }
    CALL(tcomms_fsdp_finalize(c->f, c->layout));
    return 0;
}

static void close_case(ctx_t *c)
{
    tcomms_fsdp_destroy(c->f);
    tcomms_fsdp_groups_destroy(&c->groups);
    tcomms_fsdp_layout_free(c->layout);
    tcomms_comm_destroy(c->world);
    if (c->stream)
        CU(cudaStreamDestroy(c->stream));
}

/* Within pre_forward of every unit, param_data (a device pointer) holds value() in the parameter's dtype. */
static int check_weights(ctx_t *c, double (*value)(int, size_t), const char *when)
{
    static unsigned char host[MAXN * 4];
    int fails = 0;
    for (int u = 0; u < NUNITS; u++) {
        CALL(tcomms_fsdp_pre_forward(c->f, u));
        for (int p = 0; p < NPARAMS; p++) {
            void *d = NULL;
            if (model[p].unit != u)
                continue;
            CALL(tcomms_fsdp_param_data(c->f, p, &d));
            if (fetch(c, host, d, numel(p) * tcomms_dtype_size(dtype_of(c, p))))
                return 1;
            for (size_t i = 0; i < numel(p) && fails < 5; i++) {
                double got = get(host, dtype_of(c, p), i), want = as_dtype(value(p, i), dtype_of(c, p));
                if (got != want)
                    fails += mrank_failf("FAIL %s rank %d: %s weights %s[%zu] = %g, expected %g", c->what, c->rank,
                                         when, model[p].name, i, got, want);
            }
        }
        CALL(tcomms_fsdp_post_forward(c->f, u));
    }
    return fails;
}

/* Add this rank's gradients of microbatch m into grad_data (config.reduce_dtype): the device buffer is read,
 * added to on the host (as a GEMM with beta = 1 would in float32) and written back, all ordered on the stream. */
static int add_grads(ctx_t *c, int u, int m)
{
    float host[MAXN];
    tcomms_dtype_t gd = c->s->rd ? c->s->rd : TCOMMS_FLOAT32;
    size_t es = tcomms_dtype_size(gd);
    for (int p = 0; p < NPARAMS; p++) {
        void *g = NULL;
        if (model[p].unit != u)
            continue;
        CALL(tcomms_fsdp_grad_data(c->f, p, &g));
        if (fetch(c, host, g, numel(p) * es))
            return 1;
        for (size_t i = 0; i < numel(p); i++)
            put_as(host, gd, i, get(host, gd, i) + grad_value(c->rank, m, p, i));
        if (put(c, g, host, numel(p) * es))
            return 1;
    }
    return 0;
}

/* One optimizer step's gradient part: MB microbatches, forward and backward over every unit, adding gradients
 * when `add` (the no-block case adds none: reading grad_data back would wait for the stream). */
static int run_step(ctx_t *c, int add)
{
    CALL(tcomms_fsdp_zero_grad(c->f));
    for (int m = 0; m < MB; m++) {
        for (int u = 0; u < NUNITS; u++) {
            CALL(tcomms_fsdp_pre_forward(c->f, u));
            CALL(tcomms_fsdp_post_forward(c->f, u));
        }
        CALL(tcomms_fsdp_root_pre_backward(c->f, m == MB - 1));
        for (int u = NUNITS - 1; u >= 0; u--) {
            CALL(tcomms_fsdp_pre_backward(c->f, u));
            if (add && add_grads(c, u, m))
                return 1;
            CALL(tcomms_fsdp_post_backward(c->f, u));
        }
        CALL(tcomms_fsdp_root_post_backward(c->f));
    }
    CALL(tcomms_fsdp_finish_grad_sync(c->f));
    return 0;
}

/* The reduced gradient shards against the sum over ranks and microbatches, scaled; then an "optimizer" writes
 * new_value into this rank's main pieces (host-to-device copies on the stream). */
static int check_grads_and_update(ctx_t *c)
{
    float host[MAXN];
    int fails = 0;
    for (int p = 0; p < NPARAMS; p++) {
        int si;
        size_t so, po, cnt;
        tcomms_fsdp_shard_t sh;
        CALL(tcomms_fsdp_param_range(c->f, p, &si, &so, &po, &cnt));
        if (cnt == 0)
            continue;
        CALL(tcomms_fsdp_shard(c->f, si, &sh));
        if (fetch(c, host, (const float *)sh.grad + so, cnt * sizeof(float)))
            return 1;
        for (size_t j = 0; j < cnt && fails < 5; j++) {
            double want = 0;
            for (int r = 0; r < c->size; r++)
                for (int m = 0; m < MB; m++)
                    want += grad_value(r, m, p, po + j);
            want *= SCALE;
            if (host[j] != want)
                fails += mrank_failf("FAIL %s rank %d: gradient %s[%zu] = %g, expected %g", c->what, c->rank,
                                     model[p].name, po + j, (double)host[j], want);
        }
        for (size_t j = 0; j < cnt; j++)
            host[j] = (float)new_value(p, po + j);
        if (put(c, (float *)sh.main + so, host, cnt * sizeof(float)))
            return 1;
        if (!c->s->casts)
            continue;
        double wbuf[MAXN]; /* room for the widest dtype */
        size_t es = tcomms_dtype_size(sh.weights_dtype);
        for (size_t j = 0; j < cnt; j++)
            put_as(wbuf, sh.weights_dtype, j, new_value(p, po + j));
        if (put(c, (char *)sh.weights + so * es, wbuf, cnt * es))
            return 1;
    }
    return fails;
}

/* read_param into host memory, and into device memory (copied back here). */
static int check_read(ctx_t *c, double (*value)(int, size_t))
{
    float host[MAXN], *dev = NULL;
    int fails = 0;
    CUDA(cudaMalloc((void **)&dev, MAXN * sizeof(float)));
    for (int p = 0; p < NPARAMS && !fails; p++) {
        for (int on_dev = 0; on_dev < 2 && !fails; on_dev++) {
            memset(host, 0xff, sizeof(host));
            tcomms_status_t st = tcomms_fsdp_read_param(c->f, p, on_dev ? (void *)dev : (void *)host);
            if (st != TCOMMS_SUCCESS) {
                fails += mrank_failf("FAIL %s rank %d: read_param(%s, %s memory): %s", c->what, c->rank,
                                     model[p].name, on_dev ? "device" : "host", tcomms_last_error());
                break;
            }
            if (on_dev && CU(cudaMemcpy(host, dev, numel(p) * sizeof(float), cudaMemcpyDeviceToHost)))
                fails++;
            for (size_t i = 0; i < numel(p) && fails < 5; i++)
                if ((double)host[i] != (double)(float)value(p, i))
                    fails += mrank_failf("FAIL %s rank %d: read_param (%s) %s[%zu] = %g, expected %g", c->what,
                                         c->rank, on_dev ? "device" : "host", model[p].name, i, (double)host[i],
                                         value(p, i));
        }
    }
    CU(cudaFree(dev));
    return fails;
}

static int load_all(ctx_t *c)
{
    float host[MAXN];
    for (int p = 0; p < NPARAMS; p++) {
        for (size_t i = 0; i < numel(p); i++)
            host[i] = (float)init_value(p, i);
        CALL(tcomms_fsdp_load_param(c->f, p, host));
    }
    return 0;
}

static int rank_values(int rank, int size, const scen_t *s, tcomms_dtype_t cd)
{
    ctx_t ctx = {.s = s, .cd = cd, .rank = rank, .size = size}, *c = &ctx;
    snprintf(c->what, sizeof(c->what), "%s %s on %d ranks", s->label, tcomms_dtype_name(cd), size);
    int fails = open_case(c);
    fails = fails ? fails : load_all(c);
    fails = fails ? fails : check_weights(c, init_value, "loaded");
    fails = fails ? fails : check_read(c, init_value);
    fails = fails ? fails : run_step(c, 1);
    fails = fails ? fails : check_grads_and_update(c);
    if (!fails) {
        tcomms_status_t st = tcomms_fsdp_install_weights(c->f);
        if (st != TCOMMS_SUCCESS)
            fails = mrank_failf("FAIL %s rank %d: install_weights: %s", c->what, rank, tcomms_last_error());
    }
    fails = fails ? fails : check_weights(c, new_value, "installed");
    fails = fails ? fails : check_read(c, new_value);
    if (!fails && tcomms_fsdp_check_issued(c->f) != TCOMMS_SUCCESS)
        fails = mrank_failf("FAIL %s rank %d: check_issued: %s", c->what, rank, tcomms_last_error());
    close_case(c);
    return fails;
}

/* ---- no host block: the stream is held by a host function until the test releases it ------------------------ */

/* gate[0]: set by the test to release the stream; gate[1]: set here when the limit passed first, which is what a
 * host wait on the stream inside the step leads to (it cannot return before the gate opens). */
static void CUDART_CB hold(void *arg)
{
    int *gate = arg;
    double end = mrank_now() + GATE_LIMIT_S;
    while (!__atomic_load_n(&gate[0], __ATOMIC_SEQ_CST)) {
        if (mrank_now() > end) {
            __atomic_store_n(&gate[1], 1, __ATOMIC_SEQ_CST);
            return;
        }
        mrank_sleep_ms(1);
    }
}

static int rank_no_block(int rank, int size, const scen_t *s, tcomms_dtype_t cd)
{
    ctx_t ctx = {.s = s, .cd = cd, .rank = rank, .size = size}, *c = &ctx;
    snprintf(c->what, sizeof(c->what), "no-block %s on %d ranks", s->label, size);
    static int gate[2];
    gate[0] = gate[1] = 0;
    int fails = open_case(c);
    fails = fails ? fails : load_all(c);
    if (!fails && CU(cudaLaunchHostFunc(c->stream, hold, gate)))
        fails = 1;
    double t0 = mrank_now();
    fails = fails ? fails : run_step(c, 0);
    if (!fails) {
        tcomms_status_t st = tcomms_fsdp_install_weights(c->f);
        if (st != TCOMMS_SUCCESS)
            fails = mrank_failf("FAIL %s rank %d: install_weights: %s", c->what, rank, tcomms_last_error());
    }
    /* Still held: every entry point of the step returned without waiting for the stream. */
    cudaError_t q = cudaStreamQuery(c->stream);
    double took = mrank_now() - t0;
    __atomic_store_n(&gate[0], 1, __ATOMIC_SEQ_CST);
    if (CU(cudaStreamSynchronize(c->stream)))
        fails++;
    if (!fails && (q != cudaErrorNotReady || __atomic_load_n(&gate[1], __ATOMIC_SEQ_CST)))
        fails = mrank_failf("FAIL %s rank %d: the step took %.2f s and the gate on the stream %s: an entry point "
                            "blocked the host on device work", c->what, rank, took,
                            gate[1] ? "ran out before the step returned" : "was already passed");
    fails = fails ? fails : check_read(c, init_value);
    close_case(c);
    return fails;
}

/* A peer lost mid-training, with the all-gathers on the copy engines (ZeRO-3 unit buffers in windows, which NCCL
 * 2.28 cannot abort: docs/nccl.md, "Watchdog and abort"). After one forward that every rank joins, rank size-1
 * dies. Each survivor goes on with forwards, never waiting on its stream: within 10 s a call must return an error
 * (the watchdog fails the all-gather communicator 2 s past the lost gather's post, and posts then fail), and
 * tcomms_fsdp_destroy must return within 10 s. */
static int rank_peer_loss(int rank, int size)
{
    ctx_t ctx = {.s = &scens[3], .cd = TCOMMS_FLOAT32, .rank = rank, .size = size, .timeout_ms = 2000, .big = 1};
    ctx_t *c = &ctx;
    snprintf(c->what, sizeof(c->what), "peer loss (zero3, copy engines) on %d ranks", size);
    int fails = open_case(c);
    for (int u = 0; !fails && u < BIG_UNITS; u++) {
        CALL(tcomms_fsdp_pre_forward(c->f, u));
        CALL(tcomms_fsdp_post_forward(c->f, u));
    }
    if (fails || CU(cudaStreamSynchronize(c->stream)))
        return mrank_failf("FAIL %s rank %d: the forward every rank joins", c->what, rank);
    if (rank == size - 1) /* mrank_run_ex expects this rank killed */
        raise(SIGKILL);
    double t0 = mrank_now(), took = 0;
    tcomms_status_t st = TCOMMS_SUCCESS;
    while (st == TCOMMS_SUCCESS && (took = mrank_now() - t0) < 10.0) {
        for (int u = 0; st == TCOMMS_SUCCESS && u < BIG_UNITS; u++)
            if ((st = tcomms_fsdp_pre_forward(c->f, u)) == TCOMMS_SUCCESS)
                st = tcomms_fsdp_post_forward(c->f, u);
        mrank_sleep_ms(20);
    }
    if (st == TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL %s rank %d: forwards still succeed %.1f s after the peer died", c->what, rank,
                             took);
    else
        mrank_logf("test_fsdp_cuda peer loss rank %d: %s after %.2f s: %s", rank, tcomms_strerror(st), took,
                   tcomms_last_error());
    /* The runtime's destroy must return: its wait for the stream gives up after the timeout, and the buffers stay.
     * Nothing more: with a copy-engine wait stuck on the device, any call that waits for the whole device (a free,
     * NCCL's destroy of another communicator) waits for good, and CUDA calls on other threads can queue behind it.
     * The process ends instead (mrank's ranks _exit). */
    double t1 = mrank_now();
    tcomms_fsdp_destroy(c->f);
    double destroyed = mrank_now() - t1;
    mrank_logf("test_fsdp_cuda peer loss rank %d: tcomms_fsdp_destroy took %.2f s", rank, destroyed);
    if (destroyed > 10.0)
        fails += mrank_failf("FAIL %s rank %d: tcomms_fsdp_destroy took %.2f s", c->what, rank, destroyed);
    return fails;
}

static int rank_peer_loss_main(int rank, int size, void *arg)
{
    (void)arg;
    return gpu_bind(rank) ? 1 : rank_peer_loss(rank, size);
}

/* ---- the Check side ------------------------------------------------------------------------------------------ */

typedef struct job {
    int scen, no_block;
    tcomms_dtype_t cd;
} job_t;

static int rank_main(int rank, int size, void *arg)
{
    const job_t *j = arg;
    if (gpu_bind(rank))
        return 1;
    return j->no_block ? rank_no_block(rank, size, &scens[j->scen], j->cd)
                       : rank_values(rank, size, &scens[j->scen], j->cd);
}

static void run(job_t j)
{
    for (int k = 0; k < nsizes; k++) {
        if (sizes[k] < scens[j.scen].min_ranks) {
            printf("test_fsdp_cuda: %s on %d ranks skipped (needs %d GPUs)\n", scens[j.scen].label, sizes[k],
                   scens[j.scen].min_ranks);
            continue;
        }
        char what[96];
        snprintf(what, sizeof(what), "%s%s %s", j.no_block ? "no-block " : "", scens[j.scen].label,
                 tcomms_dtype_name(j.cd));
        int failing = gpu_run_case("test_fsdp_cuda", what, sizes[k], rank_main, &j, JOB_TIMEOUT_S, 0);
        ck_assert_msg(failing == 0, "%s%s %s on %d ranks: %d rank(s) failed (see stderr)", j.no_block ? "no-block "
                      : "", scens[j.scen].label, tcomms_dtype_name(j.cd), sizes[k], failing);
    }
}

START_TEST(test_values_bf16)
{
    run((job_t){_i, 0, TCOMMS_BFLOAT16});
}
END_TEST

START_TEST(test_values_fp32)
{
    run((job_t){_i, 0, TCOMMS_FLOAT32});
}
END_TEST

START_TEST(test_peer_loss)
{
    int failing = gpu_run_case("test_fsdp_cuda", "peer loss", 2, rank_peer_loss_main, NULL, JOB_TIMEOUT_S, 1u << 1);
    ck_assert_msg(failing == 0, "peer loss on 2 ranks: %d rank(s) failed (see stderr)", failing);
}
END_TEST

START_TEST(test_no_block)
{
    run((job_t){_i, 1, TCOMMS_BFLOAT16});
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    (void)nbackends; /* CPU backends: these tests run on nccl */
    TCase *tc = mrank_tcase(s, "gpu", nsizes * (JOB_TIMEOUT_S + 30));
    tcase_add_loop_test(tc, test_values_bf16, 0, NSCENS);
    tcase_add_loop_test(tc, test_values_fp32, 0, NSCENS);
    tcase_add_loop_test(tc, test_no_block, 0, NSCENS);
    tcase_add_test(tc, test_peer_loss);
}

int main(void)
{
    char why[256] = "";
    gpu_count = gpu_probe(why, sizeof why);
    if (gpu_count < 2) {
        printf("test_fsdp_cuda: SKIP: needs 2 GPUs, found %d%s%s\n", gpu_count, gpu_count ? "" : ": ",
               gpu_count ? "" : why);
        return GPU_SKIP;
    }
    sizes[nsizes++] = 2;
    if (gpu_count >= 4)
        sizes[nsizes++] = 4;
    printf("test_fsdp_cuda: %d GPU(s), ranks %s\n", gpu_count, nsizes == 2 ? "2 and 4" : "2");
    return mrank_main("fsdp_cuda", MRANK_ANY, add_tests);
}
