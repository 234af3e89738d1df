/* SPDX-License-Identifier: BSD-3-Clause */
/* Reading the process environment: rank bootstrap from the launcher conventions, and typed variables. */
#ifndef TC_ENV_H
#define TC_ENV_H

#include <tcomms/tcomms.h>

typedef struct tc_bootstrap {
    int rank, size, local_rank;  /* local_rank -1 when the launcher did not say */
    int local_size;              /* ranks on this host as the launcher says (a cross-check only), -1 when it did not */
    const char *source;          /* "TCOMMS", "torchrun", "Open MPI", "Slurm" or "default" */
    const char *local_vars;      /* the variables local_rank and local_size come from, for messages */
    char master_addr[256];       /* "" when not set */
    int master_port;             /* 0 when not set */
} tc_bootstrap_t;

/* Fill `bs` from the environment: TCOMMS_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE, then torchrun's RANK/WORLD_SIZE/
 * LOCAL_RANK/LOCAL_WORLD_SIZE, then OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE, then SLURM_PROCID/NTASKS/
 * LOCALID/NTASKS_PER_NODE; the first family whose rank variable is set wins, and no family at all means a single
 * process (rank 0 of 1). The local size is only compared with what the rendezvous finds (lib/topo.c): a malformed
 * one is ignored with a warning. Master address and port come from
 * TCOMMS_MASTER_ADDR/PORT, else MASTER_ADDR/PORT. A malformed or missing value is TCOMMS_ERR_BAD_ENV naming it. */
tcomms_status_t tc_env_bootstrap(tc_bootstrap_t *bs);

/* The store server's limits (store.h): TCOMMS_STORE_HANDSHAKE_MS, TCOMMS_STORE_MAX_PENDING, TCOMMS_STORE_MAX_CONNS
 * and TCOMMS_STORE_MAX_BYTES, each defaulted when unset; BAD_ENV naming the first malformed one. */
struct tc_store_limits;
tcomms_status_t tc_env_store_limits(struct tc_store_limits *out);

/* Typed variables, read alike by the core and by modules (tcomms_core_t.env_int, env_bool): *out = dflt when the
 * variable is unset; any value it is set to must parse, an empty one included (a script's `X=$UNSET` is a mistake
 * to report, not a request for the default). Otherwise BAD_ENV naming the variable, its value and what was
 * expected; *out is left alone. An integer is decimal in [min, max], trailing blanks allowed; a boolean as
 * tc_parse_bool takes it. */
tcomms_status_t tc_env_int(const char *name, long min, long max, long dflt, long *out);
tcomms_status_t tc_env_bool(const char *name, int dflt, int *out);
/* Parse a decimal integer in [min, max] from text; INVALID_ARG (naming `what`) when malformed. */
tcomms_status_t tc_parse_int(const char *text, long min, long max, const char *what, long *out);
/* Parse a boolean (1/0, true/false, yes/no, on/off, y/n; any case). INVALID_ARG (naming `what`) otherwise. */
tcomms_status_t tc_parse_bool(const char *text, const char *what, int *out);

#endif
