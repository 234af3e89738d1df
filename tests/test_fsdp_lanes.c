/* SPDX-License-Identifier: BSD-3-Clause */
/* The FSDP runtime's lanes on the CPU backends. On a GPU the runtime queues a gradient slot's whole reduction at
 * post_backward on its own stream (lib/fsdp/reduce.c, rt->eager), and a unit buffer's copy-in and all-gathers on
 * another (gather.c); CI has no GPU, so here a recording ops table stands in for the CUDA one after finalize: host
 * memory, work done at once, every lane switch, event and element-wise call written to a trace. The results must
 * still equal tests/fsdp_case.c's loop-computed references, and the trace must show the schedule: every add into
 * a main-grad shard on the reduction lane, entered only after it waited for the caller's lane; no gradient slot
 * zeroed on the caller's lane; the caller's lane waiting once for each slot it is handed; under ZeRO-3 every write
 * into a unit buffer on the gather lane, entered only after it waited for the caller's lane, and the caller's lane
 * waiting for the gather lane. Links the core statically to reach rt.h. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>

#include "fsdp/rt.h"
#include "fsdp_case.h"

typedef enum { R_ZERO, R_ADD, R_WRITE, R_LANE, R_SIGNAL, R_AWAIT } rkind_t; /* R_WRITE: a copy or cast */
typedef struct rec {
    rkind_t kind;
    int lane;
    const void *p;
} rec_t;

#define MAX_RECS 65536
#define MAX_SLOTS 8

static rec_t trace[MAX_RECS];
static int ntrace, lost, cur_lane;
typedef struct { const char *data; size_t bytes; } range_t;
static range_t slots[MAX_SLOTS], ubufs[MAX_SLOTS];
static int nslots, nubufs;
static tc_fsdp_ops_t rec_ops;

static void note(rkind_t kind, int lane, const void *p)
{
    if (ntrace == MAX_RECS) {
        lost++;
        return;
    }
    trace[ntrace++] = (rec_t){kind, lane, p};
}

static tcomms_status_t rec_zero(void *dev, void *buf, size_t bytes)
{
    note(R_ZERO, cur_lane, buf);
    return tc_fsdp_host_ops.zero(dev, buf, bytes);
}

static tcomms_status_t rec_add(void *dev, void *dst, tcomms_dtype_t dt, const void *src, tcomms_dtype_t st,
                               size_t n, double s, int keep)
{
    note(R_ADD, cur_lane, dst);
    return tc_fsdp_host_ops.add(dev, dst, dt, src, st, n, s, keep);
}

static tcomms_status_t rec_cast(void *dev, void *dst, tcomms_dtype_t dt, const void *src, tcomms_dtype_t st, size_t n)
{
    note(R_WRITE, cur_lane, dst);
    return tc_fsdp_host_ops.cast(dev, dst, dt, src, st, n);
}

static tcomms_status_t rec_copy(void *dev, void *dst, const void *src, size_t bytes)
{
    note(R_WRITE, cur_lane, dst);
    return tc_fsdp_host_ops.copy(dev, dst, src, bytes);
}

static tcomms_status_t rec_lane(void *dev, int lane, void **stream)
{
    (void)dev;
    cur_lane = lane;
    note(R_LANE, lane, NULL);
    *stream = NULL; /* the CPU backends ignore it: the runtime sets no TCOMMS_OP_OPT_STREAM there */
    return TCOMMS_SUCCESS;
}

static tcomms_status_t rec_signal(void *dev, int lane, int ev)
{
    (void)dev;
    (void)ev;
    note(R_SIGNAL, lane, NULL);
    return TCOMMS_SUCCESS;
}

static tcomms_status_t rec_await(void *dev, int lane, int ev)
{
    (void)dev;
    (void)ev;
    note(R_AWAIT, lane, NULL);
    return TCOMMS_SUCCESS;
}

/* case_made: the runtime takes the recording ops and the GPU's schedule. */
static void swap_ops(tcomms_fsdp_t *f, const scen_t *s)
{
    (void)s;
    rec_ops = tc_fsdp_host_ops;
    rec_ops.zero = rec_zero;
    rec_ops.add = rec_add;
    rec_ops.cast = rec_cast;
    rec_ops.copy = rec_copy;
    rec_ops.lane = rec_lane;
    rec_ops.signal = rec_signal;
    rec_ops.await = rec_await;
    f->ops = &rec_ops;
    f->eager = 1;
    ntrace = lost = cur_lane = 0;
    nslots = f->ngslots < MAX_SLOTS ? f->ngslots : MAX_SLOTS;
    for (int i = 0; i < nslots; i++)
        slots[i] = (range_t){f->gslots[i].data, f->gslots[i].bytes};
    nubufs = f->nubufs < MAX_SLOTS ? f->nubufs : MAX_SLOTS;
    for (int i = 0; i < nubufs; i++)
        ubufs[i] = (range_t){f->ubufs[i].data, f->ubufs[i].bytes};
}

static int in_range(const range_t *r, int n, const void *p)
{
    for (int i = 0; i < n; i++)
        if ((const char *)p >= r[i].data && (const char *)p < r[i].data + r[i].bytes)
            return 1;
    return 0;
}

/* Whether record i enters side lane `lane`; such an entry must come right after that lane waited for the caller's
 * (counted into *fails otherwise). */
static int entry(const scen_t *s, int i, int lane, const char *name, int *fails)
{
    if (trace[i].kind != R_LANE || trace[i].lane != lane)
        return 0;
    if (i == 0 || trace[i - 1].kind != R_AWAIT || trace[i - 1].lane != lane)
        *fails += mrank_failf("FAIL %s: record %d: the %s lane entered without waiting for the caller's first",
                              s->label, i, name);
    return 1;
}

/* The gather lane's part of the trace (ZeRO-3): writes into unit buffers there only, the lane entered after it
 * waited for the caller's, the caller's lane waiting for it (a signal there, then the caller's wait). */
static int check_gathers(const scen_t *s)
{
    int fails = 0, fills = 0, entries = 0, joins = 0;
    for (int i = 0; i < ntrace; i++) {
        const rec_t *r = &trace[i];
        if (r->kind == R_WRITE && in_range(ubufs, nubufs, r->p)) {
            fills++;
            if (r->lane != TC_FSDP_LANE_GATHER)
                fails += mrank_failf("FAIL %s: record %d: a unit buffer written on lane %d, not the gather lane",
                                     s->label, i, r->lane);
        }
        if (r->kind == R_SIGNAL && r->lane == TC_FSDP_LANE_GATHER && i + 1 < ntrace &&
            trace[i + 1].kind == R_AWAIT && trace[i + 1].lane == TC_FSDP_LANE_CALLER)
            joins++;
        entries += entry(s, i, TC_FSDP_LANE_GATHER, "gather", &fails);
    }
    if (fills == 0 || entries == 0 || joins == 0)
        fails += mrank_failf("FAIL %s: %d unit buffer writes, %d gather-lane entries, %d joins: the path did not "
                             "run", s->label, fills, entries, joins);
    return fails;
}

/* The schedule of the runtime's last run_case, from its trace. */
static int check_trace(const scen_t *s)
{
    int fails = 0, adds = 0, entries = 0, waits = 0;
    if (lost)
        return mrank_failf("FAIL %s: the trace lost %d records", s->label, lost);
    for (int i = 0; i < ntrace; i++) {
        const rec_t *r = &trace[i];
        if (r->kind == R_ADD && r->lane != TC_FSDP_LANE_REDUCE)
            fails += mrank_failf("FAIL %s: record %d: an add on lane %d, not the reduction lane", s->label, i,
                                 r->lane);
        adds += r->kind == R_ADD;
        if (r->kind == R_ZERO && r->lane == TC_FSDP_LANE_CALLER && in_range(slots, nslots, r->p))
            fails += mrank_failf("FAIL %s: record %d: a gradient slot zeroed on the caller's lane", s->label, i);
        waits += r->kind == R_AWAIT && r->lane == TC_FSDP_LANE_CALLER;
        entries += entry(s, i, TC_FSDP_LANE_REDUCE, "reduction", &fails);
    }
    if (adds == 0 || entries == 0)
        fails += mrank_failf("FAIL %s: %d adds and %d reduction-lane entries: the path did not run", s->label,
                             adds, entries);
    if (waits < entries)
        fails += mrank_failf("FAIL %s: the caller's lane waited %d times for %d slot reductions", s->label, waits,
                             entries);
    if (s->strategy == TCOMMS_FSDP_OPTIM_GRADS_PARAMS)
        fails += check_gathers(s);
    return fails;
}

static int cases_rank(int rank, int size, void *arg)
{
    const job_t *j = arg;
    /* label, strategy, outer, compute dtype, microbatches, expert, prefetch, optimizer casts, reduce dtype */
    static const scen_t dp[] = {
        {"lanes OPTIM_GRADS", TCOMMS_FSDP_OPTIM_GRADS, TCOMMS_FSDP_OUTER_NONE, TCOMMS_FLOAT32, 3, 0, 0, 0, 0},
        {"lanes OPTIM_GRADS_PARAMS", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_NONE, TCOMMS_BFLOAT16, 3, 0,
         1, 1, 0},
        {"lanes OPTIM_GRADS_PARAMS bf16 reductions", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_NONE,
         TCOMMS_BFLOAT16, 1, 0, 1, 0, TCOMMS_BFLOAT16},
    };
    static const scen_t outer[] = {
        {"lanes HSDP OPTIM_GRADS_PARAMS", TCOMMS_FSDP_OPTIM_GRADS_PARAMS, TCOMMS_FSDP_OUTER_REPLICATE,
         TCOMMS_FLOAT32, 3, 0, 1, 0, 0},
        {"lanes hybrid OPTIM_GRADS", TCOMMS_FSDP_OPTIM_GRADS, TCOMMS_FSDP_OUTER_OPTIM, TCOMMS_BFLOAT16, 3, 0, 0, 0,
         TCOMMS_BFLOAT16},
    };
    const scen_t *set = size == 4 ? outer : dp;
    int n = size == 4 ? 2 : 3;
    env_t e;
    int fails = env_open(&e, mrank_backend(j->backend), rank, size, 1, size == 4 ? 2 : 1);
    case_made = swap_ops;
    for (int i = 0; i < n && !fails; i++) {
        fails += run_case(&e, &set[i]);
        if (!fails)
            fails += check_trace(&set[i]);
    }
    env_close(&e);
    return fails;
}

START_TEST(test_lanes)
{
    run_job(cases_rank, _i / mrank_nbackends() ? 4 : 2, _i % mrank_nbackends());
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "fsdp_lanes", JOB_S + 30);
    tcase_add_loop_test(tc, test_lanes, 0, 2 * nbackends);
}

int main(void)
{
    return mrank_main("fsdp_lanes", MRANK_BACKEND, add_tests);
}
