/* SPDX-License-Identifier: BSD-3-Clause */
/* The FSDP rank layout (include/tcomms/fsdp.h): Megatron's RankGenerator over one order of the tokens tp, cp, ep,
 * dp, pp, giving a dense and an expert layout, the group lists of every kind, and the HSDP intra/inter slicing of
 * the dp-cp and expert-dp groups. groups.c turns these lists into communicators; the runtime hashes the layout. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <tcomms/fsdp.h>

#include "error.h"
#include "hash.h" /* lib/util/hash.h */
#include "fsdp/groups.h"

enum { TOK_TP, TOK_CP, TOK_EP, TOK_DP, TOK_PP, TOK_COUNT };

static const char *const token_names[TOK_COUNT] = {"tp", "cp", "ep", "dp", "pp"};

static const char *const kind_names[TCOMMS_FSDP_GROUP_KIND_COUNT] = {
    [TCOMMS_FSDP_GROUP_DP_CP] = "dp_cp",
    [TCOMMS_FSDP_GROUP_DP_CP_INTRA] = "dp_cp_intra",
    [TCOMMS_FSDP_GROUP_DP_CP_INTER] = "dp_cp_inter",
    [TCOMMS_FSDP_GROUP_EXPT_DP] = "expt_dp",
    [TCOMMS_FSDP_GROUP_EXPT_DP_INTRA] = "expt_dp_intra",
    [TCOMMS_FSDP_GROUP_EXPT_DP_INTER] = "expt_dp_inter",
    [TCOMMS_FSDP_GROUP_TP] = "tp",
    [TCOMMS_FSDP_GROUP_CP] = "cp",
    [TCOMMS_FSDP_GROUP_DP] = "dp",
    [TCOMMS_FSDP_GROUP_PP] = "pp",
    [TCOMMS_FSDP_GROUP_EP] = "ep",
    [TCOMMS_FSDP_GROUP_EXPT_TP] = "expt_tp",
};

/* One of the two layouts: the size of each position of the order and the stride of a rank along it. */
typedef struct grid {
    int size[TOK_COUNT];
    int stride[TOK_COUNT];
} grid_t;

struct tcomms_fsdp_layout {
    int token_size[TOK_COUNT]; /* dense sizes by token (ep counted as 1) */
    int expert_tp, expert_dp, ep, outer, offset, nranks;
    int order[TOK_COUNT];      /* token at each position, most local first; omitted tokens (size 1) at the end */
    int ngiven;                /* tokens params->order names */
    char order_text[32];       /* the full order, e.g. "tp-cp-ep-dp-pp" */
    grid_t dense, expert;
};

/* A kind before HSDP slicing: which grid it lives in and which tokens its groups span. */
typedef struct base_kind {
    const grid_t *grid;
    unsigned mask; /* bit per token */
} base_kind_t;

static tcomms_status_t size_of(const char *what, int value, int *out)
{
    if (value < 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_create: params->%s = %d must be >= 0 "
                        "(0 means 1)", what, value);
    *out = value == 0 ? 1 : value;
    return TCOMMS_SUCCESS;
}

/* Parse params->order into l->order; a token left out must have size 1 in both layouts, and goes to the end. */
static tcomms_status_t parse_order(const char *text, const int both[TOK_COUNT], tcomms_fsdp_layout_t *l)
{
    int seen[TOK_COUNT] = {0}, n = 0;
    const char *p = text;
    for (;;) {
        size_t len = strcspn(p, "-");
        int tok = -1;
        for (int t = 0; t < TOK_COUNT; t++)
            if (len == strlen(token_names[t]) && strncmp(p, token_names[t], len) == 0)
                tok = t;
        if (tok < 0)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_create: params->order \"%s\" has unknown "
                            "token \"%.*s\" (expected tp, cp, ep, dp, pp separated by '-')", text,
                            (int)(len > 16 ? 16 : len), p);
        if (seen[tok])
            return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_create: params->order \"%s\" names token "
                            "\"%s\" twice", text, token_names[tok]);
        seen[tok] = 1;
        l->order[n++] = tok;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    l->ngiven = n;
    for (int t = 0; t < TOK_COUNT; t++) {
        if (seen[t])
            continue;
        if (both[t] != 1)
            return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_create: params->order \"%s\" leaves out "
                            "token \"%s\", whose size is not 1", text, token_names[t]);
        l->order[n++] = t;
    }
    char *q = l->order_text;
    for (int i = 0; i < TOK_COUNT; i++) {
        if (i > 0)
            *q++ = '-';
        memcpy(q, token_names[l->order[i]], 3);
        q += 2;
    }
    return TCOMMS_SUCCESS;
}

static void fill_grid(grid_t *g, const int order[TOK_COUNT], const int sizes[TOK_COUNT])
{
    int stride = 1;
    for (int i = 0; i < TOK_COUNT; i++) {
        g->size[i] = sizes[order[i]];
        g->stride[i] = stride;
        stride *= g->size[i];
    }
}

static tcomms_status_t check_sizes(const tcomms_fsdp_layout_t *l, const int dense[TOK_COUNT])
{
    long long n = 1;
    for (int t = 0; t < TOK_COUNT && n <= INT_MAX; t++)
        n *= dense[t]; /* each factor is <= INT_MAX: stopping once past it keeps n in range */
    if (n > INT_MAX || (long long)l->offset + n > INT_MAX)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_create: tp*cp*dp*pp = %lld plus rank_offset "
                        "%d is beyond the range of a rank", n, l->offset);
    long long inner = (long long)dense[TOK_TP] * dense[TOK_CP] * dense[TOK_DP];
    long long div = (long long)l->expert_tp * l->ep;
    if (inner % div != 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_create: expert_dp = tp*cp*dp / (expert_tp*ep) "
                        "= %lld / %lld is not an integer", inner, div);
    if ((dense[TOK_DP] * dense[TOK_CP]) % l->outer != 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_create: params->outer_dp = %d does not divide "
                        "dp*cp = %d", l->outer, dense[TOK_DP] * dense[TOK_CP]);
    if ((inner / div) % l->outer != 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_create: params->outer_dp = %d does not divide "
                        "expert_dp = %lld", l->outer, inner / div);
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_fsdp_layout_create(const tcomms_fsdp_layout_params_t *params, tcomms_fsdp_layout_t **out)
{
    if (params == NULL || out == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_create: %s is NULL", params ? "out" : "params");
    *out = NULL;
    tcomms_fsdp_layout_t l = {0};
    int dense[TOK_COUNT];
    tcomms_status_t st;
    if ((st = size_of("tp", params->tp, &dense[TOK_TP])) != TCOMMS_SUCCESS ||
        (st = size_of("cp", params->cp, &dense[TOK_CP])) != TCOMMS_SUCCESS ||
        (st = size_of("ep", params->ep, &l.ep)) != TCOMMS_SUCCESS ||
        (st = size_of("dp", params->dp, &dense[TOK_DP])) != TCOMMS_SUCCESS ||
        (st = size_of("pp", params->pp, &dense[TOK_PP])) != TCOMMS_SUCCESS ||
        (st = size_of("expert_tp", params->expert_tp, &l.expert_tp)) != TCOMMS_SUCCESS ||
        (st = size_of("outer_dp", params->outer_dp, &l.outer)) != TCOMMS_SUCCESS)
        return st;
    if (params->rank_offset < 0)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_create: params->rank_offset = %d must be >= 0",
                        params->rank_offset);
    l.offset = params->rank_offset;
    dense[TOK_EP] = 1;
    if ((st = check_sizes(&l, dense)) != TCOMMS_SUCCESS)
        return st;
    l.expert_dp = dense[TOK_TP] * dense[TOK_CP] * dense[TOK_DP] / (l.expert_tp * l.ep);
    int expert[TOK_COUNT] = {[TOK_TP] = l.expert_tp, [TOK_CP] = 1, [TOK_EP] = l.ep, [TOK_DP] = l.expert_dp,
                             [TOK_PP] = dense[TOK_PP]};
    int both[TOK_COUNT]; /* 1 only where the token has size 1 in both layouts */
    for (int t = 0; t < TOK_COUNT; t++)
        both[t] = dense[t] == 1 && expert[t] == 1 ? 1 : 0;
    const char *order = params->order ? params->order : "tp-cp-ep-dp-pp";
    if ((st = parse_order(order, both, &l)) != TCOMMS_SUCCESS)
        return st;
    /* Megatron's rule: pp last keeps a rank's pp coordinate the same in both layouts. */
    if (l.order[l.ngiven - 1] != TOK_PP && dense[TOK_PP] != 1 && l.expert_dp != dense[TOK_DP])
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_create: params->order \"%s\" does not end with "
                        "pp, so pp (%d) must be 1 or expert_dp (%d) must equal dp (%d)", order,
                        dense[TOK_PP], l.expert_dp, dense[TOK_DP]);
    memcpy(l.token_size, dense, sizeof(dense));
    l.nranks = dense[TOK_TP] * dense[TOK_CP] * dense[TOK_DP] * dense[TOK_PP];
    fill_grid(&l.dense, l.order, dense);
    fill_grid(&l.expert, l.order, expert);
    tcomms_fsdp_layout_t *copy = malloc(sizeof(*copy));
    if (copy == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "tcomms_fsdp_layout_create: out of memory");
    *copy = l;
    *out = copy;
    return TCOMMS_SUCCESS;
}

void tcomms_fsdp_layout_free(tcomms_fsdp_layout_t *layout)
{
    free(layout);
}

tcomms_status_t tcomms_fsdp_layout_size(const tcomms_fsdp_layout_t *layout, int *nranks)
{
    if (layout == NULL || nranks == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_size: %s is NULL", layout ? "nranks" : "layout");
    *nranks = layout->nranks;
    return TCOMMS_SUCCESS;
}

const char *tcomms_fsdp_group_kind_name(tcomms_fsdp_group_kind_t kind)
{
    return (unsigned)kind < TCOMMS_FSDP_GROUP_KIND_COUNT ? kind_names[kind] : NULL;
}

/* The unsliced kind a kind derives from: DP_CP for the dense HSDP kinds, EXPT_DP for the expert ones. */
static base_kind_t base_of(const tcomms_fsdp_layout_t *l, tcomms_fsdp_group_kind_t kind)
{
    const unsigned dpcp = 1u << TOK_DP | 1u << TOK_CP;
    switch (kind) {
    case TCOMMS_FSDP_GROUP_DP_CP:
    case TCOMMS_FSDP_GROUP_DP_CP_INTRA:
    case TCOMMS_FSDP_GROUP_DP_CP_INTER: return (base_kind_t){&l->dense, dpcp};
    case TCOMMS_FSDP_GROUP_TP: return (base_kind_t){&l->dense, 1u << TOK_TP};
    case TCOMMS_FSDP_GROUP_CP: return (base_kind_t){&l->dense, 1u << TOK_CP};
    case TCOMMS_FSDP_GROUP_DP: return (base_kind_t){&l->dense, 1u << TOK_DP};
    case TCOMMS_FSDP_GROUP_PP: return (base_kind_t){&l->dense, 1u << TOK_PP};
    case TCOMMS_FSDP_GROUP_EP: return (base_kind_t){&l->expert, 1u << TOK_EP};
    case TCOMMS_FSDP_GROUP_EXPT_TP: return (base_kind_t){&l->expert, 1u << TOK_TP};
    default: return (base_kind_t){&l->expert, 1u << TOK_DP}; /* EXPT_DP and its slices */
    }
}

/* Mixed-radix over the positions of the order in (masked) or not in (!masked) the mask, first position fastest:
 * the product of their sizes, or with `value` the offset of that digit-number from rank 0. */
static int radix_count(const tcomms_fsdp_layout_t *l, base_kind_t b, int masked)
{
    int n = 1;
    for (int i = 0; i < TOK_COUNT; i++)
        if (((b.mask >> l->order[i]) & 1u) == (unsigned)masked)
            n *= b.grid->size[i];
    return n;
}

static int radix_rank(const tcomms_fsdp_layout_t *l, base_kind_t b, int masked, int value)
{
    int r = 0;
    for (int i = 0; i < TOK_COUNT; i++)
        if (((b.mask >> l->order[i]) & 1u) == (unsigned)masked) {
            r += (value % b.grid->size[i]) * b.grid->stride[i];
            value /= b.grid->size[i];
        }
    return r;
}

static int radix_digits(const tcomms_fsdp_layout_t *l, base_kind_t b, int masked, int rel)
{
    int v = 0, scale = 1;
    for (int i = 0; i < TOK_COUNT; i++)
        if (((b.mask >> l->order[i]) & 1u) == (unsigned)masked) {
            v += (rel / b.grid->stride[i] % b.grid->size[i]) * scale;
            scale *= b.grid->size[i];
        }
    return v;
}

/* Slice count and slice length of a kind: (1, n) for unsliced kinds, (outer, n/outer) for INTRA, where an INTER
 * group is the j-th member of every slice. */
static int is_intra(tcomms_fsdp_group_kind_t k)
{
    return k == TCOMMS_FSDP_GROUP_DP_CP_INTRA || k == TCOMMS_FSDP_GROUP_EXPT_DP_INTRA;
}

static int is_inter(tcomms_fsdp_group_kind_t k)
{
    return k == TCOMMS_FSDP_GROUP_DP_CP_INTER || k == TCOMMS_FSDP_GROUP_EXPT_DP_INTER;
}

tcomms_status_t tcomms_fsdp_layout_groups(const tcomms_fsdp_layout_t *layout, tcomms_fsdp_group_kind_t kind,
                                          int *ngroups, int *group_size, int *ranks, size_t cap)
{
    if (layout == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_groups: layout is NULL");
    if ((unsigned)kind >= TCOMMS_FSDP_GROUP_KIND_COUNT)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_groups: kind %d is not a group kind", (int)kind);
    base_kind_t b = base_of(layout, kind);
    int nbase = radix_count(layout, b, 0), n = radix_count(layout, b, 1);
    int q = n / layout->outer; /* slice length */
    int ng = is_intra(kind) ? nbase * layout->outer : is_inter(kind) ? nbase * q : nbase;
    int gs = is_intra(kind) ? q : is_inter(kind) ? layout->outer : n;
    if (ngroups)
        *ngroups = ng;
    if (group_size)
        *group_size = gs;
    if (ranks == NULL)
        return TCOMMS_SUCCESS;
    if (cap < (size_t)ng * (size_t)gs)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_groups: cap %zu is below the %d x %d ranks of "
                        "the %s groups", cap, ng, gs, kind_names[kind]);
    for (int g = 0; g < ng; g++)
        for (int j = 0; j < gs; j++) {
            int base, idx; /* the base group and the member of its list */
            if (is_intra(kind)) {
                base = g / layout->outer;
                idx = (g % layout->outer) * q + j;
            } else if (is_inter(kind)) {
                base = g / q;
                idx = j * q + g % q;
            } else {
                base = g;
                idx = j;
            }
            ranks[(size_t)g * gs + j] = layout->offset + radix_rank(layout, b, 0, base) + radix_rank(layout, b, 1, idx);
        }
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcomms_fsdp_layout_group_of(const tcomms_fsdp_layout_t *layout, tcomms_fsdp_group_kind_t kind,
                                            int rank, int *group, int *index)
{
    if (layout == NULL || group == NULL || index == NULL)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_group_of: %s is NULL",
                        layout == NULL ? "layout" : group == NULL ? "group" : "index");
    if ((unsigned)kind >= TCOMMS_FSDP_GROUP_KIND_COUNT)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_group_of: kind %d is not a group kind", (int)kind);
    if (rank < layout->offset || rank - layout->offset >= layout->nranks)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "tcomms_fsdp_layout_group_of: rank %d is outside the layout's ranks "
                        "[%d, %d)", rank, layout->offset, layout->offset + layout->nranks);
    base_kind_t b = base_of(layout, kind);
    int rel = rank - layout->offset;
    int base = radix_digits(layout, b, 0, rel), idx = radix_digits(layout, b, 1, rel);
    int q = radix_count(layout, b, 1) / layout->outer;
    if (is_intra(kind)) {
        *group = base * layout->outer + idx / q;
        *index = idx % q;
    } else if (is_inter(kind)) {
        *group = base * q + idx % q;
        *index = idx / q;
    } else {
        *group = base;
        *index = idx;
    }
    return TCOMMS_SUCCESS;
}

int tc_fsdp_layout_outer(const tcomms_fsdp_layout_t *layout)
{
    return layout->outer;
}

int tc_fsdp_layout_offset(const tcomms_fsdp_layout_t *layout)
{
    return layout->offset;
}

/* FNV-1a over the order text and each integer's bytes taken least significant first, so the value does not depend
 * on the host's byte order. */
uint64_t tc_fsdp_layout_hash(const tcomms_fsdp_layout_t *layout)
{
    uint64_t h = tc_hash_bytes(layout->order_text, strlen(layout->order_text));
    const int values[] = {layout->token_size[TOK_TP], layout->token_size[TOK_CP], layout->ep,
                          layout->token_size[TOK_DP], layout->token_size[TOK_PP], layout->expert_tp, layout->outer,
                          layout->offset};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        uint32_t v = (uint32_t)values[i];
        const unsigned char le[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                                     (unsigned char)(v >> 24)};
        h = tc_hash_more(h, le, sizeof(le));
    }
    return h;
}
