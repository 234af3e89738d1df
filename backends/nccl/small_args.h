/* SPDX-License-Identifier: BSD-3-Clause */
/* What small.c passes to small.cu's kernel, by value, and the codes both sides use. Plain C, for both compilers. */
#ifndef TCN_SMALL_ARGS_H
#define TCN_SMALL_ARGS_H

#include <stddef.h>
#include <stdint.h>

#define TCN_SMALL_MAX_RANKS 8   /* one host's GPUs: the most a node has */
#define TCN_SMALL_MAX_BLOCKS 64 /* thread blocks per call, each with its own flag per sender */

enum { TCN_SMALL_ALL_REDUCE, TCN_SMALL_ALL_GATHER, TCN_SMALL_REDUCE_SCATTER, TCN_SMALL_ALL_TO_ALL };
/* tcomms_dtype_t's and tcomms_op_t's order, so small.c passes them as they are */
enum { TCN_SMALL_I8, TCN_SMALL_U8, TCN_SMALL_I32, TCN_SMALL_I64, TCN_SMALL_F16, TCN_SMALL_BF16, TCN_SMALL_F32,
       TCN_SMALL_F64 };
enum { TCN_SMALL_SUM, TCN_SMALL_PROD, TCN_SMALL_MIN, TCN_SMALL_MAX, TCN_SMALL_AVG };

typedef struct tcn_small_args {
    void *stage[TCN_SMALL_MAX_RANKS];     /* every rank's staging area as mapped here: 2 parities x size slots */
    uint64_t *flags[TCN_SMALL_MAX_RANKS]; /* every rank's flags: [sender][block], the epoch each last raised */
    const void *send;
    void *recv;
    const volatile int *abort;            /* host memory mapped into the device: set when the communicator fails */
    uint64_t epoch;                       /* this call's number, from 1, the same on every rank */
    uint64_t backstop_ns;                 /* a wait gives up after this long even if the host never says so */
    size_t count;                         /* elements per rank's block (all_reduce: the whole buffer) */
    size_t per_block;                     /* elements a thread block handles */
    size_t slot;                          /* bytes per sender's slot */
    size_t elem_size;
    int rank, size, type, dtype, op;
} tcn_small_args_t;

#endif
