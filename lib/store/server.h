/* SPDX-License-Identifier: BSD-3-Clause */
/* The store server's state, private to its two halves: server.c runs the poll loop, admits and drops
 * connections and starts and stops the thread; request.c reads each request, checks it and answers it.
 * Everything here is touched by the server thread alone (linger_until_ms excepted). */
#ifndef TC_STORE_SERVER_H
#define TC_STORE_SERVER_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include "error.h"
#include "proto.h"
#include "table.h"

typedef struct conn {
    int fd;
    int admitted; /* its first request passed (a HELLO with the token, when there is one): one of the job's */
    int closing;  /* an error reply is queued: close once it is sent, or at deadline_ms */
    int dead;     /* closed at the end of this loop turn */
    uint64_t since_ms; /* accepted at: a connection not admitted by since_ms + handshake_ms is closed */
    uint8_t hdr_buf[TC_STORE_HDR_LEN];
    size_t hdr_got;
    tc_store_hdr_t hdr;
    uint8_t *body; /* key bytes then value bytes */
    size_t body_len, body_cap, body_got;
    uint64_t reserved; /* bytes of the server's budget this request holds, from its header until it is answered */
    int discard;       /* over the budget: the body is read and dropped, then refused */
    int waiting;     /* a parked WAIT; its keys stay in body */
    int send_value;  /* the parked WAIT is a GET_WAIT: reply with its one key's value */
    size_t wait_off; /* offset in body of the first key not yet seen present */
    uint64_t deadline_ms;
    uint8_t *out; /* the one reply in flight: no request is read while it is pending */
    size_t out_len, out_off;
} conn_t;

struct tc_store_server {
    int listen_fd, wake[2], port, thread_started;
    pthread_t thread;
    uint8_t *token;
    size_t token_len;
    tc_store_limits_t limits;
    tc_store_table_t table;
    uint64_t reserved; /* the sum of the connections' reservations: table.bytes + reserved is the budget used */
    conn_t **conns;    /* in the order they were accepted, oldest first */
    struct pollfd *pfds; /* wake pipe, listener, then one per connection */
    size_t nconns, cap;
    uint64_t accept_resume_ms;
    _Atomic uint64_t linger_until_ms; /* set before a lingering stop's wake-up: serve clients until then */
    int draining;                     /* server thread: woken to linger, stops when the last client is gone */
    /* The log of dropped clients: the first few lines, then a count per interval (strangers can knock often). */
    unsigned drops_logged;
    uint64_t drops_unlogged, drops_report_ms;
    char drops_last[200];
};

/* request.c */
/* Read and answer what the socket holds (up to a few requests): never blocks. */
void tc_store_srv_read(tc_store_server_t *srv, conn_t *c);
/* Send what is left of the reply in flight. */
void tc_store_srv_flush(conn_t *c);
/* A parked WAIT passed its deadline: answer TIMEOUT naming the first missing key. */
void tc_store_srv_wait_expired(tc_store_server_t *srv, conn_t *c);
/* Free the connection's buffers and return its reservation; the caller closes the socket. */
void tc_store_srv_release(tc_store_server_t *srv, conn_t *c);

/* server.c */
/* Log that a client was dropped or refused: the first lines as they come, then one summary line per interval. */
void tc_store_srv_dropped(tc_store_server_t *srv, const char *fmt, ...) TC_PRINTF(2, 3);

#endif
