# SPDX-License-Identifier: BSD-3-Clause
"""tcomms.Error and one subclass per tcomms_status_t error, each carrying the status and tcomms' message."""
from . import _lib


class Error(Exception):
    """A tcomms call failed. `status` is the C status (negative), `name` its name ("TCOMMS_ERR_TIMEOUT") and
    `message` the detailed text from tcomms_last_error() (or from the Python layer)."""

    status = -14
    name = "TCOMMS_ERR_INTERNAL"

    def __init__(self, message, status=None):
        if status is not None:
            self.status = status
        self.message = message
        super().__init__("%s: %s" % (self.name, message))


def _subclass(pyname, status, cname, *bases):
    return type(pyname, (Error,) + bases, {"status": status, "name": cname, "__module__": __name__})


InvalidArgument = _subclass("InvalidArgument", -1, "TCOMMS_ERR_INVALID_ARG", ValueError)
NoMemory = _subclass("NoMemory", -2, "TCOMMS_ERR_NO_MEMORY", MemoryError)
NotSupported = _subclass("NotSupported", -3, "TCOMMS_ERR_NOT_SUPPORTED")
Timeout = _subclass("Timeout", -4, "TCOMMS_ERR_TIMEOUT", TimeoutError)
BackendUnavailable = _subclass("BackendUnavailable", -5, "TCOMMS_ERR_BACKEND_UNAVAILABLE")
NoBackendForDevice = _subclass("NoBackendForDevice", -6, "TCOMMS_ERR_NO_BACKEND_FOR_DEVICE")
BadEnvironment = _subclass("BadEnvironment", -7, "TCOMMS_ERR_BAD_ENV")
SystemFailure = _subclass("SystemFailure", -8, "TCOMMS_ERR_SYSTEM", OSError)
RemoteFailure = _subclass("RemoteFailure", -9, "TCOMMS_ERR_REMOTE")
Aborted = _subclass("Aborted", -10, "TCOMMS_ERR_ABORTED")
ProtocolError = _subclass("ProtocolError", -11, "TCOMMS_ERR_PROTOCOL")
AbiMismatch = _subclass("AbiMismatch", -12, "TCOMMS_ERR_ABI")
NotFound = _subclass("NotFound", -13, "TCOMMS_ERR_NOT_FOUND", KeyError)
InternalError = _subclass("InternalError", -14, "TCOMMS_ERR_INTERNAL")
NotBound = _subclass("NotBound", -15, "TCOMMS_ERR_NOT_BOUND")
Mismatch = _subclass("Mismatch", -16, "TCOMMS_ERR_MISMATCH")

_BY_STATUS = {cls.status: cls for cls in (InvalidArgument, NoMemory, NotSupported, Timeout, BackendUnavailable,
                                          NoBackendForDevice, BadEnvironment, SystemFailure, RemoteFailure, Aborted,
                                          ProtocolError, AbiMismatch, NotFound, InternalError, NotBound, Mismatch)}


def from_status(status, what=None):
    """The exception for a failed C call, with this thread's tcomms_last_error() (read at once: the next call on
    this thread replaces it)."""
    detail = (_lib.lib.tcomms_last_error() or b"").decode(errors="replace")
    if not detail:
        detail = (_lib.lib.tcomms_strerror(status) or b"").decode(errors="replace")
    if what and not detail.startswith(what):
        detail = "%s: %s" % (what, detail)
    cls = _BY_STATUS.get(status)
    if cls is None:
        return Error(detail, status)
    return cls(detail)


def check(status, what=None):
    """Raise the exception for `status` unless it is success (or in progress)."""
    if status < 0:
        raise from_status(status, what)
    return status
