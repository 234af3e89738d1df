/* SPDX-License-Identifier: BSD-3-Clause */
/* The Gloo backend's one exported symbol, tcomms_backend_module, and the boundary every entry crosses: exceptions
 * from Gloo or the shim become tcomms statuses with messages here, never unwinding into the C core. */
#include "gloo.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <new>
#include <system_error>

#pragma GCC visibility push(default)
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#pragma GCC visibility pop

namespace tcg {

std::string strf(const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return std::string();
    if (static_cast<size_t>(n) < sizeof small)
        return std::string(small, static_cast<size_t>(n));
    std::string out(static_cast<size_t>(n) + 1, '\0');
    va_start(ap, fmt);
    vsnprintf(&out[0], out.size(), fmt, ap);
    va_end(ap);
    out.resize(static_cast<size_t>(n));
    return out;
}

const char *coll_name(tcomms_coll_type_t type)
{
    static const char *const names[TCOMMS_COLL_TYPE_COUNT] = {
        "all_reduce",       "broadcast",  "reduce",       "all_gather", "all_gather_v", "reduce_scatter",
        "reduce_scatter_v", "all_to_all", "all_to_all_v", "gather",     "scatter",      "barrier",
        "send",             "recv"};
    return type >= 0 && type < TCOMMS_COLL_TYPE_COUNT ? names[type] : "operation";
}

namespace {

/* Gloo reports every transport problem as IoException; its text is the only way to tell a timeout (ours, or the
 * pair closure a timeout elsewhere on the context causes) from a peer that went away. */
tcomms_status_t io_status(const char *what)
{
    if (strstr(what, "Timed out") || strstr(what, "timeout") || strstr(what, "Timeout"))
        return TCOMMS_ERR_TIMEOUT;
    return TCOMMS_ERR_REMOTE;
}

Failure classify()
{
    try {
        throw;
    } catch (const Error &e) {
        return Failure{e.status, e.what(), e.keep_message};
    } catch (const gloo::IoException &e) {
        return Failure{io_status(e.what()), e.what(), false};
    } catch (const gloo::EnforceNotMet &e) {
        return Failure{TCOMMS_ERR_INTERNAL, e.what(), false};
    } catch (const gloo::Exception &e) {
        return Failure{TCOMMS_ERR_INTERNAL, e.what(), false};
    } catch (const std::bad_alloc &) {
        return Failure{TCOMMS_ERR_NO_MEMORY, "out of memory", false};
    } catch (const std::system_error &e) {
        return Failure{TCOMMS_ERR_SYSTEM, e.what(), false};
    } catch (const std::exception &e) {
        return Failure{TCOMMS_ERR_INTERNAL, e.what(), false};
    } catch (...) {
        return Failure{TCOMMS_ERR_INTERNAL, "unknown exception", false};
    }
}

tcomms_status_t query(const tcomms_core_t *core, char *reason, size_t len)
{
    (void)core;
    /* libgloo was resolved when the core loaded this module; a CPU needs nothing else. */
    if (reason && len)
        reason[0] = '\0';
    return TCOMMS_SUCCESS;
}

const char *const honoured_hints[] = {"gloo.hostname", "gloo.ifname", nullptr};

} // namespace

Failure current_failure() noexcept
{
    try {
        return classify();
    } catch (...) {
        /* Building the message itself failed (no memory): report without one. */
        return Failure{TCOMMS_ERR_NO_MEMORY, std::string(), false};
    }
}

} // namespace tcg

extern "C" __attribute__((visibility("default"))) const tcomms_backend_t tcomms_backend_module = {
    TCOMMS_BACKEND_ABI_VERSION,
    "gloo",
    "Gloo collectives and point-to-point over TCP (CPU buffers)",
    1u << TCOMMS_DEVICE_CPU,
    tcg::honoured_hints,
    tcg::query,
    tcg::comm_create,
    tcg::comm_destroy,
    tcg::comm_hint,
    tcg::post,
    tcg::work_test,
    tcg::work_wait,
    tcg::work_free,
    nullptr, // work_synchronize: work_wait already blocks the host
    nullptr, // comm_split_nonmember: non-members have nothing to do
    nullptr, // group_start: posts never block, so a group needs nothing of Gloo
    nullptr, // group_end
    nullptr, // mem_alloc: the core's page-aligned host memory
    nullptr, // mem_free
    nullptr, // mem_register: nothing to register
    nullptr, // mem_deregister
    tcg::comm_abort,
};
