/* SPDX-License-Identifier: BSD-3-Clause */
/* fsdp_bench --timeline: one more full step with timing events on the compute stream around every runtime call
 * and every layer's compute, printed per layer by rank 0. The compute stream's stall before a layer (from before
 * pre_forward/pre_backward to after it: the wait for that layer's all-gather, or for a gradient slot's
 * reduce-scatter, joined into the stream) shows where communication is exposed, forward and backward apart. */
#ifndef FSDP_TIMELINE_CUH
#define FSDP_TIMELINE_CUH

#include <cuda_runtime.h>
#include <stdio.h>

/* Event slots: per layer and direction (before the pre_ call, after it, after the compute), then the tail. */
enum { TL_BEFORE, TL_READY, TL_DONE, TL_PER_LAYER };
enum { TL_ROOT_POST, TL_SYNCED, TL_OPTIMIZED, TL_INSTALLED, TL_TAIL };

typedef struct timeline {
    cudaEvent_t *ev;
    int layers, n;
} timeline_t;

/* Slot numbers; with no timeline (t NULL, every step but the --timeline one) they are unused and 0. */
static inline int tl_slot(const timeline_t *t, int backward, int layer, int point)
{
    return t ? (backward * t->layers + layer) * TL_PER_LAYER + point : 0;
}

static inline int tl_tail(const timeline_t *t, int point)
{
    return t ? 2 * t->layers * TL_PER_LAYER + point : 0;
}

static inline cudaError_t tl_create(timeline_t *t, int layers)
{
    t->layers = layers;
    t->n = 2 * layers * TL_PER_LAYER + TL_TAIL;
    t->ev = (cudaEvent_t *)calloc((size_t)t->n, sizeof *t->ev);
    if (t->ev == NULL) return cudaErrorMemoryAllocation;
    for (int i = 0; i < t->n; i++) {
        cudaError_t e = cudaEventCreate(&t->ev[i]);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

static inline void tl_destroy(timeline_t *t)
{
    for (int i = 0; t->ev && i < t->n; i++)
        if (t->ev[i]) cudaEventDestroy(t->ev[i]);
    free(t->ev);
    t->ev = NULL;
}

/* Record slot `i` on `s` when a timeline is being taken. */
static inline cudaError_t tl_mark(const timeline_t *t, int i, cudaStream_t s)
{
    return t && t->ev ? cudaEventRecord(t->ev[i], s) : cudaSuccess;
}

static inline float tl_ms(const timeline_t *t, int from, int to)
{
    float ms = 0;
    return cudaEventElapsedTime(&ms, t->ev[from], t->ev[to]) == cudaSuccess ? ms : -1.0f;
}

/* After the step's events completed: per layer, the stall before it and its compute, both directions. */
static inline void tl_print(const timeline_t *t)
{
    const int L = t->layers, first = tl_slot(t, 0, 0, TL_BEFORE);
    float fs = 0, fc = 0, bs = 0, bc = 0;
    printf("fsdp_bench timeline (ms; stall = the compute stream waiting before the layer's compute)\n");
    printf("%6s %10s %10s %10s %10s\n", "layer", "fwd stall", "fwd comp", "bwd stall", "bwd comp");
    for (int i = 0; i < L; i++) {
        float s0 = tl_ms(t, tl_slot(t, 0, i, TL_BEFORE), tl_slot(t, 0, i, TL_READY));
        float c0 = tl_ms(t, tl_slot(t, 0, i, TL_READY), tl_slot(t, 0, i, TL_DONE));
        float s1 = tl_ms(t, tl_slot(t, 1, i, TL_BEFORE), tl_slot(t, 1, i, TL_READY));
        float c1 = tl_ms(t, tl_slot(t, 1, i, TL_READY), tl_slot(t, 1, i, TL_DONE));
        printf("%6d %10.3f %10.3f %10.3f %10.3f\n", i, s0, c0, s1, c1);
        fs += s0, fc += c0, bs += s1, bc += c1;
    }
    printf("%6s %10.3f %10.3f %10.3f %10.3f\n", "sum", fs, fc, bs, bc);
    printf("tail: root_post_backward..finish_grad_sync %.3f, optimizer %.3f, install_weights %.3f; step %.3f\n",
           tl_ms(t, tl_tail(t, TL_ROOT_POST), tl_tail(t, TL_SYNCED)),
           tl_ms(t, tl_tail(t, TL_SYNCED), tl_tail(t, TL_OPTIMIZED)),
           tl_ms(t, tl_tail(t, TL_OPTIMIZED), tl_tail(t, TL_INSTALLED)), tl_ms(t, first, tl_tail(t, TL_INSTALLED)));
    fflush(stdout);
}

#endif
