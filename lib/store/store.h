/* SPDX-License-Identifier: BSD-3-Clause */
/* The rendezvous store: a key/value service every rank of a job reaches. Two implementations sit behind one
 * handle: a TCP client of the built-in server (client.c; rank 0 runs the server, server.c, on a
 * thread) and an adapter over user callbacks (user.c). The wire protocol is in proto.h. */
#ifndef TC_STORE_H
#define TC_STORE_H

#include <tcomms/backend.h>

/* Protocol limits: a request with a longer key or value is refused without being read whole. */
#define TC_STORE_MAX_KEY 1024u
#define TC_STORE_MAX_VALUE (16u << 20)
#define TC_STORE_MAX_KEYS 4096u /* keys in one WAIT */

typedef struct tc_store_server tc_store_server_t;

/* What a server grants its clients, so that strangers reaching its port cannot stall or exhaust the job. A
 * connection is admitted by its first request: a HELLO with the right token when the server has one, any
 * well-formed request otherwise (tcomms' own clients always start with HELLO). Read from the environment
 * (TCOMMS_STORE_HANDSHAKE_MS, _MAX_PENDING, _MAX_CONNS, _MAX_BYTES) by tc_env_store_limits in env.c. */
typedef struct tc_store_limits {
    uint32_t handshake_ms; /* a connection not admitted within this is closed */
    uint32_t max_pending;  /* connections not admitted yet; a newcomer beyond closes the oldest of them */
    uint32_t max_conns;    /* connections in all; beyond, the oldest not admitted goes, else the newcomer */
    uint64_t max_bytes;    /* keys and values held, plus request bodies being received; a SET beyond is refused */
} tc_store_limits_t;

/* Serve on bind_addr:port (bind_addr NULL or "" = all interfaces, IPv6 and IPv4; port 0 = any free port) from a
 * new thread, with the limits the environment sets (a malformed one: TCOMMS_ERR_BAD_ENV naming it). `token` (NULL
 * or "" = none) is the shared secret a client must present before any request. */
tcomms_status_t tc_store_server_start(const char *bind_addr, int port, const char *token, tc_store_server_t **out);
int tc_store_server_port(const tc_store_server_t *server);
/* Stop the thread, close every connection, free all keys. NULL is a no-op. */
void tc_store_server_stop(tc_store_server_t *server);
/* Keep serving until every admitted client has disconnected or linger_ms passed (0: not at all), then stop.
 * Connections never admitted (strangers, a peer that never said HELLO) are not waited for. The rank that serves a
 * root's store lingers so that ranks still using it (splits after rank 0 finished) are not cut off. */
void tc_store_server_linger(tc_store_server_t *server, uint32_t linger_ms);

/* Connect to a server, retrying with backoff (10 ms doubling to 1 s) until timeout_ms passes; present `token`. */
tcomms_status_t tc_store_connect(const char *addr, int port, const char *token, uint32_t timeout_ms,
                                 tcomms_store_t **out);
/* Wrap user callbacks (not copied: they must outlive the store). */
tcomms_status_t tc_store_from_ops(const tcomms_store_ops_t *ops, void *ctx, tcomms_store_t **out);
void tc_store_free(tcomms_store_t *store);

/* Operations (thread-safe on one handle). get() waits up to timeout_ms for the key and returns a malloc'ed copy
 * (NUL-terminated one byte past *len, for convenience); wait() returns TCOMMS_ERR_TIMEOUT naming the first
 * missing key; del() of an absent key is TCOMMS_SUCCESS. */
tcomms_status_t tc_store_set(tcomms_store_t *s, const char *key, const void *value, size_t len);
tcomms_status_t tc_store_get(tcomms_store_t *s, const char *key, void **value, size_t *len, uint32_t timeout_ms);
tcomms_status_t tc_store_wait(tcomms_store_t *s, const char *const *keys, size_t nkeys, uint32_t timeout_ms);
tcomms_status_t tc_store_add(tcomms_store_t *s, const char *key, int64_t delta, int64_t *result);
tcomms_status_t tc_store_del(tcomms_store_t *s, const char *key);
/* Delete every key starting with `prefix` (a user store without this ability: TCOMMS_ERR_NOT_SUPPORTED). */
tcomms_status_t tc_store_del_prefix(tcomms_store_t *s, const char *prefix);
/* Through rank 0 (coll.c). gather0: every other rank sets "<prefix><rank>" to its `len` bytes; rank 0 gets
 * them all, vals[r] and lens[r] for r < size (malloc'ed, vals[0] a copy of its own; free them with
 * tc_store_free_values). A rank that does not arrive within timeout_ms: the store's status, *missing = that rank.
 * bcast0: rank 0 sets "<prefix>all" to *val; every other rank waits for it, *val a malloc'ed copy. */
tcomms_status_t tc_store_gather0(tcomms_store_t *s, const char *prefix, int rank, int size, const void *mine,
                                 size_t len, uint32_t timeout_ms, void **vals, size_t *lens, int *missing);
tcomms_status_t tc_store_bcast0(tcomms_store_t *s, const char *prefix, int rank, void **val, size_t *len,
                                uint32_t timeout_ms);
/* Every rank's value on every rank, through rank 0 (gather0, then one table through bcast0): vals[r] and lens[r]
 * for r < size, malloc'ed. On failure *missing is the rank waited for (rank 0 waits for each, the others for 0). */
tcomms_status_t tc_store_allgather(tcomms_store_t *s, const char *prefix, int rank, int size, const void *mine,
                                   size_t len, uint32_t timeout_ms, void **vals, size_t *lens, int *missing);
void tc_store_free_values(void **vals, int n);
/* Number of keys held by the server (TCP store only), for tests and leak checks. */
tcomms_status_t tc_store_num_keys(tcomms_store_t *s, int64_t *count);

#endif
