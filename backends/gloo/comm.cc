/* SPDX-License-Identifier: BSD-3-Clause */
/* Gloo communicators: the TCP device (one per root communicator, shared by its split children, bound where the
 * gloo.* hints or TCOMMS_GLOO_* say), the adapter that lets Gloo's rendezvous use the core's store, creation (full
 * mesh + barrier), destruction, and the applied values of the gloo.* hints. */
#include "gloo.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#pragma GCC visibility push(default)
#include <gloo/barrier.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/pair.h>
#pragma GCC visibility pop

namespace tcg {
namespace {

/* Gloo's rendezvous over the core's store. Keys are namespaced by the communicator's prefix, so the fixed keys
 * Gloo writes ("0", "1", ...) cannot collide between communicators. Used only in the creating thread. */
class StoreAdapter : public gloo::rendezvous::Store {
  public:
    explicit StoreAdapter(const tcomms_backend_comm_args_t &a)
        : core_(a.core), store_(a.store), prefix_(std::string(a.prefix) + "/"), timeout_ms_(a.timeout_ms)
    {
    }

    void set(const std::string &key, const std::vector<char> &data) override
    {
        std::string k = prefix_ + key;
        check(core_->store_set(store_, k.c_str(), data.data(), data.size()));
        written_.push_back(k);
    }

    std::vector<char> get(const std::string &key) override
    {
        std::string k = prefix_ + key;
        void *value = nullptr;
        size_t len = 0;
        check(core_->store_get(store_, k.c_str(), &value, &len, timeout_ms_));
        std::unique_ptr<void, void (*)(void *)> owned(value, free);
        const char *p = static_cast<const char *>(value);
        return std::vector<char>(p, p + len);
    }

    void wait(const std::vector<std::string> &keys) override
    {
        wait(keys, std::chrono::milliseconds(timeout_ms_));
    }

    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &timeout) override
    {
        std::vector<std::string> full;
        std::vector<const char *> ptrs;
        full.reserve(keys.size());
        for (const auto &k : keys)
            full.push_back(prefix_ + k);
        for (const auto &k : full)
            ptrs.push_back(k.c_str());
        uint32_t ms = timeout_ms_;
        if (timeout.count() > 0 && timeout.count() < static_cast<long>(UINT32_MAX))
            ms = static_cast<uint32_t>(timeout.count());
        check(core_->store_wait(store_, ptrs.data(), ptrs.size(), ms));
    }

    /* Once every member has connected nobody reads our keys again: drop them so long-lived stores stay small. */
    void remove_written()
    {
        for (const auto &k : written_)
            if (core_->store_del(store_, k.c_str()) != TCOMMS_SUCCESS)
                core_->log(TCOMMS_LOG_DEBUG, "gloo", "could not delete store key '%s'", k.c_str());
        written_.clear();
    }

  private:
    /* The core set this thread's message already; keep it. */
    static void check(tcomms_status_t st)
    {
        if (st != TCOMMS_SUCCESS)
            throw Error(st, std::string(), true);
    }

    const tcomms_core_t *core_;
    tcomms_store_t *store_;
    std::string prefix_;
    uint32_t timeout_ms_;
    std::vector<std::string> written_;
};

struct AddrInfo {
    struct addrinfo *head = nullptr;
    ~AddrInfo() { if (head) freeaddrinfo(head); }
};

struct Fd {
    int fd = -1;
    ~Fd() { if (fd >= 0) close(fd); }
};

bool is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET) {
        const auto *in = reinterpret_cast<const struct sockaddr_in *>(sa);
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->sa_family == AF_INET6) {
        const auto *in6 = reinterpret_cast<const struct sockaddr_in6 *>(sa);
        if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
            return true;
        return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
    }
    return false;
}

std::string numeric_host(const struct sockaddr *sa, socklen_t len)
{
    char host[NI_MAXHOST];
    if (getnameinfo(sa, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0)
        return std::string();
    return host;
}

/* The local address the kernel would use to reach the master: where peers most likely reach us too. Connecting a
 * UDP socket sends nothing. */
std::string address_toward(const char *master)
{
    if (!master || !*master)
        return "127.0.0.1";
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_DGRAM;
    AddrInfo res;
    int rc = getaddrinfo(master, "9", &hints, &res.head);
    if (rc != 0)
        throw Error(TCOMMS_ERR_SYSTEM, strf("cannot resolve master_addr '%s' (%s); set TCOMMS_GLOO_HOST or "
                                            "TCOMMS_GLOO_IFNAME", master, gai_strerror(rc)));
    int err = 0;
    for (struct addrinfo *ai = res.head; ai; ai = ai->ai_next) {
        if (is_loopback(ai->ai_addr))
            return "127.0.0.1";
        Fd s;
        s.fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s.fd < 0 || connect(s.fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            err = errno;
            continue;
        }
        struct sockaddr_storage local;
        socklen_t len = sizeof local;
        if (getsockname(s.fd, reinterpret_cast<struct sockaddr *>(&local), &len) != 0) {
            err = errno;
            continue;
        }
        std::string host = numeric_host(reinterpret_cast<struct sockaddr *>(&local), len);
        if (!host.empty())
            return host;
    }
    throw Error(TCOMMS_ERR_SYSTEM, strf("no local address routes to master_addr '%s' (%s); set TCOMMS_GLOO_HOST "
                                        "or TCOMMS_GLOO_IFNAME", master, strerror(err)));
}

/* The interface owning the bound address, for the gloo.ifname hint; loopback matches any 127/8 address. */
std::string iface_of(const struct sockaddr_storage &addr)
{
    struct ifaddrs *ifap = nullptr;
    if (getifaddrs(&ifap) != 0)
        return std::string();
    std::string name;
    const auto *want = reinterpret_cast<const struct sockaddr *>(&addr);
    for (struct ifaddrs *ifa = ifap; ifa && name.empty(); ifa = ifa->ifa_next) {
        const struct sockaddr *sa = ifa->ifa_addr;
        if (!sa || sa->sa_family != want->sa_family)
            continue;
        if (sa->sa_family == AF_INET) {
            const auto *a = reinterpret_cast<const struct sockaddr_in *>(sa);
            const auto *b = reinterpret_cast<const struct sockaddr_in *>(want);
            if (a->sin_addr.s_addr == b->sin_addr.s_addr || (is_loopback(sa) && is_loopback(want)))
                name = ifa->ifa_name;
        } else if (sa->sa_family == AF_INET6) {
            const auto *a = reinterpret_cast<const struct sockaddr_in6 *>(sa);
            const auto *b = reinterpret_cast<const struct sockaddr_in6 *>(want);
            if (memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr) == 0)
                name = ifa->ifa_name;
        }
    }
    freeifaddrs(ifap);
    return name;
}

const char *env_value(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : nullptr;
}

const char *hint_value(const tcomms_backend_comm_args_t &a, const char *key)
{
    const char *v = nullptr;
    if (a.core->hints_get(a.hints, key, &v) != TCOMMS_SUCCESS || !v || !*v)
        return nullptr;
    return v;
}

/* Where to bind, most specific first: the communicator's hints, then the environment, each naming an interface
 * before a host; else the address reaching the master. `bad` is the status earned by a value that does not bind. */
void choose_address(const tcomms_backend_comm_args_t &a, gloo::transport::tcp::attr &attr, const char **source,
                    tcomms_status_t *bad)
{
    static const struct {
        const char *name;
        bool is_hint, is_iface;
    } sources[] = {{"gloo.ifname", true, true},
                   {"gloo.hostname", true, false},
                   {"TCOMMS_GLOO_IFNAME", false, true},
                   {"TCOMMS_GLOO_HOST", false, false}};
    for (const auto &src : sources) {
        const char *v = src.is_hint ? hint_value(a, src.name) : env_value(src.name);
        if (!v)
            continue;
        (src.is_iface ? attr.iface : attr.hostname) = v;
        *source = src.name;
        *bad = src.is_hint ? TCOMMS_ERR_INVALID_ARG : TCOMMS_ERR_BAD_ENV;
        return;
    }
    attr.hostname = address_toward(a.master_addr);
    *source = "the local address toward master_addr";
    *bad = TCOMMS_ERR_SYSTEM;
}

/* Gloo 5b14351 misreads a failed getaddrinfo (it reads an unset result list) and leaks the interface list when an
 * interface has no address: check both here first, so a bad name is an error rather than a crash. */
void precheck(const gloo::transport::tcp::attr &attr)
{
    if (!attr.iface.empty()) {
        struct ifaddrs *ifap = nullptr;
        if (getifaddrs(&ifap) != 0)
            throw Error(TCOMMS_ERR_SYSTEM, strf("getifaddrs: %s", strerror(errno)));
        bool found = false;
        for (struct ifaddrs *ifa = ifap; ifa && !found; ifa = ifa->ifa_next)
            found = ifa->ifa_addr && (ifa->ifa_addr->sa_family == AF_INET || ifa->ifa_addr->sa_family == AF_INET6) &&
                    attr.iface == ifa->ifa_name;
        freeifaddrs(ifap);
        if (!found)
            throw std::runtime_error("no interface of that name has an IP address");
        return;
    }
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    AddrInfo res;
    int rc = getaddrinfo(attr.hostname.c_str(), nullptr, &hints, &res.head);
    if (rc != 0)
        throw std::runtime_error(gai_strerror(rc));
}

/* Bind the root communicator's TCP device and record the address and interface it uses. */
void make_device(const tcomms_backend_comm_args_t &a, Comm &c)
{
    gloo::transport::tcp::attr attr;
    const char *source;
    tcomms_status_t bad;
    choose_address(a, attr, &source, &bad);
    const std::string &wanted = attr.iface.empty() ? attr.hostname : attr.iface;
    try {
        precheck(attr);
        gloo::transport::tcp::attr resolved = gloo::transport::tcp::CreateDeviceAttr(attr);
        c.device = gloo::transport::tcp::CreateDevice(attr);
        c.host = numeric_host(reinterpret_cast<const struct sockaddr *>(&resolved.ai_addr),
                              static_cast<socklen_t>(resolved.ai_addrlen));
        c.iface = attr.iface.empty() ? iface_of(resolved.ai_addr) : attr.iface;
    } catch (const std::exception &e) {
        throw Error(bad, strf("cannot bind a TCP device to '%s' (%s): %s", wanted.c_str(), source, e.what()));
    }
}

/* A split child shares its parent's device, so address hints cannot apply to it. */
void share_device(const tcomms_backend_comm_args_t &a, Comm &c)
{
    const Comm *parent = static_cast<const Comm *>(a.parent);
    c.device = parent->device;
    c.host = parent->host;
    c.iface = parent->iface;
    if (hint_value(a, "gloo.ifname") || hint_value(a, "gloo.hostname"))
        c.core->log(TCOMMS_LOG_WARN, "gloo", "'%s': gloo.ifname/gloo.hostname ignored: a split uses its parent's "
                    "device (%s)", c.name.c_str(), c.host.c_str());
}

/* Everyone has connected once every member passed this barrier, so creation is eager and complete. */
void creation_barrier(Comm &c)
{
    if (c.size < 2)
        return;
    gloo::BarrierOptions o(c.ctx);
    o.setTag(0);
    o.setTimeout(std::chrono::milliseconds(c.timeout_ms));
    gloo::barrier(o);
}

void release(Comm *c)
{
    stop_worker(*c);
    /* The context's pairs refer to the device: drop them first. */
    c->ctx.reset();
    c->device.reset();
    delete c;
}

/* Gloo (5b14351) has no abort, and its pair's way to fail every pending operation (signalException) is protected.
 * Shutting its socket down makes Gloo's device loop read an end of stream, which it handles as a peer that closed:
 * the operations pending on the pair are signalled, so the worker's operation throws at once, and the peer's
 * pending operations fail too instead of waiting for their timeout. The socket and the pair's lock are protected
 * members, reached through a derived class's member pointers; the lock keeps the pair from closing the socket (and
 * its number being reused) meanwhile. */
struct PairSocket : gloo::transport::tcp::Pair {
    static void shut_down(gloo::transport::tcp::Pair &p)
    {
        std::lock_guard<std::mutex> lock(p.*(&PairSocket::m_));
        int fd = p.*(&PairSocket::fd_);
        if (fd >= 0)
            ::shutdown(fd, SHUT_RDWR);
    }
};

} // namespace

void shutdown_pairs(Comm &c)
{
    if (!c.ctx)
        return;
    for (int r = 0; r < c.size; r++) {
        if (r == c.rank)
            continue;
        gloo::transport::Pair *pair = c.ctx->getPair(r).get();
        if (pair) /* every device made here is a TCP one */
            PairSocket::shut_down(*static_cast<gloo::transport::tcp::Pair *>(pair));
    }
}

tcomms_status_t comm_create(const tcomms_backend_comm_args_t *args, void **bcomm)
{
    NoSigpipe no_sigpipe;
    return guard(args->core, "comm_create", [&]() -> tcomms_status_t {
        std::unique_ptr<Comm> c(new Comm());
        c->core = args->core;
        c->name = args->name ? args->name : "";
        c->rank = args->rank;
        c->size = args->size;
        c->timeout_ms = args->timeout_ms;
        c->state = args->state;
        c->send_seq.assign(static_cast<size_t>(args->size), 0);
        c->recv_seq.assign(static_cast<size_t>(args->size), 0);
        if (args->parent)
            share_device(*args, *c);
        else
            make_device(*args, *c);
        c->ctx = std::make_shared<gloo::rendezvous::Context>(args->rank, args->size);
        c->ctx->setTimeout(std::chrono::milliseconds(args->timeout_ms));
        StoreAdapter store(*args);
        c->ctx->connectFullMesh(store, c->device);
        creation_barrier(*c);
        store.remove_written();
        start_worker(*c);
        c->core->log(TCOMMS_LOG_DEBUG, "gloo", "'%s': rank %d of %d connected over %s (%s)", c->name.c_str(),
                     c->rank, c->size, c->host.c_str(), c->iface.empty() ? "?" : c->iface.c_str());
        *bcomm = c.release();
        return TCOMMS_SUCCESS;
    });
}

tcomms_status_t comm_destroy(void *bcomm)
{
    Comm *c = static_cast<Comm *>(bcomm);
    NoSigpipe no_sigpipe;
    return guard(c->core, "comm_destroy", [&]() -> tcomms_status_t {
        release(c);
        return TCOMMS_SUCCESS;
    });
}

tcomms_status_t comm_hint(void *bcomm, const char *key, char *buf, size_t len)
{
    const Comm *c = static_cast<const Comm *>(bcomm);
    return guard(c->core, "comm_hint", [&]() -> tcomms_status_t {
        const std::string *value = nullptr;
        if (strcmp(key, "gloo.hostname") == 0)
            value = &c->host;
        else if (strcmp(key, "gloo.ifname") == 0 && !c->iface.empty())
            value = &c->iface;
        if (!value)
            return c->core->error(TCOMMS_ERR_NOT_SUPPORTED, "gloo: hint '%s' is not applicable", key);
        if (value->size() >= len)
            return c->core->error(TCOMMS_ERR_INVALID_ARG, "gloo: len %zu is too small for hint '%s' (value '%s')",
                                  len, key, value->c_str());
        memcpy(buf, value->c_str(), value->size() + 1);
        return TCOMMS_SUCCESS;
    });
}

} // namespace tcg
