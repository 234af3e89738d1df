/* SPDX-License-Identifier: BSD-3-Clause */
/* The flight records (flight.h): one ring per communicator, the list of this process's records that the store
 * listener and dumps walk, and the TCOMMS_TRACE_DUMP writer (on a timeout, an abort, a question from a rank that
 * timed out, or the signal TCOMMS_TRACE_DUMP_SIGNAL names). */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "flight.h"
#include "log.h"

struct tc_flight {
    atomic_int refs;
    atomic_int diagnosed;
    _Atomic uint64_t last; /* the newest sequence number posted */
    char name[128];
    char prefix[TC_PREFIX_MAX];
    int rank, size;
    int *root_ranks; /* members' ranks in the root communicator: whom the listener of each process answers for */
    pthread_mutex_t store_lock; /* holds `store` still while a question is asked through it */
    tcomms_store_t *store;      /* NULL once the communicator is destroyed */
    const tc_store_ref_t *ref;  /* its owner, whose listener says whether the ranks can answer; NULL likewise */
    struct tc_flight *next;     /* in the list below */
    tc_flight_entry_t ring[TC_FLIGHT_RING];
};

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static tc_flight_t *list_head;

/* The kernel's coarse clock (a tick's resolution, a few ms): twice per operation on the fast path, where the
 * precise clock costs a few times more on hosts whose clock source needs it (kvm-clock); a hang is judged in
 * seconds. CLOCK_REALTIME, so that the ranks' files line up across hosts. */
int64_t tc_flight_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

const char *tc_flight_state_name(int state)
{
    switch (state) {
    case TC_FLIGHT_POSTED: return "posted";
    case TC_FLIGHT_WAITING: return "waiting";
    case TC_FLIGHT_COMPLETED: return "completed";
    case TC_FLIGHT_FAILED: return "failed";
    }
    return "unknown";
}

/* ---- dump on a signal: the handler only posts a semaphore (async-signal-safe); a thread writes the files ---- */

static sem_t dump_sem;

static void on_dump_signal(int sig)
{
    (void)sig;
    int saved = errno;
    sem_post(&dump_sem);
    errno = saved;
}

static void *dump_thread(void *arg)
{
    (void)arg;
    for (;;) {
        if (sem_wait(&dump_sem) == 0)
            tc_flight_dump("signal");
    }
    return NULL;
}

/* A signal name ("USR1", "SIGUSR2") or number, or 0. */
static int parse_signal(const char *s)
{
    static const struct { const char *name; int sig; } names[] = {
        {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"INT", SIGINT}, {"TERM", SIGTERM},
        {"QUIT", SIGQUIT}, {"PWR", SIGPWR},   {"URG", SIGURG}};
    if (strncmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(s, names[i].name) == 0)
            return names[i].sig;
    char *end;
    long n = strtol(s, &end, 10);
    return *s != '\0' && *end == '\0' && n > 0 && n < NSIG ? (int)n : 0;
}

static void setup_signal(void)
{
    const char *env = getenv("TCOMMS_TRACE_DUMP_SIGNAL");
    if (env == NULL || *env == '\0')
        return;
    int sig = parse_signal(env);
    pthread_t t;
    if (sig == 0 || sig == SIGKILL || sig == SIGSTOP) {
        tc_log(TCOMMS_LOG_WARN, "core", "TCOMMS_TRACE_DUMP_SIGNAL=%s is no signal a handler can take: ignored", env);
        return;
    }
    if (sem_init(&dump_sem, 0, 0) != 0 || pthread_create(&t, NULL, dump_thread, NULL) != 0) {
        tc_log(TCOMMS_LOG_WARN, "core", "TCOMMS_TRACE_DUMP_SIGNAL: no thread to write the dump: ignored");
        return;
    }
    pthread_detach(t);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_dump_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    tc_log(TCOMMS_LOG_DEBUG, "core", "signal %d writes the flight records to TCOMMS_TRACE_DUMP", sig);
}

static pthread_once_t signal_once = PTHREAD_ONCE_INIT;

/* ---- attach, detach, references ---- */

void tc_flight_attach(tcomms_comm_t *comm, const tcomms_comm_t *parent, const int *parent_ranks)
{
    comm->flight = NULL;
    tc_flight_t *f = calloc(1, sizeof(*f));
    int *roots = f != NULL ? malloc((size_t)comm->size * sizeof(int)) : NULL;
    if (roots == NULL) {
        free(f);
        tc_log(TCOMMS_LOG_WARN, "core", "communicator '%s': out of memory for its flight record", comm->name);
        return;
    }
    for (int r = 0; r < comm->size; r++) {
        int pr = parent != NULL && parent_ranks != NULL ? parent_ranks[r] : r;
        roots[r] = parent != NULL && parent->flight != NULL ? parent->flight->root_ranks[pr] : pr;
    }
    atomic_init(&f->refs, 1);
    snprintf(f->name, sizeof(f->name), "%s", comm->name);
    snprintf(f->prefix, sizeof(f->prefix), "%s", comm->prefix);
    f->rank = comm->rank;
    f->size = comm->size;
    f->root_ranks = roots;
    f->store = comm->store != NULL ? comm->store->store : NULL;
    f->ref = comm->store;
    pthread_mutex_init(&f->store_lock, NULL);
    pthread_once(&signal_once, setup_signal);
    pthread_mutex_lock(&list_lock);
    tc_flight_t **at = &list_head; /* appended: the oldest record names the dump file */
    while (*at != NULL)
        at = &(*at)->next;
    *at = f;
    pthread_mutex_unlock(&list_lock);
    comm->flight = f;
}

void tc_flight_detach(tcomms_comm_t *comm)
{
    tc_flight_t *f = comm->flight;
    if (f == NULL)
        return;
    pthread_mutex_lock(&list_lock);
    for (tc_flight_t **at = &list_head; *at != NULL; at = &(*at)->next)
        if (*at == f) {
            *at = f->next;
            break;
        }
    pthread_mutex_unlock(&list_lock);
    pthread_mutex_lock(&f->store_lock); /* waits for a question in progress */
    f->store = NULL;
    f->ref = NULL;
    pthread_mutex_unlock(&f->store_lock);
    comm->flight = NULL;
    tc_flight_unref(f);
}

void tc_flight_ref(tc_flight_t *f)
{
    if (f != NULL)
        atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}

void tc_flight_unref(tc_flight_t *f)
{
    if (f == NULL || atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1)
        return;
    pthread_mutex_destroy(&f->store_lock);
    free(f->root_ranks);
    free(f);
}

int tc_flight_first_failure(tc_flight_t *f)
{
    return atomic_exchange(&f->diagnosed, 1) == 0;
}

tc_flight_t *tc_flight_find(const char *prefix)
{
    pthread_mutex_lock(&list_lock);
    tc_flight_t *f = list_head;
    while (f != NULL && strcmp(f->prefix, prefix) != 0)
        f = f->next;
    tc_flight_ref(f);
    pthread_mutex_unlock(&list_lock);
    return f;
}

tc_flight_who_t tc_flight_who(const tc_flight_t *f)
{
    return (tc_flight_who_t){f->name, f->prefix, f->rank, f->size, f->root_ranks};
}

tcomms_store_t *tc_flight_lock_store(tc_flight_t *f)
{
    pthread_mutex_lock(&f->store_lock);
    return f->ref != NULL && f->ref->flight != NULL ? f->store : NULL; /* no listener, nobody to ask */
}

void tc_flight_unlock_store(tc_flight_t *f)
{
    pthread_mutex_unlock(&f->store_lock);
}

/* ---- the fast path ---- */

#define RELAXED memory_order_relaxed

void tc_flight_post(tc_flight_t *f, const tcomms_coll_args_t *a, tc_flight_state_t state)
{
    if (f == NULL)
        return;
    int64_t now = tc_flight_now_us(); /* first: fewer registers to keep across the call */
    tc_flight_entry_t *e = &f->ring[a->seq & (TC_FLIGHT_RING - 1)];
    atomic_store_explicit(&e->seq, 0, RELAXED);
    atomic_thread_fence(memory_order_release); /* a reader that sees the new fields sees seq 0 first */
    atomic_store_explicit(&e->count, a->count, RELAXED);
    atomic_store_explicit(&e->t_post_us, now, RELAXED);
    atomic_store_explicit(&e->t_end_us, 0, RELAXED);
    /* Raw: whether the collective has a root or an op is the readers' question (tc_flight_read), off this path. */
    atomic_store_explicit(&e->root, a->peer, RELAXED);
    atomic_store_explicit(&e->type, (uint8_t)a->type, RELAXED);
    atomic_store_explicit(&e->dtype, (uint8_t)a->dtype, RELAXED);
    atomic_store_explicit(&e->op, (uint8_t)a->op, RELAXED);
    atomic_store_explicit(&e->state, (uint8_t)state, RELAXED);
    atomic_store_explicit(&e->seq, a->seq, memory_order_release);
    if (a->seq > atomic_load_explicit(&f->last, RELAXED))
        atomic_store_explicit(&f->last, a->seq, RELAXED);
}

void tc_flight_mark(tc_flight_t *f, uint64_t seq, tc_flight_state_t state)
{
    if (f == NULL)
        return;
    tc_flight_entry_t *e = &f->ring[seq & (TC_FLIGHT_RING - 1)];
    if (atomic_load_explicit(&e->seq, RELAXED) != seq)
        return; /* overwritten by a newer operation: nothing to say about this one any more */
    if (state >= TC_FLIGHT_COMPLETED)
        atomic_store_explicit(&e->t_end_us, tc_flight_now_us(), RELAXED);
    atomic_store_explicit(&e->state, (uint8_t)state, RELAXED);
}

int tc_flight_read(tc_flight_t *f, uint64_t seq, tc_flight_op_t *out)
{
    if (seq == 0)
        seq = atomic_load_explicit(&f->last, RELAXED);
    if (seq == 0)
        return 0;
    tc_flight_entry_t *e = &f->ring[seq & (TC_FLIGHT_RING - 1)];
    if (atomic_load_explicit(&e->seq, memory_order_acquire) != seq)
        return 0;
    *out = (tc_flight_op_t){
        .seq = seq,
        .count = atomic_load_explicit(&e->count, RELAXED),
        .t_post_us = atomic_load_explicit(&e->t_post_us, RELAXED),
        .t_end_us = atomic_load_explicit(&e->t_end_us, RELAXED),
        .root = atomic_load_explicit(&e->root, RELAXED),
        .type = atomic_load_explicit(&e->type, RELAXED),
        .dtype = atomic_load_explicit(&e->dtype, RELAXED),
        .op = atomic_load_explicit(&e->op, RELAXED),
        .state = atomic_load_explicit(&e->state, RELAXED),
    };
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&e->seq, RELAXED) != seq)
        return 0; /* rewritten meanwhile: the copy may be torn */
    const tcomms_coll_info_t *info = tcomms_coll_info((tcomms_coll_type_t)out->type);
    unsigned flags = info != NULL ? info->flags : 0;
    if (!(flags & (TCOMMS_COLL_ROOTED | TCOMMS_COLL_P2P)))
        out->root = -1;
    if (!(flags & TCOMMS_COLL_REDUCES))
        out->op = 0xff;
    return 1;
}

int64_t tc_flight_posted_us(tc_flight_t *f, uint64_t seq)
{
    tc_flight_op_t op;
    return f != NULL && tc_flight_read(f, seq, &op) ? op.t_post_us : 0;
}

/* ---- text forms ---- */

static void human_bytes(uint64_t b, char *buf, size_t len)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double v = (double)b;
    while (v >= 1024 && u < 4 && (b % 1024 == 0 || v >= 10240)) {
        v /= 1024;
        b /= 1024;
        u++;
    }
    if (v == (double)(uint64_t)v)
        snprintf(buf, len, "%llu %s", (unsigned long long)v, unit[u]);
    else
        snprintf(buf, len, "%.1f %s", v, unit[u]);
}

void tc_flight_describe(const tc_flight_op_t *op, const char *where, const char *state, char *buf, size_t len)
{
    const tcomms_coll_info_t *info = tcomms_coll_info((tcomms_coll_type_t)op->type);
    char what[96] = "";
    size_t at = 0;
    if (info != NULL && op->type != TCOMMS_COLL_BARRIER) {
        char hb[24];
        human_bytes(op->count * tcomms_dtype_size((tcomms_dtype_t)op->dtype), hb, sizeof(hb));
        at += (size_t)snprintf(what, sizeof(what), "%s %s", hb, tcomms_dtype_name((tcomms_dtype_t)op->dtype));
        if (info->flags & TCOMMS_COLL_REDUCES)
            at += (size_t)snprintf(what + at, sizeof(what) - at, " %s", tcomms_op_name((tcomms_op_t)op->op));
        else if (info->flags & (TCOMMS_COLL_ROOTED | TCOMMS_COLL_P2P))
            at += (size_t)snprintf(what + at, sizeof(what) - at, " %s %d",
                                   info->flags & TCOMMS_COLL_ROOTED ? "root" : "peer", op->root);
    }
    if (state != NULL && at < sizeof(what))
        snprintf(what + at, sizeof(what) - at, "%s%s", at ? ", " : "", state);
    snprintf(buf, len, "%s #%llu%s%s%s%s", info != NULL ? info->name : "operation", (unsigned long long)op->seq,
             where != NULL ? where : "", what[0] ? " (" : "", what, what[0] ? ")" : "");
}

/* Each held operation of `f`, oldest first. */
static int held(tc_flight_t *f, tc_flight_op_t *ops)
{
    uint64_t last = atomic_load_explicit(&f->last, RELAXED);
    uint64_t first = last > TC_FLIGHT_RING ? last - TC_FLIGHT_RING + 1 : 1;
    int n = 0;
    for (uint64_t s = first; s <= last && s != 0; s++)
        n += tc_flight_read(f, s, &ops[n]);
    return n;
}

char *tc_flight_text(tc_flight_t *f, size_t *len)
{
    tc_flight_op_t ops[TC_FLIGHT_RING];
    int n = held(f, ops);
    size_t cap = 32 + (size_t)n * 120, at = 0;
    char *t = malloc(cap);
    if (t == NULL)
        return NULL;
    at += (size_t)snprintf(t, cap, "posted %llu\n", (unsigned long long)atomic_load_explicit(&f->last, RELAXED));
    for (int i = 0; i < n; i++)
        at += (size_t)snprintf(t + at, cap - at, "%llu %d %llu %d %d %d %d %lld %lld\n",
                               (unsigned long long)ops[i].seq, ops[i].type, (unsigned long long)ops[i].count,
                               ops[i].dtype, ops[i].op, ops[i].root, ops[i].state, (long long)ops[i].t_post_us,
                               (long long)ops[i].t_end_us);
    *len = at;
    return t;
}

/* ---- TCOMMS_TRACE_DUMP ---- */

/* JSON string body of `s` (names and prefixes hold no control characters, but quotes are possible). */
static void json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s != '\0'; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        if ((unsigned char)*s >= 0x20)
            fputc(*s, out);
    }
    fputc('"', out);
}

static void dump_one(FILE *out, tc_flight_t *f, int first)
{
    tc_flight_op_t ops[TC_FLIGHT_RING];
    int n = held(f, ops);
    fprintf(out, "%s\n  {\"comm\": ", first ? "" : ",");
    json_str(out, f->name);
    fprintf(out, ", \"prefix\": ");
    json_str(out, f->prefix);
    fprintf(out, ", \"rank\": %d, \"size\": %d, \"posted\": %llu, \"ops\": [", f->rank, f->size,
            (unsigned long long)atomic_load_explicit(&f->last, RELAXED));
    for (int i = 0; i < n; i++) {
        const tc_flight_op_t *o = &ops[i];
        const tcomms_coll_info_t *info = tcomms_coll_info((tcomms_coll_type_t)o->type);
        fprintf(out, "%s\n    {\"seq\": %llu, \"coll\": \"%s\", \"count\": %llu, \"dtype\": \"%s\", \"op\": \"%s\", "
                "\"root\": %d, \"state\": \"%s\", \"t_post_us\": %lld, \"t_end_us\": %lld}", i ? "," : "",
                (unsigned long long)o->seq, info ? info->name : "unknown", (unsigned long long)o->count,
                tcomms_dtype_name((tcomms_dtype_t)o->dtype), o->op == 0xff ? "" : tcomms_op_name((tcomms_op_t)o->op),
                o->root, tc_flight_state_name(o->state), (long long)o->t_post_us, (long long)o->t_end_us);
    }
    fprintf(out, "%s]}", n ? "\n  " : "");
}

void tc_flight_dump(const char *why)
{
    const char *path = getenv("TCOMMS_TRACE_DUMP");
    if (path == NULL || *path == '\0')
        return;
    pthread_mutex_lock(&list_lock);
    /* Named by this process's rank in its oldest root communicator, so each rank has a file of its own. */
    int rank = list_head != NULL ? list_head->root_ranks[list_head->rank] : (int)getpid();
    char file[4096], tmp[4200];
    snprintf(file, sizeof(file), "%s.%d.json", path, rank);
    snprintf(tmp, sizeof(tmp), "%s.tmp%d", file, (int)getpid());
    FILE *out = fopen(tmp, "w");
    if (out == NULL) {
        pthread_mutex_unlock(&list_lock);
        tc_log(TCOMMS_LOG_WARN, "core", "TCOMMS_TRACE_DUMP: cannot write %s: %s", tmp, strerror(errno));
        return;
    }
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    fprintf(out, "{\"tcomms_trace\": 1, \"rank\": %d, \"pid\": %d, \"host\": ", rank, (int)getpid());
    json_str(out, host);
    fprintf(out, ", \"why\": ");
    json_str(out, why);
    fprintf(out, ", \"time_us\": %lld, \"comms\": [", (long long)tc_flight_now_us());
    int first = 1;
    for (tc_flight_t *f = list_head; f != NULL; f = f->next, first = 0)
        dump_one(out, f, first);
    fprintf(out, "\n]}\n");
    pthread_mutex_unlock(&list_lock);
    int bad = ferror(out);
    if (fclose(out) != 0 || bad || rename(tmp, file) != 0) {
        tc_log(TCOMMS_LOG_WARN, "core", "TCOMMS_TRACE_DUMP: writing %s failed: %s", file, strerror(errno));
        unlink(tmp);
        return;
    }
    tc_log(TCOMMS_LOG_INFO, "core", "flight records written to %s (%s)", file, why);
}
