/* SPDX-License-Identifier: BSD-3-Clause */
/* The agreement every split starts with (split.c): each parent rank tells parent rank 0 what it called (its list,
 * its color and key, or that its arguments were refused), and rank 0 publishes one verdict that every rank acts on,
 * so ranks never pair different calls and a disagreement is the same named error on every rank. */
#ifndef TC_SPLIT_AGREE_H
#define TC_SPLIT_AGREE_H

#include <stdint.h>

#include "comm.h"

#define TC_SPLIT_SHOWN 8 /* members of a list a vote carries for messages */

typedef enum { TC_SPLIT_BY_LIST = 1, TC_SPLIT_BY_COLOR = 2, TC_SPLIT_SHRINK = 3 } tc_split_call_t;

/* What one rank brings to a split. Fixed-size: rank 0 reads N of them whatever the lists hold, and compares lists
 * by their hash (with their length and first member), which is what lets the agreement cost O(N). */
typedef struct tc_split_vote {
    uint64_t hash;                 /* by list: of the members in order */
    int32_t call;                  /* tc_split_call_t */
    int32_t status;                /* TCOMMS_SUCCESS, or the error that refused this rank's arguments */
    int32_t n;                     /* by list: members, 0 for a non-member */
    int32_t shown[TC_SPLIT_SHOWN]; /* by list: the first members */
    int32_t color, key;            /* by color */
    int32_t failed;                /* shrink: this rank's parent has failed */
} tc_split_vote_t;

/* A vote for a split by list over `members` (n = 0: not a member), or by color. */
void tc_split_vote_list(tc_split_vote_t *vote, const int *members, int n);
void tc_split_vote_color(tc_split_vote_t *vote, int color, int key);
/* A vote for a shrink to the survivors `members` (parent ranks, sorted); `failed`: the parent has failed here. */
void tc_split_vote_shrink(tc_split_vote_t *vote, const int *members, int n, int failed);
/* A vote refusing the caller's arguments: `status` with the thread's current message, which is carried to the
 * others. */
void tc_split_vote_refuse(tc_split_vote_t *vote, tc_split_call_t call, tcomms_status_t status);

/* Agree with every rank of `parent` on its split number `split` (each rank's n-th split call meets the others' n-th,
 * whatever its arguments). A refusing caller returns its own status and message at once, having told the others.
 * Otherwise returns TCOMMS_SUCCESS when every rank made the same kind of call and each list names exactly the ranks
 * that passed it; else, on every rank: a rank's refusal (its status, its message after "parent rank R refused its
 * arguments: "), TCOMMS_ERR_MISMATCH naming ranks and lists, or the timeout of a rank that did not call. Nobody waits
 * longer than the parent's timeout. On success of a split by color, *colors (malloc'ed) holds every rank's color and
 * key, 2 ints a rank. */
tcomms_status_t tc_split_agree(tcomms_comm_t *parent, uint64_t split, const tc_split_vote_t *vote,
                               int32_t **colors);

/* The same among the survivors of shrink number `shrink` of `parent` only: `vote` is a shrink vote over its survivors
 * (or a refusal, whose `members` still names the ranks to tell), the lowest of them judges, and the ranks left out are
 * neither waited for nor read. Every survivor of one list reaches the same outcome; a survivor whose list differs from
 * its judge's gets TCOMMS_ERR_MISMATCH. On success *any_failed says whether the parent failed on any survivor. */
tcomms_status_t tc_shrink_agree(tcomms_comm_t *parent, uint64_t shrink, const tc_split_vote_t *vote,
                                const int *members, int n, int *any_failed);

#endif
