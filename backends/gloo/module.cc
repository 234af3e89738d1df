/* SPDX-License-Identifier: BSD-3-Clause */
/* The Gloo backend's entries as C functions for the table in table.c, and the boundary every entry crosses:
 * exceptions from Gloo or the shim become tcomms statuses with messages here, never unwinding into the C core. */
#include "gloo.h"
#include "entries.h"

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

const tcomms_core_t *module_core;

const char *coll_name(tcomms_coll_type_t type)
{
    const tcomms_coll_info_t *info = module_core != nullptr ? module_core->coll_info(type) : nullptr;
    return info != nullptr ? info->name : "operation";
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

/* The shim's entries (comm.cc, worker.cc) already turn every exception into a status (guard()); these only
 * give them C names. */
extern "C" {

const char *const tcg_honoured_hints[] = {"gloo.hostname", "gloo.ifname", nullptr};

tcomms_status_t tcg_query(const tcomms_core_t *core, char *reason, size_t len)
{
    tcg::module_core = core;
    /* libgloo was resolved when the core loaded this module; a CPU needs nothing else. */
    if (reason && len)
        reason[0] = '\0';
    return TCOMMS_SUCCESS;
}

tcomms_status_t tcg_comm_create(const tcomms_backend_comm_args_t *args, void **bcomm)
{
    return tcg::comm_create(args, bcomm);
}

tcomms_status_t tcg_comm_destroy(void *bcomm)
{
    return tcg::comm_destroy(bcomm);
}

tcomms_status_t tcg_comm_hint(void *bcomm, const char *key, char *buf, size_t len)
{
    return tcg::comm_hint(bcomm, key, buf, len);
}

tcomms_status_t tcg_post(void *bcomm, const tcomms_coll_args_t *args, void **bwork)
{
    return tcg::post(bcomm, args, bwork);
}

tcomms_status_t tcg_work_test(void *bwork)
{
    return tcg::work_test(bwork);
}

tcomms_status_t tcg_work_wait(void *bwork, uint32_t timeout_ms)
{
    return tcg::work_wait(bwork, timeout_ms);
}

void tcg_work_free(void *bwork)
{
    tcg::work_free(bwork);
}

tcomms_status_t tcg_comm_abort(void *bcomm)
{
    return tcg::comm_abort(bcomm);
}

} // extern "C"
