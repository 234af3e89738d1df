/* SPDX-License-Identifier: BSD-3-Clause */
/* One-shot collectives for small messages (small.cu) between the GPUs of one host: all_reduce, all_gather,
 * reduce_scatter and all_to_all of at most TCOMMS_NCCL_SMALL_BYTES per rank's block, one kernel launch each
 * instead of NCCL's launch path, whose host time dominates these sizes. At creation every rank exports a staging
 * area (CUDA IPC) and maps its peers' through two store exchanges; the path is on only where every rank mapped
 * every peer, so all ranks agree. Calls outside a CUDA graph capture and outside a tcomms group take it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "small_args.h"
#include "tcn.h"

_Static_assert(TCN_SMALL_F64 == (int)TCOMMS_FLOAT64 && TCN_SMALL_I8 == (int)TCOMMS_INT8 &&
                   TCN_SMALL_BF16 == (int)TCOMMS_BFLOAT16, "small_args.h follows tcomms_dtype_t");
_Static_assert(TCN_SMALL_AVG == (int)TCOMMS_AVG && TCN_SMALL_MIN == (int)TCOMMS_MIN, "small_args.h follows "
               "tcomms_op_t");

/* A thread per element where the limit allows: the reduction reads peers' data that has just arrived over
 * NVLink, so a thread looping over several elements waits for each in turn (4 ranks, 1024 floats in one block of
 * 256 threads: 1.4 us more than 512). */
#define BLOCK_THREADS 256

#if TCN_HAVE_SMALL && CUDART_VERSION < 12000 /* cudaLibraryLoadData came with CUDA 12: off before */
#undef TCN_HAVE_SMALL
#define TCN_HAVE_SMALL 0
#endif

#if TCN_HAVE_SMALL
extern const unsigned char tcn_small_fatbin[];

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static cudaKernel_t kernel;
static cudaError_t load_error = cudaSuccess;

static void load(void)
{
    cudaLibrary_t lib;
    load_error = cudaLibraryLoadData(&lib, tcn_small_fatbin, NULL, NULL, 0, NULL, NULL, 0);
    if (load_error == cudaSuccess)
        load_error = cudaLibraryGetKernel(&kernel, lib, "tc_nccl_small");
}
#endif

/* What each rank publishes in the first exchange. */
typedef struct card {
    char host[128];              /* hostname and boot id: one host */
    cudaIpcMemHandle_t handle;   /* its staging area */
    long bytes;                  /* its TCOMMS_NCCL_SMALL_BYTES */
    int ok;                      /* it has a staging area to offer */
} card_t;

static size_t stage_bytes(const tcn_comm_t *c, size_t slot)
{
    return 2 * (size_t)c->size * slot;
}

static size_t area_bytes(const tcn_comm_t *c, size_t slot)
{
    return stage_bytes(c, slot) + (size_t)c->size * TCN_SMALL_MAX_BLOCKS * sizeof(uint64_t);
}

static void host_id(char *buf, size_t len)
{
    char host[64] = "", boot[40] = "";
    gethostname(host, sizeof(host) - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (fgets(boot, sizeof(boot), f) == NULL)
            boot[0] = '\0';
        fclose(f);
    }
    snprintf(buf, len, "%s/%s", host, boot);
}

/* Every rank's `len` bytes into vals (NULL on entry; free_vals after, failed or not). */
static tcomms_status_t exchange(tcn_comm_t *c, const tcomms_backend_comm_args_t *args, const char *what,
                                const void *mine, size_t len, void **vals)
{
    char prefix[512];
    size_t lens[TCN_SMALL_MAX_RANKS];
    int missing = -1;
    snprintf(prefix, sizeof(prefix), "%s/small-%s", args->prefix, what);
    tcomms_status_t st = tcn_core->store_allgather(args->store, prefix, c->rank, c->size, mine, len,
                                                   args->timeout_ms, vals, lens, &missing);
    for (int r = 0; st == TCOMMS_SUCCESS && r < c->size; r++)
        if (lens[r] != len)
            st = tcn_core->error(TCOMMS_ERR_PROTOCOL, "nccl '%s': rank %d published %zu bytes for the small-message "
                                 "path, expected %zu", c->name, r, lens[r], len);
    return st;
}

static void free_vals(void **vals, int n)
{
    for (int r = 0; r < n; r++) {
        free(vals[r]);
        vals[r] = NULL;
    }
}

/* Map every peer's staging area; 0 if one failed (tcn_small_free unmaps the ones mapped before it). */
static int map_peers(tcn_comm_t *c, card_t *const *cards)
{
    tcn_small_t *s = &c->small;
    for (int r = 0; r < c->size; r++) {
        if (r == c->rank)
            continue;
        cudaError_t e = cudaIpcOpenMemHandle(&s->peer[r], cards[r]->handle, cudaIpcMemLazyEnablePeerAccess);
        if (e != cudaSuccess) {
            cudaGetLastError();
            s->peer[r] = NULL;
            tcn_core->log(TCOMMS_LOG_DEBUG, "nccl", "'%s' rank %d: small-message path off: cudaIpcOpenMemHandle of "
                          "rank %d's area: %s", c->name, c->rank, r, cudaGetErrorString(e));
            return 0;
        }
    }
    return 1;
}

static void unmap_peers(tcn_comm_t *c)
{
    for (int r = 0; r < c->size && r < TCN_SMALL_MAX_RANKS; r++) {
        if (r != c->rank && c->small.peer[r])
            cudaIpcCloseMemHandle(c->small.peer[r]);
        c->small.peer[r] = NULL;
    }
}

#if TCN_HAVE_SMALL
/* This rank's staging area (zeroed: flags at epoch 0) and abort flag; 0 on failure. The kernel is loaded into the
 * device's context here: under CUDA's lazy loading (the default since CUDA 12.2) its first launch would load it
 * then, and loading may wait for the device to go idle, so a first call queued behind the caller's unfinished work
 * blocked the host until that work ran (test_nccl stream_semantics). */
static int offer(tcn_comm_t *c, size_t slot, cudaIpcMemHandle_t *handle)
{
    tcn_small_t *s = &c->small;
    void *abort_flag = NULL;
    struct cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, (const void *)kernel) != cudaSuccess ||
        cudaMalloc(&s->mine, area_bytes(c, slot)) != cudaSuccess ||
        cudaMemset(s->mine, 0, area_bytes(c, slot)) != cudaSuccess ||
        cudaIpcGetMemHandle(handle, s->mine) != cudaSuccess ||
        cudaHostAlloc(&abort_flag, sizeof(int), cudaHostAllocMapped) != cudaSuccess) {
        cudaGetLastError();
        tcn_small_free(c);
        return 0;
    }
    s->abort_flag = abort_flag;
    *s->abort_flag = 0;
    return 1;
}
#endif

tcomms_status_t tcn_small_setup(tcn_comm_t *c, const tcomms_backend_comm_args_t *args, long bytes)
{
    tcn_small_t *s = &c->small;
    memset(s, 0, sizeof(*s));
    if (c->size < 2 || c->size > TCN_SMALL_MAX_RANKS)
        return TCOMMS_SUCCESS; /* the same on every rank: no exchange */
    card_t mine;
    memset(&mine, 0, sizeof(mine));
    host_id(mine.host, sizeof(mine.host));
    mine.bytes = bytes;
#if TCN_HAVE_SMALL
    pthread_once(&load_once, load);
    mine.ok = bytes > 0 && load_error == cudaSuccess && offer(c, (size_t)bytes, &mine.handle);
#endif
    void *vals[TCN_SMALL_MAX_RANKS] = {NULL};
    tcomms_status_t st = exchange(c, args, "card", &mine, sizeof(mine), vals);
    int on = st == TCOMMS_SUCCESS;
    for (int r = 0; on && r < c->size; r++) {
        const card_t *o = vals[r];
        on = o->ok && o->bytes == bytes && strcmp(o->host, mine.host) == 0;
    }
    if (on)
        on = map_peers(c, (card_t *const *)vals);
    free_vals(vals, c->size);
    if (st == TCOMMS_SUCCESS) { /* a rank may have failed to map: only if all did is the path on */
        st = exchange(c, args, "mapped", &on, sizeof(on), vals);
        for (int r = 0; st == TCOMMS_SUCCESS && r < c->size; r++)
            on &= *(const int *)vals[r];
        free_vals(vals, c->size);
    }
    if (st != TCOMMS_SUCCESS || !on) {
        tcn_small_free(c);
        return st;
    }
    s->slot = (size_t)bytes;
    s->peer[c->rank] = s->mine;
    tcn_core->log(TCOMMS_LOG_DEBUG, "nccl", "'%s' rank %d: small-message path on, up to %ld bytes a block", c->name,
                  c->rank, bytes);
    return TCOMMS_SUCCESS;
}

int tcn_small_fits(const tcn_comm_t *c, const tcomms_coll_args_t *a)
{
    if (c->small.slot == 0 || a->count == 0 || a->count > c->small.slot)
        return 0;
    switch (a->type) {
    case TCOMMS_COLL_ALL_REDUCE:
    case TCOMMS_COLL_REDUCE_SCATTER:
        if (a->op == TCOMMS_AVG && a->dtype != TCOMMS_FLOAT16 && a->dtype != TCOMMS_BFLOAT16 &&
            a->dtype != TCOMMS_FLOAT32 && a->dtype != TCOMMS_FLOAT64)
            return 0; /* an integer average: NCCL's, whatever its rounding */
        break;
    case TCOMMS_COLL_ALL_GATHER:
    case TCOMMS_COLL_ALL_TO_ALL:
        break;
    default:
        return 0;
    }
    return a->count * tcn_core->dtype_size(a->dtype) <= c->small.slot;
}

tcomms_status_t tcn_small_launch(tcn_comm_t *c, const tcomms_coll_args_t *a, cudaStream_t stream, cudaEvent_t done)
{
#if TCN_HAVE_SMALL
    static const int types[TCOMMS_COLL_TYPE_COUNT] = {
        [TCOMMS_COLL_ALL_REDUCE] = TCN_SMALL_ALL_REDUCE, [TCOMMS_COLL_ALL_GATHER] = TCN_SMALL_ALL_GATHER,
        [TCOMMS_COLL_REDUCE_SCATTER] = TCN_SMALL_REDUCE_SCATTER, [TCOMMS_COLL_ALL_TO_ALL] = TCN_SMALL_ALL_TO_ALL,
    };
    tcn_small_t *s = &c->small;
    cudaError_t e;
    /* Calls on this path must run one after the other on every rank (the epochs): across streams, by the last
     * one's completion event (a recycled event marks a later point, which orders all the same). */
    if (s->last_done != NULL && s->last_stream != stream &&
        (e = cudaStreamWaitEvent(stream, s->last_done, 0)) != cudaSuccess)
        return tcn_cuda_error(e, "cudaStreamWaitEvent (small-message path)", c->name);
    tcn_small_args_t k;
    memset(&k, 0, sizeof(k));
    for (int r = 0; r < c->size; r++) {
        k.stage[r] = s->peer[r];
        k.flags[r] = (uint64_t *)((char *)s->peer[r] + stage_bytes(c, s->slot));
    }
    k.send = a->sendbuf;
    k.recv = a->recvbuf;
    k.abort = s->abort_flag;
    k.epoch = s->epoch + 1;
    k.backstop_ns = ((uint64_t)a->timeout_ms + 60000u) * 1000000ull;
    k.count = a->count;
    k.elem_size = tcn_core->dtype_size(a->dtype);
    k.slot = s->slot;
    k.rank = c->rank;
    k.size = c->size;
    k.type = types[a->type];
    k.dtype = (int)a->dtype;
    k.op = (int)a->op;
    size_t blocks = (a->count + BLOCK_THREADS - 1) / BLOCK_THREADS;
    if (blocks > TCN_SMALL_MAX_BLOCKS)
        blocks = TCN_SMALL_MAX_BLOCKS;
    size_t align = 16 / k.elem_size; /* a block's share in whole 16-byte pieces, where the count allows */
    k.per_block = (a->count + blocks - 1) / blocks;
    k.per_block = (k.per_block + align - 1) / align * align;
    blocks = (a->count + k.per_block - 1) / k.per_block;
    void *argv[] = {&k};
    dim3 grid = {(unsigned)blocks, 1, 1}, block = {BLOCK_THREADS, 1, 1};
    if ((e = cudaLaunchKernel((const void *)kernel, grid, block, argv, 0, stream)) != cudaSuccess)
        return tcn_cuda_error(e, "cudaLaunchKernel (small-message path)", c->name);
    s->epoch++;
    s->last_stream = stream;
    s->last_done = done;
    return TCOMMS_SUCCESS;
#else
    (void)stream, (void)done;
    return tcn_core->error(TCOMMS_ERR_INTERNAL, "nccl '%s': %s on the small-message path, which this build lacks",
                           c->name, tcn_coll_name(a->type));
#endif
}

void tcn_small_abort(tcn_comm_t *c)
{
    if (c->small.abort_flag)
        *(volatile int *)c->small.abort_flag = 1;
}

void tcn_small_free(tcn_comm_t *c)
{
    tcn_small_t *s = &c->small;
    if (s->mine && s->last_done && atomic_load(&c->ended)) {
        /* an aborted call's kernel may still be leaving (it reads the abort flag now and then) */
        uint64_t until = tc_now_ns() + 1000000000ull;
        for (unsigned round = 0; cudaEventQuery(s->last_done) == cudaErrorNotReady; round++) {
            if (tc_now_ns() > until) {
                tcn_core->log(TCOMMS_LOG_WARN, "nccl", "'%s' rank %d: a small-message kernel still runs 1 s after "
                              "the abort; its staging area is left allocated", c->name, c->rank);
                return;
            }
            tcn_backoff(round);
        }
        cudaGetLastError();
    }
    unmap_peers(c);
    if (s->mine)
        cudaFree(s->mine);
    if (s->abort_flag)
        cudaFreeHost((void *)s->abort_flag);
    memset(s, 0, sizeof(*s));
}
