/* SPDX-License-Identifier: BSD-3-Clause */
/* tcomms: one C API for collectives and point-to-point over run-time loaded backends (NCCL, Gloo, UCX).
 *
 * Every call returns a tcomms_status_t: 0 on success, a positive value for "not done yet", a negative value for an
 * error. After an error, tcomms_last_error() gives a detailed, thread-local message naming the argument or
 * environment variable at fault. The library never prints to stdout and never terminates the process.
 *
 * Handles (tcomms_comm_t, tcomms_work_t, tcomms_hints_t) live from the call that creates them to the call that
 * releases them (tcomms_comm_destroy, tcomms_work_free, tcomms_hints_free). A call given a released handle, a
 * second release included, returns TCOMMS_ERR_INVALID_ARG naming the call and the handle ("tcomms_work_wait: work
 * handle 0x... was already freed") and logs it as a warning, while the library still holds that memory: it keeps
 * the last 16 communicators, 64 work handles and 16 hints objects released aside before freeing them. Beyond that,
 * with a pointer that never was a handle, or with a handle released while another thread uses it, the behaviour
 * is undefined.
 *
 * Threads: calls on one communicator (its operations, splits, and the work handles posted on it) must be serialised
 * by the caller, as in torchcomms; separate communicators may be used from separate threads. The exception is
 * tcomms_comm_abort, which may be called from any thread at any time before tcomms_comm_destroy, including while
 * another thread waits on that communicator.
 *
 * Failure: a communicator whose operation failed (a peer died or disagreed, an operation timed out, a transport
 * or device error) stays failed: every later operation and split on it returns TCOMMS_ERR_ABORTED naming that
 * first error, as does every operation after tcomms_comm_abort. Queries (rank, size, name, backend, hints),
 * memory calls, tcomms_work_* on its handles and tcomms_comm_destroy still work. Errors found in the arguments,
 * TCOMMS_ERR_NOT_SUPPORTED and the call check's TCOMMS_ERR_MISMATCH (nothing was posted) leave it working. A
 * work handle may outlive its communicator: after tcomms_comm_destroy its operation goes on, it still answers with
 * its final status, and it must still be freed; the communicator's resources go with the last such handle. */
#ifndef TCOMMS_TCOMMS_H
#define TCOMMS_TCOMMS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TCOMMS_API __attribute__((visibility("default")))
#else
#define TCOMMS_API
#endif

#define TCOMMS_VERSION_MAJOR 0
#define TCOMMS_VERSION_MINOR 1
#define TCOMMS_VERSION_PATCH 0

/* ---- status ---------------------------------------------------------------------------------------------------- */

typedef enum tcomms_status {
    TCOMMS_SUCCESS = 0,
    TCOMMS_IN_PROGRESS = 1,                 /* an async operation has not completed yet */
    TCOMMS_ERR_INVALID_ARG = -1,            /* an argument, hint or option is wrong: the message names it */
    TCOMMS_ERR_NO_MEMORY = -2,
    TCOMMS_ERR_NOT_SUPPORTED = -3,          /* valid, but this backend cannot do it */
    TCOMMS_ERR_TIMEOUT = -4,                /* a wait ran past its timeout */
    TCOMMS_ERR_BACKEND_UNAVAILABLE = -5,    /* a module was asked for and failed to load, or declined */
    TCOMMS_ERR_NO_BACKEND_FOR_DEVICE = -6,  /* the communicator holds no backend for that device type */
    TCOMMS_ERR_BAD_ENV = -7,                /* an environment variable is missing or malformed */
    TCOMMS_ERR_SYSTEM = -8,                 /* an operating-system call failed (socket, thread, dlopen) */
    TCOMMS_ERR_REMOTE = -9,                 /* a peer closed its connection or failed */
    TCOMMS_ERR_ABORTED = -10,               /* the communicator is in an error state after an earlier failure */
    TCOMMS_ERR_PROTOCOL = -11,              /* a malformed or refused message (store protocol, wrong token) */
    TCOMMS_ERR_ABI = -12,                   /* a backend module was built for another ABI major, a newer minor, or
                                             * lacks a required entry (include/tcomms/backend.h) */
    TCOMMS_ERR_NOT_FOUND = -13,             /* a store key does not exist */
    TCOMMS_ERR_INTERNAL = -14,
    TCOMMS_ERR_NOT_BOUND = -15,             /* the communicator is not bound to a device of that type (split, ops) */
    TCOMMS_ERR_MISMATCH = -16               /* ranks called a collective differently (TCOMMS_CHECK_CALLS, UCX
                                             * shapes, a split's member lists) */
} tcomms_status_t;

/* A static string naming `status` ("TCOMMS_ERR_TIMEOUT: operation timed out"); never NULL. */
TCOMMS_API const char *tcomms_strerror(tcomms_status_t status);

/* The detailed message of the last error on this thread ("" when none). Valid until the next tcomms call on the
 * same thread. */
TCOMMS_API const char *tcomms_last_error(void);

/* Library version as "MAJOR.MINOR.PATCH". */
TCOMMS_API const char *tcomms_version(void);

/* ---- data types, reductions, devices ------------------------------------------------------------------------- */

typedef enum tcomms_dtype {
    TCOMMS_INT8,
    TCOMMS_UINT8,
    TCOMMS_INT32,
    TCOMMS_INT64,
    TCOMMS_FLOAT16,
    TCOMMS_BFLOAT16,
    TCOMMS_FLOAT32,
    TCOMMS_FLOAT64,
    TCOMMS_DTYPE_COUNT
} tcomms_dtype_t;

/* AVG divides the sum by the communicator size. For integer types on the CPU backends the result is the exact mean
 * of the ranks' values rounded toward zero, as C's integer division, whatever their sum (int8: 100 and 100 give
 * 100, -128 and -127 give -127; uint8: 255 and 255 give 255): the core reduces an int64 copy of the send buffer
 * (int64 itself as two words), so such a call costs a copy of 8 bytes (int64: 16) an element and one pass more.
 * On NCCL it is ncclAvg, which sums in the type (a sum out of its range wraps) before dividing. Floating-point
 * types divide the sum in their own arithmetic. */
typedef enum tcomms_op { TCOMMS_SUM, TCOMMS_PROD, TCOMMS_MIN, TCOMMS_MAX, TCOMMS_AVG, TCOMMS_OP_COUNT } tcomms_op_t;

typedef enum tcomms_device_type {
    TCOMMS_DEVICE_CPU,
    TCOMMS_DEVICE_CUDA,
    TCOMMS_DEVICE_TYPE_COUNT
} tcomms_device_type_t;

/* A device: {TCOMMS_DEVICE_CPU, 0} or {TCOMMS_DEVICE_CUDA, N}; index -1 on CUDA means the local rank (as
 * tcomms_comm_local_rank reports it) modulo the number of visible GPUs, resolved when the communicator is created. */
typedef struct tcomms_device {
    tcomms_device_type_t type;
    int index;
} tcomms_device_t;

/* Size in bytes of one element of `dtype`, or 0 for an invalid dtype. */
TCOMMS_API size_t tcomms_dtype_size(tcomms_dtype_t dtype);
/* Lower-case names ("bfloat16", "sum", "cuda"); NULL for invalid values. */
TCOMMS_API const char *tcomms_dtype_name(tcomms_dtype_t dtype);
TCOMMS_API const char *tcomms_op_name(tcomms_op_t op);
TCOMMS_API const char *tcomms_device_type_name(tcomms_device_type_t type);
/* Parse a name as printed by the functions above (also "float"/"half"/"bf16"/"double" for dtypes); INVALID_ARG
 * naming the text when unknown. */
TCOMMS_API tcomms_status_t tcomms_dtype_parse(const char *name, tcomms_dtype_t *out);
TCOMMS_API tcomms_status_t tcomms_op_parse(const char *name, tcomms_op_t *out);
/* Parse "cpu", "cuda", "cuda:N" (N >= -1). */
TCOMMS_API tcomms_status_t tcomms_device_parse(const char *text, tcomms_device_t *out);

/* ---- hints ----------------------------------------------------------------------------------------------------- */

/* A set of key/value hints (torchcomms' CommOptions.hints). Keys are validated when set:
 *   high_priority_stream (bool; also is_high_priority_stream, highPriorityStream)
 *   cga_cluster_size     (int 0..8; also cgaClusterSize)
 *   min_ctas, max_ctas   (int 1..64; also minCTAs, maxCTAs)
 *   blocking             (bool)
 *   split_share          (bool; also splitShare)
 *   strict_hints         (bool; also strictHints) a hint that an environment variable overrides (NCCL reads
 *                        NCCL_MIN_CTAS over its config, say) fails creation with TCOMMS_ERR_BAD_ENV instead of
 *                        a warning (tcomms_comm_setting)
 *   nccl.*, gloo.*, ucx.* (backend-namespaced: passed to that backend, which reports what it applied)
 * Booleans accept 1/0, true/false, yes/no, on/off. An unknown un-namespaced key, or a value of the wrong type or
 * range, is TCOMMS_ERR_INVALID_ARG naming the key. */
typedef struct tcomms_hints tcomms_hints_t;

TCOMMS_API tcomms_status_t tcomms_hints_create(tcomms_hints_t **out);
/* Free `hints` (NULL: a no-op). Communicators copy the hints they are given, so hints may be freed right after the
 * create or split call. Freeing them twice is TCOMMS_ERR_INVALID_ARG while detectable (see the top of this file). */
TCOMMS_API tcomms_status_t tcomms_hints_free(tcomms_hints_t *hints);
/* Set `key` (any accepted spelling; stored under its canonical snake_case name) to `value`, replacing any value. */
TCOMMS_API tcomms_status_t tcomms_hints_set(tcomms_hints_t *hints, const char *key, const char *value);
/* Parse "k=v,k=v" (the TCOMMS_HINTS format) into `hints`; a later key replaces an earlier one. Linear in the
 * length of `spec`. */
TCOMMS_API tcomms_status_t tcomms_hints_parse(tcomms_hints_t *hints, const char *spec);
/* The value stored for `key` (any spelling), or TCOMMS_ERR_NOT_FOUND. The pointer lives as long as the entry. */
TCOMMS_API tcomms_status_t tcomms_hints_get(const tcomms_hints_t *hints, const char *key, const char **value);
/* Number of entries, and the i-th (canonical key, value) in insertion order, for iteration. */
TCOMMS_API tcomms_status_t tcomms_hints_count(const tcomms_hints_t *hints, size_t *count);
TCOMMS_API tcomms_status_t tcomms_hints_entry(const tcomms_hints_t *hints, size_t i, const char **key,
                                              const char **value);

/* ---- rendezvous store ------------------------------------------------------------------------------------------ */

/* A user-provided key/value store replacing the built-in TCP store (e.g. a framework's own TCPStore). All calls
 * may block up to `timeout_ms`; return TCOMMS_SUCCESS, TCOMMS_ERR_TIMEOUT or another error. */
typedef struct tcomms_store_ops {
    tcomms_status_t (*set)(void *ctx, const char *key, const void *value, size_t len);
    /* Copy the value of `key` into `buf` (capacity `cap`) and its full length into *len. If cap < *len the call
     * returns TCOMMS_ERR_INVALID_ARG with *len set, and is repeated with a larger buffer. NOT_FOUND if absent. */
    tcomms_status_t (*get)(void *ctx, const char *key, void *buf, size_t cap, size_t *len);
    tcomms_status_t (*wait)(void *ctx, const char *const *keys, size_t nkeys, uint32_t timeout_ms);
    tcomms_status_t (*add)(void *ctx, const char *key, int64_t delta, int64_t *result);
    tcomms_status_t (*del)(void *ctx, const char *key);
} tcomms_store_ops_t;

/* ---- communicators --------------------------------------------------------------------------------------------- */

typedef struct tcomms_comm tcomms_comm_t;
typedef struct tcomms_work tcomms_work_t;

/* Fields of tcomms_comm_params_t that are set; unset fields take the defaults described below. */
enum {
    TCOMMS_COMM_PARAM_BACKEND = 1u << 0,
    TCOMMS_COMM_PARAM_DEVICE = 1u << 1,
    TCOMMS_COMM_PARAM_NAME = 1u << 2,
    TCOMMS_COMM_PARAM_RANK = 1u << 3,        /* rank, size and local_rank together */
    TCOMMS_COMM_PARAM_MASTER = 1u << 4,      /* master_addr and master_port together */
    TCOMMS_COMM_PARAM_TIMEOUT = 1u << 5,
    TCOMMS_COMM_PARAM_HINTS = 1u << 6,
    TCOMMS_COMM_PARAM_STORE = 1u << 7        /* store_ops and store_ctx together */
};

/* Creation parameters. Start from `tcomms_comm_params_t p = {0};` and set field_mask bits for what you fill in; a
 * bit this library does not know is TCOMMS_ERR_INVALID_ARG. */
typedef struct tcomms_comm_params {
    uint64_t field_mask;
    /* "gloo", or device-qualified "cpu:gloo,cuda:nccl". Default: TCOMMS_BACKEND, else the first CPU backend that
     * loads (ucx, then gloo) for a CPU communicator and nccl for a CUDA one. Overrides TCOMMS_BACKEND. NULL or ""
     * with TCOMMS_COMM_PARAM_BACKEND set is TCOMMS_ERR_INVALID_ARG: clear the bit for the default. */
    const char *backend;
    tcomms_device_t device;      /* bound device; default cpu */
    const char *name;            /* default "world"; see tcomms_comm_create for how roots are matched */
    int rank, size, local_rank;  /* default: from the environment (TCOMMS_*, torchrun, Open MPI, Slurm). local_rank
                                  (-1: unknown) is only checked against the rendezvous' (tcomms_comm_local_rank) */
    const char *master_addr;     /* default: TCOMMS_MASTER_ADDR, else MASTER_ADDR */
    int master_port;             /* default: TCOMMS_MASTER_PORT, else MASTER_PORT */
    uint32_t timeout_ms;         /* default for every operation; default TCOMMS_TIMEOUT_MS, else 300000 */
    const tcomms_hints_t *hints; /* merged over TCOMMS_HINTS; copied */
    const tcomms_store_ops_t *store_ops;
    void *store_ctx;
} tcomms_comm_params_t;

/* Create a root communicator. Collective over all `size` processes: it rendezvouses through the store (rank 0
 * serves it at master_addr:master_port unless a user store is given), creates every backend the selection names,
 * and ends with a barrier on each, so a returned communicator is ready. `params` may be NULL (all defaults).
 * Names need not be unique: the n-th root named X created by each process forms one communicator, so every rank
 * must create its roots in the same order. Two live roots served by the built-in store need distinct ports. */
TCOMMS_API tcomms_status_t tcomms_comm_create(const tcomms_comm_params_t *params, tcomms_comm_t **out);

/* Destroy `comm`. Local, not collective. With no work handle of it left, its resources go now, after the
 * operations whose handles were freed while running complete (each within its timeout); else this returns at
 * once and they go with the last tcomms_work_free, the operations of the handles going on meanwhile. A NULL
 * comm is a no-op; destroying it twice, or using it afterwards, is TCOMMS_ERR_INVALID_ARG while detectable (see the
 * top of this file). Children and the parent are independent: either may be destroyed first. The rank serving the
 * built-in store (rank 0 of a root) stops it with the last communicator of that root, after waiting (up to the
 * root's timeout) for the other ranks to close their connections, so their later splits of that root's family
 * still work; a user store (store_ops) has no such wait: end with a barrier there. */
TCOMMS_API tcomms_status_t tcomms_comm_destroy(tcomms_comm_t *comm);

/* End every pending operation of `comm` promptly with TCOMMS_ERR_ABORTED, and make every later operation and split
 * on it return TCOMMS_ERR_ABORTED naming the abort (or the communicator's earlier failure, which stays the one
 * named). Local, not collective: the other ranks are not told, and their operations with this rank fail as they
 * would with a rank that stopped answering (an error from the backend, or TCOMMS_ERR_TIMEOUT at their timeout).
 * Safe from any thread, including while another thread waits on `comm` (that wait returns TCOMMS_ERR_ABORTED),
 * and never waits longer than a bound of its own (NCCL: ncclCommAbort is given a few seconds, then left
 * behind). A second call returns TCOMMS_SUCCESS at once. Children split from `comm` and its parent are not
 * affected, as with ncclCommAbort. The caller still destroys `comm` and frees its work handles; once an aborted
 * operation has returned TCOMMS_ERR_ABORTED its buffers are the caller's again. A module without an abort entry
 * (third-party backends built before it) leaves its pending operations to their timeouts, with a warning. */
TCOMMS_API tcomms_status_t tcomms_comm_abort(tcomms_comm_t *comm);

#define TCOMMS_SPLIT_NOCOLOR (-1)

/* Split `parent` into a new communicator holding `ranks` (sorted, unique parent ranks); the child's rank is the
 * caller's index in `ranks`. Collective over `parent`: every rank calls it; a rank not in the new communicator
 * passes nranks = 0 and gets *out = NULL. Several disjoint lists may be split in one call. `name` (may be NULL)
 * names the child; hints apply to the child and are not inherited. Every backend of the parent gets a child.
 * A parent holding a device backend it is not bound to (e.g. created on cpu with "cpu:gloo,cuda:nccl") cannot be
 * split: TCOMMS_ERR_NOT_BOUND.
 * Each rank's n-th split call on `parent` (this or tcomms_comm_split_color, whatever its arguments) meets the other
 * ranks' n-th, and every rank gets the same outcome. A rank whose arguments are refused gets its own error at once;
 * the others get the same status, naming that rank. Lists that disagree (a list naming a rank that passed another
 * list or none), or tcomms_comm_split on some ranks and tcomms_comm_split_color on others, are TCOMMS_ERR_MISMATCH
 * on every rank, naming the ranks and their lists. Such errors come as soon as every rank has called; a rank that
 * does not call is a TCOMMS_ERR_TIMEOUT on the others within the parent's timeout. */
TCOMMS_API tcomms_status_t tcomms_comm_split(tcomms_comm_t *parent, const int *ranks, int nranks, const char *name,
                                             const tcomms_hints_t *hints, tcomms_comm_t **out);

/* MPI-style split: ranks passing the same color form one communicator, ordered by (key, parent rank).
 * color TCOMMS_SPLIT_NOCOLOR gives *out = NULL; another negative color is refused. Calls pair up and fail together
 * as those of tcomms_comm_split do. */
TCOMMS_API tcomms_status_t tcomms_comm_split_color(tcomms_comm_t *parent, int color, int key, const char *name,
                                                   const tcomms_hints_t *hints, tcomms_comm_t **out);

/* The survivors of `parent` without the ranks in `exclude` (nexclude parent ranks, any order, no duplicates): a new
 * communicator whose ranks keep the survivors' order, made after the excluded ranks died (or when the caller leaves
 * them out) without a rendezvous from outside. Collective over the survivors only: each of them calls it with the same
 * list, and the excluded ranks call nothing. Works on a failed parent (that is what it is for), which stays failed.
 * `name` and `hints` as for tcomms_comm_split. Each survivor's n-th shrink of `parent` meets the others' n-th; shrinks
 * are numbered apart from splits, so a healthy parent's ranks (the excluded ones too) still split it together
 * afterwards. Survivors whose lists differ get TCOMMS_ERR_MISMATCH (or TCOMMS_ERR_TIMEOUT where the lowest survivor of
 * a rank's list has another lowest survivor in its own list, and so judges nothing for it); a survivor that does not
 * call is a TCOMMS_ERR_TIMEOUT on the others after twice the parent's timeout plus 5 s (another survivor may still be
 * waiting out the operation that failed); an excluded caller, a rank out of range or listed twice, or no survivor left
 * is TCOMMS_ERR_INVALID_ARG. How each backend makes the child: docs/api.md ("Shrink"). The rendezvous store of
 * tcomms_comm_create lives in the process of the root's rank 0: with that process dead, a shrink fails at once on
 * every survivor with the store's error (TCOMMS_ERR_REMOTE); a job that must survive its rank 0 gives its root a store
 * of its own (TCOMMS_COMM_PARAM_STORE). */
TCOMMS_API tcomms_status_t tcomms_comm_shrink(tcomms_comm_t *parent, const int *exclude, int nexclude,
                                              const char *name, const tcomms_hints_t *hints, tcomms_comm_t **out);

TCOMMS_API tcomms_status_t tcomms_comm_rank(const tcomms_comm_t *comm, int *rank);
TCOMMS_API tcomms_status_t tcomms_comm_size(const tcomms_comm_t *comm, int *size);
/* This rank's index among the communicator's ranks on its host (ordered by rank), and how many they are. Learnt
 * at creation from the rendezvous (each rank's host name and boot id, or TCOMMS_HOST_ID), whatever the launcher
 * set; a split counts its members only. */
TCOMMS_API tcomms_status_t tcomms_comm_local_rank(const tcomms_comm_t *comm, int *local_rank);
TCOMMS_API tcomms_status_t tcomms_comm_local_size(const tcomms_comm_t *comm, int *local_size);
TCOMMS_API tcomms_status_t tcomms_comm_name(const tcomms_comm_t *comm, const char **name);
TCOMMS_API tcomms_status_t tcomms_comm_device(const tcomms_comm_t *comm, tcomms_device_t *device);
/* The backend module a communicator takes for device `type` when no selection names one: of the modules in the
 * search path serving `type`, the one of greatest priority that can run here (docs/backends.md, "Selection").
 * *name is the module's name ("ucx"), valid for the life of the process. TCOMMS_ERR_BACKEND_UNAVAILABLE with each
 * candidate's reason when none can. For bindings that build a selection themselves (the torch backend). */
TCOMMS_API tcomms_status_t tcomms_backend_default(tcomms_device_type_t type, const char **name);
/* The device types module `name` serves (bit 1u << type for each), read without starting the module:
 * TCOMMS_ERR_BACKEND_UNAVAILABLE naming the search path when no such module opens. */
TCOMMS_API tcomms_status_t tcomms_backend_device_types(const char *name, uint32_t *types);

/* The name of the backend serving `type`, or TCOMMS_ERR_NO_BACKEND_FOR_DEVICE. */
TCOMMS_API tcomms_status_t tcomms_comm_backend(const tcomms_comm_t *comm, tcomms_device_type_t type,
                                               const char **name);
/* The effective value of hint `key` (any spelling) on the backend serving `type`: what the backend applied, its
 * default where the hint was not given, or "not applicable" where the backend has no such setting. */
TCOMMS_API tcomms_status_t tcomms_comm_hint(const tcomms_comm_t *comm, tcomms_device_type_t type, const char *key,
                                            char *buf, size_t len);

/* Where the value of a setting in force comes from. Hints are not inherited, so a split child's values come from
 * its own hints, the environment or the defaults, never from its parent. */
typedef enum tcomms_setting_source {
    TCOMMS_SETTING_DEFAULT = 0, /* no hint and no variable: the backend's (or its library's) default */
    TCOMMS_SETTING_HINT,        /* the communicator's hint */
    TCOMMS_SETTING_ENV,         /* an environment variable the library under the backend reads over its config,
                                   set when the communicator was created: over the hint, if one was given */
    TCOMMS_SETTING_BACKEND      /* what the backend ended up with where that differs from what was asked (a
                                   device without stream priorities runs "high_priority_stream=1" at 0) */
} tcomms_setting_source_t;

typedef struct tcomms_setting {
    char value[128];                /* as tcomms_comm_hint gives it ("not applicable" included) */
    tcomms_setting_source_t source;
    char origin[64];                /* the hint key or the variable's name; "" for a default */
    char overridden[128];           /* "" unless source is TCOMMS_SETTING_ENV over a hint: the hint's value, which
                                       the communicator does not run with (creation warned about it) */
} tcomms_setting_t;

/* tcomms_comm_hint with where the value comes from: the setting `key` (any spelling) in force on the backend
 * serving `type`. A backend whose module predates this call reports a given hint as TCOMMS_SETTING_HINT and
 * anything else as TCOMMS_SETTING_DEFAULT. */
TCOMMS_API tcomms_status_t tcomms_comm_setting(const tcomms_comm_t *comm, tcomms_device_type_t type, const char *key,
                                               tcomms_setting_t *out);
/* "default", "hint", "environment", "backend"; "unknown" for another value. */
TCOMMS_API const char *tcomms_setting_source_name(tcomms_setting_source_t source);

/* ---- operations ------------------------------------------------------------------------------------------------ */

enum {
    TCOMMS_OP_OPT_TIMEOUT = 1u << 0,
    TCOMMS_OP_OPT_STREAM = 1u << 1,
    TCOMMS_OP_OPT_DEVICE_TYPE = 1u << 2
};

/* Per-operation options; NULL means all defaults. */
typedef struct tcomms_op_opts {
    uint64_t field_mask;
    uint32_t timeout_ms;              /* 0 = the communicator's default */
    void *stream;                     /* device backends: the caller's stream (cudaStream_t); default NULL, the
                                         legacy default stream */
    tcomms_device_type_t device_type; /* where the buffers live; default: the communicator's bound device type */
} tcomms_op_opts_t;

/* Every operation below takes `opts` (may be NULL) and `work`:
 *   work == NULL: the call blocks until the operation completes or its timeout passes.
 *   work != NULL: the call returns TCOMMS_SUCCESS once the operation is queued, with *work a handle for
 *                 tcomms_work_*; errors found when queueing (bad arguments) are returned at once, with no handle.
 * On a device backend (CUDA) "completes" is stream-ordered, as in NCCL: a blocking call returns once the operation
 * is ordered before later work on the caller's stream (opts.stream), without blocking the host; its timeout is
 * enforced by the backend's watchdog, which aborts the communicator. Use tcomms_work_synchronize to block the host.
 * Device buffers are addressed with opts.device_type = TCOMMS_DEVICE_CUDA on a communicator bound to a CPU device,
 * and host buffers with TCOMMS_DEVICE_CPU on one bound to a GPU (a "cpu:gloo,cuda:nccl" selection).
 * Counts are in elements; a buffer may be NULL where its count is 0. Buffers stay owned by the caller and must not
 * be touched until completion. After an error the contents of receive buffers are undefined; send buffers are
 * never written, except in-place forms, whose whole buffer is then undefined.
 * In-place variants follow NCCL's convention: pass the same pointer where stated. */

/* recvbuf[i] = op over ranks of sendbuf[i]. In place: sendbuf == recvbuf. */
TCOMMS_API tcomms_status_t tcomms_all_reduce(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                             tcomms_dtype_t dtype, tcomms_op_t op, const tcomms_op_opts_t *opts,
                                             tcomms_work_t **work);
/* buf on every rank = buf on root. */
TCOMMS_API tcomms_status_t tcomms_broadcast(tcomms_comm_t *comm, void *buf, size_t count, tcomms_dtype_t dtype,
                                            int root, const tcomms_op_opts_t *opts, tcomms_work_t **work);
/* recvbuf on root = op over ranks of sendbuf; recvbuf is ignored (may be NULL) elsewhere. In place on root:
 * sendbuf == recvbuf. */
TCOMMS_API tcomms_status_t tcomms_reduce(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                         tcomms_dtype_t dtype, tcomms_op_t op, int root,
                                         const tcomms_op_opts_t *opts, tcomms_work_t **work);
/* recvbuf (size * sendcount elements) = concatenation of every rank's sendbuf, in rank order. In place:
 * sendbuf == recvbuf + rank * sendcount elements. */
TCOMMS_API tcomms_status_t tcomms_all_gather(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf,
                                             size_t sendcount, tcomms_dtype_t dtype, const tcomms_op_opts_t *opts,
                                             tcomms_work_t **work);
/* Rank r contributes recvcounts[r] elements (its sendbuf), placed at recvbuf + displs[r]. displs may be NULL
 * (packed in rank order). In place: sendbuf == recvbuf + displs[rank] elements. */
TCOMMS_API tcomms_status_t tcomms_all_gather_v(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf,
                                               const size_t *recvcounts, const size_t *displs, tcomms_dtype_t dtype,
                                               const tcomms_op_opts_t *opts, tcomms_work_t **work);
/* sendbuf holds size * recvcount elements; rank r receives the reduction of block r. In place:
 * recvbuf == sendbuf + rank * recvcount elements (the other blocks are undefined afterwards). */
TCOMMS_API tcomms_status_t tcomms_reduce_scatter(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf,
                                                 size_t recvcount, tcomms_dtype_t dtype, tcomms_op_t op,
                                                 const tcomms_op_opts_t *opts, tcomms_work_t **work);
/* sendbuf holds sum(recvcounts) elements packed in rank order; rank r receives the reduction of its block. In
 * place: recvbuf == sendbuf + (sum of recvcounts[0..rank)) elements. */
TCOMMS_API tcomms_status_t tcomms_reduce_scatter_v(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf,
                                                   const size_t *recvcounts, tcomms_dtype_t dtype, tcomms_op_t op,
                                                   const tcomms_op_opts_t *opts, tcomms_work_t **work);
/* Block j (count elements) of sendbuf goes to rank j, landing in block `rank` of its recvbuf. In place:
 * sendbuf == recvbuf. */
TCOMMS_API tcomms_status_t tcomms_all_to_all(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                                             tcomms_dtype_t dtype, const tcomms_op_opts_t *opts,
                                             tcomms_work_t **work);
/* sendcounts[j] elements at sendbuf + sdispls[j] go to rank j; recvcounts[j] elements from rank j land at
 * recvbuf + rdispls[j]. NULL displacements mean packed. Counts must match pairwise across ranks. No in-place. */
TCOMMS_API tcomms_status_t tcomms_all_to_all_v(tcomms_comm_t *comm, const void *sendbuf, const size_t *sendcounts,
                                               const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                                               const size_t *rdispls, tcomms_dtype_t dtype,
                                               const tcomms_op_opts_t *opts, tcomms_work_t **work);
/* recvbuf on root (size * sendcount elements) = every rank's sendbuf in rank order; ignored elsewhere. In place on
 * root: sendbuf == recvbuf + root * sendcount elements. */
TCOMMS_API tcomms_status_t tcomms_gather(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                                         tcomms_dtype_t dtype, int root, const tcomms_op_opts_t *opts,
                                         tcomms_work_t **work);
/* Block r (recvcount elements) of root's sendbuf lands in rank r's recvbuf; sendbuf ignored elsewhere. In place on
 * root: recvbuf == sendbuf + root * recvcount elements. */
TCOMMS_API tcomms_status_t tcomms_scatter(tcomms_comm_t *comm, const void *sendbuf, void *recvbuf, size_t recvcount,
                                          tcomms_dtype_t dtype, int root, const tcomms_op_opts_t *opts,
                                          tcomms_work_t **work);
TCOMMS_API tcomms_status_t tcomms_barrier(tcomms_comm_t *comm, const tcomms_op_opts_t *opts, tcomms_work_t **work);
/* Point-to-point: messages between one pair of ranks match in order; count and dtype must agree, and `peer` is
 * another rank (a message to oneself is TCOMMS_ERR_INVALID_ARG). Start the receive and the send asynchronously
 * when two ranks exchange, as with MPI. */
TCOMMS_API tcomms_status_t tcomms_send(tcomms_comm_t *comm, const void *buf, size_t count, tcomms_dtype_t dtype,
                                       int peer, const tcomms_op_opts_t *opts, tcomms_work_t **work);
TCOMMS_API tcomms_status_t tcomms_recv(tcomms_comm_t *comm, void *buf, size_t count, tcomms_dtype_t dtype, int peer,
                                       const tcomms_op_opts_t *opts, tcomms_work_t **work);

/* ---- work handles ---------------------------------------------------------------------------------------------- */

/* Wait for `work` up to timeout_ms (0 = the operation's own timeout). TCOMMS_ERR_TIMEOUT leaves the operation
 * running: wait again or free the handle. Any other result is final and is returned again by later calls.
 * On a device backend the wait is stream-ordered: the caller's stream (opts.stream at posting) waits for the
 * operation, and the host returns at once unless the operation has already failed. */
TCOMMS_API tcomms_status_t tcomms_work_wait(tcomms_work_t *work, uint32_t timeout_ms);
/* Block the host until `work` has completed on its device, up to timeout_ms (0 = the operation's own timeout), as
 * torchcomms' wait_blocking. The same as tcomms_work_wait on CPU backends. */
TCOMMS_API tcomms_status_t tcomms_work_synchronize(tcomms_work_t *work, uint32_t timeout_ms);
/* TCOMMS_SUCCESS when complete, TCOMMS_IN_PROGRESS while running, or the operation's error. Never blocks. */
TCOMMS_API tcomms_status_t tcomms_work_test(tcomms_work_t *work);
/* Release the handle. An operation still running completes in the background; its buffers stay in use until then.
 * Except an integer AVG reduction on a CPU backend, whose result the core writes at completion (see TCOMMS_AVG):
 * freeing its handle first waits for it, up to its timeout. NULL is a no-op; a second free, or any call on a freed
 * handle, is TCOMMS_ERR_INVALID_ARG while detectable (see the top of this file). */
TCOMMS_API tcomms_status_t tcomms_work_free(tcomms_work_t *work);

/* ---- groups ---------------------------------------------------------------------------------------------------- */

/* Operations issued on this thread between tcomms_group_start() and tcomms_group_end() are started together: NCCL
 * coalesces them (ncclGroupStart/End), CPU backends post them all before any is waited for, so a batch of sends
 * and receives among ranks cannot deadlock, whatever its order. Groups nest; the outermost end issues the batch.
 * A blocking call inside a group returns once queued, and tcomms_group_end completes it (on device backends,
 * stream-ordered), returning the first error among them; a work handle returned inside a group is valid and
 * completes no earlier than the group. tcomms_group_end without a start is TCOMMS_ERR_INVALID_ARG. Destroying
 * a communicator that has operations in the open group, or freeing their buffers, before tcomms_group_end is
 * undefined. */
TCOMMS_API tcomms_status_t tcomms_group_start(void);
TCOMMS_API tcomms_status_t tcomms_group_end(void);

/* ---- memory ---------------------------------------------------------------------------------------------------- */

/* Allocate `bytes` of memory suited to the backend serving `type` on `comm` (ncclMemAlloc on NCCL, so buffers can
 * be registered and used for symmetric windows; page-aligned host memory on CPU backends), and free it with the
 * same communicator and type. bytes == 0 gives *ptr = NULL. */
TCOMMS_API tcomms_status_t tcomms_mem_alloc(tcomms_comm_t *comm, tcomms_device_type_t type, size_t bytes,
                                            void **ptr);
TCOMMS_API tcomms_status_t tcomms_mem_free(tcomms_comm_t *comm, tcomms_device_type_t type, void *ptr);

enum {
    TCOMMS_MEM_REG_WINDOW = 1u << 0  /* a symmetric window (ncclCommWindowRegister): collective over comm, every
                                        rank registering the same size; TCOMMS_ERR_NOT_SUPPORTED where the backend
                                        or its library version has none */
};

typedef struct tcomms_mem_reg tcomms_mem_reg_t;

/* Register [buf, buf + bytes) with the backend serving `type` (ncclCommRegister), so operations on it avoid
 * staging copies. A backend with nothing to register (CPU backends) accepts the call and does nothing. The handle
 * must be deregistered before the buffer is freed. It keeps the communicator's backends alive: after
 * tcomms_comm_destroy they stay until the last registration (or work handle) is released, whose release then
 * destroys them and returns that status. */
TCOMMS_API tcomms_status_t tcomms_mem_register(tcomms_comm_t *comm, tcomms_device_type_t type, void *buf,
                                               size_t bytes, unsigned flags, tcomms_mem_reg_t **reg);
/* Release a registration; NULL is a no-op. A window deregistration is collective, like its registration. */
TCOMMS_API tcomms_status_t tcomms_mem_deregister(tcomms_mem_reg_t *reg);

#ifdef __cplusplus
}
#endif
#endif /* TCOMMS_TCOMMS_H */
