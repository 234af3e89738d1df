/* SPDX-License-Identifier: BSD-3-Clause */
/* The FSDP rank layout and communicator collection (lib/fsdp/layout.c, lib/fsdp/groups.c): every group list against a
 * brute-force enumeration that sorts coordinate tuples (not mixed-radix arithmetic), hand-derived Megatron cases and
 * bad parameters; then, on every CPU backend, the communicators tcomms_fsdp_groups_create makes on 4 and 5 ranks,
 * and tc_fsdp_groups_check passing on them and failing, on every rank and without a hang, on corrupted structs. */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/fsdp.h>

#include "fsdp/groups.h"
#include "mrank.h"
#include "mrank_world.h"

#define NKINDS TCOMMS_FSDP_GROUP_KIND_COUNT
#define OP_TIMEOUT_MS 20000u
#define JOB_S 60

enum { TP, CP, EP, DP, PP, NTOK };
static const char *const tok_names[NTOK] = {"tp", "cp", "ep", "dp", "pp"};

/* ---- brute-force reference ------------------------------------------------------------------------------------- */

typedef struct ref {
    int n, ngroups[NKINDS], gsize[NKINDS];
    int *ranks[NKINDS];
} ref_t;

/* One rank of a layout as its coordinates; the sort below groups them. */
typedef struct point {
    int c[NTOK];
    int rank;
} point_t;

static int sort_order[NTOK], sort_len; /* positions of the order, most local first */
static unsigned sort_mask;

/* Compare digit by digit from the least local token: unmasked tokens first (the group), then masked (the member). */
static int by_group_then_member(const void *a, const void *b)
{
    const point_t *x = a, *y = b;
    for (int pass = 0; pass < 2; pass++)
        for (int i = sort_len - 1; i >= 0; i--) {
            int t = sort_order[i];
            if (((sort_mask >> t) & 1u) != (unsigned)pass)
                continue;
            if (x->c[t] != y->c[t])
                return x->c[t] < y->c[t] ? -1 : 1;
        }
    return 0;
}

/* The groups of `mask` over a layout of `sz` sizes: every coordinate tuple, sorted, cut into runs. */
static void enumerate(const int *order, int norder, const int sz[NTOK], unsigned mask, int offset, int n,
                      int *ngroups, int *gsize, int **ranks)
{
    point_t *pts = calloc((size_t)n, sizeof(*pts));
    int stride[NTOK] = {0}, s = 1, k = 0, c[NTOK];
    for (int i = 0; i < norder; i++) {
        stride[order[i]] = s;
        s *= sz[order[i]];
    }
    for (c[TP] = 0; c[TP] < sz[TP]; c[TP]++)
        for (c[CP] = 0; c[CP] < sz[CP]; c[CP]++)
            for (c[EP] = 0; c[EP] < sz[EP]; c[EP]++)
                for (c[DP] = 0; c[DP] < sz[DP]; c[DP]++)
                    for (c[PP] = 0; c[PP] < sz[PP]; c[PP]++) {
                        memcpy(pts[k].c, c, sizeof(c));
                        pts[k].rank = offset;
                        for (int t = 0; t < NTOK; t++)
                            pts[k].rank += c[t] * stride[t];
                        k++;
                    }
    memcpy(sort_order, order, sizeof(int) * (size_t)norder);
    sort_len = norder;
    sort_mask = mask;
    qsort(pts, (size_t)n, sizeof(*pts), by_group_then_member);
    *gsize = 1;
    for (int t = 0; t < NTOK; t++)
        if ((mask >> t) & 1u)
            *gsize *= sz[t];
    *ngroups = n / *gsize;
    *ranks = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        (*ranks)[i] = pts[i].rank;
    free(pts);
}

/* HSDP slices of a base kind, scattering each member to its slice and its position across slices. */
static void slice(ref_t *r, int base, int intra, int inter, int outer)
{
    int gs = r->gsize[base], q = gs / outer;
    r->ngroups[intra] = r->ngroups[base] * outer, r->gsize[intra] = q;
    r->ngroups[inter] = r->ngroups[base] * q, r->gsize[inter] = outer;
    r->ranks[intra] = malloc(sizeof(int) * (size_t)r->n);
    r->ranks[inter] = malloc(sizeof(int) * (size_t)r->n);
    for (int g = 0; g < r->ngroups[base]; g++)
        for (int p = 0; p < gs; p++) {
            int w = r->ranks[base][g * gs + p], s = p / q, j = p % q;
            r->ranks[intra][(g * outer + s) * q + j] = w;
            r->ranks[inter][(g * q + j) * outer + s] = w;
        }
}

static void ref_free(ref_t *r)
{
    for (int k = 0; k < NKINDS; k++)
        free(r->ranks[k]);
    memset(r, 0, sizeof(*r));
}

/* The reference: 0 and every group list when `p` is valid by the contract's rules, -1 when it is not. */
static int ref_build(const tcomms_fsdp_layout_params_t *p, ref_t *r)
{
    int in[NTOK] = {p->tp, p->cp, p->ep, p->dp, p->pp}, d[NTOK], e[NTOK], etp = p->expert_tp ? p->expert_tp : 1;
    int outer = p->outer_dp ? p->outer_dp : 1;
    if (p->expert_tp < 0 || p->outer_dp < 0 || p->rank_offset < 0)
        return -1;
    for (int t = 0; t < NTOK; t++) {
        if (in[t] < 0)
            return -1;
        d[t] = in[t] ? in[t] : 1;
    }
    int ep = d[EP], inner = d[TP] * d[CP] * d[DP];
    d[EP] = 1;
    if (inner % (etp * ep) != 0)
        return -1;
    e[TP] = etp, e[CP] = 1, e[EP] = ep, e[DP] = inner / (etp * ep), e[PP] = d[PP];
    int order[NTOK], norder = 0, seen[NTOK] = {0};
    char text[64];
    snprintf(text, sizeof(text), "%s", p->order ? p->order : "tp-cp-ep-dp-pp");
    char *save = NULL;
    if (text[0] == '\0' || text[0] == '-' || text[strlen(text) - 1] == '-' || strstr(text, "--"))
        return -1;
    for (char *tok = strtok_r(text, "-", &save); tok; tok = strtok_r(NULL, "-", &save)) {
        int t = 0;
        while (t < NTOK && strcmp(tok, tok_names[t]) != 0)
            t++;
        if (t == NTOK || seen[t])
            return -1;
        seen[t] = 1;
        order[norder++] = t;
    }
    for (int t = 0; t < NTOK; t++)
        if (!seen[t] && (d[t] != 1 || e[t] != 1))
            return -1;
    if ((d[DP] * d[CP]) % outer != 0 || e[DP] % outer != 0)
        return -1;
    if (order[norder - 1] != PP && d[PP] != 1 && e[DP] != d[DP])
        return -1;
    memset(r, 0, sizeof(*r));
    r->n = inner * d[PP];
    static const struct { int kind, expert; unsigned mask; } masks[] = {
        {TCOMMS_FSDP_GROUP_DP_CP, 0, 1u << DP | 1u << CP}, {TCOMMS_FSDP_GROUP_TP, 0, 1u << TP},
        {TCOMMS_FSDP_GROUP_CP, 0, 1u << CP},               {TCOMMS_FSDP_GROUP_DP, 0, 1u << DP},
        {TCOMMS_FSDP_GROUP_PP, 0, 1u << PP},               {TCOMMS_FSDP_GROUP_EP, 1, 1u << EP},
        {TCOMMS_FSDP_GROUP_EXPT_TP, 1, 1u << TP},          {TCOMMS_FSDP_GROUP_EXPT_DP, 1, 1u << DP},
    };
    for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
        int k = masks[i].kind;
        enumerate(order, norder, masks[i].expert ? e : d, masks[i].mask, p->rank_offset, r->n, &r->ngroups[k],
                  &r->gsize[k], &r->ranks[k]);
    }
    slice(r, TCOMMS_FSDP_GROUP_DP_CP, TCOMMS_FSDP_GROUP_DP_CP_INTRA, TCOMMS_FSDP_GROUP_DP_CP_INTER, outer);
    slice(r, TCOMMS_FSDP_GROUP_EXPT_DP, TCOMMS_FSDP_GROUP_EXPT_DP_INTRA, TCOMMS_FSDP_GROUP_EXPT_DP_INTER, outer);
    return 0;
}

/* ---- layout against the reference ----------------------------------------------------------------------------- */

static char *describe(const tcomms_fsdp_layout_params_t *p, char *buf, size_t len)
{
    snprintf(buf, len, "tp %d cp %d ep %d dp %d pp %d expert_tp %d outer %d offset %d order %s", p->tp, p->cp, p->ep,
             p->dp, p->pp, p->expert_tp, p->outer_dp, p->rank_offset, p->order ? p->order : "(default)");
    return buf;
}

/* Every kind's lists, and group_of for every rank, equal the reference's. Returns the number of mismatches. */
static int compare_layout(const tcomms_fsdp_layout_t *l, const ref_t *r, const char *what)
{
    int fails = 0, n = 0, offset = r->ranks[TCOMMS_FSDP_GROUP_DP_CP][0];
    for (int i = 1; i < r->n; i++)
        offset = r->ranks[TCOMMS_FSDP_GROUP_DP_CP][i] < offset ? r->ranks[TCOMMS_FSDP_GROUP_DP_CP][i] : offset;
    ck_assert_int_eq(tcomms_fsdp_layout_size(l, &n), TCOMMS_SUCCESS);
    ck_assert_msg(n == r->n, "%s: size %d, expected %d", what, n, r->n);
    int *got = malloc(sizeof(int) * (size_t)n);
    for (int k = 0; k < NKINDS && !fails; k++) {
        int ng = -1, gs = -1;
        ck_assert_int_eq(tcomms_fsdp_layout_groups(l, k, &ng, &gs, got, (size_t)n), TCOMMS_SUCCESS);
        if (ng != r->ngroups[k] || gs != r->gsize[k]) {
            fprintf(stderr, "FAIL %s: %s: %d groups of %d, expected %d of %d\n", what, tcomms_fsdp_group_kind_name(k),
                    ng, gs, r->ngroups[k], r->gsize[k]);
            fails++;
            continue;
        }
        for (int i = 0; i < n && !fails; i++)
            if (got[i] != r->ranks[k][i])
                fails += fprintf(stderr, "FAIL %s: %s group %d member %d is %d, expected %d\n", what,
                                 tcomms_fsdp_group_kind_name(k), i / gs, i % gs, got[i], r->ranks[k][i]) > 0;
        for (int w = offset; w < offset + n && !fails; w++) {
            int g = -1, idx = -1;
            tcomms_status_t st = tcomms_fsdp_layout_group_of(l, k, w, &g, &idx);
            if (st != TCOMMS_SUCCESS || g < 0 || g >= ng || idx < 0 || idx >= gs || got[g * gs + idx] != w)
                fails += fprintf(stderr, "FAIL %s: group_of(%s, %d) = (%d, %d), status %d\n", what,
                                 tcomms_fsdp_group_kind_name(k), w, g, idx, st) > 0;
        }
    }
    free(got);
    return fails;
}

START_TEST(test_against_brute_force)
{
    static const char *const orders[] = {"tp-cp-ep-dp-pp", "tp-cp-ep-pp-dp", "tp-dp-cp-pp", "pp-dp-tp",
                                         "dp-tp-cp-ep-pp", "ep-tp-pp-cp-dp", NULL};
    static const int tps[] = {1, 2, 3}, cps[] = {1, 2}, eps[] = {1, 2}, dps[] = {1, 2, 4}, pps[] = {1, 2};
    static const int etps[] = {1, 2}, outers[] = {0, 1, 2}, offsets[] = {0, 3};
    int valid = 0, invalid = 0, fails = 0;
    for (size_t o = 0; o < sizeof(orders) / sizeof(orders[0]); o++)
        for (int a = 0; a < 3; a++) for (int b = 0; b < 2; b++) for (int c = 0; c < 2; c++)
        for (int d = 0; d < 3; d++) for (int e = 0; e < 2; e++) for (int f = 0; f < 2; f++)
        for (int g = 0; g < 3; g++) for (int h = 0; h < 2; h++) {
            tcomms_fsdp_layout_params_t p = {.tp = tps[a], .cp = cps[b], .ep = eps[c], .dp = dps[d], .pp = pps[e],
                                             .expert_tp = etps[f], .outer_dp = outers[g], .order = orders[o],
                                             .rank_offset = offsets[h]};
            char what[160];
            describe(&p, what, sizeof(what));
            ref_t r;
            int ok = ref_build(&p, &r) == 0;
            tcomms_fsdp_layout_t *l = NULL;
            tcomms_status_t st = tcomms_fsdp_layout_create(&p, &l);
            if (!ok) {
                invalid++;
                ck_assert_msg(st == TCOMMS_ERR_INVALID_ARG && *tcomms_last_error(), "%s: the reference rejects it, "
                              "create returned %d", what, st);
                continue;
            }
            valid++;
            ck_assert_msg(st == TCOMMS_SUCCESS, "%s: create returned %d: %s", what, st, tcomms_last_error());
            fails += compare_layout(l, &r, what);
            tcomms_fsdp_layout_free(l);
            ref_free(&r);
            ck_assert_msg(fails == 0, "%s: layout differs from the brute-force reference (see stderr)", what);
        }
    ck_assert_msg(valid > 500 && invalid > 100, "only %d valid and %d invalid combinations were tried", valid,
                  invalid);
}
END_TEST

/* ---- hand-derived cases ---------------------------------------------------------------------------------------- */

typedef struct hand {
    tcomms_fsdp_layout_params_t p;
    int kind, ngroups, gsize;
    int ranks[16];
} hand_t;

START_TEST(test_hand_cases)
{
    static const tcomms_fsdp_layout_params_t t2d2p2 = {.tp = 2, .dp = 2, .pp = 2};
    static const tcomms_fsdp_layout_params_t t2c2d2o2 = {.tp = 2, .cp = 2, .dp = 2, .outer_dp = 2};
    static const tcomms_fsdp_layout_params_t moe = {.tp = 2, .dp = 2, .ep = 2, .expert_tp = 1};
    static const tcomms_fsdp_layout_params_t pdt = {.tp = 2, .dp = 2, .pp = 2, .expert_tp = 2, .order = "pp-dp-tp",
                                                     .rank_offset = 1};
    const hand_t cases[] = {
        /* tp-cp-ep-dp-pp, strides tp 1, dp 2, pp 4 */
        {t2d2p2, TCOMMS_FSDP_GROUP_DP, 4, 2, {0, 2, 1, 3, 4, 6, 5, 7}},
        {t2d2p2, TCOMMS_FSDP_GROUP_DP_CP, 4, 2, {0, 2, 1, 3, 4, 6, 5, 7}},
        {t2d2p2, TCOMMS_FSDP_GROUP_TP, 4, 2, {0, 1, 2, 3, 4, 5, 6, 7}},
        {t2d2p2, TCOMMS_FSDP_GROUP_PP, 4, 2, {0, 4, 1, 5, 2, 6, 3, 7}},
        {t2d2p2, TCOMMS_FSDP_GROUP_DP_CP_INTER, 8, 1, {0, 2, 1, 3, 4, 6, 5, 7}},
        /* strides tp 1, cp 2, dp 4: dp-cp groups [0,2,4,6] [1,3,5,7], cut in halves for HSDP */
        {t2c2d2o2, TCOMMS_FSDP_GROUP_CP, 4, 2, {0, 2, 1, 3, 4, 6, 5, 7}},
        {t2c2d2o2, TCOMMS_FSDP_GROUP_DP, 4, 2, {0, 4, 1, 5, 2, 6, 3, 7}},
        {t2c2d2o2, TCOMMS_FSDP_GROUP_DP_CP, 2, 4, {0, 2, 4, 6, 1, 3, 5, 7}},
        {t2c2d2o2, TCOMMS_FSDP_GROUP_DP_CP_INTRA, 4, 2, {0, 2, 4, 6, 1, 3, 5, 7}},
        {t2c2d2o2, TCOMMS_FSDP_GROUP_DP_CP_INTER, 4, 2, {0, 4, 2, 6, 1, 5, 3, 7}},
        /* expert layout: expert_tp 1, ep 2 (stride 1), expert_dp 2 (stride 2) */
        {moe, TCOMMS_FSDP_GROUP_EP, 2, 2, {0, 1, 2, 3}},
        {moe, TCOMMS_FSDP_GROUP_EXPT_DP, 2, 2, {0, 2, 1, 3}},
        {moe, TCOMMS_FSDP_GROUP_EXPT_TP, 4, 1, {0, 1, 2, 3}},
        {moe, TCOMMS_FSDP_GROUP_TP, 2, 2, {0, 1, 2, 3}},
        /* pp-dp-tp from world rank 1 (expert_dp == dp, as pp is not last): strides pp 1, dp 2, tp 4 */
        {pdt, TCOMMS_FSDP_GROUP_TP, 4, 2, {1, 5, 2, 6, 3, 7, 4, 8}},
        {pdt, TCOMMS_FSDP_GROUP_DP, 4, 2, {1, 3, 2, 4, 5, 7, 6, 8}},
        {pdt, TCOMMS_FSDP_GROUP_PP, 4, 2, {1, 2, 3, 4, 5, 6, 7, 8}},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        tcomms_fsdp_layout_t *l = NULL;
        ck_assert_msg(tcomms_fsdp_layout_create(&cases[c].p, &l) == TCOMMS_SUCCESS, "case %zu: %s", c,
                      tcomms_last_error());
        int got[16], ng = 0, gs = 0;
        ck_assert_int_eq(tcomms_fsdp_layout_groups(l, cases[c].kind, &ng, &gs, got, 16), TCOMMS_SUCCESS);
        ck_assert_msg(ng == cases[c].ngroups && gs == cases[c].gsize, "case %zu (%s): %d groups of %d", c,
                      tcomms_fsdp_group_kind_name(cases[c].kind), ng, gs);
        for (int i = 0; i < ng * gs; i++)
            ck_assert_msg(got[i] == cases[c].ranks[i], "case %zu (%s): element %d is %d, expected %d", c,
                          tcomms_fsdp_group_kind_name(cases[c].kind), i, got[i], cases[c].ranks[i]);
        tcomms_fsdp_layout_free(l);
    }
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------------------------------- */

START_TEST(test_bad_params)
{
    static const struct { tcomms_fsdp_layout_params_t p; const char *named; } bad[] = {
        {{.tp = -1}, "tp"}, {{.cp = -2}, "cp"}, {{.ep = -1}, "ep"}, {{.dp = -1}, "dp"}, {{.pp = -1}, "pp"},
        {{.expert_tp = -1}, "expert_tp"}, {{.outer_dp = -1}, "outer_dp"}, {{.rank_offset = -1}, "rank_offset"},
        {{.order = "tp-cp-ep-dp-xx"}, "xx"}, {{.order = "tp-cp-ep-dp-pp-tp"}, "twice"},
        {{.order = "tp--cp-ep-dp-pp"}, "unknown"}, {{.order = ""}, "unknown"},
        {{.order = "tp-cp-ep-dp-pp-"}, "unknown"},
        {{.ep = 2, .dp = 2, .order = "tp-cp-dp-pp"}, "\"ep\""},
        {{.dp = 4, .expert_tp = 2, .order = "cp-ep-dp-pp"}, "\"tp\""},
        {{.dp = 3, .ep = 2}, "expert_dp"}, {{.dp = 4, .outer_dp = 3}, "outer_dp"},
        {{.dp = 4, .ep = 4, .outer_dp = 2}, "expert_dp"},
        {{.dp = 2, .ep = 2, .pp = 2, .order = "tp-cp-ep-pp-dp"}, "pp"},
        {{.tp = 65536, .dp = 65536}, "range"}, {{.dp = 2, .rank_offset = 2147483647}, "range"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tcomms_fsdp_layout_t *l = (tcomms_fsdp_layout_t *)&l;
        tcomms_status_t st = tcomms_fsdp_layout_create(&bad[i].p, &l);
        const char *msg = tcomms_last_error();
        ck_assert_msg(st == TCOMMS_ERR_INVALID_ARG && l == NULL, "case %zu: status %d", i, st);
        ck_assert_msg(strstr(msg, bad[i].named) != NULL, "case %zu: message \"%s\" does not name \"%s\"", i, msg,
                      bad[i].named);
    }
    tcomms_fsdp_layout_t *l = NULL;
    tcomms_fsdp_layout_params_t p = {.tp = 2, .dp = 2, .rank_offset = 2};
    ck_assert_int_eq(tcomms_fsdp_layout_create(NULL, &l), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_fsdp_layout_create(&p, NULL), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_fsdp_layout_create(&p, &l), TCOMMS_SUCCESS);
    int ranks[4], ng = 0, gs = 0, g = 0, idx = 0;
    ck_assert_int_eq(tcomms_fsdp_layout_groups(l, TCOMMS_FSDP_GROUP_TP, &ng, &gs, NULL, 0), TCOMMS_SUCCESS);
    ck_assert_int_eq(ng * gs, 4);
    ck_assert_int_eq(tcomms_fsdp_layout_groups(l, TCOMMS_FSDP_GROUP_TP, &ng, &gs, ranks, 3), TCOMMS_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "cap"));
    ck_assert_int_eq(tcomms_fsdp_layout_groups(l, NKINDS, &ng, &gs, ranks, 4), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_fsdp_layout_groups(NULL, TCOMMS_FSDP_GROUP_TP, &ng, &gs, ranks, 4),
                     TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_fsdp_layout_group_of(l, TCOMMS_FSDP_GROUP_TP, 1, &g, &idx), TCOMMS_ERR_INVALID_ARG);
    ck_assert_ptr_nonnull(strstr(tcomms_last_error(), "rank 1"));
    ck_assert_int_eq(tcomms_fsdp_layout_group_of(l, TCOMMS_FSDP_GROUP_TP, 6, &g, &idx), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_fsdp_layout_group_of(l, TCOMMS_FSDP_GROUP_TP, 5, &g, &idx), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_fsdp_layout_group_of(l, -1, 5, &g, &idx), TCOMMS_ERR_INVALID_ARG);
    ck_assert_int_eq(tcomms_fsdp_layout_group_of(l, TCOMMS_FSDP_GROUP_TP, 5, NULL, &idx), TCOMMS_ERR_INVALID_ARG);
    ck_assert_ptr_null(tcomms_fsdp_group_kind_name(NKINDS));
    ck_assert_str_eq(tcomms_fsdp_group_kind_name(TCOMMS_FSDP_GROUP_EXPT_DP_INTRA), "expt_dp_intra");
    ck_assert_int_eq(tc_fsdp_layout_offset(l), 2);
    ck_assert_int_eq(tc_fsdp_layout_outer(l), 1);
    /* the hash follows every field; equal layouts hash equal */
    tcomms_fsdp_layout_t *same = NULL, *other = NULL;
    tcomms_fsdp_layout_params_t q = p;
    q.order = "tp-cp-ep-dp-pp";
    ck_assert_int_eq(tcomms_fsdp_layout_create(&q, &same), TCOMMS_SUCCESS);
    ck_assert(tc_fsdp_layout_hash(l) == tc_fsdp_layout_hash(same));
    q.order = "dp-tp-cp-ep-pp";
    ck_assert_int_eq(tcomms_fsdp_layout_create(&q, &other), TCOMMS_SUCCESS);
    ck_assert(tc_fsdp_layout_hash(l) != tc_fsdp_layout_hash(other));
    tcomms_fsdp_layout_free(other);
    q = p;
    q.rank_offset = 3;
    ck_assert_int_eq(tcomms_fsdp_layout_create(&q, &other), TCOMMS_SUCCESS);
    ck_assert(tc_fsdp_layout_hash(l) != tc_fsdp_layout_hash(other));
    tcomms_fsdp_layout_free(other);
    tcomms_fsdp_layout_free(same);
    tcomms_fsdp_layout_free(l);
    tcomms_fsdp_layout_free(NULL);
}
END_TEST

/* ---- communicators on several ranks ---------------------------------------------------------------------------- */

typedef struct shared {
    int backend;
} shared_t;

#define AG_DENSE (-2)
#define AG_EXPERT (-3)
#define MEMBERS (-1)
static const struct { const char *name; size_t off; int kind; } tfields[] = {
    {"members", offsetof(tcomms_fsdp_groups_t, members), MEMBERS},
    {"dp_cp", offsetof(tcomms_fsdp_groups_t, dp_cp), TCOMMS_FSDP_GROUP_DP_CP},
    {"dp_cp_ag", offsetof(tcomms_fsdp_groups_t, dp_cp_ag), AG_DENSE},
    {"dp_cp_intra", offsetof(tcomms_fsdp_groups_t, dp_cp_intra), TCOMMS_FSDP_GROUP_DP_CP_INTRA},
    {"dp_cp_inter", offsetof(tcomms_fsdp_groups_t, dp_cp_inter), TCOMMS_FSDP_GROUP_DP_CP_INTER},
    {"expt_dp", offsetof(tcomms_fsdp_groups_t, expt_dp), TCOMMS_FSDP_GROUP_EXPT_DP},
    {"expt_dp_ag", offsetof(tcomms_fsdp_groups_t, expt_dp_ag), AG_EXPERT},
    {"expt_dp_intra", offsetof(tcomms_fsdp_groups_t, expt_dp_intra), TCOMMS_FSDP_GROUP_EXPT_DP_INTRA},
    {"expt_dp_inter", offsetof(tcomms_fsdp_groups_t, expt_dp_inter), TCOMMS_FSDP_GROUP_EXPT_DP_INTER},
    {"tp", offsetof(tcomms_fsdp_groups_t, tp), TCOMMS_FSDP_GROUP_TP},
    {"cp", offsetof(tcomms_fsdp_groups_t, cp), TCOMMS_FSDP_GROUP_CP},
    {"dp", offsetof(tcomms_fsdp_groups_t, dp), TCOMMS_FSDP_GROUP_DP},
    {"pp", offsetof(tcomms_fsdp_groups_t, pp), TCOMMS_FSDP_GROUP_PP},
    {"ep", offsetof(tcomms_fsdp_groups_t, ep), TCOMMS_FSDP_GROUP_EP},
    {"expt_tp", offsetof(tcomms_fsdp_groups_t, expt_tp), TCOMMS_FSDP_GROUP_EXPT_TP},
};
#define NFIELDS ((int)(sizeof(tfields) / sizeof(tfields[0])))

static tcomms_comm_t **field(tcomms_fsdp_groups_t *g, const char *name)
{
    for (int f = 0; f < NFIELDS; f++)
        if (strcmp(tfields[f].name, name) == 0)
            return (tcomms_comm_t **)((char *)g + tfields[f].off);
    return NULL;
}

/* `c` has `w` at its index in `list`, and an all_gather of world ranks over it gives back `list`. */
static int verify_comm(tcomms_comm_t *c, const int *list, int n, int w, const char *label, const char *name)
{
    int me = -1, rank = -1, size = -1, fails = 0;
    for (int k = 0; k < n; k++)
        me = list[k] == w ? k : me;
    if (c == NULL)
        return mrank_failf("FAIL world rank %d, %s: %s is NULL", w, label, name);
    if (tcomms_comm_rank(c, &rank) != TCOMMS_SUCCESS || tcomms_comm_size(c, &size) != TCOMMS_SUCCESS ||
        rank != me || size != n)
        return mrank_failf("FAIL world rank %d, %s: %s has rank %d of %d, expected %d of %d", w, label, name, rank,
                           size, me, n);
    int32_t mine = w, got[16];
    tcomms_status_t st = tcomms_all_gather(c, &mine, got, 1, TCOMMS_INT32, NULL, NULL);
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL world rank %d, %s: all_gather on %s: %s", w, label, name, tcomms_last_error());
    for (int k = 0; k < n; k++)
        if (got[k] != list[k])
            fails += mrank_failf("FAIL world rank %d, %s: %s member %d is world rank %d, expected %d", w, label,
                                 name, k, (int)got[k], list[k]);
    return fails;
}

/* The members of the layout's group of `kind` holding `w`. */
static int layout_group(const tcomms_fsdp_layout_t *l, int kind, int w, int *list)
{
    int all[64], ng = 0, gs = 0, g = 0, idx = 0;
    ck_assert_int_eq(tcomms_fsdp_layout_groups(l, kind, &ng, &gs, all, 64), TCOMMS_SUCCESS);
    ck_assert_int_eq(tcomms_fsdp_layout_group_of(l, kind, w, &g, &idx), TCOMMS_SUCCESS);
    memcpy(list, all + g * gs, sizeof(int) * (size_t)gs);
    return gs;
}

/* Every field of `g` against the layout: members, order, the *_ag duplicates, the outer_dp == 1 aliases. */
static int verify_groups(tcomms_fsdp_groups_t *g, const tcomms_fsdp_layout_t *l, int w, const char *label)
{
    int n = 0, offset = tc_fsdp_layout_offset(l), outer = tc_fsdp_layout_outer(l), fails = 0, list[64];
    tcomms_fsdp_layout_size(l, &n);
    if (w < offset || w >= offset + n) {
        for (int f = 0; f < NFIELDS; f++)
            if (*field(g, tfields[f].name) != NULL)
                fails += mrank_failf("FAIL world rank %d, %s: outside the layout, %s is not NULL", w, label,
                                     tfields[f].name);
        return fails;
    }
    for (int f = 0; f < NFIELDS; f++) {
        tcomms_comm_t *c = *field(g, tfields[f].name);
        int kind = tfields[f].kind, size;
        if (kind == MEMBERS) {
            for (size = 0; size < n; size++)
                list[size] = offset + size;
        } else if (kind == AG_DENSE || kind == AG_EXPERT) {
            tcomms_comm_t *shard = *field(g, kind == AG_DENSE ? "dp_cp_intra" : "expt_dp_intra");
            if (c == shard)
                fails += mrank_failf("FAIL world rank %d, %s: %s is its shard communicator, not a duplicate", w,
                                     label, tfields[f].name);
            size = layout_group(l, kind == AG_DENSE ? TCOMMS_FSDP_GROUP_DP_CP_INTRA : TCOMMS_FSDP_GROUP_EXPT_DP_INTRA,
                                w, list);
        } else if (outer == 1 && (kind == TCOMMS_FSDP_GROUP_DP_CP_INTER || kind == TCOMMS_FSDP_GROUP_EXPT_DP_INTER)) {
            if (c != NULL)
                fails += mrank_failf("FAIL world rank %d, %s: %s is not NULL with outer_dp 1", w, label,
                                     tfields[f].name);
            continue;
        } else {
            size = layout_group(l, kind, w, list);
        }
        if (outer == 1 && kind == TCOMMS_FSDP_GROUP_DP_CP_INTRA && c != g->dp_cp)
            fails += mrank_failf("FAIL world rank %d, %s: dp_cp_intra is not dp_cp with outer_dp 1", w, label);
        if (outer == 1 && kind == TCOMMS_FSDP_GROUP_EXPT_DP_INTRA && c != g->expt_dp)
            fails += mrank_failf("FAIL world rank %d, %s: expt_dp_intra is not expt_dp with outer_dp 1", w, label);
        fails += verify_comm(c, list, size, w, label, tfields[f].name);
    }
    return fails;
}

/* tc_fsdp_groups_check on a copy of `g` with fields a and b swapped on the ranks in `on` (bit per world rank)
 * must be INVALID_ARG naming one of them, on every rank, not a timeout. */
static int corrupted(const tcomms_fsdp_groups_t *g, const tcomms_fsdp_layout_t *l, int w, unsigned on,
                     const char *a, const char *b)
{
    tcomms_fsdp_groups_t bad = *g;
    bad.owned = 0;
    if ((on >> w) & 1u) {
        tcomms_comm_t *t = *field(&bad, a);
        *field(&bad, a) = *field(&bad, b);
        *field(&bad, b) = t;
    }
    tcomms_status_t st = tc_fsdp_groups_check(&bad, l);
    const char *msg = tcomms_last_error();
    if (st != TCOMMS_ERR_INVALID_ARG || (!strstr(msg, a) && !strstr(msg, b)))
        return mrank_failf("FAIL world rank %d: %s and %s swapped on ranks 0x%x: check returned %d (%s)", w, a, b,
                           on, st, msg);
    return 0;
}

/* Create the groups of `p`, check them by hand and with tc_fsdp_groups_check; keep them in *kept if asked. */
static int layout_case(tcomms_comm_t *world, int w, const tcomms_fsdp_layout_params_t *p, const char *label,
                       tcomms_fsdp_groups_t *kept, tcomms_fsdp_layout_t **kept_layout)
{
    tcomms_fsdp_layout_t *l = NULL;
    tcomms_fsdp_groups_t g;
    tcomms_status_t st = tcomms_fsdp_layout_create(p, &l);
    if (st != TCOMMS_SUCCESS)
        return mrank_failf("FAIL world rank %d, %s: layout: %s", w, label, tcomms_last_error());
    st = tcomms_fsdp_groups_create(world, l, &g);
    int fails = st != TCOMMS_SUCCESS ? mrank_failf("FAIL world rank %d, %s: groups_create: %s", w, label,
                                                   tcomms_last_error())
                                     : verify_groups(&g, l, w, label);
    if (!fails && g.members != NULL && (st = tc_fsdp_groups_check(&g, l)) != TCOMMS_SUCCESS)
        fails += mrank_failf("FAIL world rank %d, %s: tc_fsdp_groups_check: %s", w, label, tcomms_last_error());
    if (!fails && g.members == NULL && tc_fsdp_groups_check(&g, l) != TCOMMS_ERR_INVALID_ARG)
        fails += mrank_failf("FAIL world rank %d, %s: check of an all-NULL struct passed", w, label);
    if (kept && !fails) {
        *kept = g;
        *kept_layout = l;
        return 0;
    }
    if (st == TCOMMS_SUCCESS)
        tcomms_fsdp_groups_destroy(&g);
    tcomms_fsdp_layout_free(l);
    return fails;
}

static int four_ranks(int rank, int size, void *arg)
{
    (void)size;
    shared_t *sh = arg;
    tcomms_comm_t *world = mrank_world(mrank_backend(sh->backend), OP_TIMEOUT_MS, rank);
    if (!world)
        return 1;
    const tcomms_fsdp_layout_params_t dense = {.tp = 2, .dp = 2}, hsdp = {.dp = 4, .outer_dp = 2};
    const tcomms_fsdp_layout_params_t moe = {.tp = 2, .dp = 2, .ep = 2}, moe_hsdp = {.dp = 4, .ep = 2, .outer_dp = 2};
    tcomms_fsdp_groups_t g;
    tcomms_fsdp_layout_t *l = NULL;
    int fails = layout_case(world, rank, &moe, "tp 2 dp 2 ep 2", NULL, NULL);
    fails += layout_case(world, rank, &moe_hsdp, "dp 4 ep 2 outer_dp 2", NULL, NULL);
    fails += layout_case(world, rank, &hsdp, "dp 4 outer_dp 2", &g, &l);
    if (!fails) { /* rank 1 passes both checks of round 1; only round 2 can tell */
        fails += corrupted(&g, l, rank, 1u << 1, "dp_cp_intra", "dp_cp_ag");
        fails += corrupted(&g, l, rank, 1u << 3, "dp_cp_inter", "dp");
        fails += tc_fsdp_groups_check(&g, l) != TCOMMS_SUCCESS;
        tcomms_fsdp_groups_destroy(&g);
        tcomms_fsdp_layout_free(l);
    }
    fails += layout_case(world, rank, &dense, "tp 2 dp 2", &g, &l);
    if (!fails) {
        fails += corrupted(&g, l, rank, 1u << 0, "tp", "dp");  /* same size and rank on rank 0: round 2 */
        fails += corrupted(&g, l, rank, 1u << 1, "tp", "dp");  /* rank 1's ranks differ: round 1 */
        fails += corrupted(&g, l, rank, 1u << 2, "dp_cp", "dp_cp_ag");
        fails += corrupted(&g, l, rank, 0xfu, "tp", "dp");
        fails += corrupted(&g, l, rank, 0xfu, "dp_cp_ag", "pp");
        if (tc_fsdp_groups_check(&g, l) != TCOMMS_SUCCESS)
            fails += mrank_failf("FAIL world rank %d: the intact struct fails after the corrupted ones: %s", rank,
                                 tcomms_last_error());
        tcomms_fsdp_groups_destroy(&g);
        for (int f = 0; f < NFIELDS; f++)
            fails += *field(&g, tfields[f].name) != NULL;
        /* create/destroy cycles must not leave communicators (sockets) behind */
        int fd0 = mrank_count_fds();
        for (int c = 0; c < 3 && !fails; c++) {
            if (tcomms_fsdp_groups_create(world, l, &g) != TCOMMS_SUCCESS)
                fails += mrank_failf("FAIL world rank %d: cycle %d: %s", rank, c, tcomms_last_error());
            else
                tcomms_fsdp_groups_destroy(&g);
        }
        if (!fails && mrank_count_fds() > fd0)
            fails += mrank_failf("FAIL world rank %d: fds grew from %d to %d over create/destroy", rank, fd0,
                                 mrank_count_fds());
        tcomms_fsdp_layout_free(l);
    }
    /* a layout that differs on one rank, or outgrows the world, is refused on every rank */
    tcomms_fsdp_layout_params_t odd = rank == 3 ? hsdp : dense, big = {.dp = 8};
    const char *want[] = {"hash", "beyond"};
    const tcomms_fsdp_layout_params_t *bad[] = {&odd, &big};
    for (int b = 0; b < 2; b++) {
        tcomms_fsdp_layout_create(bad[b], &l);
        tcomms_status_t st = tcomms_fsdp_groups_create(world, l, &g);
        if (st != TCOMMS_ERR_INVALID_ARG || !strstr(tcomms_last_error(), want[b]))
            fails += mrank_failf("FAIL world rank %d: bad layout %d: status %d (%s)", rank, b, st,
                                 tcomms_last_error());
        if (st == TCOMMS_SUCCESS)
            tcomms_fsdp_groups_destroy(&g);
        tcomms_fsdp_layout_free(l);
    }
    tcomms_comm_destroy(world);
    return fails;
}

/* Five ranks, a layout from world rank 1 in a non-default order: rank 0 gets NULLs and takes no part in checks. */
static int five_ranks(int rank, int size, void *arg)
{
    (void)size;
    shared_t *sh = arg;
    tcomms_comm_t *world = mrank_world(mrank_backend(sh->backend), OP_TIMEOUT_MS, rank);
    if (!world)
        return 1;
    const tcomms_fsdp_layout_params_t p = {.tp = 2, .dp = 2, .ep = 2, .order = "dp-ep-tp-cp-pp", .rank_offset = 1};
    const tcomms_fsdp_layout_params_t q = {.tp = 2, .dp = 2, .order = "dp-tp-cp-ep-pp", .rank_offset = 1};
    tcomms_fsdp_groups_t g;
    tcomms_fsdp_layout_t *l = NULL;
    int fails = layout_case(world, rank, &p, "offset 1, dp-ep-tp-cp-pp, ep 2", NULL, NULL);
    fails += layout_case(world, rank, &q, "offset 1, dp-tp-cp-ep-pp", &g, &l);
    if (!fails && rank > 0) {
        fails += corrupted(&g, l, rank, 1u << 1, "tp", "dp"); /* same size and rank on world rank 1 */
        tcomms_fsdp_groups_destroy(&g);
    }
    tcomms_fsdp_layout_free(l);
    tcomms_comm_destroy(world);
    return fails;
}

static void run_job(int nranks, mrank_fn_t fn, int backend)
{
    shared_t *sh = mrank_shared_alloc(sizeof *sh);
    ck_assert_ptr_nonnull(sh);
    sh->backend = backend;
    int failing = mrank_run(nranks, fn, sh, JOB_S);
    mrank_shared_free(sh, sizeof *sh);
    ck_assert_msg(failing == 0, "%s: %d rank(s) failed (see stderr)", mrank_backend(backend), failing);
}

START_TEST(test_groups_four_ranks)
{
    run_job(4, four_ranks, _i);
}
END_TEST

START_TEST(test_groups_five_ranks)
{
    run_job(5, five_ranks, _i);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tl = mrank_tcase(s, "layout", 60);
    tcase_add_test(tl, test_against_brute_force);
    tcase_add_test(tl, test_hand_cases);
    tcase_add_test(tl, test_bad_params);
    TCase *tg = mrank_tcase(s, "groups", JOB_S + 30);
    if (nbackends > 0) {
        tcase_add_loop_test(tg, test_groups_four_ranks, 0, nbackends);
        tcase_add_loop_test(tg, test_groups_five_ranks, 0, nbackends);
    } else {
        printf("test_fsdp_layout: TCOMMS_TEST_BACKENDS is empty: multi-rank cases skipped\n");
    }
}

int main(void)
{
    return mrank_main("fsdp_layout", MRANK_ANY, add_tests);
}
