/* SPDX-License-Identifier: BSD-3-Clause */
/* Wire protocol of the built-in rendezvous store, shared by server.c, client.c and the tests that forge
 * bad frames. Every message is a 16-byte header followed by `klen` key bytes and then `vlen` value bytes. All
 * integers, in headers and bodies, are little-endian; the fixed header lets the server check every length before
 * it reads (or allocates for) a body. */
#ifndef TC_STORE_PROTO_H
#define TC_STORE_PROTO_H

#include <stdint.h>
#include <string.h>

#include "store.h"

#define TC_STORE_MAGIC 0x31534354u /* "TCS1" on the wire */
#define TC_STORE_HDR_LEN 16u

/* Header layout: magic u32 | code u16 (a request's op or a reply's status) | reserved u16 (sent as 0, ignored) |
 * klen u32 | vlen u32. A reply always has klen 0. */
typedef struct tc_store_hdr {
    uint32_t magic;
    uint16_t code;
    uint16_t reserved;
    uint32_t klen;
    uint32_t vlen;
} tc_store_hdr_t;

/* Requests. Bodies, and the replies each gets besides the error replies:
 *   HELLO      key empty; value = token (<= TC_STORE_MAX_KEY bytes)          -> OK | REFUSED
 *   SET        key; value (<= TC_STORE_MAX_VALUE bytes)                      -> OK
 *   GET        key; no value; never blocks                                   -> OK + value | NOT_FOUND
 *   GET_WAIT   key; value = timeout_ms u32; the key's value once it is set (a WAIT on the one key and a GET in
 *              one round trip)                                               -> OK + value | TIMEOUT + the key
 *   WAIT       key empty; value = timeout_ms u32, nkeys u32 (<= TC_STORE_MAX_KEYS), then nkeys times
 *              (len u32, len key bytes); keys are checked in order and the reply comes once each has been seen
 *              present (a key deleted after being seen is not waited for again)
 *                                                                            -> OK | TIMEOUT + first missing key
 *   ADD        key; value = delta i64; a missing key counts as 0; counters are 8-byte little-endian values
 *                                                                            -> OK + new value i64 | BAD_VALUE
 *   DEL        key (absent: still OK)                                        -> OK
 *   DEL_PREFIX key = prefix                                                  -> OK + keys removed i64
 *   NUM_KEYS   key and value empty                                           -> OK + key count i64
 * With a token configured on the server, the first request must be a HELLO carrying it. */
typedef enum tc_store_op {
    TC_STORE_OP_HELLO = 1,
    TC_STORE_OP_SET = 2,
    TC_STORE_OP_GET = 3,
    TC_STORE_OP_WAIT = 4,
    TC_STORE_OP_ADD = 5,
    TC_STORE_OP_DEL = 6,
    TC_STORE_OP_DEL_PREFIX = 7,
    TC_STORE_OP_NUM_KEYS = 8,
    TC_STORE_OP_GET_WAIT = 9
} tc_store_op_t;

/* Reply codes. Error replies carry a short text message as their value. After BAD_REQUEST and REFUSED the server
 * closes the connection; after the others the connection stays usable. */
typedef enum tc_store_reply {
    TC_STORE_OK = 0,
    TC_STORE_NOT_FOUND = 1,
    TC_STORE_TIMEOUT = 2,
    TC_STORE_BAD_VALUE = 3,   /* ADD on a key whose value is not 8 bytes */
    TC_STORE_BAD_REQUEST = 4, /* bad magic, unknown op, a length over its limit, a malformed body */
    TC_STORE_REFUSED = 5,     /* missing or wrong token */
    TC_STORE_NO_MEMORY = 6
} tc_store_reply_t;

/* The largest WAIT body: the two counts, then TC_STORE_MAX_KEYS keys of TC_STORE_MAX_KEY bytes with their lengths. */
#define TC_STORE_MAX_WAIT_BODY (8u + TC_STORE_MAX_KEYS * (4u + TC_STORE_MAX_KEY))

static inline void tc_store_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t tc_store_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void tc_store_put_i64(uint8_t *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(u >> (8 * i));
}

static inline int64_t tc_store_get_i64(const uint8_t *p)
{
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u |= (uint64_t)p[i] << (8 * i);
    int64_t v;
    memcpy(&v, &u, sizeof(v)); /* two's complement reinterpretation without implementation-defined conversion */
    return v;
}

static inline void tc_store_hdr_pack(uint8_t out[TC_STORE_HDR_LEN], uint16_t code, uint32_t klen, uint32_t vlen)
{
    tc_store_put_u32(out, TC_STORE_MAGIC);
    out[4] = (uint8_t)code;
    out[5] = (uint8_t)(code >> 8);
    out[6] = out[7] = 0;
    tc_store_put_u32(out + 8, klen);
    tc_store_put_u32(out + 12, vlen);
}

static inline tc_store_hdr_t tc_store_hdr_unpack(const uint8_t in[TC_STORE_HDR_LEN])
{
    tc_store_hdr_t h;
    h.magic = tc_store_get_u32(in);
    h.code = (uint16_t)(in[4] | in[5] << 8);
    h.reserved = (uint16_t)(in[6] | in[7] << 8);
    h.klen = tc_store_get_u32(in + 8);
    h.vlen = tc_store_get_u32(in + 12);
    return h;
}

#endif
