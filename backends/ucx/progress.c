/* SPDX-License-Identifier: BSD-3-Clause */
/* Who turns the worker: a caller waiting on an operation progresses it inline (spin, yield, then sleep on the
 * worker's event fd), and one process-wide progress thread does so while no caller is waiting, so non-blocking
 * operations advance when the caller is away. Both sweep after progress: advance the tasks whose round completed
 * (the ready list), fail those past their deadline or on a broken communicator. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ucx.h"

#define TICK_NS (1000ull * 1000)               /* the progress thread looks for an absent caller this often */
#define IDLE_NS (1000ull * 1000 * 1000)        /* ... or this often after IDLE_AFTER_NS without any post */
#define IDLE_AFTER_NS (1000ull * 1000 * 1000)
#define OVERSUBSCRIBED_TICK_NS (10ull * 1000 * 1000) /* the tick while a caller waits on an oversubscribed host */
#define THREAD_BURST 64                        /* progress calls per wake-up before the thread arms again */
#define POLLS_PER_CHECK 16                     /* a waiting caller reads the clock once per this many polls */
#define LINGER_NS (1000ull * 1000 * 1000)     /* the thread serves the worker this long after the last task ended */

/* Peer error mode: a running task with a request in flight with a peer whose endpoint failed fails with
 * TCOMMS_ERR_REMOTE (UCX completes the sends itself, but a receive would wait for ever). Others carry on: a peer that
 * finished its part and left must not fail operations that no longer need it; posting to it later fails. */
static void fail_tasks_on_failed_eps(tcu_ctx_t *c)
{
    for (tcu_task_t *t = c->active.anext, *next; t != &c->active; t = next) {
        next = t->anext;
        for (int i = 0; i < t->nreqs; i++) {
            tcu_ep_t *e = t->comm->eps[t->reqs[i].peer];
            if (e && e->failed && ucp_request_check_status(t->reqs[i].req) == UCS_INPROGRESS) {
                tcu_task_fail(t, TCOMMS_ERR_REMOTE, "the connection to rank %d failed: %s", t->reqs[i].peer,
                              ucs_status_string((ucs_status_t)e->failed));
                break;
            }
        }
    }
}

/* A communicator broke (tcu_comm_break): fail its other running tasks. The whole list, but only then. */
static void fail_tasks_on_broken_comms(tcu_ctx_t *c)
{
    for (tcu_task_t *t = c->active.anext, *next; t != &c->active; t = next) {
        next = t->anext; /* failing a task takes only that one off the list */
        const char *why;
        tcomms_status_t broken = tcu_comm_failed(t->comm, &why);
        if (broken != TCOMMS_SUCCESS)
            tcu_task_fail(t, broken, "aborted: %s", why);
    }
}

/* Only the ready tasks, whatever the number in flight. A task that a step's own post makes ready again goes back on
 * the list and is taken once more, harmlessly: its round is still pending or it has ended (and left the list). */
void tcu_sweep(tcu_ctx_t *c)
{
    c->events = 0;
    if (c->ep_failed) {
        c->ep_failed = 0;
        fail_tasks_on_failed_eps(c);
    }
    if (c->broken) {
        c->broken = 0;
        fail_tasks_on_broken_comms(c);
    }
    while (c->ready.rnext != &c->ready) {
        tcu_task_t *t = c->ready.rnext;
        tcu_task_unready(t);
        const char *why;
        tcomms_status_t broken = tcu_comm_failed(t->comm, &why);
        if (broken != TCOMMS_SUCCESS)
            tcu_task_fail(t, broken, "aborted: %s", why);
        else
            tcu_task_advance(t);
    }
}

void tcu_check_deadlines(tcu_ctx_t *c, uint64_t now)
{
    uint64_t next_check = now + TCU_CHECK_EVERY_NS;
    for (tcu_task_t *t = c->active.anext, *next; t != &c->active; t = next) {
        next = t->anext;
        const char *why;
        tcomms_status_t broken = tcu_comm_failed(t->comm, &why);
        if (broken != TCOMMS_SUCCESS) { /* recorded by the core without an event here (another backend's slot) */
            tcu_task_fail(t, broken, "aborted: %s", why);
            continue;
        }
        if (tcu_task_check_shape(t))
            continue;
        if (now >= t->deadline_ns)
            tcu_task_fail(t, TCOMMS_ERR_TIMEOUT, "timed out after %u ms (at step %d, %d message(s) pending)",
                          t->a.timeout_ms, t->round, t->pending);
        else if (t->deadline_ns < next_check)
            next_check = t->deadline_ns;
    }
    c->next_check_ns = next_check;
}

/* Sleep on the worker's event fd until an event, `until` or the next deadline check. Lock held; dropped while
 * asleep. */
static void sleep_on_worker(tcu_ctx_t *c, uint64_t now, uint64_t until)
{
    ucs_status_t st = ucp_worker_arm(c->worker);
    if (st == UCS_ERR_BUSY)
        return; /* events are waiting: progress again */
    if (until > c->next_check_ns)
        until = c->next_check_ns;
    uint64_t ns = until > now ? until - now : 0;
    if (ns > TCU_CHECK_EVERY_NS)
        ns = TCU_CHECK_EVERY_NS;
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    struct pollfd pfd = {.fd = c->efd, .events = POLLIN};
    pthread_mutex_unlock(&c->lock);
    if (st == UCS_OK)
        ppoll(&pfd, 1, &ts, NULL);
    else /* cannot arm: nap instead of spinning */
        nanosleep(&(struct timespec){0, 50000}, NULL);
    pthread_mutex_lock(&c->lock);
}

/* More ranks on this host than CPUs this process may run on (the core counts the ranks of each communicator on
 * this host at its rendezvous, whatever the launcher): the rank a waiting caller waits for may be queued behind it
 * on its own core, so yield at once, as Open MPI does when oversubscribed (yielding later, or never, was several
 * times slower: docs/perf.md, "Measurements behind the code"). Otherwise yield only after TCU_YIELD_AFTER_NS, a
 * safety net for an oversubscription nobody told us about: yielding early hands the CPU to any other busy process
 * (a compiler beside 2 ranks on 2 CPUs took it on every wait). The context keeps the
 * largest local size of the communicators created on it: a split's smaller one does not make the host any less
 * crowded. Called under the creation lock; the progress thread reads yield_after_ns without it. */
void tcu_ctx_note_local_size(tcu_ctx_t *c, int local_size)
{
    if (local_size <= c->local_size)
        return;
    c->local_size = local_size;
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
    uint64_t after = cpus > 0 && local_size > cpus ? 0 : TCU_YIELD_AFTER_NS;
    __atomic_store_n(&c->yield_after_ns, after, __ATOMIC_RELAXED);
    c->core->log(TCOMMS_LOG_DEBUG, "ucx", "%d rank(s) on this host, %d CPU(s): %s", local_size, cpus,
                 after == 0 ? "oversubscribed, waiting callers yield at once" : "waiting callers spin first");
}

static uint64_t yield_after_ns(const tcu_ctx_t *c)
{
    return __atomic_load_n(&c->yield_after_ns, __ATOMIC_RELAXED);
}

int tcu_oversubscribed(const tcu_ctx_t *c)
{
    return yield_after_ns(c) == 0;
}

/* The caller's wait, in three phases. It polls flat out for TCU_YIELD_AFTER_NS (not at all when oversubscribed): a
 * running peer answers within microseconds, and a peer that is not running gets its turn from the scheduler anyway.
 * Then it keeps polling but yields the CPU at every clock check, so that a rank sharing this core gets to run while
 * this rank stays runnable and sees its message without a wake-up. Only after ctx->spin_ns (TCOMMS_UCX_SPIN_US)
 * does it sleep on the worker's event fd. Sleeping early is what must be avoided: on a busy machine a wake-up takes
 * far longer than a message, and two ranks that sleep in turn pay it on every message for as long as they exchange
 * (docs/perf.md, "Measurements behind the code"). */
int tcu_drive(tcu_ctx_t *c, int (*done)(void *), void *arg, uint64_t timeout_ns)
{
    if (done(arg))
        return 1;
    int ok = 0;
    /* set at the first clock reading, which most waits end before: a small blocking call reads no clock to wait */
    uint64_t yield_at = 0, spin_end = 0, until = UINT64_MAX;
    __atomic_store_n(&c->waiters, c->waiters + 1, __ATOMIC_RELAXED); /* the thread peeks without the lock */
    c->wait_epoch++;
    for (unsigned polls = 1;; polls++) {
        ucp_worker_progress(c->worker);
        if (c->events)
            tcu_sweep(c);
        if ((ok = done(arg)))
            break;
        if (polls % POLLS_PER_CHECK)
            continue;
        uint64_t now = tc_now_ns();
        if (spin_end == 0) {
            yield_at = now + yield_after_ns(c);
            spin_end = now + c->spin_ns;
            until = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
        }
        if (now >= c->next_check_ns) {
            tcu_check_deadlines(c, now);
            if ((ok = done(arg)))
                break;
        }
        if (now >= until)
            break;
        if (now < spin_end) {
            /* let other threads post or test now and then; yield with the lock held, or the progress thread may
             * take it meanwhile and put this caller to sleep on the mutex */
            pthread_mutex_unlock(&c->lock);
            pthread_mutex_lock(&c->lock);
            if (now >= yield_at)
                sched_yield();
        } else {
            sleep_on_worker(c, now, until);
        }
    }
    __atomic_store_n(&c->waiters, c->waiters - 1, __ATOMIC_RELAXED);
    return ok;
}

/* ---- the progress thread ------------------------------------------------------------------------------------- */

/* The thread must never compete with a caller that progresses inline: on a machine with few cores a woken thread
 * takes the core of a rank that is about to receive. So it does not listen to the worker's event fd by default; it
 * ticks (TICK_NS, or IDLE_NS after a second without posts) and only when the worker has work and nobody has waited
 * on or tested anything for a whole tick ("the caller is away") does it take over: progress, arm the worker, sleep
 * on its event fd, until the tasks end or a caller is back. It uses trylock, so it never queues behind a caller
 * either. The worker has work while a task runs, and for LINGER_NS after the last one that received a large
 * message ended (message.c: OWE_BYTES); then the thread only progresses it once a tick, without arming. An
 * operation that completed here may still owe its peer something UCX sends later (the acknowledgement that ends a
 * rendezvous, queued when the peer's FIFO was full), and that peer's send must not wait for our next call. */
static int has_work(tcu_ctx_t *c, uint64_t now)
{
    if (c->task_ended) { /* set by the engine without a clock reading: start the linger here */
        c->task_ended = 0;
        c->linger_until_ns = now + LINGER_NS;
    }
    return c->nactive > 0 || now < c->linger_until_ns;
}

static int caller_away(tcu_ctx_t *c, uint64_t now, uint64_t *seen_epoch, int away)
{
    int idle_tick = c->wait_epoch == *seen_epoch;
    *seen_epoch = c->wait_epoch;
    return c->waiters == 0 && has_work(c, now) && (away || idle_tick);
}

/* One wake-up of the thread, lock held; returns how long to sleep and whether on the worker's fd too. */
static uint64_t thread_turn(tcu_ctx_t *c, uint64_t *seen_epoch, int *away, int *armed)
{
    uint64_t now = tc_now_ns();
    *armed = 0;
    if ((*away = caller_away(c, now, seen_epoch, *away))) {
        for (int i = 0; i < THREAD_BURST && ucp_worker_progress(c->worker); i++)
            if (c->events)
                tcu_sweep(c);
        if (c->events)
            tcu_sweep(c);
        now = tc_now_ns();
    }
    if (now >= c->next_check_ns) /* deadlines hold even if the caller never comes back */
        tcu_check_deadlines(c, now);
    if (*away && c->nactive > 0) { /* a linger alone only ticks: events would wake the thread for nothing owed */
        ucs_status_t st = ucp_worker_arm(c->worker);
        if (st == UCS_ERR_BUSY)
            return 0;
        *armed = st == UCS_OK;
        if (*armed)
            return c->next_check_ns > now ? c->next_check_ns - now : 0;
    }
    *seen_epoch = c->wait_epoch;
    c->deep_sleep = c->nactive == 0 && now - c->last_post_ns > IDLE_AFTER_NS;
    return c->deep_sleep ? IDLE_NS : TICK_NS;
}

static void *thread_main(void *arg)
{
    tcu_ctx_t *c = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    uint64_t seen_epoch = 0;
    int away = 0;
    while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
        uint64_t ns = TICK_NS;
        int armed = 0;
        if (__atomic_load_n(&c->waiters, __ATOMIC_RELAXED) > 0) {
            /* a caller is progressing: stay off its lock (taking it could put the caller to sleep on it); on an
             * oversubscribed host also tick less, since every wake-up takes a CPU from some rank (frequent ticks
             * stalled the ranks: docs/perf.md, "Measurements behind the code") */
            away = 0;
            if (yield_after_ns(c) == 0)
                ns = OVERSUBSCRIBED_TICK_NS;
        } else if (pthread_mutex_trylock(&c->lock) == 0) {
            ns = thread_turn(c, &seen_epoch, &away, &armed);
            pthread_mutex_unlock(&c->lock);
        } else {
            away = 0; /* someone is progressing */
        }
        if (ns == 0)
            continue;
        if (ns > IDLE_NS)
            ns = IDLE_NS;
        struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
        struct pollfd pfd[2] = {{.fd = c->wake_fd, .events = POLLIN}, {.fd = c->efd, .events = POLLIN}};
        ppoll(pfd, armed ? 2 : 1, &ts, NULL);
        if (pfd[0].revents & POLLIN) {
            uint64_t v;
            if (read(c->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                v = 0;
        }
    }
    return NULL;
}

void tcu_thread_wake(tcu_ctx_t *c)
{
    c->deep_sleep = 0;
    uint64_t one = 1;
    if (write(c->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        c->core->log(TCOMMS_LOG_DEBUG, "ucx", "waking the progress thread: %s", strerror(errno));
}

tcomms_status_t tcu_thread_start(tcu_ctx_t *c)
{
    if (!c->use_thread)
        return TCOMMS_SUCCESS;
    int rc = pthread_create(&c->thread, NULL, thread_main, c);
    if (rc != 0)
        return c->core->error(TCOMMS_ERR_SYSTEM, "ucx: cannot start the progress thread: %s", strerror(rc));
    pthread_setname_np(c->thread, "tcomms-ucx");
    c->thread_started = 1;
    return TCOMMS_SUCCESS;
}

void tcu_thread_stop(tcu_ctx_t *c)
{
    if (!c->thread_started)
        return;
    __atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
    tcu_thread_wake(c);
    pthread_join(c->thread, NULL);
    c->thread_started = 0;
}
