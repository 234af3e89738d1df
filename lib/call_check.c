/* SPDX-License-Identifier: BSD-3-Clause */
/* The call check (TCOMMS_CHECK_CALLS=1), a debugging aid. Before a collective is posted, rank 0 of the
 * communicator collects every rank's description of it through the store (which collective, on which device
 * type, count, dtype, op, root, and the v-variants' count arrays), compares them and publishes a verdict. When
 * ranks disagree, or call different collectives or in a different order, every rank gets TCOMMS_ERR_MISMATCH
 * naming both sides and nothing is posted; unchecked, NCCL hangs or reduces garbage and the CPU backends time
 * out. It costs three store requests per call on each rank, and one more per rank on rank 0. Point-to-point calls are
 * not checked: a receive that waited for its sender's description would deadlock the usual exchange (both ranks
 * post the receive first). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call_check.h"
#include "error.h"

#define NONE (-1)             /* a field the collective does not have (root of all_reduce) */
#define NO_COUNT UINT64_MAX /* barrier, and the v-variants, whose counts are arrays */
#define VERDICT_MARGIN_MS 2000u /* the others outwait rank 0, so its own timeout reaches them as a verdict */
#define VERDICT_MAX 640

/* One rank's description of a call; `narrays` arrays of comm->size counts follow it. */
typedef struct print {
    uint64_t count;
    int32_t type, device, dtype, op, root, narrays;
} print_t;

/* This rank's description, in a malloc'ed buffer of *len bytes. */
static print_t *describe(const tcomms_coll_args_t *a, tcomms_device_type_t device, int n, size_t *len)
{
    tcomms_coll_type_t t = a->type;
    const tcomms_coll_info_t *info = tcomms_coll_info(t);
    int narrays = info->count_arrays; /* all_to_all_v: rank i's sendcounts[j] is rank j's recvcounts[i] */
    *len = sizeof(print_t) + (size_t)narrays * (size_t)n * sizeof(uint64_t);
    print_t *p = malloc(*len);
    if (p == NULL)
        return NULL;
    *p = (print_t){
        .count = narrays || t == TCOMMS_COLL_BARRIER ? NO_COUNT : (uint64_t)a->count,
        .type = (int32_t)t,
        .device = (int32_t)device,
        .dtype = t == TCOMMS_COLL_BARRIER ? NONE : (int32_t)a->dtype,
        .op = info->flags & TCOMMS_COLL_REDUCES ? (int32_t)a->op : NONE,
        .root = info->flags & TCOMMS_COLL_ROOTED ? a->peer : NONE,
        .narrays = narrays,
    };
    uint64_t *arr = (uint64_t *)(p + 1);
    for (int i = 0; i < n && narrays; i++) {
        arr[i] = t == TCOMMS_COLL_ALL_TO_ALL_V ? a->sendcounts[i] : a->recvcounts[i];
        if (narrays == 2)
            arr[n + i] = a->recvcounts[i];
    }
    return p;
}

/* "tcomms_all_reduce on cpu (count 1000, float32, sum)" */
static void say(const print_t *p, char *buf, size_t len)
{
    int k = snprintf(buf, len, "%s on %s (", tc_coll_name((tcomms_coll_type_t)p->type),
                     tcomms_device_type_name((tcomms_device_type_t)p->device));
    const char *sep = "";
    if (p->count != NO_COUNT && k >= 0 && (size_t)k < len)
        k += snprintf(buf + k, len - (size_t)k, "count %llu", (unsigned long long)p->count), sep = ", ";
    if (p->dtype != NONE && k >= 0 && (size_t)k < len)
        k += snprintf(buf + k, len - (size_t)k, "%s%s", sep, tcomms_dtype_name((tcomms_dtype_t)p->dtype)), sep = ", ";
    if (p->op != NONE && k >= 0 && (size_t)k < len)
        k += snprintf(buf + k, len - (size_t)k, "%s%s", sep, tcomms_op_name((tcomms_op_t)p->op));
    if (p->root != NONE && k >= 0 && (size_t)k < len)
        k += snprintf(buf + k, len - (size_t)k, ", root %d", p->root);
    if (k >= 0 && (size_t)k < len)
        snprintf(buf + k, len - (size_t)k, ")");
}

/* Rank 0: compare every rank's description with its own. 0 when all agree, else 1 with `msg` saying where. */
static int judge(void *const *vals, const size_t *lens, int n, char *msg, size_t len)
{
    const print_t *p0 = vals[0];
    const uint64_t *a0 = (const uint64_t *)(p0 + 1);
    char mine[160], theirs[160];
    for (int r = 1; r < n; r++) {
        const print_t *p = vals[r];
        if (lens[r] < sizeof(print_t) ||
            lens[r] != sizeof(print_t) + (size_t)p->narrays * (size_t)n * sizeof(uint64_t)) {
            snprintf(msg, len, "rank %d's description of the call is malformed (%zu bytes)", r, lens[r]);
            return 1;
        }
        if (memcmp(p, p0, sizeof(*p)) != 0) {
            say(p0, mine, sizeof(mine));
            say(p, theirs, sizeof(theirs));
            snprintf(msg, len, "rank 0 called %s, rank %d %s", mine, r, theirs);
            return 1;
        }
        const uint64_t *ar = (const uint64_t *)(p + 1);
        for (int i = 0; i < n && p0->narrays == 1; i++)
            if (ar[i] != a0[i]) {
                snprintf(msg, len, "%s: recvcounts[%d] is %llu on rank 0 and %llu on rank %d",
                         tc_coll_name((tcomms_coll_type_t)p0->type), i, (unsigned long long)a0[i],
                         (unsigned long long)ar[i], r);
                return 1;
            }
    }
    for (int i = 0; i < n && p0->narrays == 2; i++) {
        const uint64_t *si = (const uint64_t *)((const print_t *)vals[i] + 1);
        for (int j = 0; j < n; j++) {
            const uint64_t *rj = (const uint64_t *)((const print_t *)vals[j] + 1) + n;
            if (si[j] != rj[i]) {
                snprintf(msg, len, "%s: rank %d sends %llu elements to rank %d, which expects %llu from it",
                         tc_coll_name(TCOMMS_COLL_ALL_TO_ALL_V), i, (unsigned long long)si[j], j,
                         (unsigned long long)rj[i]);
                return 1;
            }
        }
    }
    return 0;
}

/* The verdict: 'o' (agreed), 'm' (a mismatch) or 't' (rank 0 gave up waiting), then the message, NUL-ended. */
static tcomms_status_t verdict_status(char kind)
{
    return kind == 'o' ? TCOMMS_SUCCESS : kind == 'm' ? TCOMMS_ERR_MISMATCH : TCOMMS_ERR_TIMEOUT;
}

tcomms_status_t tc_check_call(tcomms_comm_t *comm, const tcomms_coll_args_t *a, tcomms_device_type_t device)
{
    if (a->type == TCOMMS_COLL_SEND || a->type == TCOMMS_COLL_RECV || comm->size == 1)
        return TCOMMS_SUCCESS;
    unsigned long long seq = (unsigned long long)atomic_fetch_add(&comm->calls_checked, 1) + 1;
    const char *what = tc_coll_name(a->type);
    tcomms_store_t *store = comm->store->store;
    int n = comm->size, missing = 0;
    char prefix[TC_KEY_MAX], *verdict = NULL;
    snprintf(prefix, sizeof(prefix), "%.*s/chk/%llu/", TC_PREFIX_MAX, comm->prefix, seq);
    size_t len = 0, vlen = 0;
    print_t *mine = describe(a, device, n, &len);
    void **vals = comm->rank == 0 ? calloc((size_t)n, sizeof(*vals)) : NULL;
    size_t *lens = comm->rank == 0 ? calloc((size_t)n, sizeof(*lens)) : NULL;
    tcomms_status_t st = mine && (comm->rank || (vals && lens)) ? TCOMMS_SUCCESS
                                                               : tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
    if (st == TCOMMS_SUCCESS)
        st = tc_store_gather0(store, prefix, comm->rank, n, mine, len, a->timeout_ms, vals, lens, &missing);
    if (comm->rank == 0 && (st == TCOMMS_SUCCESS || st == TCOMMS_ERR_TIMEOUT)) {
        /* rank 0's own outcome goes out as the verdict, so that every rank returns the same error */
        if ((verdict = malloc(VERDICT_MAX)) == NULL) {
            st = tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
        } else {
            if (st == TCOMMS_SUCCESS)
                verdict[0] = judge(vals, lens, n, verdict + 1, VERDICT_MAX - 1) ? 'm' : 'o';
            else
                snprintf(verdict, VERDICT_MAX, "trank %d did not reach it within %u ms (it is behind, in another "
                         "collective, or not checking calls: set TCOMMS_CHECK_CALLS alike on every rank)", missing,
                         a->timeout_ms);
            if (verdict[0] == 'o')
                verdict[1] = '\0';
            vlen = strlen(verdict) + 1;
            st = tc_store_bcast0(store, prefix, 0, (void **)&verdict, &vlen, a->timeout_ms);
        }
        if (vals != NULL)
            tc_store_free_values(vals, n);
    } else if (comm->rank != 0 && st == TCOMMS_SUCCESS) {
        st = tc_store_bcast0(store, prefix, comm->rank, (void **)&verdict, &vlen, a->timeout_ms + VERDICT_MARGIN_MS);
        if (st == TCOMMS_ERR_TIMEOUT)
            tc_error_prefix(st, "rank 0 published no verdict (it is behind, in another collective, or not checking "
                            "calls: set TCOMMS_CHECK_CALLS alike on every rank): ");
        else if (st == TCOMMS_SUCCESS && (vlen < 2 || verdict[vlen - 1] != '\0' || !memchr("omt", verdict[0], 3)))
            st = tc_error(TCOMMS_ERR_PROTOCOL, "malformed verdict from rank 0 (%zu bytes)", vlen);
    }
    if (st == TCOMMS_SUCCESS) {
        tc_comm_cleanup_keys(comm, prefix, n); /* every rank has read the verdict: the last one deletes the keys */
        if ((st = verdict_status(verdict[0])) != TCOMMS_SUCCESS)
            tc_error(st, "%s", verdict + 1);
    }
    if (st != TCOMMS_SUCCESS)
        tc_error_prefix(st, "%s: call check of call #%llu on '%s': ", what, seq, comm->name);
    free(verdict);
    free(vals);
    free(lens);
    free(mine);
    return st;
}
