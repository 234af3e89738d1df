/* SPDX-License-Identifier: BSD-3-Clause */
/* The environment as tcomms reads it: rank/size/local rank from whichever launcher started us (tcomms-run,
 * torchrun, Open MPI, Slurm), the master address and port, the store server's limits, and typed parsing that names
 * what is malformed. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>

#include "env.h"
#include "error.h"
#include "log.h"
#include "store/store.h"

tcomms_status_t tc_parse_int(const char *text, long min, long max, const char *what, long *out)
{
    if (text == NULL || *text == '\0')
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: empty value", what);
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    while (*end == ' ')
        end++;
    if (errno != 0 || *end != '\0' || end == text)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: '%s' is not an integer", what, text);
    if (v < min || v > max)
        return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: %ld is out of range [%ld, %ld]", what, v, min, max);
    *out = v;
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_parse_bool(const char *text, const char *what, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on", "y"}, *const no[] = {"0", "false", "no", "off", "n"};
    for (size_t i = 0; text != NULL && i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(text, yes[i]) == 0)
            return *out = 1, TCOMMS_SUCCESS;
        if (strcasecmp(text, no[i]) == 0)
            return *out = 0, TCOMMS_SUCCESS;
    }
    return tc_error(TCOMMS_ERR_INVALID_ARG, "%s: '%s' is not a boolean (1/0, true/false, yes/no, on/off)", what,
                    text ? text : "(null)");
}

tcomms_status_t tc_env_int(const char *name, long min, long max, long dflt, long *out)
{
    const char *text = getenv(name);
    if (text == NULL) {
        *out = dflt;
        return TCOMMS_SUCCESS;
    }
    if (tc_parse_int(text, min, max, name, out) != TCOMMS_SUCCESS)
        return tc_error(TCOMMS_ERR_BAD_ENV, "environment variable %s='%s' is malformed: expected an integer in "
                        "[%ld, %ld]", name, text, min, max);
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_env_bool(const char *name, int dflt, int *out)
{
    const char *text = getenv(name);
    if (text == NULL) {
        *out = dflt;
        return TCOMMS_SUCCESS;
    }
    if (tc_parse_bool(text, name, out) != TCOMMS_SUCCESS)
        return tc_error(TCOMMS_ERR_BAD_ENV, "environment variable %s='%s' is malformed: expected a boolean (1/0, "
                        "true/false, yes/no, on/off, y/n)", name, text);
    return TCOMMS_SUCCESS;
}

/* The store's defaults. A job's own clients authenticate within milliseconds of connecting; half the descriptor
 * limit leaves the rest of rank 0 (backends, the program) room however many strangers knock. tcomms itself stores
 * a few MiB (the largest is every rank's UCX worker address, gathered and then published as one table: about 2 MiB
 * at 4096 ranks of 215-byte addresses); 128 MiB holds eight values of the largest size allowed (TC_STORE_MAX_VALUE). */
#define STORE_HANDSHAKE_MS 3000
#define STORE_MAX_PENDING 256
#define STORE_MAX_BYTES (8L * TC_STORE_MAX_VALUE)

tcomms_status_t tc_env_store_limits(tc_store_limits_t *out)
{
    struct rlimit rl;
    long nofile = 1L << 20;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)nofile)
        nofile = (long)rl.rlim_cur;
    long conns_default = nofile / 2 > 16 ? nofile / 2 : 16;
    long handshake, pending, conns, bytes;
    tcomms_status_t st = tc_env_int("TCOMMS_STORE_HANDSHAKE_MS", 1, 3600000, STORE_HANDSHAKE_MS, &handshake);
    if (st == TCOMMS_SUCCESS)
        st = tc_env_int("TCOMMS_STORE_MAX_CONNS", 1, 1L << 24, conns_default, &conns);
    if (st == TCOMMS_SUCCESS)
        st = tc_env_int("TCOMMS_STORE_MAX_PENDING", 1, 1L << 24, conns < STORE_MAX_PENDING ? conns : STORE_MAX_PENDING,
                        &pending);
    if (st == TCOMMS_SUCCESS)
        st = tc_env_int("TCOMMS_STORE_MAX_BYTES", 1, LONG_MAX, STORE_MAX_BYTES, &bytes);
    if (st != TCOMMS_SUCCESS)
        return st;
    *out = (tc_store_limits_t){.handshake_ms = (uint32_t)handshake, .max_pending = (uint32_t)pending,
                               .max_conns = (uint32_t)conns, .max_bytes = (uint64_t)bytes};
    return TCOMMS_SUCCESS;
}

static const struct family {
    const char *source, *rank, *size, *local_rank, *local_size, *local_vars;
} families[] = {
    {"TCOMMS", "TCOMMS_RANK", "TCOMMS_SIZE", "TCOMMS_LOCAL_RANK", "TCOMMS_LOCAL_SIZE",
     "TCOMMS_LOCAL_RANK/TCOMMS_LOCAL_SIZE"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "LOCAL_RANK/LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK/OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
     "SLURM_LOCALID/SLURM_NTASKS_PER_NODE"},
};

/* The first set variable among `names`, or NULL; *which names it. */
static const char *first_env(const char *const *names, size_t n, const char **which)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(names[i]);
        if (v != NULL) {
            *which = names[i];
            return v;
        }
    }
    return NULL;
}

static tcomms_status_t read_master(tc_bootstrap_t *bs)
{
    static const char *const addr_vars[] = {"TCOMMS_MASTER_ADDR", "MASTER_ADDR"};
    static const char *const port_vars[] = {"TCOMMS_MASTER_PORT", "MASTER_PORT"};
    const char *which;
    const char *addr = first_env(addr_vars, 2, &which);
    if (addr != NULL) {
        if (*addr == '\0' || strlen(addr) >= sizeof(bs->master_addr))
            return tc_error(TCOMMS_ERR_BAD_ENV, "environment variable %s='%.64s' is malformed: expected a host "
                            "name or address", which, addr);
        strcpy(bs->master_addr, addr);
    }
    const char *port = first_env(port_vars, 2, &which);
    if (port != NULL) {
        long v;
        if (tc_parse_int(port, 1, 65535, which, &v) != TCOMMS_SUCCESS)
            return tc_error(TCOMMS_ERR_BAD_ENV, "environment variable %s='%s' is malformed: expected a TCP port in "
                            "[1, 65535]", which, port);
        bs->master_port = (int)v;
    }
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_env_bootstrap(tc_bootstrap_t *bs)
{
    memset(bs, 0, sizeof(*bs));
    bs->size = 1;
    bs->local_rank = bs->local_size = -1;
    bs->source = "default";
    bs->local_vars = "(none)";
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
        const struct family *fam = &families[f];
        if (getenv(fam->rank) == NULL)
            continue;
        long rank, size, local;
        if (getenv(fam->size) == NULL)
            return tc_error(TCOMMS_ERR_BAD_ENV, "%s is set (%s launcher) but %s is missing", fam->rank, fam->source,
                            fam->size);
        tcomms_status_t st = tc_env_int(fam->size, 1, 1 << 24, 1, &size);
        if (st == TCOMMS_SUCCESS)
            st = tc_env_int(fam->rank, 0, size - 1, 0, &rank);
        if (st == TCOMMS_SUCCESS)
            st = tc_env_int(fam->local_rank, 0, size - 1, -1, &local);
        if (st != TCOMMS_SUCCESS)
            return st;
        bs->rank = (int)rank;
        bs->size = (int)size;
        bs->local_rank = (int)local;
        bs->source = fam->source;
        bs->local_vars = fam->local_vars;
        const char *text = getenv(fam->local_size);
        long lsize;
        if (text != NULL && tc_parse_int(text, 1, 1 << 24, fam->local_size, &lsize) == TCOMMS_SUCCESS)
            bs->local_size = (int)lsize;
        else if (text != NULL) {
            tc_error_clear();
            tc_log(TCOMMS_LOG_WARN, "core", "environment variable %s='%.32s' ignored: expected an integer in [1, %d]",
                   fam->local_size, text, 1 << 24);
        }
        break;
    }
    return read_master(bs);
}
