/* SPDX-License-Identifier: BSD-3-Clause */
/* Logging by TCOMMS_LOG_LEVEL, with TCOMMS_<WHO>_LOG_LEVEL overriding per component, to stderr or to the file per
 * rank that TCOMMS_LOG_FILE names. Each line carries a UTC timestamp, the pid, the rank and, while a thread works
 * on one communicator, its name; the core sets that context (tc_log_set_rank, tc_log_set_comm), so no backend's call
 * site has to pass it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

extern char **environ;

static const char *const level_names[] = {"", "error", "warn", "info", "debug", "trace"};

/* The level `text` names, or -1 when it names none. */
static int parse_level_text(const char *text)
{
    for (int i = 1; i <= TCOMMS_LOG_TRACE; i++)
        if (strcasecmp(text, level_names[i]) == 0)
            return i;
    if (strcasecmp(text, "warning") == 0)
        return TCOMMS_LOG_WARN;
    if (strcasecmp(text, "none") == 0 || strcmp(text, "0") == 0)
        return 0;
    if (text[0] >= '1' && text[0] <= '5' && text[1] == '\0')
        return text[0] - '0';
    return -1;
}

/* A malformed value keeps the default here: logging must work before and after tc_log_env_check reports it. */
static int parse_level(const char *text, int dflt)
{
    if (text == NULL || *text == '\0')
        return dflt;
    int level = parse_level_text(text);
    return level < 0 ? dflt : level;
}

/* The levels in force: read from the environment at the first line and again at each communicator's creation
 * (tc_log_env_check for a root, tc_log_refresh for a split), never per line, so a disabled level costs one load
 * and one compare on the hot path. A snapshot is never changed once published; one that differs replaces it, and
 * the old ones stay reachable (a thread may still read one) until the process ends: a few hundred bytes each, kept
 * only when the variables changed. */
#define MAX_COMPONENTS 16
typedef struct levels {
    int global, max;  /* TCOMMS_LOG_LEVEL; the highest level any component logs at */
    int n;
    struct {
        char who[24]; /* the <WHO> of TCOMMS_<WHO>_LOG_LEVEL, compared without case */
        int level;
    } comp[MAX_COMPONENTS];
    struct levels *older;
} levels_t;

static _Atomic(levels_t *) levels;
atomic_int tc_log_max = TCOMMS_LOG_TRACE;
static pthread_mutex_t levels_lock = PTHREAD_MUTEX_INITIALIZER;

/* The <WHO> of "TCOMMS_<WHO>_LOG_LEVEL=..." as [*who, *who + *len), or 0 when `var` is no such variable ("" for
 * TCOMMS_LOG_LEVEL itself). TCOMMS_FOOLOG_LEVEL is not one. */
static int level_var(const char *var, const char **who, size_t *len)
{
    const char *eq = strchr(var, '=');
    if (strncmp(var, "TCOMMS_", 7) != 0 || eq == NULL || eq - var < 16 || strncmp(eq - 9, "LOG_LEVEL", 9) != 0)
        return 0;
    if (eq - var != 16 && eq[-10] != '_')
        return 0;
    *who = var + 7;
    *len = eq - var == 16 ? 0 : (size_t)(eq - 10 - *who);
    return 1;
}

static levels_t *levels_refresh(void);

void tc_log_refresh(void)
{
    levels_refresh();
}

static levels_t *levels_refresh(void)
{
    levels_t fresh;
    memset(&fresh, 0, sizeof(fresh));
    fresh.global = parse_level(getenv("TCOMMS_LOG_LEVEL"), TCOMMS_LOG_WARN);
    fresh.max = fresh.global;
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        const char *who;
        size_t len;
        if (!level_var(*e, &who, &len) || len == 0 || len >= sizeof(fresh.comp[0].who) || fresh.n == MAX_COMPONENTS)
            continue;
        memcpy(fresh.comp[fresh.n].who, who, len);
        fresh.comp[fresh.n].level = parse_level(strchr(*e, '=') + 1, fresh.global);
        if (fresh.comp[fresh.n].level > fresh.max)
            fresh.max = fresh.comp[fresh.n].level;
        fresh.n++;
    }
    pthread_mutex_lock(&levels_lock);
    levels_t *cur = atomic_load(&levels);
    if (cur == NULL || cur->global != fresh.global || cur->max != fresh.max || cur->n != fresh.n ||
        memcmp(cur->comp, fresh.comp, sizeof(fresh.comp)) != 0) {
        levels_t *made = malloc(sizeof(*made));
        if (made != NULL) {
            *made = fresh;
            made->older = cur;
            atomic_store_explicit(&levels, made, memory_order_release);
            cur = made;
        }
    }
    if (cur != NULL)
        atomic_store_explicit(&tc_log_max, cur->max, memory_order_relaxed);
    pthread_mutex_unlock(&levels_lock);
    return cur;
}

int tc_log_enabled(tcomms_log_level_t level, const char *who)
{
    const levels_t *l = atomic_load_explicit(&levels, memory_order_acquire);
    if (l == NULL && (l = levels_refresh()) == NULL)
        return (int)level <= TCOMMS_LOG_WARN; /* out of memory at the first line */
    if ((int)level > l->max)
        return 0;
    int threshold = l->global;
    for (int i = 0; who != NULL && i < l->n; i++)
        if (strcasecmp(who, l->comp[i].who) == 0)
            threshold = l->comp[i].level;
    return (int)level <= threshold;
}

/* ---- context: whose line it is ------------------------------------------------------------------------------- */

/* The thread's own rank first: tests and Python programs may run several ranks' communicators in one process, one
 * per thread. Backend threads (progress, watchdog) have none and take the process's: the first root communicator's. */
static _Thread_local int tls_rank = -1;
static _Thread_local char tls_comm[64];
static atomic_int process_rank = -1;

void tc_log_set_rank(int rank)
{
    tls_rank = rank;
    int unset = -1;
    atomic_compare_exchange_strong(&process_rank, &unset, rank);
}

void tc_log_set_comm(const char *name)
{
    snprintf(tls_comm, sizeof(tls_comm), "%s", name ? name : "");
}

/* Before any communicator exists, the launcher's word (the variables tc_env_bootstrap reads first); -1: unknown. */
static int current_rank(void)
{
    if (tls_rank >= 0)
        return tls_rank;
    int r = atomic_load(&process_rank);
    if (r >= 0)
        return r;
    static const char *const vars[] = {"TCOMMS_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        char *end;
        if (v != NULL && *v != '\0') {
            long l = strtol(v, &end, 10);
            return *end == '\0' && l >= 0 && l < (1L << 24) ? (int)l : -1;
        }
    }
    return -1;
}

/* ---- the destination ----------------------------------------------------------------------------------------- */

/* TCOMMS_LOG_FILE is opened once, on the first line or the first check, whichever comes first; a failure is kept
 * so the check can report it (and each line then goes to stderr). */
static pthread_mutex_t file_lock = PTHREAD_MUTEX_INITIALIZER;
static int file_fd = -1;
static int file_tried;
static int file_errno;
static char file_path[1024];

/* Expand %r (rank, "unknown" before one is known), %p (pid), %h (host name) and %% in `pattern` (not empty); -1
 * if the result does not fit. */
static int expand_path(const char *pattern, char *out, size_t len)
{
    size_t n = 0;
    for (const char *p = pattern; *p != '\0'; p++) {
        char piece[300];
        if (*p == '%' && p[1] != '\0') {
            p++;
            int rank = current_rank();
            if (*p == 'r' && rank >= 0)
                snprintf(piece, sizeof(piece), "%d", rank);
            else if (*p == 'r')
                snprintf(piece, sizeof(piece), "unknown");
            else if (*p == 'p')
                snprintf(piece, sizeof(piece), "%ld", (long)getpid());
            else if (*p == 'h') {
                if (gethostname(piece, sizeof(piece) - 1) != 0)
                    snprintf(piece, sizeof(piece), "unknown");
                piece[sizeof(piece) - 1] = '\0';
            } else if (*p == '%')
                snprintf(piece, sizeof(piece), "%%");
            else
                snprintf(piece, sizeof(piece), "%%%c", *p); /* an unknown one stays as it is */
        } else
            snprintf(piece, sizeof(piece), "%c", *p);
        size_t k = strlen(piece);
        if (n + k >= len)
            return -1;
        memcpy(out + n, piece, k + 1);
        n += k;
    }
    return 0;
}

/* The descriptor lines go to: the file, or stderr when none is set or it could not be opened. */
static int log_fd(void)
{
    pthread_mutex_lock(&file_lock);
    if (!file_tried) {
        const char *pattern = getenv("TCOMMS_LOG_FILE");
        if (pattern != NULL && *pattern != '\0') {
            file_tried = 1;
            if (expand_path(pattern, file_path, sizeof(file_path)) != 0) {
                file_errno = ENAMETOOLONG;
                snprintf(file_path, sizeof(file_path), "%.200s", pattern);
            } else {
                /* O_APPEND: ranks or runs that share one file interleave whole lines, never overwrite. */
                file_fd = open(file_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                file_errno = file_fd < 0 ? errno : 0;
            }
        }
    }
    int fd = file_fd >= 0 ? file_fd : STDERR_FILENO;
    pthread_mutex_unlock(&file_lock);
    return fd;
}

/* ---- checking the variables ------------------------------------------------------------------------------------ */

tcomms_status_t tc_log_env_check(void)
{
    levels_refresh();
    /* Every TCOMMS_*LOG_LEVEL: the global one and each component's, whatever components exist. */
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        const char *who, *eq = strchr(*e, '=');
        size_t len;
        if (!level_var(*e, &who, &len))
            continue;
        if (eq[1] != '\0' && parse_level_text(eq + 1) < 0)
            return tc_error(TCOMMS_ERR_BAD_ENV, "environment variable %.*s='%.64s' is malformed: expected error, "
                            "warn, info, debug, trace, none or 0..5", (int)(eq - *e), *e, eq + 1);
    }
    log_fd();
    pthread_mutex_lock(&file_lock);
    int err = file_tried && file_fd < 0 ? file_errno : 0;
    char path[sizeof(file_path)];
    snprintf(path, sizeof(path), "%s", file_path);
    pthread_mutex_unlock(&file_lock);
    if (err != 0)
        return tc_error(TCOMMS_ERR_BAD_ENV, "environment variable TCOMMS_LOG_FILE='%.200s': cannot open '%.300s': %s",
                        getenv("TCOMMS_LOG_FILE") ? getenv("TCOMMS_LOG_FILE") : "", path, strerror(err));
    return TCOMMS_SUCCESS;
}

/* ---- writing ------------------------------------------------------------------------------------------------- */

void tc_vlog(tcomms_log_level_t level, const char *who, const char *fmt, va_list ap)
{
    if (!tc_log_enabled(level, who))
        return;
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    /* ISO 8601 in UTC with milliseconds: sorts as text, and merges across ranks and hosts without time zones. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    time_t sec = ts.tv_sec;
    gmtime_r(&sec, &tm);
    char when[64];
    size_t wn = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + wn, sizeof(when) - wn, ".%03dZ", (int)(ts.tv_nsec / 1000000 % 1000));
    char rank[24] = "?";
    int r = current_rank();
    if (r >= 0)
        snprintf(rank, sizeof(rank), "%d", r);
    char comm[80] = "";
    if (tls_comm[0] != '\0')
        snprintf(comm, sizeof(comm), " '%s'", tls_comm);
    /* One write per line so lines from several threads or ranks do not interleave. */
    char line[1300];
    int n = snprintf(line, sizeof(line), "%s tcomms[%ld] rank %s%s %s %s: %s\n", when, (long)getpid(), rank, comm,
                     level >= 1 && level <= 5 ? level_names[level] : "?", who ? who : "core", msg);
    if (n >= (int)sizeof(line)) {
        n = (int)sizeof(line);
        line[n - 1] = '\n'; /* truncated, still one line */
    }
    if (n > 0) {
        ssize_t w = write(log_fd(), line, (size_t)n);
        (void)w;
    }
}

void tc_log(tcomms_log_level_t level, const char *who, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tc_vlog(level, who, fmt, ap);
    va_end(ap);
}
