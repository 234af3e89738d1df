/* SPDX-License-Identifier: BSD-3-Clause */
/* A split's agreement through the store (split_agree.h): every voter but the judge sets its vote and reads the
 * judge's verdict, the judge reads the votes and sets the verdict, about 3N requests plus the key cleanup. The
 * voters are every parent rank with rank 0 judging, or for a shrink the survivors with the lowest judging. One rank
 * alone judges, so every voter reaches the same outcome; a refusal ends the call for all at once, a voter that
 * never comes at the timeout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h" /* lib/util/clock.h */
#include "error.h"
#include "split_agree.h"

#define MSG_MAX 1024 /* a message carried in a vote or a verdict */

/* The verdict the judge publishes: this header, the message, then for a split by color 2 ints per parent rank. */
typedef struct verdict_head {
    int32_t status;
    uint32_t msg_len;
    uint32_t ncolors; /* ints that follow the message */
    uint32_t failed;  /* shrink: the parent failed on some voter */
    uint64_t hash;    /* shrink: the judge's list, which a voter of another list must not act on */
} verdict_head_t;

/* One agreement: who votes (voters[0] judges) and where their keys go. */
typedef struct agreement {
    tcomms_comm_t *parent;
    char prefix[TC_SUBPREFIX_MAX];
    const int *voters; /* NULL: every parent rank, rank 0 judging */
    int n;
    uint32_t wait_ms; /* how long a voter waits for the others */
} agreement_t;

static int voter(const agreement_t *a, int i)
{
    return a->voters != NULL ? a->voters[i] : i;
}

static int is_judge(const agreement_t *a)
{
    return voter(a, 0) == a->parent->rank;
}

/* splitmix64's finalizer: a bijection in which every input bit moves about half the output bits. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void tc_split_vote_list(tc_split_vote_t *vote, const int *members, int n)
{
    memset(vote, 0, sizeof(*vote));
    vote->call = TC_SPLIT_BY_LIST;
    vote->n = n;
    uint64_t h = mix64((uint64_t)n);
    for (int i = 0; i < n; i++) {
        h = mix64(h + 0x9e3779b97f4a7c15ull + (uint32_t)members[i]);
        if (i < TC_SPLIT_SHOWN)
            vote->shown[i] = members[i];
    }
    vote->hash = h;
}

void tc_split_vote_color(tc_split_vote_t *vote, int color, int key)
{
    memset(vote, 0, sizeof(*vote));
    vote->call = TC_SPLIT_BY_COLOR;
    vote->color = color;
    vote->key = key;
}

void tc_split_vote_shrink(tc_split_vote_t *vote, const int *members, int n, int failed)
{
    tc_split_vote_list(vote, members, n);
    vote->call = TC_SPLIT_SHRINK;
    vote->failed = failed != 0;
}

void tc_split_vote_refuse(tc_split_vote_t *vote, tc_split_call_t call, tcomms_status_t status)
{
    memset(vote, 0, sizeof(*vote));
    vote->call = call;
    vote->status = status;
}

static const char *call_name(int32_t call)
{
    return call == TC_SPLIT_BY_LIST ? "tcomms_comm_split" : call == TC_SPLIT_SHRINK ? "tcomms_comm_shrink"
                                                                                    : "tcomms_comm_split_color";
}

/* "{0, 1, 2}", or past TC_SPLIT_SHOWN "{0, 1, 2, 3, 4, 5, 6, 7, ...} (12 ranks)", or "no list (not a member)". */
static void format_list(const tc_split_vote_t *v, char *out, size_t cap)
{
    if (v->n == 0) {
        snprintf(out, cap, "no list (not a member)");
        return;
    }
    size_t at = (size_t)snprintf(out, cap, "{");
    int shown = v->n < TC_SPLIT_SHOWN ? v->n : TC_SPLIT_SHOWN;
    for (int i = 0; i < shown && at < cap; i++)
        at += (size_t)snprintf(out + at, cap - at, "%s%d", i ? ", " : "", (int)v->shown[i]);
    if (at < cap)
        snprintf(out + at, cap - at, v->n > shown ? ", ...} (%d ranks)" : "}", (int)v->n);
}

static int same_list(const tc_split_vote_t *a, const tc_split_vote_t *b)
{
    return a->n == b->n && a->hash == b->hash && a->shown[0] == b->shown[0];
}

typedef struct list_ref {
    const tc_split_vote_t *vote;
    int rank;
} list_ref_t;

static int by_list_then_rank(const void *pa, const void *pb)
{
    const list_ref_t *a = pa, *b = pb;
    const tc_split_vote_t *x = a->vote, *y = b->vote;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    if (x->n != y->n)
        return x->n < y->n ? -1 : 1;
    if (x->shown[0] != y->shown[0])
        return x->shown[0] < y->shown[0] ? -1 : 1;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

/* Each rank checked that it is in its own list, so the lists agree exactly when the ranks passing each distinct
 * list number as many as it holds: then they are its members. A run short of that has a member that passed
 * something else; name it when its rank is among those the vote shows. */
static tcomms_status_t judge_lists(const tc_split_vote_t *votes, int size, char *msg, size_t cap)
{
    list_ref_t *refs = malloc((size_t)size * sizeof(*refs));
    if (refs == NULL) {
        snprintf(msg, cap, "parent rank 0 is out of memory");
        return TCOMMS_ERR_NO_MEMORY;
    }
    int m = 0;
    for (int r = 0; r < size; r++)
        if (votes[r].n > 0)
            refs[m++] = (list_ref_t){&votes[r], r};
    qsort(refs, (size_t)m, sizeof(*refs), by_list_then_rank);
    tcomms_status_t st = TCOMMS_SUCCESS;
    for (int i = 0, j; i < m && st == TCOMMS_SUCCESS; i = j) {
        for (j = i + 1; j < m && same_list(refs[j].vote, refs[i].vote); j++)
            ;
        const tc_split_vote_t *v = refs[i].vote;
        if (j - i == v->n)
            continue;
        st = TCOMMS_ERR_MISMATCH;
        char mine[160], theirs[160];
        format_list(v, mine, sizeof(mine));
        int shown = v->n < TC_SPLIT_SHOWN ? v->n : TC_SPLIT_SHOWN, other = -1;
        for (int k = 0; k < shown && other < 0; k++)
            if (v->shown[k] >= 0 && v->shown[k] < size && !same_list(&votes[v->shown[k]], v))
                other = v->shown[k];
        if (other >= 0) {
            format_list(&votes[other], theirs, sizeof(theirs));
            snprintf(msg, cap, "the member lists disagree: parent rank %d passed %s, but parent rank %d, a member "
                     "of that list, passed %s", refs[i].rank, mine, other, theirs);
        } else {
            snprintf(msg, cap, "the member lists disagree: parent rank %d passed %s, but only %d of its ranks "
                     "passed that list", refs[i].rank, mine, j - i);
        }
    }
    free(refs);
    return st;
}

/* The judge's verdict on the voters' votes (the others are zero): the kinds of call, then the lists; the color
 * table goes with a split by color, which every parent rank votes in. */
static tcomms_status_t judge(const agreement_t *a, const tc_split_vote_t *votes, char *msg, size_t cap,
                             int32_t **table)
{
    int size = a->parent->size, j = voter(a, 0);
    for (int i = 1; i < a->n; i++) {
        int r = voter(a, i);
        if (votes[r].call != votes[j].call) {
            snprintf(msg, cap, "parent rank %d called %s, but parent rank %d called %s", j, call_name(votes[j].call),
                     r, call_name(votes[r].call));
            return TCOMMS_ERR_MISMATCH;
        }
    }
    if (votes[j].call != TC_SPLIT_BY_COLOR)
        return judge_lists(votes, size, msg, cap);
    if ((*table = malloc((size_t)size * 2 * sizeof(int32_t))) == NULL) {
        snprintf(msg, cap, "parent rank %d is out of memory", j);
        return TCOMMS_ERR_NO_MEMORY;
    }
    for (int r = 0; r < size; r++) {
        (*table)[2 * r] = votes[r].color;
        (*table)[2 * r + 1] = votes[r].key;
    }
    return TCOMMS_SUCCESS;
}

/* The judge: read the votes in voter order until a refusal, a voter that does not come by the deadline, or the
 * last; then judge. The verdict's message goes to msg; *failed: whether any voter's parent failed. */
static tcomms_status_t collect(const agreement_t *a, const tc_split_vote_t *mine, char *msg, size_t cap,
                               int32_t **table, int *failed)
{
    tcomms_comm_t *parent = a->parent;
    tc_split_vote_t *votes = calloc((size_t)parent->size, sizeof(*votes));
    if (votes == NULL) {
        snprintf(msg, cap, "parent rank %d is out of memory", parent->rank);
        return TCOMMS_ERR_NO_MEMORY;
    }
    votes[parent->rank] = *mine;
    *failed = mine->failed;
    uint64_t deadline = tc_now_ms() + a->wait_ms;
    tcomms_status_t st = TCOMMS_SUCCESS;
    for (int i = 1; i < a->n && st == TCOMMS_SUCCESS; i++) {
        int r = voter(a, i);
        char key[TC_KEY_MAX];
        snprintf(key, sizeof(key), "%sv%d", a->prefix, r);
        uint64_t now = tc_now_ms();
        void *val = NULL;
        size_t len = 0;
        st = tc_store_get(parent->store->store, key, &val, &len, now < deadline ? (uint32_t)(deadline - now) : 1);
        if (st == TCOMMS_ERR_TIMEOUT)
            snprintf(msg, cap, "parent rank %d did not call within %u ms", r, a->wait_ms);
        else if (st != TCOMMS_SUCCESS)
            snprintf(msg, cap, "parent rank %d reading parent rank %d's call: %s", parent->rank, r,
                     tcomms_last_error());
        else if (len < sizeof(*votes)) {
            snprintf(msg, cap, "parent rank %d's vote takes %zu bytes, expected at least %zu", r, len,
                     sizeof(*votes));
            st = TCOMMS_ERR_PROTOCOL;
        } else {
            memcpy(&votes[r], val, sizeof(*votes));
            *failed |= votes[r].failed;
            if (votes[r].status != TCOMMS_SUCCESS) {
                st = votes[r].status;
                snprintf(msg, cap, "parent rank %d refused its arguments: %.*s", r, (int)(len - sizeof(*votes)),
                         (const char *)val + sizeof(*votes));
            }
        }
        free(val);
    }
    if (st == TCOMMS_SUCCESS)
        st = judge(a, votes, msg, cap, table);
    free(votes);
    return st;
}

/* The verdict of judge `judge` (this rank) for the voters; `hash` is the judge's shrink list, 0 for a split. */
static tcomms_status_t publish(const agreement_t *a, tcomms_status_t st, const char *msg, const int32_t *table,
                               int failed, uint64_t hash)
{
    verdict_head_t head = {st, (uint32_t)strlen(msg), table ? 2u * (uint32_t)a->parent->size : 0, failed != 0,
                           hash};
    size_t len = sizeof(head) + head.msg_len + head.ncolors * sizeof(int32_t);
    unsigned char *buf = malloc(len);
    if (buf == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
    memcpy(buf, &head, sizeof(head));
    memcpy(buf + sizeof(head), msg, head.msg_len);
    if (table != NULL)
        memcpy(buf + sizeof(head) + head.msg_len, table, head.ncolors * sizeof(int32_t));
    char key[TC_KEY_MAX];
    snprintf(key, sizeof(key), "%sverdict%d", a->prefix, a->parent->rank);
    tcomms_status_t set = tc_store_set(a->parent->store->store, key, buf, len);
    free(buf);
    return set;
}

/* Every voter but the judge: the verdict, with its message in msg and the color table if any. A shrink's verdict
 * on another list than `mine` is a mismatch. */
static tcomms_status_t await(const agreement_t *a, const tc_split_vote_t *mine, char *msg, size_t cap,
                             int32_t **table, int *failed)
{
    tcomms_comm_t *parent = a->parent;
    int j = voter(a, 0);
    char key[TC_KEY_MAX];
    snprintf(key, sizeof(key), "%sverdict%d", a->prefix, j);
    void *val = NULL;
    size_t len = 0;
    tcomms_status_t st = tc_store_get(parent->store->store, key, &val, &len, a->wait_ms);
    verdict_head_t head = {0};
    if (st == TCOMMS_SUCCESS && len >= sizeof(head))
        memcpy(&head, val, sizeof(head));
    if (st != TCOMMS_SUCCESS) {
        snprintf(msg, cap, "waiting for parent rank %d's verdict: %s", j, tcomms_last_error());
    } else if (len < sizeof(head) || len != sizeof(head) + head.msg_len + (size_t)head.ncolors * sizeof(int32_t) ||
               (head.ncolors != 0 && head.ncolors != 2u * (uint32_t)parent->size)) {
        snprintf(msg, cap, "parent rank %d's verdict takes %zu bytes, which is not a verdict", j, len);
        st = TCOMMS_ERR_PROTOCOL;
    } else if (head.status == TCOMMS_SUCCESS && mine->call == TC_SPLIT_SHRINK && head.hash != mine->hash) {
        char list[160];
        format_list(mine, list, sizeof(list));
        snprintf(msg, cap, "the survivor lists disagree: parent rank %d, the lowest survivor this rank named, shrank "
                 "to another list than this rank's %s", j, list);
        st = TCOMMS_ERR_MISMATCH;
    } else {
        st = head.status;
        *failed = head.failed != 0;
        snprintf(msg, cap, "%.*s", (int)head.msg_len, (const char *)val + sizeof(head));
        if (st == TCOMMS_SUCCESS && head.ncolors != 0) {
            if ((*table = malloc(head.ncolors * sizeof(int32_t))) == NULL) {
                snprintf(msg, cap, "out of memory");
                st = TCOMMS_ERR_NO_MEMORY;
            } else {
                memcpy(*table, (const char *)val + sizeof(head) + head.msg_len, head.ncolors * sizeof(int32_t));
            }
        }
    }
    free(val);
    return st;
}

/* Every voter but the judge: its vote, followed by the message of its refusal if it refused. */
static tcomms_status_t send_vote(const agreement_t *a, const tc_split_vote_t *vote, const char *why)
{
    size_t why_len = vote->status != TCOMMS_SUCCESS ? strlen(why) : 0;
    unsigned char *buf = malloc(sizeof(*vote) + why_len);
    if (buf == NULL)
        return tc_error(TCOMMS_ERR_NO_MEMORY, "out of memory");
    memcpy(buf, vote, sizeof(*vote));
    memcpy(buf + sizeof(*vote), why, why_len);
    char key[TC_KEY_MAX];
    snprintf(key, sizeof(key), "%sv%d", a->prefix, a->parent->rank);
    tcomms_status_t st = tc_store_set(a->parent->store->store, key, buf, sizeof(*vote) + why_len);
    free(buf);
    return st;
}

/* A refusing rank tells the others and leaves at once: the judge through its verdict, the others through their
 * vote. A shrink's refusal does both, since the refusing rank cannot know whom the others take for their judge. */
static void refuse(const agreement_t *a, const tc_split_vote_t *vote, const char *why)
{
    if (!is_judge(a) || vote->call == TC_SPLIT_SHRINK)
        send_vote(a, vote, why);
    if (!is_judge(a) && vote->call != TC_SPLIT_SHRINK)
        return;
    char msg[MSG_MAX + 64];
    snprintf(msg, sizeof(msg), "parent rank %d refused its arguments: %.*s", a->parent->rank, MSG_MAX, why);
    publish(a, vote->status, msg, NULL, 0, 0);
}

/* A lone voter judges its own vote (a parent of one rank, a shrink to one survivor): no store traffic. */
static tcomms_status_t judge_alone(const agreement_t *a, const tc_split_vote_t *vote, char *msg, size_t cap,
                                   int32_t **table)
{
    tc_split_vote_t *votes = calloc((size_t)a->parent->size, sizeof(*votes));
    if (votes == NULL) {
        snprintf(msg, cap, "out of memory");
        return TCOMMS_ERR_NO_MEMORY;
    }
    votes[a->parent->rank] = *vote;
    tcomms_status_t st = judge(a, votes, msg, cap, table);
    free(votes);
    return st;
}

/* This rank's part of agreement `a`; *failed as in collect. The last of the voters out deletes the keys. */
static tcomms_status_t agree(const agreement_t *a, const tc_split_vote_t *vote, int32_t **table, int *failed)
{
    char msg[MSG_MAX + 64];
    snprintf(msg, sizeof(msg), "%s", vote->status != TCOMMS_SUCCESS ? tcomms_last_error() : "");
    tcomms_status_t st = vote->status;
    *failed = vote->failed;
    if (st != TCOMMS_SUCCESS) {
        if (a->parent->size > 1)
            refuse(a, vote, msg);
    } else if (a->n <= 1) {
        st = judge_alone(a, vote, msg, sizeof(msg), table);
    } else if (is_judge(a)) {
        st = collect(a, vote, msg, sizeof(msg), table, failed);
        tcomms_status_t set = publish(a, st, msg, *table, *failed, vote->call == TC_SPLIT_SHRINK ? vote->hash : 0);
        if (st == TCOMMS_SUCCESS && set != TCOMMS_SUCCESS) {
            st = set;
            snprintf(msg, sizeof(msg), "publishing the verdict: %s", tcomms_last_error());
        }
    } else if ((st = send_vote(a, vote, "")) != TCOMMS_SUCCESS) {
        snprintf(msg, sizeof(msg), "sending this rank's call to parent rank %d: %s", voter(a, 0),
                 tcomms_last_error());
    } else {
        st = await(a, vote, msg, sizeof(msg), table, failed);
    }
    /* Every parent rank counts alike in a split. A shrink's voters count alike only when they agreed: a voter of
     * another list has another count, and its cleanup could delete a verdict its judge's voters still wait for. */
    if (a->n > 1 && (a->voters == NULL || st == TCOMMS_SUCCESS))
        tc_comm_cleanup_keys(a->parent, a->prefix, a->n);
    if (st != TCOMMS_SUCCESS) {
        free(*table);
        *table = NULL;
        return tc_error(st, "%s", msg);
    }
    return TCOMMS_SUCCESS;
}

tcomms_status_t tc_split_agree(tcomms_comm_t *parent, uint64_t split, const tc_split_vote_t *vote,
                               int32_t **colors)
{
    agreement_t a = {.parent = parent, .voters = NULL, .n = parent->size, .wait_ms = parent->timeout_ms};
    snprintf(a.prefix, sizeof(a.prefix), "%s/s%llu/a/", parent->prefix, (unsigned long long)split);
    int32_t *table = NULL;
    int failed = 0;
    tcomms_status_t st = agree(&a, vote, &table, &failed);
    if (colors != NULL)
        *colors = table;
    else
        free(table);
    return st;
}

tcomms_status_t tc_shrink_agree(tcomms_comm_t *parent, uint64_t shrink, const tc_split_vote_t *vote,
                                const int *members, int n, int *any_failed)
{
    /* The survivors come as each sees the failure: one may still be waiting out the timeout of the operation that
     * failed, and asking the others about it (flight_ask.c), when another calls. */
    uint64_t wait = 2ull * parent->timeout_ms + TC_WAIT_MARGIN_MS;
    agreement_t a = {.parent = parent, .voters = members, .n = n, .wait_ms = wait > UINT32_MAX ? UINT32_MAX
                                                                                               : (uint32_t)wait};
    snprintf(a.prefix, sizeof(a.prefix), "%s/k%llu/a/", parent->prefix, (unsigned long long)shrink);
    int32_t *table = NULL;
    int failed = 0;
    tcomms_status_t st = agree(&a, vote, &table, &failed);
    free(table);
    *any_failed = failed;
    return st;
}
