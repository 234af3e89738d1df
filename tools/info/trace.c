/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms-info --trace FILES...: merge the flight records the ranks wrote under TCOMMS_TRACE_DUMP (lib/flight.c
 * writes them one operation a line, which is what this reads) and print, per communicator, the first operation
 * where the ranks diverge: a rank that never posted it while another did, or ranks that posted it differently. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#define RING 256 /* at least lib/flight.h's TC_FLIGHT_RING */
#define MAX_RANKS 4096

typedef struct op {
    unsigned long long seq, count;
    int root;
    char coll[24], dtype[16], op[16], state[16];
} op_t;

typedef struct rank_rec {
    int present;
    unsigned long long posted;
    int nops;
    op_t ops[RING];
} rank_rec_t;

typedef struct comm_rec {
    char name[128], prefix[300];
    int size;
    rank_rec_t *ranks; /* size entries */
    struct comm_rec *next;
} comm_rec_t;

/* The text after `"key": ` in `line`, or NULL. */
static const char *field(const char *line, const char *key)
{
    char k[48];
    snprintf(k, sizeof(k), "\"%s\": ", key);
    const char *p = strstr(line, k);
    return p ? p + strlen(k) : NULL;
}

static void str_field(const char *line, const char *key, char *out, size_t len)
{
    const char *p = field(line, key);
    out[0] = '\0';
    if (p == NULL || *p++ != '"')
        return;
    size_t n = 0;
    for (; *p != '\0' && *p != '"' && n + 1 < len; p++) {
        if (*p == '\\' && p[1] != '\0')
            p++;
        out[n++] = *p;
    }
    out[n] = '\0';
}

static long long num_field(const char *line, const char *key)
{
    const char *p = field(line, key);
    return p ? strtoll(p, NULL, 10) : -1;
}

static comm_rec_t *comm_of(comm_rec_t **head, const char *line)
{
    char prefix[300];
    str_field(line, "prefix", prefix, sizeof(prefix));
    for (comm_rec_t *c = *head; c != NULL; c = c->next)
        if (strcmp(c->prefix, prefix) == 0)
            return c;
    long long size = num_field(line, "size");
    if (size < 1 || size > MAX_RANKS)
        return NULL;
    comm_rec_t *c = calloc(1, sizeof(*c));
    if (c == NULL || (c->ranks = calloc((size_t)size, sizeof(rank_rec_t))) == NULL) {
        free(c);
        return NULL;
    }
    snprintf(c->prefix, sizeof(c->prefix), "%s", prefix);
    str_field(line, "comm", c->name, sizeof(c->name));
    c->size = (int)size;
    comm_rec_t **at = head;
    while (*at != NULL)
        at = &(*at)->next;
    *at = c;
    return c;
}

static int read_file(const char *path, comm_rec_t **head)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "tcomms-info: cannot read %s\n", path);
        return -1;
    }
    char line[1024];
    rank_rec_t *r = NULL;
    int seen = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, "\"tcomms_trace\"") != NULL)
            seen = 1;
        if (strstr(line, "\"comm\": ") != NULL) {
            comm_rec_t *c = comm_of(head, line);
            long long rank = num_field(line, "rank");
            r = c != NULL && rank >= 0 && rank < c->size ? &c->ranks[rank] : NULL;
            if (r != NULL) {
                r->present = 1;
                r->posted = (unsigned long long)num_field(line, "posted");
                r->nops = 0;
            }
        } else if (r != NULL && r->nops < RING && strstr(line, "\"seq\": ") != NULL) {
            op_t *o = &r->ops[r->nops++];
            o->seq = (unsigned long long)num_field(line, "seq");
            o->count = (unsigned long long)num_field(line, "count");
            o->root = (int)num_field(line, "root");
            str_field(line, "coll", o->coll, sizeof(o->coll));
            str_field(line, "dtype", o->dtype, sizeof(o->dtype));
            str_field(line, "op", o->op, sizeof(o->op));
            str_field(line, "state", o->state, sizeof(o->state));
        }
    }
    fclose(f);
    if (!seen)
        fprintf(stderr, "tcomms-info: %s is no TCOMMS_TRACE_DUMP file\n", path);
    return seen ? 0 : -1;
}

static const op_t *find(const rank_rec_t *r, unsigned long long seq)
{
    for (int i = 0; i < r->nops; i++)
        if (r->ops[i].seq == seq)
            return &r->ops[i];
    return NULL;
}

static int same(const op_t *a, const op_t *b)
{
    return strcmp(a->coll, b->coll) == 0 && a->count == b->count && strcmp(a->dtype, b->dtype) == 0 &&
           strcmp(a->op, b->op) == 0 && a->root == b->root;
}

static void print_op(const op_t *o)
{
    printf("%s #%llu (count %llu %s%s%s", o->coll, o->seq, o->count, o->dtype, o->op[0] ? " " : "", o->op);
    if (o->root >= 0)
        printf(" root/peer %d", o->root);
    printf("), %s", o->state);
}

/* The first sequence number of `c` where the ranks with a file disagree, or 0. */
static unsigned long long first_divergence(const comm_rec_t *c, unsigned long long *last_common)
{
    unsigned long long lo = 0, hi = 0;
    for (int r = 0; r < c->size; r++) {
        const rank_rec_t *k = &c->ranks[r];
        if (!k->present)
            continue;
        unsigned long long first = k->nops > 0 ? k->ops[0].seq : k->posted + 1;
        lo = lo == 0 || first > lo ? first : lo; /* the oldest operation every rank still holds */
        hi = k->posted > hi ? k->posted : hi;
    }
    *last_common = 0;
    for (unsigned long long s = lo; s != 0 && s <= hi; s++) {
        const op_t *ref = NULL;
        int missing = 0, differ = 0;
        for (int r = 0; r < c->size; r++) {
            const rank_rec_t *k = &c->ranks[r];
            if (!k->present)
                continue;
            const op_t *o = s <= k->posted ? find(k, s) : NULL;
            missing += s > k->posted;
            if (o != NULL && ref != NULL && !same(o, ref))
                differ = 1;
            if (o != NULL && ref == NULL)
                ref = o;
        }
        if (missing || differ)
            return s;
        *last_common = s;
    }
    return 0;
}

static void report(const comm_rec_t *c, unsigned long long s)
{
    printf("  first divergence at #%llu:\n", s);
    for (int r = 0; r < c->size; r++) {
        const rank_rec_t *k = &c->ranks[r];
        printf("    rank %d: ", r);
        if (!k->present) {
            printf("no file\n");
            continue;
        }
        const op_t *o = s <= k->posted ? find(k, s) : NULL;
        if (o != NULL) {
            print_op(o);
        } else if (s > k->posted) {
            printf("never posted #%llu; last ", s);
            const op_t *last = find(k, k->posted);
            if (last != NULL)
                print_op(last);
            else
                printf("#%llu", k->posted);
        } else {
            printf("posted #%llu (no longer in its record)", s);
        }
        printf("\n");
    }
}

int tc_trace_merge(int nfiles, char **files)
{
    comm_rec_t *head = NULL;
    int bad = 0, diverged = 0;
    for (int i = 0; i < nfiles; i++)
        bad |= read_file(files[i], &head) != 0;
    for (comm_rec_t *c = head; c != NULL; c = c->next) {
        int have = 0;
        for (int r = 0; r < c->size; r++)
            have += c->ranks[r].present;
        printf("communicator '%s' (%s): %d ranks, %d with a record\n", c->name, c->prefix, c->size, have);
        unsigned long long common, s = first_divergence(c, &common);
        if (s != 0) {
            report(c, s);
            diverged = 1;
        } else {
            printf("  no divergence: the ranks agree up to #%llu\n", common);
        }
    }
    while (head != NULL) {
        comm_rec_t *next = head->next;
        free(head->ranks);
        free(head);
        head = next;
    }
    return bad ? 2 : diverged;
}
