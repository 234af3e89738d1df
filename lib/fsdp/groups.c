/* SPDX-License-Identifier: BSD-3-Clause */
/* The FSDP communicator collection (include/tcomms/fsdp.h): tcomms_fsdp_groups_create splits `world` once per
 * group kind in one fixed order, and tc_fsdp_groups_check (groups.h) proves a struct, made here or by hand, matches
 * the layout on every member without letting a rank-dependent struct hang or abort the job. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "error.h"
#include "fsdp/groups.h"
#include "fsdp/rt.h"

#define NO_KIND (-1)

/* Every communicator field, in the order tcomms_fsdp_groups_create splits them. `kind` is the layout kind its
 * members must equal; an *_ag field follows its domain's shard communicator: `intra` when present, else `base`. */
typedef struct field {
    const char *name;
    size_t offset;
    int kind;
    int ag_intra, ag_base; /* field indexes, -1 unless an *_ag field */
} field_t;

#define FIELD(f, k) {#f, offsetof(tcomms_fsdp_groups_t, f), k, -1, -1}
enum { F_MEMBERS, F_DP_CP, F_DP_CP_INTRA, F_DP_CP_INTER, F_DP_CP_AG, F_EXPT_DP, F_EXPT_DP_INTRA, F_EXPT_DP_INTER,
       F_EXPT_DP_AG, F_COUNT = 15 };
static const field_t fields[F_COUNT] = {
    FIELD(members, NO_KIND),
    FIELD(dp_cp, TCOMMS_FSDP_GROUP_DP_CP),
    FIELD(dp_cp_intra, TCOMMS_FSDP_GROUP_DP_CP_INTRA),
    FIELD(dp_cp_inter, TCOMMS_FSDP_GROUP_DP_CP_INTER),
    {"dp_cp_ag", offsetof(tcomms_fsdp_groups_t, dp_cp_ag), NO_KIND, F_DP_CP_INTRA, F_DP_CP},
    FIELD(expt_dp, TCOMMS_FSDP_GROUP_EXPT_DP),
    FIELD(expt_dp_intra, TCOMMS_FSDP_GROUP_EXPT_DP_INTRA),
    FIELD(expt_dp_inter, TCOMMS_FSDP_GROUP_EXPT_DP_INTER),
    {"expt_dp_ag", offsetof(tcomms_fsdp_groups_t, expt_dp_ag), NO_KIND, F_EXPT_DP_INTRA, F_EXPT_DP},
    FIELD(tp, TCOMMS_FSDP_GROUP_TP),
    FIELD(cp, TCOMMS_FSDP_GROUP_CP),
    FIELD(dp, TCOMMS_FSDP_GROUP_DP),
    FIELD(pp, TCOMMS_FSDP_GROUP_PP),
    FIELD(ep, TCOMMS_FSDP_GROUP_EP),
    FIELD(expt_tp, TCOMMS_FSDP_GROUP_EXPT_TP),
};

static tcomms_comm_t **slot(tcomms_fsdp_groups_t *g, int f)
{
    return (tcomms_comm_t **)((char *)g + fields[f].offset);
}

static tcomms_comm_t *get(const tcomms_fsdp_groups_t *g, int f)
{
    return *(tcomms_comm_t *const *)((const char *)g + fields[f].offset);
}

/* ---- creation -------------------------------------------------------------------------------------------------- */

/* Every exchange below is on host buffers: tc_fsdp_ctl (ops.c) runs it on the CPU backend, or staged through the
 * GPU when a communicator has NCCL alone. */
static const tcomms_op_opts_t host_opts = {.field_mask = TCOMMS_OP_OPT_DEVICE_TYPE, .device_type = TCOMMS_DEVICE_CPU};

/* Every world rank must hold the same layout, or the splits below would pair up differently on each rank. */
static tcomms_status_t same_layout(tcomms_comm_t *world, int wsize, const tcomms_fsdp_layout_t *layout)
{
    uint64_t mine = tc_fsdp_layout_hash(layout);
    uint64_t *all = calloc((size_t)wsize, sizeof(*all));
    if (all == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_fsdp_groups_create: out of memory");
    tcomms_status_t st = tc_fsdp_ctl(world, TC_FSDP_ALL_GATHER, &mine, all, 1, TCOMMS_INT64, TCOMMS_SUM, 0);
    for (int r = 1; st == TCOMMS_SUCCESS && r < wsize; r++)
        if (all[r] != all[0])
            st = tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_groups_create: world rank %d holds layout hash "
                          "%016llx, world rank 0 holds %016llx: every rank must pass the same layout", r,
                          (unsigned long long)all[r], (unsigned long long)all[0]);
    free(all);
    return st;
}

/* Split `world` into the groups of `kind` (or, with NO_KIND, into the layout's members); ranks outside the layout
 * pass NOCOLOR. Members are ordered by their index in the layout's group. */
static tcomms_status_t split_kind(tcomms_comm_t *world, const tcomms_fsdp_layout_t *layout, int wrank, int inside,
                                  int kind, const char *name, tcomms_comm_t **out)
{
    int color = TCOMMS_SPLIT_NOCOLOR, key = 0;
    if (inside && kind == NO_KIND) {
        color = 0;
        key = wrank;
    } else if (inside) {
        tcomms_status_t st = tcomms_fsdp_layout_group_of(layout, (tcomms_fsdp_group_kind_t)kind, wrank, &color, &key);
        if (st != TCOMMS_SUCCESS)
            return st;
    }
    return tcomms_comm_split_color(world, color, key, name, NULL, out);
}

/* The all-gather duplicates' hints: nccl.cta_policy=zero where the shard communicator's GPU backend has that
 * setting (an NCCL of 2.27 or later), so all-gathers into symmetric windows (the runtime's unit buffers on a GPU) run
 * on copy engines and leave every SM to the compute they overlap. NULL elsewhere ("not applicable", or no module
 * of that namespace), and where the environment decides it (NCCL_CTA_POLICY, which NCCL applies over any config):
 * the backend's own report says which, so no backend is named here. */
static tcomms_status_t ag_hints(tcomms_comm_t *shard, tcomms_hints_t **out)
{
    *out = NULL;
    tcomms_setting_t now;
    if (tcomms_comm_setting(shard, TCOMMS_DEVICE_CUDA, "nccl.cta_policy", &now) != TCOMMS_SUCCESS ||
        strcmp(now.value, "not applicable") == 0 || now.source == TCOMMS_SETTING_ENV) {
        tc_error_clear();
        return TCOMMS_SUCCESS;
    }
    tcomms_status_t st = tcomms_hints_create(out);
    if (st == TCOMMS_SUCCESS && (st = tcomms_hints_set(*out, "nccl.cta_policy", "zero")) != TCOMMS_SUCCESS) {
        tcomms_hints_free(*out);
        *out = NULL;
    }
    return st;
}

/* A duplicate of `shard` for all-gathers: same members, same order (never derived from the layout a second time). */
static tcomms_status_t duplicate(tcomms_comm_t *shard, const char *name, tcomms_comm_t **out)
{
    int r = 0;
    tcomms_hints_t *hints = NULL;
    tcomms_status_t st = tcomms_comm_rank(shard, &r);
    if (st == TCOMMS_SUCCESS)
        st = ag_hints(shard, &hints);
    if (st == TCOMMS_SUCCESS)
        st = tcomms_comm_split_color(shard, 0, r, name, hints, out);
    tcomms_hints_free(hints);
    return st;
}

/* Every split ends with reads from the world's store. A host-blocking barrier keeps a rank that is done early (one
 * outside the layout has nothing else to do) from destroying the world while others still read: the built-in
 * store lingers for them, but a user store may go away with its host (seen as "connection to the store lost" on
 * a 5-rank run with rank_offset 1, before the built-in store lingered). */
static tcomms_status_t settle(tcomms_comm_t *world)
{
    tcomms_work_t *w = NULL;
    tcomms_status_t st = tcomms_barrier(world, NULL, &w);
    if (st == TCOMMS_SUCCESS)
        st = tcomms_work_synchronize(w, 0); /* a device world's barrier is stream-ordered: block the host */
    tcomms_work_free(w);
    return st == TCOMMS_SUCCESS ? st : tc_error_prefix(st, "tcomms_fsdp_groups_create: final barrier: ");
}

tcomms_status_t tcomms_fsdp_groups_create(tcomms_comm_t *world, const tcomms_fsdp_layout_t *layout,
                                          tcomms_fsdp_groups_t *groups)
{
    if (world == NULL || layout == NULL || groups == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_groups_create: %s is NULL",
                        world == NULL ? "world" : layout == NULL ? "layout" : "groups");
    memset(groups, 0, sizeof(*groups));
    int wrank = 0, wsize = 0, n = 0, offset = tc_fsdp_layout_offset(layout), outer = tc_fsdp_layout_outer(layout);
    tcomms_status_t st;
    if ((st = tcomms_comm_rank(world, &wrank)) != TCOMMS_SUCCESS ||
        (st = tcomms_comm_size(world, &wsize)) != TCOMMS_SUCCESS ||
        (st = tcomms_fsdp_layout_size(layout, &n)) != TCOMMS_SUCCESS)
        return st;
    if ((long long)offset + n > wsize)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_groups_create: the layout covers world ranks [%d, %d), "
                        "beyond world's %d ranks", offset, offset + n, wsize);
    if ((st = same_layout(world, wsize, layout)) != TCOMMS_SUCCESS)
        return st;
    int inside = wrank >= offset && wrank < offset + n;
    groups->owned = 1;
    for (int f = 0; f < F_COUNT && st == TCOMMS_SUCCESS; f++) {
        char name[32];
        snprintf(name, sizeof(name), "fsdp.%s", fields[f].name);
        int intra_or_inter = f == F_DP_CP_INTRA || f == F_DP_CP_INTER || f == F_EXPT_DP_INTRA || f == F_EXPT_DP_INTER;
        if (intra_or_inter && outer == 1) { /* no slicing: intra is the whole group, inter stays NULL */
            if (f == F_DP_CP_INTRA || f == F_EXPT_DP_INTRA)
                *slot(groups, f) = get(groups, f - 1);
        } else if (fields[f].ag_base >= 0) {
            tcomms_comm_t *shard = get(groups, fields[f].ag_intra);
            if (shard != NULL)
                st = duplicate(shard, name, slot(groups, f));
        } else {
            st = split_kind(world, layout, wrank, inside, fields[f].kind, name, slot(groups, f));
        }
        if (st != TCOMMS_SUCCESS)
            tc_error_prefix(st, "tcomms_fsdp_groups_create: splitting %s: ", name);
    }
    if (st == TCOMMS_SUCCESS)
        st = settle(world);
    if (st != TCOMMS_SUCCESS)
        tcomms_fsdp_groups_destroy(groups);
    return st;
}

void tcomms_fsdp_groups_destroy(tcomms_fsdp_groups_t *groups)
{
    if (groups == NULL)
        return;
    for (int f = 0; groups->owned && f < F_COUNT; f++) {
        tcomms_comm_t *c = get(groups, f);
        int first = c != NULL;
        for (int e = 0; e < f && first; e++)
            first = get(groups, e) != c;
        if (first)
            tcomms_comm_destroy(c);
    }
    memset(groups, 0, sizeof(*groups));
}

/* ---- checking ---------------------------------------------------------------------------------------------------
 * Three rounds, each an all_gather of one REC-int record per rank, so that however the structs of the ranks differ,
 * no communicator ever sees two counts (Gloo aborts the process on that):
 *   1. over members: each rank's view of every field (NULL or which field it aliases, size, rank), judged against
 *      the layout identically on every rank; a bad struct stops here on every rank;
 *   2. over each distinct communicator, posted all at once: its members' world ranks, compared with the layout;
 *   3. over members: each rank's finding of round 2, so every rank reports the same first wrong member. */

#define REC (4 + 3 * F_COUNT)
#define MAGIC 0x46534450 /* "FSDP" */

typedef struct finding {
    int code; /* tcomms_status_t; 0 = fine */
    int field, member, got, expected;
    int got_field; /* the field the member posted from; -1 when unknown */
} finding_t;

/* The kind whose group field `f` must equal on a rank whose intra field of the same domain is present or not. */
static int expected_kind(int f, int intra_present)
{
    if (fields[f].ag_base < 0)
        return fields[f].kind;
    return fields[intra_present ? fields[f].ag_intra : fields[f].ag_base].kind;
}

/* The members of the group of `kind` holding world rank `w` into `out` (room for the layout's size); its size. */
static int expected_group(const tcomms_fsdp_layout_t *layout, int kind, int w, int *out, int *scratch, int *index)
{
    int ng = 0, gs = 0, n = 0, g = 0;
    tcomms_fsdp_layout_size(layout, &n);
    if (kind == NO_KIND) { /* members: the layout's ranks in world order */
        for (int i = 0; i < n; i++)
            out[i] = tc_fsdp_layout_offset(layout) + i;
        *index = w - tc_fsdp_layout_offset(layout);
        return n;
    }
    tcomms_fsdp_layout_groups(layout, (tcomms_fsdp_group_kind_t)kind, &ng, &gs, scratch, (size_t)n);
    tcomms_fsdp_layout_group_of(layout, (tcomms_fsdp_group_kind_t)kind, w, &g, index);
    memcpy(out, scratch + (size_t)g * gs, (size_t)gs * sizeof(*out));
    return gs;
}

static void make_record(const tcomms_fsdp_groups_t *g, int32_t *rec)
{
    int r = -1, s = -1;
    tcomms_comm_rank(g->members, &r);
    tcomms_comm_size(g->members, &s);
    memset(rec, 0, REC * sizeof(*rec));
    rec[0] = MAGIC, rec[1] = 1, rec[2] = r, rec[3] = s;
    for (int f = 0; f < F_COUNT; f++) {
        int32_t *e = rec + 4 + 3 * f;
        tcomms_comm_t *c = get(g, f);
        e[0] = -1, e[1] = 0, e[2] = -1;
        for (int a = 0; c != NULL && e[0] < 0; a++)
            if (get(g, a) == c)
                e[0] = a;
        if (c != NULL && (tcomms_comm_size(c, &e[1]) != TCOMMS_SUCCESS || tcomms_comm_rank(c, &e[2]) != TCOMMS_SUCCESS))
            e[1] = e[2] = -1;
    }
}

/* Round 1's verdict from every rank's record: the same on every rank, since it reads only gathered data. */
static tcomms_status_t judge_records(const int32_t *all, int n, const tcomms_fsdp_layout_t *layout, int *list,
                                     int *scratch)
{
    int offset = tc_fsdp_layout_offset(layout), want = 0;
    tcomms_fsdp_layout_size(layout, &want);
    for (int m = 0; m < n; m++) {
        const int32_t *rec = all + (size_t)m * REC;
        int w = offset + m;
        if (rec[0] != MAGIC || rec[1] != 1)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "tc_fsdp_groups_check: members rank %d sent no field record: "
                            "its groups.members is another communicator", m);
        if (rec[3] != want || rec[2] != m)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "tc_fsdp_groups_check: communicator members on world rank %d "
                            "has rank %d of %d; the layout has %d ranks from world rank %d", w, (int)rec[2],
                            (int)rec[3], want, offset);
        for (int f = 0; f < F_COUNT; f++) {
            const int32_t *e = rec + 4 + 3 * f, *e0 = all + 4 + 3 * f;
            if (e[0] != e0[0])
                return tc_error(TCOMMS_ERR_INVALID_ARG, "tc_fsdp_groups_check: communicator %s on world rank %d is "
                                "%s%s, on world rank %d %s%s: every member's struct must have the same shape",
                                fields[f].name, w, e[0] < 0 ? "NULL" : "the one in field ",
                                e[0] < 0 ? "" : fields[e[0]].name, offset, e0[0] < 0 ? "NULL" : "the one in field ",
                                e0[0] < 0 ? "" : fields[e0[0]].name);
            if (e[0] < 0)
                continue;
            int intra = fields[f].ag_intra >= 0 && rec[4 + 3 * fields[f].ag_intra] >= 0;
            int kind = expected_kind(f, intra), index = -1;
            int size = expected_group(layout, kind, w, list, scratch, &index);
            if (e[1] != size || e[2] != index)
                return tc_error(TCOMMS_ERR_INVALID_ARG, "tc_fsdp_groups_check: communicator %s on world rank %d has "
                                "rank %d of %d; the layout's %s group holding it has world rank %d at index %d of %d",
                                fields[f].name, w, (int)e[2], (int)e[1],
                                kind == NO_KIND ? "members" : tcomms_fsdp_group_kind_name(kind), w, index, size);
        }
    }
    return TCOMMS_SUCCESS;
}

/* Round 2: all_gather this rank's world rank over each distinct communicator, all posted before any wait (a rank
 * whose fields are swapped waits on them in another order than its peers), then compare with the layout. */
static finding_t check_members(const tcomms_fsdp_groups_t *g, const tcomms_fsdp_layout_t *layout, const int32_t *mine,
                               int w, uint32_t timeout_ms, int *list, int *scratch)
{
    finding_t out = {0};
    tcomms_work_t *work[F_COUNT] = {0};
    int32_t *got[F_COUNT] = {0}, sent[F_COUNT][REC]; /* sent outlives the posts */
    tcomms_status_t posted[F_COUNT];
    tcomms_op_opts_t opts = host_opts;
    opts.field_mask |= TCOMMS_OP_OPT_TIMEOUT;
    opts.timeout_ms = timeout_ms;
    for (int f = 0; f < F_COUNT; f++) {
        const int32_t *e = mine + 4 + 3 * f;
        posted[f] = TCOMMS_SUCCESS;
        if (e[0] != f)
            continue;
        memset(sent[f], 0, sizeof(sent[f]));
        sent[f][0] = MAGIC, sent[f][1] = 2, sent[f][2] = w, sent[f][3] = f;
        got[f] = calloc((size_t)e[1] * REC, sizeof(int32_t));
        posted[f] = got[f] ? tcomms_all_gather(get(g, f), sent[f], got[f], REC, TCOMMS_INT32, &opts, &work[f])
                           : tc_error(TCOMMS_ERR_NO_MEMORY, "tc_fsdp_groups_check: out of memory");
        /* No CPU backend: one blocking staged exchange at a time (a rank with swapped fields then ends by the
         * device backend's timeout rather than by this check). */
        if (posted[f] == TCOMMS_ERR_NO_BACKEND_FOR_DEVICE)
            posted[f] = tc_fsdp_ctl(get(g, f), TC_FSDP_ALL_GATHER, sent[f], got[f], REC, TCOMMS_INT32, TCOMMS_SUM,
                                    timeout_ms);
    }
    for (int f = 0; f < F_COUNT; f++)
        if (work[f] != NULL) {
            posted[f] = tcomms_work_wait(work[f], 0);
            tcomms_work_free(work[f]);
        }
    for (int f = 0; f < F_COUNT && out.code == 0; f++) {
        const int32_t *e = mine + 4 + 3 * f;
        if (e[0] < 0)
            continue;
        if (posted[e[0]] != TCOMMS_SUCCESS) {
            out = (finding_t){posted[e[0]], f, -1, -1, -1, -1};
            continue;
        }
        int intra = fields[f].ag_intra >= 0 && mine[4 + 3 * fields[f].ag_intra] >= 0, index = -1;
        int size = expected_group(layout, expected_kind(f, intra), w, list, scratch, &index);
        for (int j = 0; j < size && out.code == 0; j++) {
            const int32_t *r = got[e[0]] + (size_t)j * REC;
            if (r[0] != MAGIC || r[1] != 2 || r[3] != e[0] || r[2] != list[j])
                out = r[0] == MAGIC && r[1] == 2
                          ? (finding_t){TCOMMS_ERR_INVALID_ARG, f, j, r[2], list[j], r[3]}
                          : (finding_t){TCOMMS_ERR_INVALID_ARG, f, j, -1, list[j], -1};
        }
    }
    for (int f = 0; f < F_COUNT; f++)
        free(got[f]);
    return out;
}

/* Round 3: every rank learns every finding and reports the first, preferring a wrong member over a failed wait. */
static tcomms_status_t agree(const tcomms_fsdp_groups_t *g, int n, int offset, finding_t mine, uint32_t timeout_ms)
{
    int32_t rec[REC] = {MAGIC, 3, mine.code, mine.field, mine.member, mine.got, mine.expected, mine.got_field};
    int32_t *all = calloc((size_t)n * REC, sizeof(*all));
    if (all == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tc_fsdp_groups_check: out of memory");
    tcomms_status_t st = tc_fsdp_ctl(g->members, TC_FSDP_ALL_GATHER, rec, all, REC, TCOMMS_INT32, TCOMMS_SUM,
                                     timeout_ms);
    int pick = -1;
    for (int m = 0; st == TCOMMS_SUCCESS && m < n; m++) {
        const int32_t *r = all + (size_t)m * REC;
        if (r[0] != MAGIC || r[1] != 3) {
            st = tc_error(TCOMMS_ERR_INVALID_ARG, "tc_fsdp_groups_check: members rank %d sent no finding: the "
                          "members' structs differ", m);
        } else if (r[2] != 0 && (pick < 0 || (all[(size_t)pick * REC + 2] != TCOMMS_ERR_INVALID_ARG &&
                                              r[2] == TCOMMS_ERR_INVALID_ARG))) {
            pick = m;
        }
    }
    if (st == TCOMMS_SUCCESS && pick >= 0) {
        const int32_t *r = all + (size_t)pick * REC;
        const char *name = r[3] >= 0 && r[3] < F_COUNT ? fields[r[3]].name : "?";
        if (r[2] == TCOMMS_ERR_INVALID_ARG && r[7] >= 0 && r[7] < F_COUNT && r[7] != r[3])
            st = tc_error(TCOMMS_ERR_INVALID_ARG, "tc_fsdp_groups_check: communicator %s on world rank %d: member %d "
                          "(world rank %d) holds it as %s", name, offset + pick, (int)r[4], (int)r[5],
                          fields[r[7]].name);
        else if (r[2] == TCOMMS_ERR_INVALID_ARG)
            st = tc_error(TCOMMS_ERR_INVALID_ARG, "tc_fsdp_groups_check: communicator %s on world rank %d: member %d "
                          "is world rank %d, the layout has world rank %d there%s", name, offset + pick, (int)r[4],
                          (int)r[5], (int)r[6], r[5] < 0 ? " (it answered another check: fields differ)" : "");
        else
            st = tc_error((tcomms_status_t)r[2], "tc_fsdp_groups_check: communicator %s on world rank %d did not "
                          "complete its check (%s): are its members holding it in the same field?", name,
                          offset + pick, tcomms_strerror((tcomms_status_t)r[2]));
    }
    free(all);
    return st;
}

tcomms_status_t tc_fsdp_groups_check(const tcomms_fsdp_groups_t *g, const tcomms_fsdp_layout_t *layout)
{
    if (g == NULL || layout == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tc_fsdp_groups_check: %s is NULL", g ? "layout" : "groups");
    if (g->members == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tc_fsdp_groups_check: groups.members is NULL (a rank outside the "
                        "layout has nothing to check)");
    int n = 0, msize = 0, offset = tc_fsdp_layout_offset(layout);
    tcomms_fsdp_layout_size(layout, &n);
    tcomms_status_t st = tcomms_comm_size(g->members, &msize);
    if (st != TCOMMS_SUCCESS)
        return st;
    int32_t mine[REC];
    make_record(g, mine);
    int cap = msize > n ? msize : n;
    int32_t *all = calloc((size_t)msize * REC, sizeof(*all));
    int *list = calloc((size_t)cap, sizeof(*list)), *scratch = calloc((size_t)cap, sizeof(*scratch));
    if (all == NULL || list == NULL || scratch == NULL)
        st = tc_error(TCOMMS_ERR_NO_MEMORY, "tc_fsdp_groups_check: out of memory");
    if (st == TCOMMS_SUCCESS)
        st = tc_fsdp_ctl(g->members, TC_FSDP_ALL_GATHER, mine, all, REC, TCOMMS_INT32, TCOMMS_SUM, 0);
    if (st == TCOMMS_SUCCESS)
        st = judge_records(all, msize, layout, list, scratch);
    if (st == TCOMMS_SUCCESS) {
        /* Round 2 ends within one timeout on every rank; round 3 waits that long again for the slowest. */
        uint32_t t = g->members->timeout_ms, limit = (UINT32_MAX - TC_WAIT_MARGIN_MS) / 2;
        t = t > limit ? limit : t;
        finding_t f = check_members(g, layout, mine, offset + mine[2], t, list, scratch);
        st = agree(g, msize, offset, f, 2 * t + TC_WAIT_MARGIN_MS);
    }
    free(all);
    free(list);
    free(scratch);
    return st;
}
