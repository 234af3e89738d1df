/* Every collective and send/recv, on every CPU backend named by TCOMMS_TEST_BACKENDS, on 1 to 4 ranks: one table of
 * (collective x dtype x op x count x in-place x root) cases run inside one communicator per (backend, ranks), each
 * receive buffer checked element by element against coll_ref, and guards, gaps and unwritten buffers checked too. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/tcomms.h>
#include <unistd.h>

#include "coll_ref.h"
#include "mrank.h"

#define MAX_BACKENDS 8
#define MAX_RANKS 4
#define OP_TIMEOUT_MS 20000u /* a rank that stopped early makes the others fail after this, not hang */
#define JOB_TIMEOUT_S 170
#define NDTYPES ((int)TCOMMS_DTYPE_COUNT)
#define NOPS ((int)TCOMMS_OP_COUNT)

static char backends[MAX_BACKENDS][32];
static int nbackends;
static const size_t counts[] = {0, 1, 7, 13};
#define NCOUNTS ((int)(sizeof counts / sizeof counts[0]))

typedef struct ctx {
    tcomms_comm_t *comm;
    int rank, size;
    volatile int *shared; /* counter for the barrier check */
    int barrier_round;
    int stop;             /* a call failed: the ranks may be out of step, so run nothing more */
    int cases;
} ctx_t;

static void buf_init(ref_buf_t *b, tcomms_dtype_t dt, size_t n)
{
    if (ref_buf_init(b, dt, n) != 0) {
        mrank_logf("test_coll: out of memory");
        _exit(100);
    }
}

static mrank_case_t mk_case(const ctx_t *x, const char *coll, tcomms_dtype_t dt, int op, size_t n, int inplace,
                            int root)
{
    mrank_case_t c = {coll, ref_dtype_name(dt), op < 0 ? NULL : ref_op_name((tcomms_op_t)op), NULL, (long long)n,
                      inplace, root, x->rank, 0};
    return c;
}

/* 0 when st is SUCCESS; otherwise report, stop the table and return 1. */
static int failed_call(ctx_t *x, mrank_case_t *c, const char *call, tcomms_status_t st)
{
    x->cases++;
    if (st == TCOMMS_SUCCESS)
        return 0;
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
    int bad = failed_call(x, &c, "tcomms_all_reduce",
                          tcomms_all_reduce(x->comm, s.data, out->data, n, dt, op, NULL, NULL));
    if (!bad) {
        for (size_t i = 0; i < n; i++)
            out->expect[i] = ref_reduce(dt, op, x->size, i);
        bad |= ref_check(&c, inplace ? "buf" : "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    ref_buf_free(&s);
    ref_buf_free(&r);
    return bad;
}

static int t_broadcast(ctx_t *x, tcomms_dtype_t dt, size_t n, int root)
{
    mrank_case_t c = mk_case(x, "broadcast", dt, -1, n, -1, root);
    ref_buf_t b;
    buf_init(&b, dt, n);
    for (size_t i = 0; i < n; i++)
        ref_set(&b, i, ref_mov_value(x->rank, i));
    int bad = failed_call(x, &c, "tcomms_broadcast", tcomms_broadcast(x->comm, b.data, n, dt, root, NULL, NULL));
    if (!bad) {
        for (size_t i = 0; i < n; i++)
            b.expect[i] = ref_mov_value(root, i);
        bad |= ref_check(&c, "buf", &b);
    }
    ref_buf_free(&b);
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
    int bad = failed_call(x, &c, "tcomms_reduce", tcomms_reduce(x->comm, s.data, rb, n, dt, op, root, NULL, NULL));
    if (!bad) {
        for (size_t i = 0; is_root && i < n; i++)
            out->expect[i] = ref_reduce(dt, op, x->size, i);
        bad |= ref_check(&c, inplace && is_root ? "buf" : "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    ref_buf_free(&s);
    ref_buf_free(&r);
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
    int bad = failed_call(x, &c, "tcomms_all_gather", tcomms_all_gather(x->comm, sb, r.data, n, dt, NULL, NULL));
    if (!bad) {
        for (int q = 0; q < x->size; q++)
            for (size_t i = 0; i < n; i++)
                r.expect[(size_t)q * n + i] = ref_mov_value(q, i);
        bad |= ref_check(&c, "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    ref_buf_free(&s);
    ref_buf_free(&r);
    return bad;
}

/* Per-rank counts (one rank gets 0 when size > 1) and a displacement layout for the v-variants. */
static const size_t v_counts[][MAX_RANKS] = {{4, 0, 9, 1}, {13, 1, 0, 7}, {2, 5, 3, 0}, {0, 0, 0, 0}};
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
    int bad = failed_call(x, &c, "tcomms_all_gather_v",
                          tcomms_all_gather_v(x->comm, sb, r.data, cnt, dp, dt, NULL, NULL));
    if (!bad) {
        for (int q = 0; q < x->size; q++)
            for (size_t i = 0; i < cnt[q]; i++)
                r.expect[displs[q] + i] = ref_mov_value(q, i);
        bad |= ref_check(&c, "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    ref_buf_free(&s);
    ref_buf_free(&r);
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
    tcomms_status_t st = v ? tcomms_reduce_scatter_v(x->comm, s.data, rb, cnt, dt, op, NULL, NULL)
                           : tcomms_reduce_scatter(x->comm, s.data, rb, mine, dt, op, NULL, NULL);
    int bad = failed_call(x, c, v ? "tcomms_reduce_scatter_v" : "tcomms_reduce_scatter", st);
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
    ref_buf_free(&s);
    ref_buf_free(&r);
    return bad;
}

static int t_reduce_scatter(ctx_t *x, tcomms_dtype_t dt, tcomms_op_t op, size_t n, int inplace)
{
    mrank_case_t c = mk_case(x, "reduce_scatter", dt, op, n, inplace, -1);
    size_t cnt[MAX_RANKS] = {n, n, n, n};
    return t_reduce_scatter_any(x, &c, cnt, dt, op, inplace, 0);
}

static int t_reduce_scatter_v(ctx_t *x, tcomms_dtype_t dt, tcomms_op_t op, int pat, int inplace)
{
    mrank_case_t c = mk_case(x, "reduce_scatter_v", dt, op, v_counts[pat][x->rank], inplace, -1);
    c.variant = pat == 0 ? "counts {4,0,9,1}" : pat == 1 ? "counts {13,1,0,7}" : pat == 2 ? "counts {2,5,3,0}"
                                                                                           : "counts all 0";
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
    int bad = failed_call(x, &c, "tcomms_all_to_all",
                          tcomms_all_to_all(x->comm, s.data, out->data, n, dt, NULL, NULL));
    if (!bad) {
        for (int q = 0; q < x->size; q++)
            for (size_t i = 0; i < n; i++)
                out->expect[(size_t)q * n + i] = ref_mov_value(q, (size_t)x->rank * n + i);
        bad |= ref_check(&c, inplace ? "buf" : "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    ref_buf_free(&s);
    ref_buf_free(&r);
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
    int bad = failed_call(x, &c, "tcomms_all_to_all_v",
                          tcomms_all_to_all_v(x->comm, s.data, sc, packed ? NULL : sd, r.data, rc,
                                              packed ? NULL : rd, dt, NULL, NULL));
    if (!bad) {
        for (int j = 0; j < x->size; j++)
            for (size_t e = 0; e < rc[j]; e++)
                r.expect[rd[j] + e] = ref_mov_value(j, 1000u * (size_t)x->rank + e);
        bad |= ref_check(&c, "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    ref_buf_free(&s);
    ref_buf_free(&r);
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
    int bad = failed_call(x, &c, "tcomms_gather", tcomms_gather(x->comm, sb, rb, n, dt, root, NULL, NULL));
    if (!bad) {
        for (int q = 0; is_root && q < x->size; q++)
            for (size_t i = 0; i < n; i++)
                r.expect[(size_t)q * n + i] = ref_mov_value(q, i);
        bad |= ref_check(&c, "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    ref_buf_free(&s);
    ref_buf_free(&r);
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
    int bad = failed_call(x, &c, "tcomms_scatter", tcomms_scatter(x->comm, sb, rb, n, dt, root, NULL, NULL));
    if (!bad) {
        for (size_t i = 0; !(inplace && is_root) && i < n; i++)
            r.expect[i] = ref_mov_value(root, (size_t)x->rank * n + i);
        bad |= ref_check(&c, inplace && is_root ? "buf" : "sendbuf", &s);
        bad |= ref_check(&c, "recvbuf", &r);
    }
    ref_buf_free(&s);
    ref_buf_free(&r);
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
    int seen = __atomic_load_n(x->shared, __ATOMIC_SEQ_CST);
    if (seen >= x->size * round)
        return 0;
    mrank_logf("FAIL barrier rank=%d round %d: left with %d of %d ranks arrived", x->rank, round,
               seen - x->size * (round - 1), x->size);
    return 1;
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
    if (failed_call(x, &c, "tcomms_recv", tcomms_recv(x->comm, r[0].data, n, dt, prev, NULL, &w[0])) ||
        failed_call(x, &c, "tcomms_recv", tcomms_recv(x->comm, r[1].data, n, dt, prev, NULL, &w[1])) ||
        failed_call(x, &c, "tcomms_send", tcomms_send(x->comm, s[0].data, n, dt, next, NULL, &w[2])) ||
        failed_call(x, &c, "tcomms_send", tcomms_send(x->comm, s[1].data, n, dt, next, NULL, &w[3])))
        return 1; /* buffers may still be in use: leak them, the rank stops here */
    int bad = 0;
    for (int k = 0; k < 4 && !bad; k++)
        bad = failed_call(x, &c, "tcomms_work_wait", tcomms_work_wait(w[k], 0));
    if (bad)
        return 1;
    for (int k = 0; k < 4; k++)
        tcomms_work_free(w[k]);
    if (x->rank == 0)
        bad = failed_call(x, &c, "tcomms_send", tcomms_send(x->comm, s[2].data, n, dt, next, NULL, NULL)) ||
              failed_call(x, &c, "tcomms_recv", tcomms_recv(x->comm, r[2].data, n, dt, prev, NULL, NULL));
    else
        bad = failed_call(x, &c, "tcomms_recv", tcomms_recv(x->comm, r[2].data, n, dt, prev, NULL, NULL)) ||
              failed_call(x, &c, "tcomms_send", tcomms_send(x->comm, s[2].data, n, dt, next, NULL, NULL));
    for (int m = 0; m < 3; m++) {
        for (size_t i = 0; !bad && i < n; i++)
            r[m].expect[i] = ref_mov_value(prev, 500u * (size_t)m + i);
        if (!bad) {
            bad |= ref_check(&c, "sendbuf", &s[m]);
            static const char *const what[] = {"first recvbuf", "second recvbuf", "blocking recvbuf"};
            bad |= ref_check(&c, what[m], &r[m]);
        }
        ref_buf_free(&s[m]);
        ref_buf_free(&r[m]);
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
                             TCOMMS_DEVICE_CPU};
    tcomms_work_t *w[NASYNC] = {NULL, NULL, NULL, NULL};
    tcomms_status_t st[NASYNC];
    st[0] = tcomms_all_reduce(x->comm, ar_s.data, ar_r.data, n, TCOMMS_FLOAT32, TCOMMS_SUM, &opts, &w[0]);
    st[1] = tcomms_broadcast(x->comm, bc.data, n, TCOMMS_INT32, root, NULL, &w[1]);
    st[2] = tcomms_all_gather(x->comm, ag_s.data, ag_r.data, n, TCOMMS_INT8, NULL, &w[2]);
    st[3] = tcomms_reduce_scatter(x->comm, rs_s.data, rs_r.data, n, TCOMMS_FLOAT64, TCOMMS_MAX, NULL, &w[3]);
    for (int k = 0; k < NASYNC; k++) {
        if (failed_call(x, &c, "posting an operation", st[k] > 0 ? TCOMMS_SUCCESS : st[k]))
            return 1; /* others may be running on these buffers: leak them, the rank stops here */
        if (!w[k]) {
            mrank_logf("FAIL %s rank %d: operation %d returned no work handle", names[how], x->rank, k);
            x->stop = 1;
            return 1;
        }
    }
    if (finish_all(x, &c, w, how))
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
        ref_buf_free(all[k]);
    }
    return bad;
}

/* ---- the table ------------------------------------------------------------------------------------------------ */

#define RUN(expr)                                                                                                    \
    do {                                                                                                             \
        fails += (expr);                                                                                             \
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
    const char *backend = backends[((int *)arg)[0]];
    ctx_t x = {NULL, rank, size, (volatile int *)((int *)arg + 1), 0, 0, 0};
    tcomms_comm_params_t p = {0};
    p.field_mask = TCOMMS_COMM_PARAM_BACKEND | TCOMMS_COMM_PARAM_TIMEOUT;
    p.backend = backend;
    p.timeout_ms = OP_TIMEOUT_MS;
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
        mrank_logf("test_coll: %s on %d rank(s): %d calls, %d failed case(s)%s, %.1f s", backend, size, x.cases,
                   fails, x.stop ? ", stopped early" : "", mrank_now() - t0);
    return fails;
}

START_TEST(test_coll_table)
{
    int b = _i / MAX_RANKS, nranks = _i % MAX_RANKS + 1;
    /* arg[0]: the backend index; arg[1]: the barrier counter, shared with the ranks. */
    int *arg = mrank_shared_alloc(4096);
    ck_assert_ptr_nonnull(arg);
    arg[0] = b;
    int failing = mrank_run(nranks, coll_rank, arg, JOB_TIMEOUT_S);
    mrank_shared_free(arg, 4096);
    ck_assert_msg(failing == 0, "%s on %d rank(s): %d rank(s) failed (see stderr)", backends[b], nranks, failing);
}
END_TEST

int main(void)
{
    nbackends = mrank_backends(backends, MAX_BACKENDS);
    if (nbackends == 0) {
        printf("test_coll: TCOMMS_TEST_BACKENDS is empty: no CPU backend to test, skipping\n");
        return 77;
    }
    Suite *s = suite_create("coll");
    TCase *tc = tcase_create("table");
    tcase_set_timeout(tc, JOB_TIMEOUT_S + 30);
    tcase_add_loop_test(tc, test_coll_table, 0, nbackends * MAX_RANKS);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
