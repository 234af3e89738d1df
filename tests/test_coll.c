/* SPDX-License-Identifier: BSD-3-Clause */
/* Every collective and send/recv, on every CPU backend named by TCOMMS_TEST_BACKENDS, on 1 to 4 ranks (1 to 8 with
 * TCOMMS_TEST_MAX_RANKS=8, `make check-long`): one table of (collective x dtype x op x count x in-place x root) cases
 * run inside one communicator per (backend, ranks), each receive buffer checked element by element against
 * coll_ref, and guards, gaps and unwritten buffers checked too. Built again with -DTC_TEST_CUDA as
 * tests/gpu/test_coll_cuda: the same table on NCCL, one GPU per rank, through device twins of the buffers. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>
#include <unistd.h>

#include "coll_ref.h"
#include "mrank.h"

#ifdef TC_TEST_CUDA
#include "gpu/gpu_util.h"
#include "gpu/mirror.h"
#define DEV(p) mirror_dev(p)
#define TEST_DEVICE TCOMMS_DEVICE_CUDA
#else
#define DEV(p) (p)
#define TEST_DEVICE TCOMMS_DEVICE_CPU
#endif

#define MAX_RANKS REF_MAX_RANKS /* the most ranks a job may have; TCOMMS_TEST_MAX_RANKS picks (default 4) */
#define OP_TIMEOUT_MS 20000u /* a rank that stopped early makes the others fail after this, not hang */
#define JOB_TIMEOUT_S 170    /* per job up to 4 ranks; oversubscribed jobs get more (mrank_job_timeout) */
#define NDTYPES ((int)TCOMMS_DTYPE_COUNT)
#define NOPS ((int)TCOMMS_OP_COUNT)

static const size_t counts[] = {0, 1, 7, 13};
#define NCOUNTS ((int)(sizeof counts / sizeof counts[0]))

typedef struct ctx {
    tcomms_comm_t *comm;
    int rank, size;
    volatile int *shared; /* counter for the barrier check */
    int barrier_round;
    int stop;             /* a call failed: the ranks may be out of step, so run nothing more */
    int cases;
    int skipped;          /* the case just run was skipped (NOT_SUPPORTED on a device backend) */
    int nskips;
    const char *skip_names[16];
    char variant[96];     /* a case's variant text, built per case */
} ctx_t;

static void buf_init(ref_buf_t *b, tcomms_dtype_t dt, size_t n)
{
    if (ref_buf_init(b, dt, n) != 0) {
        mrank_logf("test_coll: out of memory");
        _exit(100);
    }
#ifdef TC_TEST_CUDA
    if (mirror_add(b) != 0)
        _exit(100);
#endif
}

static void buf_free(ref_buf_t *b)
{
#ifdef TC_TEST_CUDA
    mirror_remove(b);
#endif
    ref_buf_free(b);
}

/* Copy the device twins in before an operation and out after it (no-ops on CPU); 1 on a CUDA error. */
static int dev_in(ctx_t *x)
{
#ifdef TC_TEST_CUDA
    if (mirror_in() != 0) {
        x->stop = 1;
        return 1;
    }
#endif
    (void)x;
    return 0;
}

static int dev_out(ctx_t *x)
{
#ifdef TC_TEST_CUDA
    if (mirror_out() != 0) {
        x->stop = 1;
        return 1;
    }
#endif
    (void)x;
    return 0;
}

static mrank_case_t mk_case(const ctx_t *x, const char *coll, tcomms_dtype_t dt, int op, size_t n, int inplace,
                            int root)
{
    mrank_case_t c = {coll, ref_dtype_name(dt), op < 0 ? NULL : ref_op_name((tcomms_op_t)op), NULL, (long long)n,
                      inplace, root, x->rank, 0};
    return c;
}

#ifdef TC_TEST_CUDA
/* A device backend may lack an operation or form: say so once per collective (rank 0) and go on. */
static void note_skip(ctx_t *x, mrank_case_t *c)
{
    x->skipped = 1;
    for (int k = 0; k < x->nskips; k++)
        if (strcmp(x->skip_names[k], c->coll) == 0)
            return;
    if (x->nskips < (int)(sizeof x->skip_names / sizeof x->skip_names[0]))
        x->skip_names[x->nskips++] = c->coll;
    if (x->rank == 0)
        mrank_logf("SKIP test_coll_cuda %s (first: dtype=%s op=%s count=%lld inplace=%s%s%s): NOT_SUPPORTED: %s",
                   c->coll, c->dtype ? c->dtype : "-", c->op ? c->op : "-", c->count,
                   c->inplace < 0 ? "-" : (c->inplace ? "yes" : "no"), c->variant ? " " : "",
                   c->variant ? c->variant : "", tcomms_last_error());
}
#endif

/* 0 when st is SUCCESS; otherwise report, stop the table and return 1. */
static int failed_call(ctx_t *x, mrank_case_t *c, const char *call, tcomms_status_t st)
{
    x->cases++;
    if (st == TCOMMS_SUCCESS)
        return 0;
#ifdef TC_TEST_CUDA
    if (st == TCOMMS_ERR_NOT_SUPPORTED) {
        note_skip(x, c);
        return 1;
    }
#endif
    mrank_case_status(c, call, st, tcomms_last_error());
    x->stop = 1;
    return 1;
}

/* ---- one function per collective ------------------------------------------------------------------------------ */

static int t_all_reduce(ctx_t *x, tcomms_dtype_t dt, tcomms_op_t op, size_t n, int inplace)
{
    mrank_case_t c = mk_case(x, "all_reduce", dt, op, n, inplace, -1);
    ref_buf_t s, r;
    buf_init(&s, dt, n);
    buf_init(&r, dt, inplace ? 0 : n);
    for (size_t i = 0; i < n; i++)
        ref_set(&s, i, ref_red_value(dt, x->rank, i));
    ref_buf_t *out = inplace ? &s : &r;
    int bad = dev_in(x) ||
              failed_call(x, &c, "tcomms_all_reduce",
                          tcomms_all_reduce(x->comm, DEV(s.data), DEV(out->data), n, dt, op, NULL, NULL)) ||
              dev_out(x);
    if (!bad) {
        for (size_t i = 0; i < n; i++)
            out->expect[i] = ref_reduce(dt, op, x->size, i);
        bad |= ref_check(&c, inplace ? "buf" : "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    buf_free(&s);
    buf_free(&r);
    return bad;
}

static int t_broadcast(ctx_t *x, tcomms_dtype_t dt, size_t n, int root)
{
    mrank_case_t c = mk_case(x, "broadcast", dt, -1, n, -1, root);
    ref_buf_t b;
    buf_init(&b, dt, n);
    for (size_t i = 0; i < n; i++)
        ref_set(&b, i, ref_mov_value(x->rank, i));
    int bad = dev_in(x) ||
              failed_call(x, &c, "tcomms_broadcast", tcomms_broadcast(x->comm, DEV(b.data), n, dt, root, NULL, NULL)) ||
              dev_out(x);
    if (!bad) {
        for (size_t i = 0; i < n; i++)
            b.expect[i] = ref_mov_value(root, i);
        bad |= ref_check(&c, "buf", &b);
    }
    buf_free(&b);
    return bad;
}

/* Non-root ranks pass recvbuf NULL in the in-place round and an untouchable buffer in the other. */
static int t_reduce(ctx_t *x, tcomms_dtype_t dt, tcomms_op_t op, size_t n, int inplace, int root)
{
    mrank_case_t c = mk_case(x, "reduce", dt, op, n, inplace, root);
    int is_root = x->rank == root;
    ref_buf_t s, r;
    buf_init(&s, dt, n);
    buf_init(&r, dt, inplace ? 0 : n);
    for (size_t i = 0; i < n; i++)
        ref_set(&s, i, ref_red_value(dt, x->rank, i));
    ref_buf_t *out = inplace ? &s : &r;
    void *rb = is_root || !inplace ? out->data : NULL;
    int bad = dev_in(x) ||
              failed_call(x, &c, "tcomms_reduce",
                          tcomms_reduce(x->comm, DEV(s.data), DEV(rb), n, dt, op, root, NULL, NULL)) ||
              dev_out(x);
    if (!bad) {
        for (size_t i = 0; is_root && i < n; i++)
            out->expect[i] = ref_reduce(dt, op, x->size, i);
        bad |= ref_check(&c, inplace && is_root ? "buf" : "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    buf_free(&s);
    buf_free(&r);
    return bad;
}

static int t_all_gather(ctx_t *x, tcomms_dtype_t dt, size_t n, int inplace)
{
    mrank_case_t c = mk_case(x, "all_gather", dt, -1, n, inplace, -1);
    size_t at = (size_t)x->rank * n;
    ref_buf_t s, r;
    buf_init(&s, dt, inplace ? 0 : n);
    buf_init(&r, dt, (size_t)x->size * n);
    for (size_t i = 0; i < n; i++)
        inplace ? ref_set(&r, at + i, ref_mov_value(x->rank, i)) : ref_set(&s, i, ref_mov_value(x->rank, i));
    const void *sb = inplace ? ref_at(&r, at) : s.data;
    int bad = dev_in(x) ||
              failed_call(x, &c, "tcomms_all_gather",
                          tcomms_all_gather(x->comm, DEV(sb), DEV(r.data), n, dt, NULL, NULL)) ||
              dev_out(x);
    if (!bad) {
        for (int q = 0; q < x->size; q++)
            for (size_t i = 0; i < n; i++)
                r.expect[(size_t)q * n + i] = ref_mov_value(q, i);
        bad |= ref_check(&c, "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    buf_free(&s);
    buf_free(&r);
    return bad;
}

/* Per-rank counts (one rank gets 0 when size > 1) and a displacement layout for the v-variants. */
static const size_t v_counts[][MAX_RANKS] = {
    {4, 0, 9, 1, 6, 2, 0, 5}, {13, 1, 0, 7, 3, 0, 8, 2}, {2, 5, 3, 0, 1, 4, 0, 6}, {0, 0, 0, 0, 0, 0, 0, 0}};
#define NVPATTERNS 4
enum { LAYOUT_NULL, LAYOUT_GAPS, LAYOUT_REVERSED };
static const int v_layout[NVPATTERNS] = {LAYOUT_NULL, LAYOUT_GAPS, LAYOUT_REVERSED, LAYOUT_NULL};
static const char *const layout_names[] = {"displs=NULL", "displs with gaps", "displs reversed with gaps"};

/* Fill displs for counts[0..size) in `layout` (packed for NULL); returns the extent in elements, gaps included. */
static size_t make_displs(const size_t *cnt, int size, int layout, size_t *displs)
{
    size_t pos = layout == LAYOUT_NULL ? 0 : 2;
    for (int k = 0; k < size; k++) {
        int q = layout == LAYOUT_REVERSED ? size - 1 - k : k;
        displs[q] = pos;
        pos += cnt[q] + (layout == LAYOUT_NULL ? 0 : 3);
    }
    return pos;
}

static int t_all_gather_v(ctx_t *x, tcomms_dtype_t dt, int pat, int inplace)
{
    const size_t *cnt = v_counts[pat];
    size_t displs[MAX_RANKS];
    size_t extent = make_displs(cnt, x->size, v_layout[pat], displs);
    size_t mine = cnt[x->rank];
    mrank_case_t c = mk_case(x, "all_gather_v", dt, -1, mine, inplace, -1);
    c.variant = layout_names[v_layout[pat]];
    ref_buf_t s, r;
    buf_init(&s, dt, inplace ? 0 : mine);
    buf_init(&r, dt, extent);
    for (size_t i = 0; i < mine; i++)
        inplace ? ref_set(&r, displs[x->rank] + i, ref_mov_value(x->rank, i))
                : ref_set(&s, i, ref_mov_value(x->rank, i));
    const void *sb = inplace ? ref_at(&r, displs[x->rank]) : s.data;
    const size_t *dp = v_layout[pat] == LAYOUT_NULL ? NULL : displs;
    int bad = dev_in(x) ||
              failed_call(x, &c, "tcomms_all_gather_v",
                          tcomms_all_gather_v(x->comm, DEV(sb), DEV(r.data), cnt, dp, dt, NULL, NULL)) ||
              dev_out(x);
    if (!bad) {
        for (int q = 0; q < x->size; q++)
            for (size_t i = 0; i < cnt[q]; i++)
                r.expect[displs[q] + i] = ref_mov_value(q, i);
        bad |= ref_check(&c, "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    buf_free(&s);
    buf_free(&r);
    return bad;
}

/* Shared by reduce_scatter (equal blocks) and reduce_scatter_v: block q of the send buffer starts at off[q]. */
static int t_reduce_scatter_any(ctx_t *x, mrank_case_t *c, const size_t *cnt, tcomms_dtype_t dt, tcomms_op_t op,
                                int inplace, int v)
{
    size_t off[MAX_RANKS + 1] = {0};
    for (int q = 0; q < x->size; q++)
        off[q + 1] = off[q] + cnt[q];
    size_t total = off[x->size], mine = cnt[x->rank], at = off[x->rank];
    ref_buf_t s, r;
    buf_init(&s, dt, total);
    buf_init(&r, dt, inplace ? 0 : mine);
    for (size_t j = 0; j < total; j++)
        ref_set(&s, j, ref_red_value(dt, x->rank, j));
    ref_buf_t *out = &r;
    void *rb = inplace ? ref_at(&s, at) : r.data;
    int bad;
    if (dev_in(x))
        bad = 1;
    else if (v)
        bad = failed_call(x, c, "tcomms_reduce_scatter_v",
                          tcomms_reduce_scatter_v(x->comm, DEV(s.data), DEV(rb), cnt, dt, op, NULL, NULL));
    else
        bad = failed_call(x, c, "tcomms_reduce_scatter",
                          tcomms_reduce_scatter(x->comm, DEV(s.data), DEV(rb), mine, dt, op, NULL, NULL));
    bad = bad || dev_out(x);
    if (!bad) {
        if (inplace) { /* the other blocks of an in-place buffer may serve as scratch */
            out = &s;
            for (size_t j = 0; j < total; j++)
                s.expect[j] = REF_ANY;
        }
        for (size_t i = 0; i < mine; i++)
            out->expect[(inplace ? at : 0) + i] = ref_reduce(dt, op, x->size, at + i);
        bad |= ref_check(c, inplace ? "buf" : "sendbuf", &s);
        bad |= ref_check(c, "recvbuf", &r);
    }
    buf_free(&s);
    buf_free(&r);
    return bad;
}

static int t_reduce_scatter(ctx_t *x, tcomms_dtype_t dt, tcomms_op_t op, size_t n, int inplace)
{
    mrank_case_t c = mk_case(x, "reduce_scatter", dt, op, n, inplace, -1);
    size_t cnt[MAX_RANKS];
    for (int q = 0; q < x->size; q++)
        cnt[q] = n;
    return t_reduce_scatter_any(x, &c, cnt, dt, op, inplace, 0);
}

static int t_reduce_scatter_v(ctx_t *x, tcomms_dtype_t dt, tcomms_op_t op, int pat, int inplace)
{
    mrank_case_t c = mk_case(x, "reduce_scatter_v", dt, op, v_counts[pat][x->rank], inplace, -1);
    int len = snprintf(x->variant, sizeof x->variant, "counts {");
    for (int q = 0; q < x->size && len > 0 && (size_t)len < sizeof x->variant; q++)
        len += snprintf(x->variant + len, sizeof x->variant - (size_t)len, q ? ",%zu" : "%zu", v_counts[pat][q]);
    if (len > 0 && (size_t)len < sizeof x->variant)
        snprintf(x->variant + len, sizeof x->variant - (size_t)len, "}");
    c.variant = x->variant;
    return t_reduce_scatter_any(x, &c, v_counts[pat], dt, op, inplace, 1);
}

static int t_all_to_all(ctx_t *x, tcomms_dtype_t dt, size_t n, int inplace)
{
    mrank_case_t c = mk_case(x, "all_to_all", dt, -1, n, inplace, -1);
    size_t total = (size_t)x->size * n;
    ref_buf_t s, r;
    buf_init(&s, dt, total);
    buf_init(&r, dt, inplace ? 0 : total);
    for (size_t j = 0; j < total; j++)
        ref_set(&s, j, ref_mov_value(x->rank, j));
    ref_buf_t *out = inplace ? &s : &r;
    int bad = dev_in(x) ||
              failed_call(x, &c, "tcomms_all_to_all",
                          tcomms_all_to_all(x->comm, DEV(s.data), DEV(out->data), n, dt, NULL, NULL)) ||
              dev_out(x);
    if (!bad) {
        for (int q = 0; q < x->size; q++)
            for (size_t i = 0; i < n; i++)
                out->expect[(size_t)q * n + i] = ref_mov_value(q, (size_t)x->rank * n + i);
        bad |= ref_check(&c, inplace ? "buf" : "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    buf_free(&s);
    buf_free(&r);
    return bad;
}

/* Elements rank i sends to rank j in all_to_all_v pattern `pat` (zeros included). */
static size_t a2av_count(int pat, int i, int j)
{
    return pat == 2 ? 13 : (size_t)((i * 3 + j * 5 + 1 + pat) % 6);
}

static int t_all_to_all_v(ctx_t *x, tcomms_dtype_t dt, int pat)
{
    static const int layouts[][2] = {{LAYOUT_NULL, LAYOUT_NULL}, {LAYOUT_GAPS, LAYOUT_REVERSED},
                                     {LAYOUT_REVERSED, LAYOUT_GAPS}};
    size_t sc[MAX_RANKS], rc[MAX_RANKS], sd[MAX_RANKS], rd[MAX_RANKS];
    for (int j = 0; j < x->size; j++) {
        sc[j] = a2av_count(pat, x->rank, j);
        rc[j] = a2av_count(pat, j, x->rank);
    }
    size_t sext = make_displs(sc, x->size, layouts[pat][0], sd);
    size_t rext = make_displs(rc, x->size, layouts[pat][1], rd);
    mrank_case_t c = mk_case(x, "all_to_all_v", dt, -1, sext, 0, -1);
    c.variant = pat == 0 ? "packed" : pat == 1 ? "send gaps, recv reversed" : "13 each, send reversed, recv gaps";
    ref_buf_t s, r;
    buf_init(&s, dt, sext);
    buf_init(&r, dt, rext);
    for (int j = 0; j < x->size; j++)
        for (size_t e = 0; e < sc[j]; e++)
            ref_set(&s, sd[j] + e, ref_mov_value(x->rank, 1000u * (size_t)j + e));
    int packed = layouts[pat][0] == LAYOUT_NULL;
    int bad = dev_in(x) ||
              failed_call(x, &c, "tcomms_all_to_all_v",
                          tcomms_all_to_all_v(x->comm, DEV(s.data), sc, packed ? NULL : sd, DEV(r.data), rc,
                                              packed ? NULL : rd, dt, NULL, NULL)) ||
              dev_out(x);
    if (!bad) {
        for (int j = 0; j < x->size; j++)
            for (size_t e = 0; e < rc[j]; e++)
                r.expect[rd[j] + e] = ref_mov_value(j, 1000u * (size_t)x->rank + e);
        bad |= ref_check(&c, "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    buf_free(&s);
    buf_free(&r);
    return bad;
}

static int t_gather(ctx_t *x, tcomms_dtype_t dt, size_t n, int inplace, int root)
{
    mrank_case_t c = mk_case(x, "gather", dt, -1, n, inplace, root);
    int is_root = x->rank == root;
    int own_in_r = inplace && is_root;
    ref_buf_t s, r;
    buf_init(&s, dt, own_in_r ? 0 : n);
    buf_init(&r, dt, is_root ? (size_t)x->size * n : (inplace ? 0 : n));
    for (size_t i = 0; i < n; i++)
        own_in_r ? ref_set(&r, (size_t)root * n + i, ref_mov_value(x->rank, i))
                 : ref_set(&s, i, ref_mov_value(x->rank, i));
    const void *sb = own_in_r ? ref_at(&r, (size_t)root * n) : s.data;
    void *rb = is_root || !inplace ? r.data : NULL;
    int bad = dev_in(x) ||
              failed_call(x, &c, "tcomms_gather", tcomms_gather(x->comm, DEV(sb), DEV(rb), n, dt, root, NULL, NULL)) ||
              dev_out(x);
    if (!bad) {
        for (int q = 0; is_root && q < x->size; q++)
            for (size_t i = 0; i < n; i++)
                r.expect[(size_t)q * n + i] = ref_mov_value(q, i);
        bad |= ref_check(&c, "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    buf_free(&s);
    buf_free(&r);
    return bad;
}

static int t_scatter(ctx_t *x, tcomms_dtype_t dt, size_t n, int inplace, int root)
{
    mrank_case_t c = mk_case(x, "scatter", dt, -1, n, inplace, root);
    int is_root = x->rank == root;
    ref_buf_t s, r;
    buf_init(&s, dt, is_root ? (size_t)x->size * n : (inplace ? 0 : n));
    buf_init(&r, dt, inplace && is_root ? 0 : n);
    for (size_t j = 0; j < s.count; j++)
        ref_set(&s, j, ref_mov_value(x->rank, j));
    const void *sb = is_root || !inplace ? s.data : NULL;
    void *rb = inplace && is_root ? ref_at(&s, (size_t)root * n) : r.data;
    int bad = dev_in(x) ||
              failed_call(x, &c, "tcomms_scatter",
                          tcomms_scatter(x->comm, DEV(sb), DEV(rb), n, dt, root, NULL, NULL)) ||
              dev_out(x);
    if (!bad) {
        for (size_t i = 0; !(inplace && is_root) && i < n; i++)
            r.expect[i] = ref_mov_value(root, (size_t)x->rank * n + i);
        bad |= ref_check(&c, inplace && is_root ? "buf" : "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    buf_free(&s);
    buf_free(&r);
    return bad;
}

/* Every rank bumps a shared counter before the barrier (the last rank late); none may leave before all bumped. */
static int t_barrier(ctx_t *x)
{
    mrank_case_t c = {"barrier", NULL, NULL, NULL, 0, -1, -1, x->rank, 0};
    int round = ++x->barrier_round;
    if (x->rank == x->size - 1)
        mrank_sleep_ms(20);
    __atomic_add_fetch(x->shared, 1, __ATOMIC_SEQ_CST);
    if (failed_call(x, &c, "tcomms_barrier", tcomms_barrier(x->comm, NULL, NULL)))
        return 1;
#ifdef TC_TEST_CUDA
    /* Completion is stream-ordered on a device backend: the host knows the others arrived once the stream has. */
    if (mirror_sync() != 0)
        return x->stop = 1;
#endif
    int seen = __atomic_load_n(x->shared, __ATOMIC_SEQ_CST);
    if (seen >= x->size * round)
        return 0;
    mrank_logf("FAIL barrier rank=%d round %d: left with %d of %d ranks arrived", x->rank, round,
               seen - x->size * (round - 1), x->size);
    return 1;
}

/* NCCL runs one communicator's posts in order on one stream, so four separate p2p posts where every rank starts
 * with a receive would wait forever: on a device backend the asynchronous part of the ring is one group. */
static int ring_group(ctx_t *x, mrank_case_t *c, int start)
{
#ifdef TC_TEST_CUDA
    return start ? failed_call(x, c, "tcomms_group_start", tcomms_group_start())
                 : failed_call(x, c, "tcomms_group_end", tcomms_group_end());
#else
    (void)x, (void)c, (void)start;
    return 0;
#endif
}

/* Two messages to the next rank posted asynchronously (they must arrive in order), then a blocking ring where rank
 * 0 sends first and every other rank receives first. */
static int t_send_recv_ring(ctx_t *x, tcomms_dtype_t dt, size_t n)
{
    if (x->size < 2)
        return 0;
    int next = (x->rank + 1) % x->size, prev = (x->rank + x->size - 1) % x->size;
    mrank_case_t c = mk_case(x, "send/recv ring", dt, -1, n, -1, -1);
    ref_buf_t s[3], r[3];
    tcomms_work_t *w[4] = {NULL, NULL, NULL, NULL};
    for (int m = 0; m < 3; m++) {
        buf_init(&s[m], dt, n);
        buf_init(&r[m], dt, n);
        for (size_t i = 0; i < n; i++)
            ref_set(&s[m], i, ref_mov_value(x->rank, 500u * (size_t)m + i));
    }
    if (dev_in(x) || ring_group(x, &c, 1) ||
        failed_call(x, &c, "tcomms_recv", tcomms_recv(x->comm, DEV(r[0].data), n, dt, prev, NULL, &w[0])) ||
        failed_call(x, &c, "tcomms_recv", tcomms_recv(x->comm, DEV(r[1].data), n, dt, prev, NULL, &w[1])) ||
        failed_call(x, &c, "tcomms_send", tcomms_send(x->comm, DEV(s[0].data), n, dt, next, NULL, &w[2])) ||
        failed_call(x, &c, "tcomms_send", tcomms_send(x->comm, DEV(s[1].data), n, dt, next, NULL, &w[3])) ||
        ring_group(x, &c, 0))
        return 1; /* buffers may still be in use: leak them, the rank stops here */
    int bad = 0;
    for (int k = 0; k < 4 && !bad; k++)
        bad = failed_call(x, &c, "tcomms_work_wait", tcomms_work_wait(w[k], 0));
    if (bad)
        return 1;
    for (int k = 0; k < 4; k++)
        tcomms_work_free(w[k]);
    if (x->rank == 0)
        bad = failed_call(x, &c, "tcomms_send", tcomms_send(x->comm, DEV(s[2].data), n, dt, next, NULL, NULL)) ||
              failed_call(x, &c, "tcomms_recv", tcomms_recv(x->comm, DEV(r[2].data), n, dt, prev, NULL, NULL));
    else
        bad = failed_call(x, &c, "tcomms_recv", tcomms_recv(x->comm, DEV(r[2].data), n, dt, prev, NULL, NULL)) ||
              failed_call(x, &c, "tcomms_send", tcomms_send(x->comm, DEV(s[2].data), n, dt, next, NULL, NULL));
    bad = bad || dev_out(x);
    for (int m = 0; m < 3; m++) {
        for (size_t i = 0; !bad && i < n; i++)
            r[m].expect[i] = ref_mov_value(prev, 500u * (size_t)m + i);
        if (!bad) {
            bad |= ref_check(&c, "sendbuf", &s[m]);
            static const char *const what[] = {"first recvbuf", "second recvbuf", "blocking recvbuf"};
            bad |= ref_check(&c, what[m], &r[m]);
        }
        buf_free(&s[m]);
        buf_free(&r[m]);
    }
    return bad;
}

/* ---- asynchronous operations ---------------------------------------------------------------------------------- */

enum { FINISH_IN_ORDER, FINISH_REVERSED, FINISH_POLLING };
#define NASYNC 4

/* Wait every handle in w[0..NASYNC) as `how` says; 0 when all succeeded. */
static int finish_all(ctx_t *x, mrank_case_t *c, tcomms_work_t **w, int how)
{
    if (how != FINISH_POLLING) {
        for (int k = 0; k < NASYNC; k++) {
            tcomms_work_t *next = w[how == FINISH_IN_ORDER ? k : NASYNC - 1 - k];
            if (failed_call(x, c, "tcomms_work_wait", tcomms_work_wait(next, 0)))
                return 1;
        }
        return 0;
    }
    int done[NASYNC] = {0}, ndone = 0;
    double deadline = mrank_now() + OP_TIMEOUT_MS / 1000.0;
    while (ndone < NASYNC) {
        for (int k = 0; k < NASYNC; k++) {
            if (done[k])
                continue;
            tcomms_status_t st = tcomms_work_test(w[k]);
            if (st == TCOMMS_SUCCESS) {
                done[k] = 1;
                ndone++;
            } else if (st != TCOMMS_IN_PROGRESS) {
                return failed_call(x, c, "tcomms_work_test", st);
            }
        }
        if (mrank_now() > deadline)
            return failed_call(x, c, "tcomms_work_test polling", TCOMMS_ERR_TIMEOUT);
        if (ndone < NASYNC)
            mrank_sleep_ms(1);
    }
    /* A final result is returned again by later calls. */
    for (int k = 0; k < NASYNC; k++)
        if (failed_call(x, c, "tcomms_work_test after completion", tcomms_work_test(w[k])) ||
            failed_call(x, c, "tcomms_work_wait after completion", tcomms_work_wait(w[k], 0)))
            return 1;
    return 0;
}

/* Posts all_reduce, broadcast, all_gather and reduce_scatter with handles (one with explicit options), then
 * finishes them in order, in reverse, or by polling. */
static int t_async(ctx_t *x, int how)
{
    static const char *const names[] = {"async, waited in order", "async, waited in reverse", "async, polled"};
    mrank_case_t c = {names[how], "mixed", NULL, NULL, 13, 0, x->size - 1, x->rank, 0};
    const size_t n = 13;
    int sz = x->size, root = x->size - 1;
    ref_buf_t ar_s, ar_r, bc, ag_s, ag_r, rs_s, rs_r;
    buf_init(&ar_s, TCOMMS_FLOAT32, n);
    buf_init(&ar_r, TCOMMS_FLOAT32, n);
    buf_init(&bc, TCOMMS_INT32, n);
    buf_init(&ag_s, TCOMMS_INT8, n);
    buf_init(&ag_r, TCOMMS_INT8, (size_t)sz * n);
    buf_init(&rs_s, TCOMMS_FLOAT64, (size_t)sz * n);
    buf_init(&rs_r, TCOMMS_FLOAT64, n);
    for (size_t i = 0; i < n; i++) {
        ref_set(&ar_s, i, ref_red_value(TCOMMS_FLOAT32, x->rank, i));
        ref_set(&bc, i, ref_mov_value(x->rank, i));
        ref_set(&ag_s, i, ref_mov_value(x->rank, i));
    }
    for (size_t j = 0; j < (size_t)sz * n; j++)
        ref_set(&rs_s, j, ref_red_value(TCOMMS_FLOAT64, x->rank, j));
    tcomms_op_opts_t opts = {TCOMMS_OP_OPT_TIMEOUT | TCOMMS_OP_OPT_DEVICE_TYPE, OP_TIMEOUT_MS, NULL,
                             TEST_DEVICE};
    tcomms_work_t *w[NASYNC] = {NULL, NULL, NULL, NULL};
    tcomms_status_t st[NASYNC];
    if (dev_in(x))
        return 1;
    st[0] = tcomms_all_reduce(x->comm, DEV(ar_s.data), DEV(ar_r.data), n, TCOMMS_FLOAT32, TCOMMS_SUM, &opts, &w[0]);
    st[1] = tcomms_broadcast(x->comm, DEV(bc.data), n, TCOMMS_INT32, root, NULL, &w[1]);
    st[2] = tcomms_all_gather(x->comm, DEV(ag_s.data), DEV(ag_r.data), n, TCOMMS_INT8, NULL, &w[2]);
    st[3] = tcomms_reduce_scatter(x->comm, DEV(rs_s.data), DEV(rs_r.data), n, TCOMMS_FLOAT64, TCOMMS_MAX, NULL,
                                  &w[3]);
    for (int k = 0; k < NASYNC; k++) {
        if (failed_call(x, &c, "posting an operation", st[k] > 0 ? TCOMMS_SUCCESS : st[k]))
            return 1; /* others may be running on these buffers: leak them, the rank stops here */
        if (!w[k]) {
            mrank_logf("FAIL %s rank %d: operation %d returned no work handle", names[how], x->rank, k);
            x->stop = 1;
            return 1;
        }
    }
    if (finish_all(x, &c, w, how) || dev_out(x))
        return 1;
    for (int k = 0; k < NASYNC; k++)
        tcomms_work_free(w[k]);
    for (size_t i = 0; i < n; i++) {
        ar_r.expect[i] = ref_reduce(TCOMMS_FLOAT32, TCOMMS_SUM, sz, i);
        bc.expect[i] = ref_mov_value(root, i);
        rs_r.expect[i] = ref_reduce(TCOMMS_FLOAT64, TCOMMS_MAX, sz, (size_t)x->rank * n + i);
        for (int q = 0; q < sz; q++)
            ag_r.expect[(size_t)q * n + i] = ref_mov_value(q, i);
    }
    int bad = 0;
    ref_buf_t *all[] = {&ar_s, &ar_r, &bc, &ag_s, &ag_r, &rs_s, &rs_r};
    static const char *const what[] = {"all_reduce sendbuf", "all_reduce recvbuf", "broadcast buf",
                                       "all_gather sendbuf", "all_gather recvbuf", "reduce_scatter sendbuf",
                                       "reduce_scatter recvbuf"};
    for (int k = 0; k < 7; k++) {
        bad |= ref_check(&c, what[k], all[k]);
        buf_free(all[k]);
    }
    return bad;
}

/* ---- the table ------------------------------------------------------------------------------------------------ */

/* A skipped case (device backends only) counts as no failure; twins it left behind are freed. */
static int case_result(ctx_t *x, int failures)
{
    if (x->skipped)
        failures = 0;
    x->skipped = 0;
#ifdef TC_TEST_CUDA
    mirror_reset();
#endif
    return failures;
}

#define RUN(expr)                                                                                                    \
    do {                                                                                                             \
        fails += case_result(x, (expr));                                                                             \
        if (x->stop)                                                                                                 \
            return fails;                                                                                            \
    } while (0)

static int run_table(ctx_t *x)
{
    int fails = 0;
    int roots[2] = {x->size - 1, 0};
    int nroots = x->size > 1 ? 2 : 1;
    RUN(t_barrier(x));
    for (int d = 0; d < NDTYPES; d++) {
        tcomms_dtype_t dt = (tcomms_dtype_t)d;
        for (int k = 0; k < NCOUNTS; k++) {
            size_t n = counts[k];
            for (int ip = 0; ip < 2; ip++) {
                for (int o = 0; o < NOPS; o++) {
                    RUN(t_all_reduce(x, dt, (tcomms_op_t)o, n, ip));
                    RUN(t_reduce_scatter(x, dt, (tcomms_op_t)o, n, ip));
                    for (int ri = 0; ri < nroots; ri++)
                        RUN(t_reduce(x, dt, (tcomms_op_t)o, n, ip, roots[ri]));
                }
                RUN(t_all_gather(x, dt, n, ip));
                RUN(t_all_to_all(x, dt, n, ip));
                for (int ri = 0; ri < nroots; ri++) {
                    RUN(t_gather(x, dt, n, ip, roots[ri]));
                    RUN(t_scatter(x, dt, n, ip, roots[ri]));
                }
            }
            for (int ri = 0; ri < nroots; ri++)
                RUN(t_broadcast(x, dt, n, roots[ri]));
            RUN(t_send_recv_ring(x, dt, n));
        }
        for (int pat = 0; pat < NVPATTERNS; pat++) {
            for (int ip = 0; ip < 2; ip++) {
                RUN(t_all_gather_v(x, dt, pat, ip));
                for (int o = 0; o < NOPS && pat < 3; o++)
                    RUN(t_reduce_scatter_v(x, dt, (tcomms_op_t)o, pat, ip));
            }
        }
        for (int pat = 0; pat < 3; pat++)
            RUN(t_all_to_all_v(x, dt, pat));
        RUN(t_barrier(x));
    }
    for (int how = FINISH_IN_ORDER; how <= FINISH_POLLING; how++)
        RUN(t_async(x, how));
    return fails;
}

static int coll_rank(int rank, int size, void *arg)
{
    const char *backend = mrank_backend(((int *)arg)[0]);
    ctx_t x = {.rank = rank, .size = size, .shared = (volatile int *)((int *)arg + 1)};
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_TIMEOUT;
    p.backend = backend;
    p.timeout_ms = OP_TIMEOUT_MS;
#ifdef TC_TEST_CUDA
    /* One GPU per rank: cuda:-1 is local_rank (the harness sets it to the rank); the test's own buffers go there. */
    if (gpu_bind(rank % gpu_count) != 0)
        return 1;
    p.field_mask |= TCOMMS_COMM_PARAM_DEVICE;
    p.device.type = TCOMMS_DEVICE_CUDA;
    p.device.index = -1;
#endif
    double t0 = mrank_now();
    tcomms_status_t st = tcomms_comm_create(&p, &x.comm);
    if (st != TCOMMS_SUCCESS) {
        mrank_logf("FAIL rank %d: tcomms_comm_create(backend %s) returned %d (%s)", rank, backend, st,
                   tcomms_last_error());
        return 1;
    }
    int fails = run_table(&x);
    st = tcomms_comm_destroy(x.comm);
    if (st != TCOMMS_SUCCESS) {
        mrank_logf("FAIL rank %d: tcomms_comm_destroy returned %d (%s)", rank, st, tcomms_last_error());
        fails++;
    }
    if (rank == 0)
        mrank_logf("test_coll: %s on %d rank(s): %d calls, %d failed case(s), %d collective(s) skipped%s, %.1f s",
                   backend, size, x.cases, fails, x.nskips, x.stop ? ", stopped early" : "", mrank_now() - t0);
    return fails;
}

/* The rank counts to run (mrank_rank_counts): 1 to 4 unless TCOMMS_TEST_RANKS or TCOMMS_TEST_MAX_RANKS say. */
static int rank_counts[MAX_RANKS];
static int nrank_counts;

START_TEST(test_coll_table)
{
    int b = _i / nrank_counts, nranks = rank_counts[_i % nrank_counts];
    /* arg[0]: the backend index; arg[1]: the barrier counter, shared with the ranks. */
    int *arg = mrank_shared_alloc(4096);
    ck_assert_ptr_nonnull(arg);
    arg[0] = b;
    int failing = mrank_run(nranks, coll_rank, arg, mrank_job_timeout(JOB_TIMEOUT_S, nranks));
    mrank_shared_free(arg, 4096);
    ck_assert_msg(failing == 0, "%s on %d rank(s): %d rank(s) failed (see stderr)", mrank_backend(b), nranks, failing);
}
END_TEST

#ifdef TC_TEST_CUDA
/* One backend, nccl, and only as many ranks as GPUs; no GPU is a skip. */
static int pick_gpus(void)
{
    char why[256] = "";
    gpu_count = gpu_probe(why, sizeof why);
    if (gpu_count == 0) {
        printf("test_coll_cuda: SKIP: no usable GPU: %s\n", why);
        return -1;
    }
    int kept = 0;
    for (int k = 0; k < nrank_counts; k++) {
        if (rank_counts[k] <= gpu_count)
            rank_counts[kept++] = rank_counts[k];
        else
            printf("test_coll_cuda: SKIP %d ranks: only %d GPU(s) visible (one rank per GPU)\n", rank_counts[k],
                   gpu_count);
    }
    nrank_counts = kept;
    if (nrank_counts == 0)
        return -1;
    printf("test_coll_cuda: %d GPU(s), libnccl.so.2 version code %d\n", gpu_count, gpu_nccl_version());
    return 0;
}
#endif

static void add_tests(Suite *s, int nbackends)
{
    int most = 0; /* ranks of the largest job, which may take longest */
    for (int k = 0; k < nrank_counts; k++)
        most = rank_counts[k] > most ? rank_counts[k] : most;
    tcase_add_loop_test(mrank_tcase(s, "table", mrank_job_timeout(JOB_TIMEOUT_S, most) + 30), test_coll_table, 0,
                        nbackends * nrank_counts);
}

int main(void)
{
    if ((nrank_counts = mrank_rank_counts(1, MAX_RANKS, rank_counts)) < 0) {
        fprintf(stderr, "test_coll: TCOMMS_TEST_RANKS / TCOMMS_TEST_MAX_RANKS must be rank counts in 1..%d\n",
                MAX_RANKS);
        return EXIT_FAILURE;
    }
#ifdef TC_TEST_CUDA
    if (pick_gpus() != 0)
        return 77;
    setenv("TCOMMS_TEST_BACKENDS", "nccl", 1); /* the one backend under test, as mrank_main reads it */
#endif
    return mrank_main("coll", MRANK_BACKEND, add_tests);
}
