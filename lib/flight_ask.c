/* SPDX-License-Identifier: BSD-3-Clause */
/* Asking the other ranks where they are when an operation times out. Each process runs a listener thread on a
 * connection of its own to the built-in store, parked in a GET on its next question key, so it answers whatever
 * its application threads are doing (blocked in a wait, in a CUDA sync, computing); a process that is dead or
 * stopped does not answer, and the message says so. Keys (all under the root store, R = root rank):
 *   tcomms/flight/n/R        question counter of the process with root rank R
 *   tcomms/flight/ask/R/k    question k: "<comm prefix>\n<answer key>", or "stop" from the process itself
 *   <prefix>/flight/ans/q/r  rank r's record (flight.c's text form) for question batch q, or "gone". */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "error.h"
#include "flight.h"
#include "log.h"

#define LISTEN_POLL_MS 10000u /* a listener's GET: long, as a question or the stop key wakes it at once */
#define ASK_BOUND_MS 2000u    /* how long a rank that timed out waits for the others' answers, at most */
#define CONNECT_MS 30000u

#define STOP_WAIT_MS 1000u /* destroy waits this long for the thread, then leaves it to end on its own */

struct tc_flight_listener {
    pthread_t thread;
    char addr[256];
    int port, root_rank;
    atomic_int stop;
    atomic_int refs; /* the thread's and its owner's: the last one out frees it */
    pthread_mutex_t lock;
    pthread_cond_t ended_cv;
    int ended;
};

static void listener_unref(tc_flight_listener_t *l)
{
    if (atomic_fetch_sub(&l->refs, 1) != 1)
        return;
    pthread_cond_destroy(&l->ended_cv);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

/* ---- the listener ---- */

static void answer(tcomms_store_t *own, const char *question)
{
    const char *nl = strchr(question, '\n');
    if (nl == NULL || nl - question >= TC_PREFIX_MAX)
        return;
    char prefix[TC_PREFIX_MAX];
    memcpy(prefix, question, (size_t)(nl - question));
    prefix[nl - question] = '\0';
    tc_flight_t *f = tc_flight_find(prefix);
    size_t len = 5;
    char *text = f != NULL ? tc_flight_text(f, &len) : NULL;
    tcomms_status_t st = tc_store_set(own, nl + 1, text != NULL ? text : "gone\n", text != NULL ? len : 5);
    if (st != TCOMMS_SUCCESS)
        tc_log(TCOMMS_LOG_DEBUG, "core", "flight listener: answering %s: %s", nl + 1, tcomms_last_error());
    free(text);
    tc_flight_unref(f);
    tc_flight_dump("a rank that timed out asked");
}

static void *listen_main(void *arg)
{
    tc_flight_listener_t *l = arg;
    tcomms_store_t *own = NULL;
    if (tc_store_connect(l->addr, l->port, getenv("TCOMMS_STORE_TOKEN"), CONNECT_MS, &own) != TCOMMS_SUCCESS) {
        tc_log(TCOMMS_LOG_DEBUG, "core", "flight listener: %s; this rank will not answer", tcomms_last_error());
        own = NULL;
    }
    uint64_t next = 1, stuck_on = 0;
    while (own != NULL && !atomic_load(&l->stop)) {
        char key[96];
        snprintf(key, sizeof(key), "tcomms/flight/ask/%d/%llu", l->root_rank, (unsigned long long)next);
        void *val = NULL;
        size_t len = 0;
        tcomms_status_t st = tc_store_get(own, key, &val, &len, LISTEN_POLL_MS);
        if (st == TCOMMS_SUCCESS) {
            tc_store_del(own, key);
            if (strcmp(val, "stop") != 0)
                answer(own, val);
            free(val);
            next++;
            continue;
        }
        if (st != TCOMMS_ERR_TIMEOUT)
            break; /* the store is gone: so is the job */
        /* A rank that died between taking number `next` and setting its key leaves a hole: skip it once it has
         * stayed empty for two polls while later numbers were taken. */
        char nkey[64];
        int64_t taken = 0;
        snprintf(nkey, sizeof(nkey), "tcomms/flight/n/%d", l->root_rank);
        if (tc_store_add(own, nkey, 0, &taken) == TCOMMS_SUCCESS && (uint64_t)taken > next) {
            if (stuck_on == next)
                next++;
            else
                stuck_on = next;
        }
    }
    tc_store_free(own);
    pthread_mutex_lock(&l->lock);
    l->ended = 1;
    pthread_cond_signal(&l->ended_cv);
    pthread_mutex_unlock(&l->lock);
    listener_unref(l);
    return NULL;
}

tc_flight_listener_t *tc_flight_listen(const char *addr, int port, int root_rank)
{
    tc_flight_listener_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    snprintf(l->addr, sizeof(l->addr), "%s", addr);
    l->port = port;
    l->root_rank = root_rank;
    atomic_init(&l->refs, 2);
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->ended_cv, NULL);
    if (pthread_create(&l->thread, NULL, listen_main, l) != 0) {
        tc_log(TCOMMS_LOG_WARN, "core", "no thread for the flight listener: this rank will not answer questions "
               "about its operations");
        pthread_cond_destroy(&l->ended_cv);
        pthread_mutex_destroy(&l->lock);
        free(l);
        return NULL;
    }
    return l;
}

/* Take the next question number of root rank `r` and set its key. */
static tcomms_status_t ask(tcomms_store_t *store, int r, const char *what, size_t len)
{
    char key[96];
    int64_t k = 0;
    snprintf(key, sizeof(key), "tcomms/flight/n/%d", r);
    tcomms_status_t st = tc_store_add(store, key, 1, &k);
    if (st != TCOMMS_SUCCESS)
        return st;
    snprintf(key, sizeof(key), "tcomms/flight/ask/%d/%lld", r, (long long)k);
    return tc_store_set(store, key, what, len);
}

void tc_flight_listen_stop(tc_flight_listener_t *l, tcomms_store_t *store)
{
    if (l == NULL)
        return;
    atomic_store(&l->stop, 1);
    if (ask(store, l->root_rank, "stop", 5) != TCOMMS_SUCCESS) /* without the key it ends within one poll */
        tc_log(TCOMMS_LOG_DEBUG, "core", "flight listener: waking it: %s", tcomms_last_error());
    /* Bounded: a thread still connecting to a store that went away must not hold up the destroy. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += STOP_WAIT_MS / 1000;
    pthread_mutex_lock(&l->lock);
    while (!l->ended && pthread_cond_timedwait(&l->ended_cv, &l->lock, &until) == 0)
        ;
    int ended = l->ended;
    pthread_mutex_unlock(&l->lock);
    if (ended)
        pthread_join(l->thread, NULL);
    else
        pthread_detach(l->thread);
    listener_unref(l);
}

/* ---- asking, when an operation timed out ---- */

/* What a rank answered: whether it did, how far it posted, its newest operation and operation `seq`. */
typedef struct reply {
    int answered, gone, has_last, has_seq;
    uint64_t posted;
    tc_flight_op_t last, at;
    char *text; /* as received (malloc'ed) */
} reply_t;

static void parse(const char *text, uint64_t seq, reply_t *r)
{
    r->answered = 1;
    r->has_seq = r->has_last = 0;
    if (strncmp(text, "gone", 4) == 0) {
        r->gone = 1;
        return;
    }
    unsigned long long posted = 0;
    sscanf(text, "posted %llu", &posted);
    r->posted = posted;
    for (const char *line = strchr(text, '\n'); line != NULL; line = strchr(line + 1, '\n')) {
        unsigned long long s, count;
        long long tp, te;
        tc_flight_op_t o;
        if (sscanf(line + 1, "%llu %d %llu %d %d %d %d %lld %lld", &s, &o.type, &count, &o.dtype, &o.op, &o.root,
                   &o.state, &tp, &te) != 9)
            continue;
        o.seq = s;
        o.count = count;
        o.t_post_us = tp;
        o.t_end_us = te;
        if (o.seq == r->posted) {
            r->last = o;
            r->has_last = 1;
        }
        if (o.seq == seq) {
            r->at = o;
            r->has_seq = 1;
        }
    }
}

/* Ask every other member of `f` and collect the answers into rep[] (this rank's own record too), within
 * `bound_ms` in all. */
static void gather(tc_flight_t *f, tcomms_store_t *store, uint64_t seq, uint32_t bound_ms, reply_t *rep)
{
    tc_flight_who_t w = tc_flight_who(f);
    size_t mylen;
    if ((rep[w.rank].text = tc_flight_text(f, &mylen)) != NULL)
        parse(rep[w.rank].text, seq, &rep[w.rank]);
    int64_t q = 0;
    if (tc_store_add(store, "tcomms/flight/q", 1, &q) != TCOMMS_SUCCESS)
        return;
    char msg[TC_KEY_MAX + TC_PREFIX_MAX + 8], key[TC_KEY_MAX];
    for (int r = 0; r < w.size; r++) {
        if (r == w.rank)
            continue;
        int n = snprintf(msg, sizeof(msg), "%s\n%s/flight/ans/%lld/%d", w.prefix, w.prefix, (long long)q, r);
        if (ask(store, w.root_ranks[r], msg, (size_t)n + 1) != TCOMMS_SUCCESS)
            return;
    }
    int64_t deadline = tc_flight_now_us() + (int64_t)bound_ms * 1000;
    for (int r = 0; r < w.size; r++) {
        if (r == w.rank)
            continue;
        int64_t left = (deadline - tc_flight_now_us()) / 1000;
        snprintf(key, sizeof(key), "%s/flight/ans/%lld/%d", w.prefix, (long long)q, r);
        void *val = NULL;
        size_t len = 0;
        if (tc_store_get(store, key, &val, &len, left > 1 ? (uint32_t)left : 1) == TCOMMS_SUCCESS) {
            parse(val, seq, &rep[r]);
            rep[r].text = val;
        }
    }
    snprintf(key, sizeof(key), "%s/flight/ans/%lld/", w.prefix, (long long)q);
    tc_store_del_prefix(store, key);
}

/* Append to buf (at *at, of len) with printf. */
static void put(char *buf, size_t len, size_t *at, const char *fmt, ...) TC_PRINTF(4, 5);
static void put(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
    if (*at >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *at, len - *at, fmt, ap);
    va_end(ap);
    *at = n < 0 ? *at : *at + (size_t)n;
}

/* "rank 5", "ranks 5 and 7", "ranks 1, 2 and 3", the first few of a long list then a count. */
static void put_ranks(char *buf, size_t len, size_t *at, const int *ranks, int n)
{
    enum { SHOWN = 8 };
    put(buf, len, at, n == 1 ? "rank %d" : "ranks %d", ranks[0]);
    for (int i = 1; i < n && i < SHOWN; i++)
        put(buf, len, at, i == n - 1 ? " and %d" : ", %d", ranks[i]);
    if (n > SHOWN)
        put(buf, len, at, " and %d more", n - SHOWN);
}

static int same_call(const tc_flight_op_t *a, const tc_flight_op_t *b)
{
    return a->type == b->type && a->count == b->count && a->dtype == b->dtype && a->op == b->op &&
           a->root == b->root;
}

/* "rank 5's last operation is broadcast #1841 (completed)", then ", rank 7's is ..." for each of `ranks`. */
static void put_where(char *buf, size_t len, size_t *at, const reply_t *rep, const int *ranks, int n)
{
    for (int i = 0; i < n && i < 8; i++) {
        const reply_t *r = &rep[ranks[i]];
        char d[160];
        if (r->has_last)
            tc_flight_describe(&r->last, NULL, tc_flight_state_name(r->last.state), d, sizeof(d));
        else
            snprintf(d, sizeof(d), "#%llu", (unsigned long long)r->posted);
        put(buf, len, at, i == 0 ? "; rank %d's last operation is %s" : ", rank %d's is %s", ranks[i],
            r->posted == 0 ? "none (it posted nothing)" : d);
    }
}

static void put_diagnosis(char *buf, size_t len, size_t *at, const tc_flight_who_t *w, const reply_t *rep,
                          const tc_flight_op_t *mine, uint64_t seq, uint32_t bound_ms)
{
    int *never = malloc(4 * (size_t)w->size * sizeof(int));
    if (never == NULL)
        return;
    int *differ = never + w->size, *silent = differ + w->size, *gone = silent + w->size;
    int nn = 0, nd = 0, ns = 0, ng = 0;
    for (int r = 0; r < w->size; r++) {
        const reply_t *p = &rep[r];
        if (!p->answered)
            silent[ns++] = r;
        else if (p->gone)
            gone[ng++] = r;
        else if (p->posted < seq)
            never[nn++] = r;
        else if (p->has_seq && mine != NULL && !same_call(&p->at, mine))
            differ[nd++] = r;
    }
    const char *sep = "";
    if (nn > 0) {
        put_ranks(buf, len, at, never, nn);
        put(buf, len, at, " never posted #%llu", (unsigned long long)seq);
        sep = "; ";
    }
    for (int i = 0; i < nd && i < 4; i++) {
        char d[160];
        tc_flight_describe(&rep[differ[i]].at, NULL, NULL, d, sizeof(d));
        put(buf, len, at, "%srank %d posted #%llu as %s", sep, differ[i], (unsigned long long)seq, d);
        sep = "; ";
    }
    if (ns > 0) {
        put(buf, len, at, "%s", sep);
        put_ranks(buf, len, at, silent, ns);
        put(buf, len, at, " did not answer within %.1f s (dead, stopped, or without a flight listener)",
            bound_ms / 1000.0);
        sep = "; ";
    }
    if (ng > 0) {
        put(buf, len, at, "%s", sep);
        put_ranks(buf, len, at, gone, ng);
        put(buf, len, at, " destroyed the communicator");
        sep = "; ";
    }
    if (nn + nd + ns + ng == 0)
        put(buf, len, at, "every rank posted #%llu alike; the operation itself is stuck (network, backend or a "
            "device)", (unsigned long long)seq);
    put_where(buf, len, at, rep, never, nn);
    free(never);
}

static void free_replies(reply_t *rep, int n)
{
    for (int r = 0; r < n && rep != NULL; r++)
        free(rep[r].text);
    free(rep);
}

/* The operation where the ranks diverge when no timed-out operation is known (a communicator a backend broke):
 * the first one that some answering rank has not posted, or 0 when they all posted as far. */
static uint64_t divergence(const reply_t *rep, int n)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int r = 0; r < n; r++) {
        if (!rep[r].answered || rep[r].gone)
            continue;
        lo = rep[r].posted < lo ? rep[r].posted : lo;
        hi = rep[r].posted > hi ? rep[r].posted : hi;
    }
    return lo < hi ? lo + 1 : 0;
}

/* Ask, build "<what>: <diagnosis> [<backend's message>]" as this thread's error. `seq` 0: find the divergence. */
/* 1 when this thread's last error is now the diagnosis, 0 when it stays the backend's. */
static int diagnose(tc_flight_t *f, uint64_t seq, uint32_t timeout_ms, tcomms_status_t st)
{
    char backend[1024];
    snprintf(backend, sizeof(backend), "%s", tcomms_last_error());
    tc_flight_who_t w = tc_flight_who(f);
    reply_t *rep = calloc((size_t)w.size, sizeof(*rep));
    tcomms_store_t *store = tc_flight_lock_store(f);
    uint32_t bound = timeout_ms / 2 < ASK_BOUND_MS ? timeout_ms / 2 : ASK_BOUND_MS;
    if (store == NULL || rep == NULL || w.size < 2) { /* nobody to ask, or nobody listening */
        tc_flight_unlock_store(f);
        free(rep);
        tc_flight_dump(seq != 0 ? "timeout" : "failure");
        tc_error(st, "%s", backend);
        return 0;
    }
    gather(f, store, seq, bound, rep);
    tc_flight_unlock_store(f);
    int timed_out = seq != 0;
    if (!timed_out && (seq = divergence(rep, w.size)) != 0)
        for (int r = 0; r < w.size; r++)
            if (rep[r].text != NULL)
                parse(rep[r].text, seq, &rep[r]);
    const tc_flight_op_t *op = NULL; /* operation `seq` as this rank, else the first rank that has it, posted it */
    for (int r = w.rank, k = 0; k < w.size && op == NULL; k++, r = (r + 1) % w.size)
        op = rep[r].has_seq ? &rep[r].at : NULL;
    char msg[1024], d[320], where[160];
    size_t at = 0;
    snprintf(where, sizeof(where), " on '%s'", w.name);
    if (op != NULL)
        tc_flight_describe(op, where, NULL, d, sizeof(d));
    else
        snprintf(d, sizeof(d), "operation #%llu%s", (unsigned long long)seq, where);
    if (timed_out)
        put(msg, sizeof(msg), &at, "%s timed out after %.1f s: ", d, timeout_ms / 1000.0);
    else if (seq != 0)
        put(msg, sizeof(msg), &at, "the ranks diverge at %s: ", d);
    else
        put(msg, sizeof(msg), &at, "the ranks that answered all posted up to #%llu%s",
            (unsigned long long)rep[w.rank].posted, where);
    if (seq != 0)
        put_diagnosis(msg, sizeof(msg), &at, &w, rep, op, seq, bound);
    free_replies(rep, w.size);
    tc_error(st, "%s [%s]", msg, backend);
    tc_log(TCOMMS_LOG_ERROR, "core", "%s", msg);
    tc_flight_dump(timed_out ? "timeout" : "failure");
    return 1;
}

int tc_flight_timed_out(tc_flight_t *f, uint64_t seq, uint32_t timeout_ms, tcomms_status_t st)
{
    if (f == NULL || !tc_flight_first_failure(f))
        return 0;
    return diagnose(f, seq, timeout_ms, st);
}

int tc_flight_broken(tc_flight_t *f, uint32_t timeout_ms, tcomms_status_t st)
{
    if (f == NULL || (st != TCOMMS_ERR_ABORTED && st != TCOMMS_ERR_TIMEOUT) || !tc_flight_first_failure(f))
        return 0;
    return diagnose(f, 0, timeout_ms, st);
}
