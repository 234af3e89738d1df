/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms groups on NCCL: group_start/group_end bracket this thread's NCCL calls with ncclGroupStart/End, so
 * NCCL launches them together. Operations posted inside the group are launched only by ncclGroupEnd, so their
 * completion events are recorded (and their scratch freed) after it, in posting order. */
#include <stdio.h>

#include "tcn.h"

static _Thread_local struct {
    int open;
    tcn_op_t *head, *tail;
} tg;

int tcn_group_open(void)
{
    return tg.open;
}

void tcn_group_defer(tcn_op_t *op)
{
    op->grouped = 1;
    op->gnext = NULL;
    if (tg.tail)
        tg.tail->gnext = op;
    else
        tg.head = op;
    tg.tail = op;
}

tcomms_status_t tcn_group_start(void)
{
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
        return tcn_nccl_error(NULL, r, "ncclGroupStart");
    tg.open = 1;
    return TCOMMS_SUCCESS;
}

/* A non-blocking communicator may still be launching the group: wait for each one the group touched. */
static ncclResult_t settle_group(void)
{
    ncclResult_t r = ncclSuccess;
    for (tcn_op_t *op = tg.head; op; op = op->gnext) {
        tcn_comm_t *c = op->comm;
        if (!c->nonblocking || c->nccl == NULL)
            continue;
        ncclResult_t q = tcn_settle_comm(c, tc_now_ns() + (uint64_t)op->timeout_ms * 1000000ull);
        if (q != ncclSuccess && r == ncclSuccess)
            r = q;
    }
    return r;
}

tcomms_status_t tcn_group_end(void)
{
    if (!tg.open)
        return tcn_core->error(TCOMMS_ERR_INVALID_ARG, "nccl: group_end without group_start");
    tg.open = 0;
    ncclResult_t r = ncclGroupEnd();
    if (r == ncclInProgress)
        r = settle_group();
    tcomms_status_t st = TCOMMS_SUCCESS;
    char why[256] = "";
    if (r != ncclSuccess) {
        const tcn_comm_t *c = tg.head ? tg.head->comm : NULL;
        st = tcn_nccl_error(c, r, "ncclGroupEnd");
        snprintf(why, sizeof(why), "its group failed to launch: ncclGroupEnd: %s", ncclGetErrorString(r));
    }
    tcn_op_t *op = tg.head;
    tg.head = tg.tail = NULL;
    while (op) {
        tcn_op_t *next = op->gnext;
        tcn_fail_launch(op->comm, st, "a group"); /* once per communicator: a failed one stays failed */
        int prev = tcn_device_enter(op->comm);
        tcn_op_finish(op, st, why);
        tcn_device_leave(prev);
        op = next;
    }
    return st;
}
