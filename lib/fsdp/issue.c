/* SPDX-License-Identifier: BSD-3-Clause */
/* FSDP runtime: every collective of a step is posted here (in place, with a work handle), counted, hashed and
 * optionally logged, so tcomms_fsdp_check_issued can prove that every rank issued the same sequence; waiting and
 * the runtime's failure state live here too. */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static const char *const coll_names[] = {"all_gather", "reduce_scatter", "all_reduce"};

uint64_t tc_fsdp_hash_i64(uint64_t h, int64_t v)
{
    return tc_hash_more(h, &v, sizeof(v));
}

tcomms_status_t tc_fsdp_fail(tcomms_fsdp_t *rt, tcomms_status_t st)
{
    if (rt->failed == TCOMMS_SUCCESS) {
        rt->failed = st;
        snprintf(rt->failed_msg, sizeof(rt->failed_msg), "%s", tcomms_last_error());
    }
    return st;
}

/* The name of a domain's communicator as the issue log shows it. */
static const char *comm_name(const tcomms_fsdp_t *rt, int domain, tc_fsdp_on_t on)
{
    static const char *const dense[] = {"dp_cp", "dp_cp_ag", "dp_cp_inter", "dp_cp_intra"};
    static const char *const expert[] = {"expt_dp", "expt_dp_ag", "expt_dp_inter", "expt_dp_intra"};
    const char *const *names = domain == TC_FSDP_EXPERT ? expert : dense;
    if (on == TC_FSDP_ON_SHARD && rt->dom[domain].inter != NULL)
        return names[3];
    return names[on];
}

tcomms_status_t tc_fsdp_log_open(tcomms_fsdp_t *rt)
{
    if (rt->log_path == NULL)
        return TCOMMS_SUCCESS;
    char path[4096];
    int n = snprintf(path, sizeof(path), "%s.%d", rt->log_path, rt->members_rank);
    if (n < 0 || (size_t)n >= sizeof(path))
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_finalize: config->log_path is too long");
    rt->log = fopen(path, "a");
    if (rt->log == NULL)
        return tc_error(TCOMMS_ERR_SYSTEM, "tcomms_fsdp_finalize: cannot open the issue log '%s' "
                        "(config->log_path) for appending", path);
    return TCOMMS_SUCCESS;
}

static void note(tcomms_fsdp_t *rt, int domain, tc_fsdp_on_t on, tc_fsdp_coll_t coll, int bucket, size_t bytes)
{
    int64_t v[4] = {domain * 3 + (int)on, coll, bucket, (int64_t)bytes};
    rt->hash = tc_hash_more(rt->hash, v, sizeof(v));
    rt->issued++;
    if (rt->log != NULL) {
        fprintf(rt->log, "%llu %s %s bucket %d unit %d bytes %zu\n", (unsigned long long)rt->issued,
                comm_name(rt, domain, on), coll_names[coll], bucket, rt->buckets[bucket].unit, bytes);
        fflush(rt->log);
    }
}

static tcomms_status_t post(tcomms_fsdp_t *rt, tc_fsdp_coll_t coll, int domain, tc_fsdp_on_t on, int bucket,
                            void *buf, void *out, size_t count, tcomms_dtype_t dtype, tcomms_op_t op,
                            tcomms_work_t **work)
{
    *work = NULL;
    const tc_fsdp_domain_t *d = &rt->dom[domain];
    tcomms_comm_t *c = on == TC_FSDP_ON_SHARD ? d->shard : on == TC_FSDP_ON_AG ? d->ag : d->inter;
    int rank = on == TC_FSDP_ON_INTER ? d->inter_rank : d->shard_rank;
    int size = on == TC_FSDP_ON_INTER ? d->inter_size : d->shard_size;
    if (c == NULL || size == 1)
        return TCOMMS_SUCCESS;
    size_t esize = tcomms_dtype_size(dtype);
    note(rt, domain, on, coll, bucket, count * esize * (coll == TC_FSDP_ALL_REDUCE ? 1 : (size_t)size));
    const tcomms_op_opts_t *o = &rt->opts; /* on a GPU: the caller's stream, so the result is ordered on it */
    void *mine = out != NULL ? out : (char *)buf + (size_t)rank * count * esize;
    tcomms_status_t st;
    if (coll == TC_FSDP_ALL_GATHER)
        st = tcomms_all_gather(c, mine, buf, count, dtype, o, work);
    else if (coll == TC_FSDP_REDUCE_SCATTER)
        st = tcomms_reduce_scatter(c, buf, mine, count, dtype, op, o, work);
    else
        st = tcomms_all_reduce(c, buf, buf, count, dtype, op, o, work);
    if (st != TCOMMS_SUCCESS) {
        *work = NULL;
        return tc_fsdp_fail(rt, tc_error_prefix(st, "fsdp: %s of bucket %d on %s: ", coll_names[coll], bucket,
                                                comm_name(rt, domain, on)));
    }
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_fsdp_post(tcomms_fsdp_t *rt, tc_fsdp_coll_t coll, int domain, tc_fsdp_on_t on, int bucket,
                             void *buf, size_t count, tcomms_dtype_t dtype, tcomms_work_t **work)
{
    return post(rt, coll, domain, on, bucket, buf, NULL, count, dtype, TCOMMS_SUM, work);
}

tcomms_status_t tc_fsdp_post_scatter_into(tcomms_fsdp_t *rt, int domain, int bucket, const void *buf, void *out,
                                          size_t count, tcomms_dtype_t dtype, tcomms_op_t op, tcomms_work_t **work)
{
    return post(rt, TC_FSDP_REDUCE_SCATTER, domain, TC_FSDP_ON_SHARD, bucket, (void *)buf, out, count, dtype, op,
                work);
}

tcomms_status_t tc_fsdp_wait(tcomms_fsdp_t *rt, tcomms_work_t **work)
{
    if (*work == NULL)
        return TCOMMS_SUCCESS;
    tcomms_status_t st = tcomms_work_wait(*work, rt->cfg.timeout_ms);
    /* A wait that timed out leaves a running operation; one that itself timed out is over (test tells them apart). */
    if (st == TCOMMS_ERR_TIMEOUT && tcomms_work_test(*work) == TCOMMS_IN_PROGRESS)
        return tc_fsdp_fail(rt, tc_error_prefix(st, "fsdp: waiting for a collective: "));
    tcomms_work_free(*work);
    *work = NULL;
    if (st != TCOMMS_SUCCESS)
        return tc_fsdp_fail(rt, tc_error_prefix(st, "fsdp: a collective failed: "));
    return TCOMMS_SUCCESS;
}

static int pool_pending(const tc_fsdp_buf_t *bufs, int n, int nworks)
{
    for (int i = 0; bufs && i < n; i++)
        for (int k = 0; bufs[i].works && k < nworks; k++)
            if (bufs[i].works[k] != NULL)
                return 1;
    return 0;
}

int tc_fsdp_pending(const tcomms_fsdp_t *rt)
{
    for (int b = 0; rt->buckets && b < rt->nbuckets; b++)
        if (rt->buckets[b].red_work != NULL || rt->buckets[b].outer_work != NULL)
            return 1;
    return pool_pending(rt->ubufs, rt->nubufs, rt->max_unit_buckets) ||
           pool_pending(rt->gslots, rt->ngslots, rt->max_unit_buckets);
}

tcomms_status_t tcomms_fsdp_issued(const tcomms_fsdp_t *rt, uint64_t *count, uint64_t *hash)
{
    if (rt == NULL || count == NULL || hash == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_issued: %s is NULL",
                        rt == NULL ? "fsdp" : count == NULL ? "count" : "hash");
    *count = rt->issued;
    *hash = rt->hash;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_fsdp_check_issued(tcomms_fsdp_t *rt)
{
    const char *fn = "tcomms_fsdp_check_issued";
    tcomms_status_t st = tc_fsdp_ready(rt, fn);
    if (st != TCOMMS_SUCCESS)
        return st;
    /* Hashes are cut to 62 bits so that negating them cannot overflow: one MIN gives both extremes. */
    int64_t c = (int64_t)rt->issued, h = (int64_t)(rt->hash & ((UINT64_C(1) << 62) - 1));
    int64_t v[4] = {c, -c, h, -h};
    st = tc_fsdp_ctl(rt->groups.members, TC_FSDP_ALL_REDUCE, v, v, 4, TCOMMS_INT64, TCOMMS_MIN, rt->cfg.timeout_ms);
    if (st != TCOMMS_SUCCESS)
        return tc_error_prefix(st, "%s: over groups->members: ", fn);
    if (v[0] != -v[1] || v[2] != -v[3])
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: ranks issued different collective sequences: count %lld..%lld, "
                        "hash 0x%llx..0x%llx (here count %lld, hash 0x%llx); set config->log_path and compare the "
                        "logs", fn, (long long)v[0], (long long)-v[1], (unsigned long long)v[2],
                        (unsigned long long)-v[3], (long long)c, (unsigned long long)h);
    return TCOMMS_SUCCESS;
}
