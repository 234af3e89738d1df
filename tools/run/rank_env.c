/* SPDX-License-Identifier: BSD-3-Clause */
/* The environment tcomms-run gives its ranks: the caller's, with the bootstrap variables tcomms reads replaced, and
 * the rendezvous store locked to this job: bound to 127.0.0.1 (every rank is on this host) and guarded by a fresh
 * random token unless the caller chose one. tcomms-run.c rewrites the per-rank variables before each spawn. */
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

char **run_build_env(const run_opts_t *o, int port, char *rank_var, char *local_var)
{
    extern char **environ;
    /* Replaced in every rank; TCOMMS_BACKEND only with --backend, TCOMMS_STORE_TOKEN only when the caller set none. */
    static const char *const ours[] = {"TCOMMS_RANK=", "TCOMMS_SIZE=", "TCOMMS_LOCAL_RANK=", "TCOMMS_LOCAL_SIZE=",
                                       "TCOMMS_MASTER_ADDR=", "TCOMMS_MASTER_PORT=", "TCOMMS_STORE_BIND_ADDR=",
                                       "TCOMMS_BACKEND="};
    size_t nours = o->backend ? 8 : 7;
    static char size_var[32], lsize_var[32], port_var[32], addr_var[] = "TCOMMS_MASTER_ADDR=127.0.0.1",
                bind_var[] = "TCOMMS_STORE_BIND_ADDR=127.0.0.1", token_var[sizeof "TCOMMS_STORE_TOKEN=" +
                                                                           2 * TOKEN_BYTES];
    const char *user_token = getenv("TCOMMS_STORE_TOKEN");
    if (user_token == NULL || *user_token == '\0') {
        memcpy(token_var, "TCOMMS_STORE_TOKEN=", sizeof "TCOMMS_STORE_TOKEN=");
        if (make_token(token_var + strlen(token_var)) != 0) return NULL;
    }
    size_t n = 0, k = 0;
    while (environ[n]) n++;
    size_t backend_len = o->backend ? strlen(o->backend) + sizeof "TCOMMS_BACKEND=" : 0;
    char **env = calloc(1, (n + 10) * sizeof *env + backend_len);
    if (!env) return NULL;
    char *backend_var = o->backend ? (char *)(env + n + 10) : NULL;
    if (backend_var) snprintf(backend_var, backend_len, "TCOMMS_BACKEND=%s", o->backend);
    for (size_t i = 0; i < n; i++) {
        int drop = user_token != NULL && *user_token == '\0' &&
                   strncmp(environ[i], "TCOMMS_STORE_TOKEN=", strlen("TCOMMS_STORE_TOKEN=")) == 0;
        for (size_t j = 0; j < nours && !drop; j++)
            drop = strncmp(environ[i], ours[j], strlen(ours[j])) == 0;
        if (!drop) env[k++] = environ[i];
    }
    snprintf(size_var, sizeof size_var, "TCOMMS_SIZE=%d", o->nranks);
    snprintf(lsize_var, sizeof lsize_var, "TCOMMS_LOCAL_SIZE=%d", o->nranks);
    snprintf(port_var, sizeof port_var, "TCOMMS_MASTER_PORT=%d", port);
    env[k++] = rank_var;
    env[k++] = size_var;
    env[k++] = local_var;
    env[k++] = lsize_var;
    env[k++] = addr_var;
    env[k++] = port_var;
    env[k++] = bind_var;
    if (token_var[0] != '\0') env[k++] = token_var;
    if (backend_var) env[k++] = backend_var;
    env[k] = NULL;
    return env;
}
