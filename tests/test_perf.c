/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of tools/perf/tcomms-perf: the built tool ($TCOMMS_PERF) runs under the built launcher ($TCOMMS_RUN) on
 * every CPU backend of TCOMMS_TEST_BACKENDS and 1 to 3 ranks. Its table and JSON file are parsed and checked
 * against this file's own tables (sizes, counts, busbw factors, which forms exist); bad flags must fail cleanly,
 * a deliberately spoiled element (TCOMMS_PERF_CORRUPT=1) must be counted and fail the run, and --device cuda on a
 * machine without a GPU or without the CUDA runtime must end with a message saying so and no table. The --device cuda
 * path itself runs on a stand-in runtime (tools/perf/test_cudart.c) and the single-rank "fakecuda" backend. */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mrank.h"

#define RUN_LIMIT_S 90 /* a run still going after this is killed and fails the test */
#define MAX_ROWS 1024

/* The collectives in `all` order, with what this test expects of each (independently of tools/perf/colls.c). */
enum { WHOLE = 1, REDUCES = 2, ROOTED = 4, NO_IN_PLACE = 8, PAIRWISE = 16, ALLREDUCE_BW = 32, BW_ONE = 64 };
static const struct { const char *name; unsigned f; } colls[] = {
    {"all_reduce", WHOLE | REDUCES | ALLREDUCE_BW}, {"all_gather", 0}, {"reduce_scatter", REDUCES},
    {"broadcast", WHOLE | ROOTED | NO_IN_PLACE | BW_ONE}, {"reduce", WHOLE | REDUCES | ROOTED | BW_ONE},
    {"alltoall", 0}, {"gather", ROOTED}, {"scatter", ROOTED}, {"sendrecv", WHOLE | NO_IN_PLACE | PAIRWISE | BW_ONE},
    {"all_gather_v", 0}, {"reduce_scatter_v", REDUCES}, {"alltoall_v", NO_IN_PLACE},
};
#define NCOLLS (int)(sizeof colls / sizeof colls[0])

static double factor(unsigned f, int n)
{
    return (f & ALLREDUCE_BW) ? 2.0 * (n - 1) / n : (f & BW_ONE) ? 1.0 : (double)(n - 1) / n;
}

/* ---- running a program with a time limit ---------------------------------------------------------------------- */

typedef struct result {
    int status; /* exit status, or -1 when it did not exit normally */
    char *out, *err, *json; /* json: the --json file's text (NULL: not asked for, or not written) */
} result_t;

static char *slurp(FILE *f)
{
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
    ck_assert_ptr_nonnull(s);
    if (n > 0 && fread(s, 1, (size_t)n, f) != (size_t)n)
        s[0] = '\0';
    fclose(f);
    return s;
}

/* Run `cmd` (words separated by single spaces); under tcomms-run on `nranks` ranks unless it is 0; with `env`
 * (NULL, or "NAME=VALUE" strings ending with NULL) in its environment; with `json`, add --json and a temporary file,
 * read back (and removed) once the run is over. */
static result_t run(int nranks, const char *cmd, const char *const *env, int json)
{
    char line[1024], *argv[64], path[] = "/tmp/test_perf_XXXXXX";
    int argc = 0;
    const char *launcher = getenv("TCOMMS_RUN"), *perf = getenv("TCOMMS_PERF");
    ck_assert_msg(launcher && perf, "TCOMMS_RUN and TCOMMS_PERF must name the built programs");
    if (nranks > 0)
        snprintf(line, sizeof line, "%s --no-tag-output --timeout %d -n %d %s %s", launcher, RUN_LIMIT_S - 10,
                 nranks, perf, cmd);
    else
        snprintf(line, sizeof line, "%s %s", perf, cmd);
    if (json) {
        int fd = mkstemp(path);
        ck_assert_int_ge(fd, 0);
        close(fd);
        snprintf(line + strlen(line), sizeof line - strlen(line), " --json %s", path);
    }
    for (char *save, *w = strtok_r(line, " ", &save); w && argc < 63; w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    argv[argc] = NULL;
    FILE *out = tmpfile(), *err = tmpfile();
    ck_assert(out && err);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setpgid(0, 0);
        dup2(fileno(out), 1);
        dup2(fileno(err), 2);
        unsetenv("TCOMMS_PERF_CORRUPT");
        unsetenv("TCOMMS_PERF_CUDART");
        for (int k = 0; env != NULL && env[k] != NULL; k++)
            putenv((char *)env[k]);
        execv(argv[0], argv);
        _exit(127);
    }
    int ws = 0, waited = 0;
    for (time_t end = time(NULL) + RUN_LIMIT_S; !waited && time(NULL) < end;) {
        waited = waitpid(pid, &ws, WNOHANG) == pid;
        if (!waited)
            usleep(20000);
    }
    if (!waited) { /* tcomms-run forwards SIGTERM to the ranks; SIGKILL if that is not enough */
        kill(-pid, SIGTERM);
        sleep(5);
        kill(-pid, SIGKILL);
        waitpid(pid, &ws, 0);
    }
    FILE *j = json ? fopen(path, "r") : NULL;
    if (json)
        unlink(path);
    ck_assert_msg(waited, "'%s' ran past %d s and was killed", cmd, RUN_LIMIT_S);
    return (result_t){WIFEXITED(ws) ? WEXITSTATUS(ws) : -1, slurp(out), slurp(err), j ? slurp(j) : NULL};
}

static void result_free(result_t *r)
{
    free(r->out);
    free(r->err);
    free(r->json);
}

/* ---- the table ------------------------------------------------------------------------------------------------ */

typedef struct cell {
    int na;
    double v[3];      /* time, algbw, busbw */
    char s[3][16];    /* as printed */
    long long wrong;  /* -1: N/A */
} cell_t;

typedef struct row {
    int block;
    size_t size, count;
    char type[16], redop[16];
    int root;
    cell_t c[2];
} row_t;

typedef struct table {
    row_t rows[MAX_ROWS];
    int nrows, nblocks, block_of[NCOLLS];
} table_t;

/* Half a unit of the last printed digit of s (getFloatStr prints %.Nf or %.1e). */
static double ulp_half(const char *s)
{
    const char *e = strpbrk(s, "eE"), *dot = strchr(s, '.');
    if (e)
        return 0.05 * fabs(strtod(s, NULL)) + 1e-300;
    size_t decimals = dot ? strlen(dot + 1) : 0;
    return 0.5 * pow(10.0, -(double)decimals);
}

static int parse_num(const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    while (*end == ' ') /* nccl-tests' footer ends "%g %s" with an empty verdict */
        end++;
    return end != s && *end == '\0' && isfinite(*v);
}

static void parse_cell(char **tok, cell_t *c, int line)
{
    int na = 0;
    for (int k = 0; k < 4; k++)
        na += strcmp(tok[k], "N/A") == 0;
    c->na = na == 4;
    c->wrong = -1;
    if (c->na)
        return;
    for (int k = 0; k < 3; k++) {
        ck_assert_msg(parse_num(tok[k], &c->v[k]) && c->v[k] >= 0, "line %d: '%s' is not a number", line, tok[k]);
        snprintf(c->s[k], sizeof c->s[k], "%s", tok[k]);
    }
    if (strcmp(tok[3], "N/A") != 0) {
        char *end;
        c->wrong = strtoll(tok[3], &end, 10);
        ck_assert_msg(*end == '\0' && c->wrong >= 0, "line %d: #wrong '%s'", line, tok[3]);
    }
}

/* Blocks of the expected collectives in order, each with its header, rows, footer, and a sane average. */
static void parse_table(char *text, table_t *t, const int *want, int nwant)
{
    memset(t, 0, sizeof *t);
    int inside = 0, have_avg = 0, lineno = 0;
    double avg = 0, sum = 0, tol = 0;
    int nbw = 0;
    for (char *save, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char name[64];
        if (sscanf(l, "# Collective test starting: %63s", name) == 1) {
            ck_assert_msg(!inside && t->nblocks < nwant, "line %d: unexpected block %s", lineno, name);
            int c = want[t->nblocks];
            ck_assert_msg(strncmp(name, colls[c].name, strlen(colls[c].name)) == 0 &&
                              strcmp(name + strlen(colls[c].name), "_perf") == 0,
                          "line %d: block %s where %s_perf was due", lineno, name, colls[c].name);
            inside = 1;
            have_avg = nbw = 0;
            sum = tol = 0;
        } else if (sscanf(l, "# Collective test concluded: %63s", name) == 1) {
            ck_assert_msg(inside && have_avg, "line %d: block ends without its Avg bus bandwidth line", lineno);
            int c = want[t->nblocks];
            if (nbw > 0)
                ck_assert_msg(fabs(avg - sum / nbw) <= tol + 1e-5 * avg + 1e-9,
                              "%s: Avg bus bandwidth %g, mean of the printed busbw %g", colls[c].name, avg, sum / nbw);
            t->block_of[t->nblocks++] = c;
            inside = 0;
        } else if (strncmp(l, "# Avg bus bandwidth    : ", 25) == 0) {
            have_avg = 1;
            ck_assert_msg(parse_num(l + 25, &avg) || (strcmp(l + 25, "N/A") == 0 && nbw == 0),
                          "line %d: '%s'", lineno, l);
        } else if (strncmp(l, "# Out of bounds values : ", 25) == 0) {
            ck_assert_msg(inside, "line %d: footer outside a block", lineno);
        } else if (l[0] != '#') {
            char *tok[32], *s2;
            int n = 0;
            for (char *w = strtok_r(l, " ", &s2); w && n < 32; w = strtok_r(NULL, " ", &s2))
                tok[n++] = w;
            ck_assert_msg(inside && n == 13, "line %d: a row outside a block or without 13 columns", lineno);
            ck_assert_int_lt(t->nrows, MAX_ROWS);
            row_t *r = &t->rows[t->nrows++];
            char *e1, *e2, *e3;
            r->block = t->nblocks;
            r->size = strtoull(tok[0], &e1, 10);
            r->count = strtoull(tok[1], &e2, 10);
            r->root = (int)strtol(tok[4], &e3, 10);
            ck_assert_msg(!*e1 && !*e2 && !*e3, "line %d: size, count or root is not an integer", lineno);
            snprintf(r->type, sizeof r->type, "%s", tok[2]);
            snprintf(r->redop, sizeof r->redop, "%s", tok[3]);
            parse_cell(tok + 5, &r->c[0], lineno);
            parse_cell(tok + 9, &r->c[1], lineno);
            for (int k = 0; k < 2; k++)
                if (!r->c[k].na) {
                    sum += r->c[k].v[2];
                    tol = fmax(tol, ulp_half(r->c[k].s[2]));
                    nbw++;
                }
        }
    }
    ck_assert_msg(!inside && t->nblocks == nwant, "%d of %d blocks completed", t->nblocks, nwant);
}

/* ---- the rules a table must follow ---------------------------------------------------------------------------- */

typedef struct sweep {
    int nranks;
    size_t min, max, step;
    int factor, cycles, check, root;
} sweep_t;

static void check_cell(const cell_t *c, const row_t *r, unsigned f, const sweep_t *s, const char *what)
{
    double t = c->v[0], alg = c->v[1], bus = c->v[2], dt = ulp_half(c->s[0]);
    double ta = ulp_half(c->s[1]), tb = ulp_half(c->s[2]), fac = factor(f, s->nranks);
    ck_assert_msg(t > 0, "%s: time %s", what, c->s[0]);
    ck_assert_msg(fabs(bus - alg * fac) <= tb + fac * ta + 1e-12, "%s: busbw %s is not algbw %s * %g", what,
                  c->s[2], c->s[1], fac);
    double lo = (double)r->size / ((t + dt) * 1e3), hi = t > dt ? (double)r->size / ((t - dt) * 1e3) : INFINITY;
    ck_assert_msg(alg >= lo - ta - 1e-12 && alg <= hi + ta + 1e-12, "%s: algbw %s is not size / time", what,
                  c->s[1]);
    if (s->check)
        ck_assert_msg(c->wrong == 0, "%s: #wrong %lld", what, c->wrong);
    else
        ck_assert_msg(c->wrong == -1, "%s: #wrong printed with -c 0", what);
}

static void check_table(const table_t *t, const sweep_t *s)
{
    int k = 0;
    for (int b = 0; b < t->nblocks; b++) {
        unsigned f = colls[t->block_of[b]].f;
        const char *name = colls[t->block_of[b]].name;
        for (int cycle = 0; cycle < s->cycles; cycle++) {
            for (size_t size = s->min; size <= s->max; size = s->factor > 1 ? size * s->factor : size + s->step) {
                ck_assert_msg(k < t->nrows && t->rows[k].block == b, "%s: fewer rows than the sweep", name);
                const row_t *r = &t->rows[k++];
                size_t c = size / 4, n = (size_t)s->nranks, count = (f & WHOLE) ? c : c / n;
                char what[96];
                snprintf(what, sizeof what, "%s on %d rank(s), %zu B", name, s->nranks, size);
                ck_assert_msg(r->count == count && r->size == ((f & WHOLE) ? count : count * n) * 4,
                              "%s: size %zu count %zu", what, r->size, r->count);
                ck_assert_str_eq(r->type, "float");
                ck_assert_str_eq(r->redop, (f & REDUCES) ? "sum" : "none");
                ck_assert_int_eq(r->root, (f & ROOTED) ? s->root : -1);
                int runs = !(f & PAIRWISE) || s->nranks > 1;
                ck_assert_msg(r->c[0].na == !runs, "%s: out-of-place N/A is %d", what, r->c[0].na);
                ck_assert_msg(r->c[1].na == (!runs || (f & NO_IN_PLACE)), "%s: in-place N/A is %d", what,
                              r->c[1].na);
                for (int form = 0; form < 2; form++)
                    if (!r->c[form].na)
                        check_cell(&r->c[form], r, f, s, what);
            }
        }
    }
    ck_assert_msg(k == t->nrows, "%d rows past the sweep", t->nrows - k);
}

/* ---- a strict JSON reader that keeps what the comparison with the table needs ---------------------------------- */

typedef struct jres {
    char coll[32];
    double size, count, bus[2], wrong[2];
    int absent[2], keys, cell_keys[2];
} jres_t;

typedef struct json {
    const char *p;
    unsigned top;   /* bit k: top-level key k present */
    jres_t res[MAX_ROWS];
    int nres;
} json_t;

static const char *const top_keys[] = {"tool", "version", "date", "host", "backend", "device", "nranks", "label",
                                       "dtype", "op", "root", "iters", "warmup", "check", "blocking", "average",
                                       "results", "avg_busbw", "wrong"};
#define NTOP (int)(sizeof top_keys / sizeof top_keys[0])

static void ws(json_t *j)
{
    while (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r')
        j->p++;
}

static int jstring(json_t *j, char *out, size_t cap)
{
    size_t n = 0;
    if (*j->p++ != '"')
        return 0;
    for (; *j->p != '"'; j->p++) {
        if ((unsigned char)*j->p < 0x20)
            return 0;
        if (*j->p == '\\' && (*++j->p == '\0' || !strchr("\"\\/bfnrtu", *j->p)))
            return 0;
        if (n + 1 < cap)
            out[n++] = *j->p;
    }
    out[n] = '\0';
    j->p++;
    return 1;
}

/* A scalar (number: v, or null: isnan(v)) at `path` ("results[].oop.busbw"). */
static void jscalar(json_t *j, const char *path, const char *str, double v)
{
    jres_t *r = j->nres ? &j->res[j->nres - 1] : NULL;
    if (!r || strncmp(path, "results[].", 10) != 0)
        return;
    const char *key = path + 10;
    int form = strncmp(key, "oop", 3) == 0 ? 0 : strncmp(key, "ip", 2) == 0 ? 1 : -1;
    if (form >= 0 && strchr(key, '.')) {
        r->cell_keys[form]++;
        if (strstr(key, ".busbw"))
            r->bus[form] = v;
        if (strstr(key, ".wrong"))
            r->wrong[form] = v;
        return;
    }
    r->keys++;
    if (form >= 0)
        r->absent[form] = 1; /* "oop": null or "ip": null */
    else if (strcmp(key, "collective") == 0 && str)
        snprintf(r->coll, sizeof r->coll, "%s", str);
    else if (strcmp(key, "size") == 0)
        r->size = v;
    else if (strcmp(key, "count") == 0)
        r->count = v;
}

static int jvalue(json_t *j, const char *path)
{
    char sub[128], key[64];
    ws(j);
    if (*j->p == '{' || *j->p == '[') {
        int obj = *j->p++ == '{';
        if (obj && strcmp(path, "results[]") == 0) {
            if (j->nres == MAX_ROWS)
                return 0;
            jres_t *r = &j->res[j->nres++];
            memset(r, 0, sizeof *r);
            r->bus[0] = r->bus[1] = r->wrong[0] = r->wrong[1] = NAN;
        } else if (obj && strncmp(path, "results[].", 10) == 0 && j->nres) {
            j->res[j->nres - 1].keys++; /* "oop": {...} */
        }
        ws(j);
        if (*j->p == (obj ? '}' : ']')) {
            j->p++;
            return 1;
        }
        for (;;) {
            if (obj) {
                ws(j);
                if (!jstring(j, key, sizeof key))
                    return 0;
                ws(j);
                if (*j->p++ != ':')
                    return 0;
                snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", key);
                for (int k = 0; !*path && k < NTOP; k++)
                    j->top |= strcmp(key, top_keys[k]) == 0 ? 1u << k : 0u;
            } else {
                snprintf(sub, sizeof sub, "%s[]", path);
            }
            if (!jvalue(j, sub))
                return 0;
            ws(j);
            if (*j->p == ',') {
                j->p++;
                continue;
            }
            return *j->p++ == (obj ? '}' : ']');
        }
    }
    if (*j->p == '"') {
        char s[256];
        if (!jstring(j, s, sizeof s))
            return 0;
        jscalar(j, path, s, NAN);
        return 1;
    }
    for (const char *lit = "null\0true\0false\0"; *lit; lit += strlen(lit) + 1)
        if (strncmp(j->p, lit, strlen(lit)) == 0) {
            j->p += strlen(lit);
            jscalar(j, path, NULL, NAN);
            return 1;
        }
    const char *start = j->p; /* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
    j->p += *j->p == '-';
    if (*j->p < '0' || *j->p > '9' || (*j->p == '0' && j->p[1] >= '0' && j->p[1] <= '9'))
        return 0;
    while (*j->p >= '0' && *j->p <= '9') j->p++;
    for (int part = 0; part < 2; part++) {
        if (*j->p != (part ? 'e' : '.') && *j->p != (part ? 'E' : '.'))
            continue;
        j->p += 1 + (part && (j->p[1] == '+' || j->p[1] == '-'));
        if (*j->p < '0' || *j->p > '9')
            return 0;
        while (*j->p >= '0' && *j->p <= '9') j->p++;
    }
    jscalar(j, path, NULL, strtod(start, NULL));
    return 1;
}

/* The JSON text parses, has the contract's keys, one result per table row, and agrees with the table. */
static void check_json(const char *text, const table_t *t, const sweep_t *s)
{
    ck_assert_msg(text != NULL, "no JSON file was written");
    static json_t j;
    memset(&j, 0, sizeof j);
    j.p = text;
    int ok = jvalue(&j, "");
    ws(&j);
    ck_assert_msg(ok && *j.p == '\0', "not valid JSON near offset %ld: %.40s", (long)(j.p - text), j.p);
    for (int k = 0; k < NTOP; k++)
        ck_assert_msg(j.top & (1u << k), "JSON: no top-level key \"%s\"", top_keys[k]);
    ck_assert_int_eq(j.nres, t->nrows);
    for (int k = 0; k < t->nrows; k++) {
        const row_t *r = &t->rows[k];
        const jres_t *x = &j.res[k];
        ck_assert_str_eq(x->coll, colls[t->block_of[r->block]].name);
        ck_assert_int_eq(x->keys, 8);
        ck_assert(x->size == (double)r->size && x->count == (double)r->count);
        for (int form = 0; form < 2; form++) {
            const cell_t *c = &r->c[form];
            ck_assert_msg(x->absent[form] || x->cell_keys[form] == 4, "result %d: cell keys", k);
            ck_assert_msg(c->na == (x->absent[form] || isnan(x->bus[form])), "result %d: N/A differs", k);
            if (c->na)
                continue;
            ck_assert_msg(fabs(x->bus[form] - c->v[2]) <= ulp_half(c->s[2]) + 1e-5 * c->v[2],
                          "result %d: busbw %g in JSON, %s in the table", k, x->bus[form], c->s[2]);
            ck_assert_msg(s->check ? x->wrong[form] == (double)c->wrong : isnan(x->wrong[form]),
                          "result %d: wrong differs", k);
        }
    }
}

/* ---- the tests ------------------------------------------------------------------------------------------------ */

static void sweep_and_check(const char *backend, const sweep_t *s, const char *flags)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "all -B %s %s", backend, flags);
    result_t r = run(s->nranks, cmd, NULL, 1);
    ck_assert_msg(r.status == 0, "%s on %d rank(s) exited %d:\n%s", cmd, s->nranks, r.status, r.err);
    int want[NCOLLS];
    for (int c = 0; c < NCOLLS; c++)
        want[c] = c;
    static table_t t;
    parse_table(r.out, &t, want, NCOLLS);
    check_table(&t, s);
    check_json(r.json, &t, s);
    result_free(&r);
}

/* Sweeps of `all`: the CI command on 1, 2 and 3 ranks, the exact command (nccl-tests' default -i 1M gives
 * one size), and the other options (no check, blocking, maximum time, two cycles, another root). */
static const struct { sweep_t s; const char *flags; } sweeps[] = {
    {{1, 8, 1u << 20, 0, 4, 1, 1, 0}, "-b 8 -e 1M -f 4 -c 1 -n 2 -w 1"},
    {{2, 8, 1u << 20, 0, 4, 1, 1, 0}, "-b 8 -e 1M -f 4 -c 1 -n 2 -w 1"},
    {{3, 8, 1u << 20, 0, 4, 1, 1, 0}, "-b 8 -e 1M -f 4 -c 1 -n 2 -w 1"},
    {{2, 8, 1u << 20, 1u << 20, 1, 1, 1, 0}, "-b 8 -e 1M -c 1"},
    {{3, 64, 256, 0, 4, 2, 0, 2}, "-b 64 -e 256 -f 4 -c 0 -z 1 -a 3 -N 2 -r 2 -n 1 -w 0"},
    /* Registration modes of --device cuda are accepted and change nothing on cpu. */
    {{2, 8, 4096, 0, 8, 1, 1, 1}, "-b 8 -e 4K -f 8 -R 1 -r 1 -n 1 -w 0"},
    {{3, 16, 1024, 0, 4, 1, 1, 0}, "-b 16 -e 1K -f 4 -R 2 -z 1 -n 1 -w 0 --local_register 2"},
};
#define NSWEEPS (int)(sizeof sweeps / sizeof sweeps[0])

START_TEST(test_sweep)
{
    sweep_and_check(mrank_backend(_i / NSWEEPS), &sweeps[_i % NSWEEPS].s, sweeps[_i % NSWEEPS].flags);
}
END_TEST

START_TEST(test_bad_flags)
{
    static const char *const cases[][2] = {
        {"bogus", "unknown collective"},     {"all_reduce -b 2M -e 1M", "larger than"},
        {"all_reduce -b 8Q", "suffix"},      {"all_reduce -b 8 -e 8 -B nosuch", "nosuch"},
        {"all_reduce -d float7", "float7"}, {"all_reduce -o nosuchop", "nosuchop"},
        {"all_reduce --nope", "--nope"},    {"all_reduce -R 3", "-R/--local_register"},
        {"all_reduce --device cuda:x", "cuda:x"}, {"all_reduce -G 2", "needs --device cuda"},
        {"all_reduce,bogus", "'bogus'"},     {"all_reduce,", "''"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        result_t r = run(0, cases[k][0], NULL, 0);
        ck_assert_msg(r.status > 0, "'%s' exited %d", cases[k][0], r.status);
        ck_assert_msg(strstr(r.err, cases[k][1]) != NULL, "'%s': stderr lacks '%s': %s", cases[k][0], cases[k][1],
                      r.err);
        ck_assert_msg(r.out[0] == '\0', "'%s' wrote to stdout: %s", cases[k][0], r.out);
        result_free(&r);
    }
}
END_TEST

START_TEST(test_corrupt_is_counted)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "all_reduce -B %s -b 8 -e 64 -f 2 -n 1 -w 0", mrank_backend(_i));
    static const char *const corrupt[] = {"TCOMMS_PERF_CORRUPT=1", NULL};
    result_t r = run(2, cmd, corrupt, 1);
    ck_assert_msg(r.status != 0, "a run with a spoiled element exited 0");
    ck_assert_msg(strstr(r.out, "# Out of bounds values : 8 FAILED") != NULL, "no FAILED footer:\n%s", r.out);
    int want[1] = {0};
    static table_t t;
    parse_table(r.out, &t, want, 1);
    ck_assert_int_eq(t.nrows, 4);
    for (int k = 0; k < t.nrows; k++)
        ck_assert_msg(t.rows[k].c[0].wrong >= 1 && t.rows[k].c[1].wrong >= 1, "row %d: the spoiled element was "
                      "not counted", k);
    sweep_t s = {2, 8, 64, 0, 2, 1, 1, 0};
    check_json(r.json, &t, &s); /* the JSON file is complete and counts the same wrong elements */
    result_free(&r);
}
END_TEST

/* A comma-separated list runs its collectives in table order, one block each, like `all` does for every one. */
START_TEST(test_list)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "alltoall,all_reduce,reduce_scatter -B %s -b 8 -e 512 -f 8 -n 1 -w 0", mrank_backend(0));
    result_t r = run(2, cmd, NULL, 1);
    ck_assert_msg(r.status == 0, "%s exited %d:\n%s", cmd, r.status, r.err);
    int want[3] = {0, 2, 5}; /* all_reduce, reduce_scatter, alltoall */
    static table_t t;
    parse_table(r.out, &t, want, 3);
    sweep_t s = {2, 8, 512, 0, 8, 1, 1, 0};
    check_table(&t, &s);
    check_json(r.json, &t, &s);
    result_free(&r);
}
END_TEST

/* --device cuda that cannot run: exit 1, a message naming what is missing, and no table row on stdout (the contract
 * allows '#' header lines only; this build prints none, as it checks before any communicator exists). */
static void expect_no_cuda(const char *env, const char *why1, const char *why2)
{
    const char *const vars[] = {env, NULL};
    const char *name = env ? env : "default runtime";
    result_t r = run(0, "all_reduce -b 8 -e 64 --device cuda -B nccl", vars, 0);
    ck_assert_msg(r.status == 1, "--device cuda (%s) exited %d, not 1: %s", name, r.status, r.err);
    ck_assert_msg(strstr(r.err, "--device cuda") && (strstr(r.err, why1) || strstr(r.err, why2)),
                  "--device cuda (%s): stderr does not say '%s' or '%s': %s", name, why1, why2, r.err);
    for (char *save, *l = strtok_r(r.out, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        ck_assert_msg(l[0] == '#', "--device cuda without a GPU printed a row: %s", l);
    result_free(&r);
}

START_TEST(test_cuda_missing)
{
    /* No runtime at all, as on a machine without CUDA. */
    expect_no_cuda("TCOMMS_PERF_CUDART=/nonexistent/libcudart.so.13", "cannot load the CUDA runtime",
                   "cannot load the CUDA runtime");
    /* The machine's own runtime, when it has no GPU (no driver device node): either no runtime or no GPU. */
    if (access("/dev/nvidiactl", F_OK) != 0)
        expect_no_cuda(NULL, "cannot load the CUDA runtime", "no CUDA GPU");
}
END_TEST

/* --device cuda end to end on the stand-in runtime and the fakecuda backend (one rank): buffers, copies and the check go
 * through the runtime, operations carry the stream, -R registers, -G captures and replays; the stand-in reports
 * misuse (a synchronize while capturing, an unknown stream) and leaks on stderr. */
static const struct { int nranks; int graph; const char *flags; } cuda_runs[] = {
    {0, 0, "--device cuda:0 -z 0"},
    {0, 0, "--device cuda:0 -z 1 -R 1"},
    {0, 3, "--device cuda:0 -z 0 -R 2 -G 3"},
    {1, 2, "--device cuda -z 1 -R 2 -G 2"}, /* under tcomms-run: cuda = the local rank's GPU */
};

START_TEST(test_cuda_stand_in)
{
    const char *libs = getenv("TCOMMS_PERF_TEST_LIBS");
    ck_assert_msg(libs != NULL, "TCOMMS_PERF_TEST_LIBS must name the directory of the test libraries");
    static char cudart[1024], path[2048];
    snprintf(cudart, sizeof cudart, "TCOMMS_PERF_CUDART=%s/perf_cudart.so", libs);
    snprintf(path, sizeof path, "TCOMMS_BACKEND_PATH=%s", libs);
    const char *const vars[] = {cudart, path, NULL};
    char cmd[256];
    snprintf(cmd, sizeof cmd, "all_reduce -B fakecuda -b 8 -e 4K -f 8 -n 2 -w 1 %s", cuda_runs[_i].flags);
    result_t r = run(cuda_runs[_i].nranks, cmd, vars, 1);
    ck_assert_msg(r.status == 0, "'%s' exited %d:\n%s", cmd, r.status, r.err);
    ck_assert_msg(strstr(r.err, "perf_cudart") == NULL, "'%s': the stand-in runtime objected:\n%s", cmd, r.err);
    ck_assert_msg(strstr(r.out, "backend fakecuda device cuda nranks 1\n") != NULL, "'%s': header:\n%s", cmd, r.out);
    char graph[32];
    snprintf(graph, sizeof graph, "graph: %d unalign: 0\n", cuda_runs[_i].graph);
    ck_assert_msg(strstr(r.out, graph) != NULL, "'%s': no '%s' in the header:\n%s", cmd, graph, r.out);
    ck_assert_msg(strstr(r.out, " device  0 [0000:2a:03] ") != NULL, "'%s': the rank line lacks the stand-in GPU's "
                  "PCI address 0000:2a:03:\n%s", cmd, r.out);
    int want[1] = {0};
    static table_t t;
    parse_table(r.out, &t, want, 1);
    sweep_t s = {1, 8, 4096, 0, 8, 1, 1, 0};
    check_table(&t, &s);
    check_json(r.json, &t, &s);
    result_free(&r);
}
END_TEST

START_TEST(test_help)
{
    static const char *const flags[] = {"--minbytes", "--maxbytes", "--stepfactor", "--stepbytes", "--iters",
                                        "--warmup_iters", "--check", "--datatype", "--op", "--root", "--average",
                                        "--run_cycles", "--blocking", "--backend", "--device", "--json", "--label",
                                        "--help", "--coll", "--local_register", "--cudagraph", "TCOMMS_PERF_CORRUPT",
                                        "TCOMMS_PERF_CUDART"};
    result_t r = run(0, "--help", NULL, 0);
    ck_assert_int_eq(r.status, 0);
    for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++)
        ck_assert_msg(strstr(r.out, flags[k]) != NULL, "--help does not mention %s", flags[k]);
    result_free(&r);
}
END_TEST

static void add_tests(Suite *s, int nbackends)
{
    TCase *tc = mrank_tcase(s, "perf", RUN_LIMIT_S + 30);
    tcase_add_loop_test(tc, test_sweep, 0, NSWEEPS * nbackends);
    tcase_add_loop_test(tc, test_corrupt_is_counted, 0, nbackends);
    tcase_add_test(tc, test_bad_flags);
    tcase_add_test(tc, test_list);
    tcase_add_test(tc, test_cuda_missing);
    tcase_add_loop_test(tc, test_cuda_stand_in, 0, (int)(sizeof cuda_runs / sizeof cuda_runs[0]));
    tcase_add_test(tc, test_help);
}

int main(void)
{
    return mrank_main("perf", MRANK_BACKEND, add_tests);
}
