/* SPDX-License-Identifier: BSD-3-Clause */
/* The environment tcomms-run gives its ranks: the caller's, with the bootstrap variables tcomms reads and those
 * torchrun sets replaced, and the rendezvous store locked to this job: bound to 127.0.0.1 (every rank is on this
 * host) and guarded by a fresh random token unless the caller chose one. tcomms-run.c rewrites the per-rank
 * variables before each spawn. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "run.h"

#define TOKEN_BYTES 32

/* TOKEN_BYTES random bytes from the kernel as hex: getrandom, else /dev/urandom. 0, or -1 with errno. */
static int make_token(char *hex)
{
    unsigned char raw[TOKEN_BYTES];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n > 0) got += (size_t)n;
        else if (n < 0 && errno != EINTR) break;
    }
    if (got < sizeof raw) { /* a kernel without getrandom (ENOSYS), or a seccomp filter refusing it */
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        got = 0;
        while (fd >= 0 && got < sizeof raw) {
            ssize_t n = read(fd, raw + got, sizeof raw - got);
            if (n > 0) got += (size_t)n;
            else if (!(n < 0 && errno == EINTR)) break;
        }
        if (fd >= 0) close(fd);
        if (got < sizeof raw) {
            if (errno == 0) errno = EIO;
            return -1;
        }
    }
    for (size_t i = 0; i < sizeof raw; i++) snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

void run_rank_vars_set(run_rank_vars_t *v, int r)
{
    snprintf(v->rank, sizeof v->rank, "TCOMMS_RANK=%d", r);
    snprintf(v->local_rank, sizeof v->local_rank, "TCOMMS_LOCAL_RANK=%d", r);
    snprintf(v->torch_rank, sizeof v->torch_rank, "RANK=%d", r);
    snprintf(v->torch_local_rank, sizeof v->torch_local_rank, "LOCAL_RANK=%d", r);
}

/* `var` ("NAME=value") sets the same variable as `ours` ("NAME=..."). */
static int same_name(const char *var, const char *ours)
{
    size_t len = strcspn(ours, "=") + 1;
    return strncmp(var, ours, len) == 0;
}

char **run_build_env(const run_opts_t *o, int port, int torch_port, run_rank_vars_t *v)
{
    extern char **environ;
    static char size_var[32], lsize_var[32], port_var[32], world_var[32], lworld_var[32], torch_port_var[32],
        addr_var[] = "TCOMMS_MASTER_ADDR=127.0.0.1", bind_var[] = "TCOMMS_STORE_BIND_ADDR=127.0.0.1",
        group_var[] = "GROUP_RANK=0", torch_addr_var[] = "MASTER_ADDR=127.0.0.1",
        token_var[sizeof "TCOMMS_STORE_TOKEN=" + 2 * TOKEN_BYTES];
    const char *user_token = getenv("TCOMMS_STORE_TOKEN");
    if (user_token == NULL || *user_token == '\0') {
        memcpy(token_var, "TCOMMS_STORE_TOKEN=", sizeof "TCOMMS_STORE_TOKEN=");
        if (make_token(token_var + strlen(token_var)) != 0) return NULL;
    }
    run_rank_vars_set(v, 0);
    snprintf(size_var, sizeof size_var, "TCOMMS_SIZE=%d", o->nranks);
    snprintf(lsize_var, sizeof lsize_var, "TCOMMS_LOCAL_SIZE=%d", o->nranks);
    snprintf(port_var, sizeof port_var, "TCOMMS_MASTER_PORT=%d", port);
    snprintf(world_var, sizeof world_var, "WORLD_SIZE=%d", o->nranks);
    snprintf(lworld_var, sizeof lworld_var, "LOCAL_WORLD_SIZE=%d", o->nranks);
    snprintf(torch_port_var, sizeof torch_port_var, "MASTER_PORT=%d", torch_port);
    /* What every rank gets, tcomms' then torchrun's (as torchrun sets them for one node); an inherited variable of
     * the same name is dropped. TCOMMS_BACKEND only with --backend (filled in below), TCOMMS_STORE_TOKEN only when
     * the caller set none. */
    enum { BACKEND_AT = 8 };
    char *ours[] = {v->rank, size_var, v->local_rank, lsize_var, addr_var, port_var, bind_var,
                    token_var[0] != '\0' ? token_var : NULL, NULL /* BACKEND_AT */, v->torch_rank, world_var,
                    v->torch_local_rank, lworld_var, group_var, torch_addr_var, torch_port_var};
    size_t nours = sizeof ours / sizeof ours[0], n = 0, k = 0;
    while (environ[n]) n++;
    size_t backend_len = o->backend ? strlen(o->backend) + sizeof "TCOMMS_BACKEND=" : 0;
    char **env = calloc(1, (n + nours + 1) * sizeof *env + backend_len);
    if (!env) return NULL;
    if (o->backend) {
        ours[BACKEND_AT] = (char *)(env + n + nours + 1);
        snprintf(ours[BACKEND_AT], backend_len, "TCOMMS_BACKEND=%s", o->backend);
    }
    for (size_t i = 0; i < n; i++) {
        int drop = 0;
        for (size_t j = 0; j < nours && !drop; j++) drop = ours[j] != NULL && same_name(environ[i], ours[j]);
        if (!drop) env[k++] = environ[i];
    }
    for (size_t j = 0; j < nours; j++)
        if (ours[j] != NULL) env[k++] = ours[j];
    env[k] = NULL;
    return env;
}
