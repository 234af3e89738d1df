/* SPDX-License-Identifier: BSD-3-Clause */
/* Hints -> ncclConfig_t, and back: which value each hint applied, or NCCL's default where none was given, for
 * tcomms_comm_hint. The common keys arrive validated and canonical from the core; the nccl.* keys (snake_case or
 * NCCL's own camelCase field name after the prefix) are validated here. Fields newer than the NCCL headers the
 * module was built with read "not applicable". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tcn.h"

typedef enum { K_BOOL, K_INT, K_STR, K_POLICY } kind_t;

enum {
    F_BLOCKING, F_CGA, F_MIN_CTAS, F_MAX_CTAS, F_SPLIT_SHARE, F_HIGH_PRIO, F_NET_NAME, F_TRAFFIC_CLASS,
    F_COMM_NAME, F_COLLNET, F_CTA_POLICY, F_SHRINK_SHARE, F_NVLS_CTAS, F_NCH_NET_PEER, F_NVLINK_SCHED,
    F_SMALL_BYTES, F_COUNT
};

static const struct key_def {
    const char *key, *alias; /* canonical; the camelCase spelling of an nccl.* key */
    kind_t kind;
    long min, max;
    int available;           /* the NCCL headers have the field */
    const char *env;         /* NCCL's variable for the default, or NULL */
    const char *dflt;        /* the default when `env` is unset; NULL: computed */
} defs[F_COUNT] = {
    [F_BLOCKING] = {"blocking", NULL, K_BOOL, 0, 1, 1, "NCCL_COMM_BLOCKING", "1"},
    [F_CGA] = {"cga_cluster_size", NULL, K_INT, 0, 8, 1, "NCCL_CGA_CLUSTER_SIZE", NULL},
    [F_MIN_CTAS] = {"min_ctas", NULL, K_INT, 1, 64, 1, "NCCL_MIN_CTAS", "1"},
    [F_MAX_CTAS] = {"max_ctas", NULL, K_INT, 1, 64, 1, "NCCL_MAX_CTAS", TCN_NCCL_AT_LEAST(2, 17) ? "64" : "32"},
    [F_SPLIT_SHARE] = {"split_share", NULL, K_BOOL, 0, 1, TCN_HAS_SPLIT, "NCCL_COMM_SPLIT_SHARE_RESOURCES", "0"},
    [F_HIGH_PRIO] = {"high_priority_stream", NULL, K_BOOL, 0, 1, 1, NULL, NULL},
    [F_NET_NAME] = {"nccl.net_name", "nccl.netName", K_STR, 0, 0, 1, "NCCL_NET", "auto"},
    [F_TRAFFIC_CLASS] = {"nccl.traffic_class", "nccl.trafficClass", K_INT, 0, 255, TCN_HAS_CONFIG_27, NULL, "auto"},
    [F_COMM_NAME] = {"nccl.comm_name", "nccl.commName", K_STR, 0, 0, TCN_HAS_CONFIG_27, NULL, NULL},
    [F_COLLNET] = {"nccl.collnet_enable", "nccl.collnetEnable", K_BOOL, 0, 1, TCN_HAS_CONFIG_27,
                   "NCCL_COLLNET_ENABLE", "0"},
    [F_CTA_POLICY] = {"nccl.cta_policy", "nccl.CTAPolicy", K_POLICY, 0, 2, TCN_HAS_CONFIG_27, "NCCL_CTA_POLICY",
                      "default"},
    [F_SHRINK_SHARE] = {"nccl.shrink_share", "nccl.shrinkShare", K_BOOL, 0, 1, TCN_HAS_CONFIG_27,
                         "NCCL_COMM_SHRINK_SHARE_RESOURCES", "0"},
    [F_NVLS_CTAS] = {"nccl.nvls_ctas", "nccl.nvlsCTAs", K_INT, 1, 64, TCN_HAS_CONFIG_27, "NCCL_NVLS_NCHANNELS",
                     "auto"},
    [F_NCH_NET_PEER] = {"nccl.n_channels_per_net_peer", "nccl.nChannelsPerNetPeer", K_INT, 1, 64,
                        TCN_HAS_CONFIG_28, "NCCL_NCHANNELS_PER_NET_PEER", "auto"},
    [F_NVLINK_SCHED] = {"nccl.nvlink_centric_sched", "nccl.nvlinkCentricSched", K_BOOL, 0, 1, TCN_HAS_CONFIG_28,
                        "NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE", "0"},
    /* tcomms' own (small.c): its default comes from TCOMMS_NCCL_SMALL_BYTES (comm.c), which the hint overrides;
     * the query reads what the communicator runs with */
    [F_SMALL_BYTES] = {"nccl.small_bytes", "nccl.smallBytes", K_INT, 0, 1 << 20, 1, NULL, "0"},
};

#define KNOWN_KEYS                                                                                                 \
    "net_name, traffic_class, comm_name, collnet_enable, cta_policy, shrink_share, nvls_ctas, "                      \
    "n_channels_per_net_peer, nvlink_centric_sched, small_bytes"

static const char *const policy_names[] = {"default", "efficiency", "zero"};
_Static_assert(F_COUNT <= TCN_CONFIG_KEYS, "tcn_config_t.set holds a setting per key");

/* The ncclConfig_t int field of key `id`, or NULL (strings, the stream priority, fields these headers lack). */
static int *int_field(ncclConfig_t *nc, int id)
{
    switch (id) {
    case F_BLOCKING: return &nc->blocking;
    case F_CGA: return &nc->cgaClusterSize;
    case F_MIN_CTAS: return &nc->minCTAs;
    case F_MAX_CTAS: return &nc->maxCTAs;
#if TCN_HAS_SPLIT
    case F_SPLIT_SHARE: return &nc->splitShare;
#endif
#if TCN_HAS_CONFIG_27
    case F_TRAFFIC_CLASS: return &nc->trafficClass;
    case F_COLLNET: return &nc->collnetEnable;
    case F_CTA_POLICY: return &nc->CTAPolicy;
    case F_SHRINK_SHARE: return &nc->shrinkShare;
    case F_NVLS_CTAS: return &nc->nvlsCTAs;
#endif
#if TCN_HAS_CONFIG_28
    case F_NCH_NET_PEER: return &nc->nChannelsPerNetPeer;
    case F_NVLINK_SCHED: return &nc->nvlinkCentricSched;
#endif
    default: return NULL;
    }
}

static int find_def(const char *key)
{
    for (int i = 0; i < F_COUNT; i++)
        if (strcmp(key, defs[i].key) == 0 || (defs[i].alias && strcmp(key, defs[i].alias) == 0))
            return i;
    return -1;
}

static int parse_bool(const char *v, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on", "y"}, *const no[] = {"0", "false", "no", "off", "n"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return *out = 1, 1;
        if (strcasecmp(v, no[i]) == 0)
            return *out = 0, 1;
    }
    return 0;
}

static int parse_long(const char *v, long min, long max, long *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < min || x > max)
        return 0;
    *out = x;
    return 1;
}

/* A CTA policy: its name or its number. */
static int parse_policy(const char *v, long *out)
{
    for (long i = 0; i < 3; i++)
        if (strcasecmp(v, policy_names[i]) == 0)
            return *out = i, 1;
    return parse_long(v, defs[F_CTA_POLICY].min, defs[F_CTA_POLICY].max, out);
}

/* Parse `v` for key `id` into *out (ints, bools, policies). */
static tcomms_status_t parse_value(int id, const char *key, const char *v, int *out)
{
    const struct key_def *d = &defs[id];
    long x = 0;
    int ok = 0;
    if (d->kind == K_BOOL) {
        int b;
        ok = parse_bool(v, &b);
        x = b;
    } else if (d->kind == K_POLICY) {
        ok = parse_policy(v, &x);
    } else {
        ok = parse_long(v, d->min, d->max, &x);
    }
    if (!ok)
        return tcn_core->error(TCOMMS_ERR_INVALID_ARG, "nccl: hint '%s': '%s' is not %s", key, v,
                               d->kind == K_BOOL     ? "a boolean (1/0, true/false, yes/no, on/off)"
                               : d->kind == K_POLICY ? "a CTA policy (default, efficiency, zero, or 0..2)"
                                                     : "an integer in range");
    *out = (int)x;
    return TCOMMS_SUCCESS;
}

static const char *lookup(const tcomms_hints_t *hints, const struct key_def *d, const char **key)
{
    const char *v = NULL;
    *key = d->key;
    if (hints == NULL)
        return NULL;
    if (tcn_core->hints_get(hints, d->key, &v) == TCOMMS_SUCCESS && v)
        return v;
    *key = d->alias;
    if (d->alias && tcn_core->hints_get(hints, d->alias, &v) == TCOMMS_SUCCESS && v)
        return v;
    return NULL;
}

/* NCCL's value for int key `id` where no hint sets it: its variable, else its default. */
static int nccl_default_int(int id)
{
    const char *env = getenv(defs[id].env);
    return atoi(env && *env ? env : defs[id].dflt);
}

tcomms_status_t tcn_config_build(const tcomms_hints_t *hints, const char *comm_name, tcn_config_t *cfg)
{
    ncclConfig_t init = NCCL_CONFIG_INITIALIZER;
    memset(cfg, 0, sizeof(*cfg));
    cfg->nc = init;
    cfg->small_bytes = -1;
    /* An nccl.* key this module does not know is a mistake to report, not a setting to drop. */
    size_t n = tcn_core->hints_count(hints);
    for (size_t i = 0; i < n; i++) {
        const char *key = NULL, *value = NULL;
        if (tcn_core->hints_entry(hints, i, &key, &value) == TCOMMS_SUCCESS && strncmp(key, "nccl.", 5) == 0 &&
            find_def(key) < 0)
            return tcn_core->error(TCOMMS_ERR_INVALID_ARG, "nccl: unknown hint '%s' (known nccl.* keys: %s)", key,
                                   KNOWN_KEYS);
    }
    for (int id = 0; id < F_COUNT; id++) {
        const char *key;
        const char *v = lookup(hints, &defs[id], &key);
        if (defs[id].available) { /* what NCCL will run: the hint, unless its variable overrides it */
            tcomms_status_t st = tcn_core->setting_resolve(hints, "nccl", defs[id].key, v, defs[id].env,
                                                           defs[id].dflt, &cfg->set[id]);
            if (st != TCOMMS_SUCCESS)
                return st;
        }
        if (v == NULL)
            continue;
        if (!defs[id].available) {
            tcn_core->log(TCOMMS_LOG_WARN, "nccl", "hint '%s' needs a newer NCCL than %d.%d.%d (this module's "
                          "headers): not applied, and it reads \"not applicable\"", key, NCCL_MAJOR, NCCL_MINOR,
                          NCCL_PATCH);
            continue;
        }
        if (defs[id].kind == K_STR) {
            char *dst = id == F_NET_NAME ? cfg->net_name : cfg->comm_name;
            if (*v == '\0' || strlen(v) >= sizeof(cfg->net_name))
                return tcn_core->error(TCOMMS_ERR_INVALID_ARG, "nccl: hint '%s': the value must have 1 to %zu "
                                       "characters", key, sizeof(cfg->net_name) - 1);
            snprintf(dst, sizeof(cfg->net_name), "%s", v);
        } else {
            int x = 0;
            tcomms_status_t st = parse_value(id, key, v, &x);
            if (st != TCOMMS_SUCCESS)
                return st;
            int *f = int_field(&cfg->nc, id);
            if (f)
                *f = x;
            else if (id == F_HIGH_PRIO)
                cfg->high_priority = x;
            else if (id == F_SMALL_BYTES)
                cfg->small_bytes = x;
        }
        cfg->given |= 1u << id;
    }
    if (cfg->given & (1u << F_NET_NAME))
        cfg->nc.netName = cfg->net_name;
#if TCN_HAS_CONFIG_27
    if (!(cfg->given & (1u << F_COMM_NAME)))
        snprintf(cfg->comm_name, sizeof(cfg->comm_name), "%s", comm_name ? comm_name : "");
    if (cfg->comm_name[0])
        cfg->nc.commName = cfg->comm_name;
#else
    (void)comm_name;
#endif
    /* NCCL 2.28's ncclCommSplit refuses minCTAs or maxCTAs set alone, the other left undefined ("Invalid config
     * min/max channels attribute value 2/-2147483648"): the other gets NCCL's own default, as NCCL would. */
    const unsigned ctas = (1u << F_MIN_CTAS) | (1u << F_MAX_CTAS);
    if ((cfg->given & ctas) != 0 && (cfg->given & ctas) != ctas) {
        int other = (cfg->given & (1u << F_MIN_CTAS)) ? F_MAX_CTAS : F_MIN_CTAS;
        *int_field(&cfg->nc, other) = nccl_default_int(other);
    }
    if ((cfg->given & ctas) != 0 && cfg->nc.minCTAs > cfg->nc.maxCTAs)
        return tcn_core->error(TCOMMS_ERR_INVALID_ARG, "nccl: hint min_ctas (%d) is larger than max_ctas (%d)%s",
                               cfg->nc.minCTAs, cfg->nc.maxCTAs, (cfg->given & ctas) != ctas ?
                               " (NCCL's default for the one not given)" : "");
    return TCOMMS_SUCCESS;
}

void tcn_config_windows(const tcn_config_t *cfg, int ctas, ncclConfig_t *out)
{
    *out = cfg->nc; /* its strings stay in cfg */
#if TCN_HAS_SPLIT
    out->splitShare = 0; /* connections of its own, made only if a ring or tree ever runs there */
#endif
    const unsigned given = (1u << F_MIN_CTAS) | (1u << F_MAX_CTAS);
    if (cfg->given & given)
        return; /* the user's CTA bounds hold on both communicators */
    int max = nccl_default_int(F_MAX_CTAS);
    out->maxCTAs = max > 0 ? max : atoi(defs[F_MAX_CTAS].dflt);
    out->minCTAs = ctas < out->maxCTAs ? ctas : out->maxCTAs;
}

int tcn_config_cta_zero(const tcn_config_t *cfg)
{
#if TCN_HAS_CONFIG_28 /* policy zero came with NCCL 2.28 */
    long x; /* cfg->set: the hint, or NCCL's variable over it, or the default, as NCCL runs it */
    return parse_policy(cfg->set[F_CTA_POLICY].value, &x) && x == NCCL_CTA_POLICY_ZERO;
#else
    (void)cfg;
    return 0;
#endif
}

/* NCCL lets NCCL_COMM_BLOCKING (0 or 1) override the config's value. */
int tcn_config_nonblocking(const tcn_config_t *cfg)
{
    const char *env = getenv("NCCL_COMM_BLOCKING");
    if (env && (strcmp(env, "0") == 0 || strcmp(env, "1") == 0))
        return env[0] == '0';
    return (cfg->given & (1u << F_BLOCKING)) && cfg->nc.blocking == 0;
}

/* NCCL's default for key `id` on this communicator, as NCCL's sources set it. */
static void report_default(const tcn_comm_t *c, int id, char *buf, size_t len)
{
    if (id == F_CGA)
        snprintf(buf, len, "%d", c->cc_major >= 9 ? 4 : 0); /* NCCL clusters CTAs from Hopper on */
    else if (id == F_COMM_NAME)
        snprintf(buf, len, "%s", c->cfg.comm_name);
    else
        snprintf(buf, len, "%s", defs[id].dflt);
}

/* What the hint asked, where a backend-side fact decided otherwise, reads TCOMMS_SETTING_BACKEND. */
static void measured(tcomms_setting_t *out, const char *value)
{
    if (out->source == TCOMMS_SETTING_HINT && strcmp(out->value, value) != 0)
        out->source = TCOMMS_SETTING_BACKEND;
    snprintf(out->value, sizeof(out->value), "%s", value);
}

tcomms_status_t tcn_comm_setting(void *bcomm, const char *key, tcomms_setting_t *out)
{
    tcn_comm_t *c = bcomm;
    int id = find_def(key);
    if (id < 0) {
        if (strncmp(key, "nccl.", 5) != 0)
            return tcn_core->error(TCOMMS_ERR_NOT_SUPPORTED, "nccl: hint '%s' is not applicable", key);
        return tcn_core->error(TCOMMS_ERR_INVALID_ARG, "nccl: unknown hint '%s' (known nccl.* keys: %s)", key,
                               KNOWN_KEYS);
    }
    if (!defs[id].available)
        return tcn_core->error(TCOMMS_ERR_NOT_SUPPORTED, "nccl: hint '%s' needs a newer NCCL than %d.%d.%d", key,
                               NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
    *out = c->cfg.set[id];
    char v[64];
    if (id == F_SMALL_BYTES) { /* what the communicator runs with: 0 where the path is off */
        snprintf(v, sizeof(v), "%zu", c->small.slot);
        measured(out, v);
    } else if (id == F_HIGH_PRIO) {
        /* what the stream got, not what was asked: a device without priorities gives 0 */
        snprintf(v, sizeof(v), "%d", c->prio == c->prio_greatest && c->prio_greatest != c->prio_least);
        measured(out, v);
    } else if (out->source == TCOMMS_SETTING_DEFAULT) {
        report_default(c, id, out->value, sizeof(out->value));
    } else if (out->source == TCOMMS_SETTING_HINT && defs[id].kind != K_STR) { /* as NCCL got it: 1, not "yes" */
        int x = *int_field(&c->cfg.nc, id);
        if (defs[id].kind == K_POLICY && x >= 0 && x < 3)
            snprintf(out->value, sizeof(out->value), "%s", policy_names[x]);
        else
            snprintf(out->value, sizeof(out->value), "%d", x);
    }
    return TCOMMS_SUCCESS;
}
