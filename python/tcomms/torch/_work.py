# SPDX-License-Identifier: BSD-3-Clause
"""The torch Work of an operation tcomms runs: wait() as torch's own backends do (CPU: block until done; CUDA:
make the current stream wait, the host does not), errors raised as torch.distributed.DistBackendError."""
import torch
from torch._C._distributed_c10d import Work as _TorchWork

from .. import errors as _errors

try:
    from torch.distributed import DistBackendError as _DistBackendError
except ImportError:  # torch < 2.0
    _DistBackendError = RuntimeError

try:
    raw_stream = torch._C._cuda_getCurrentRawStream  # an int, without building a Stream object
except AttributeError:  # pragma: no cover - older torch
    def raw_stream(index):
        return torch.cuda.current_stream(index).cuda_stream

_classes = {}


def torch_error(e):
    """`e` (a tcomms.Error) as an exception that is both its tcomms class and torch's DistBackendError (ValueError
    for bad input, as torch raises there)."""
    if not isinstance(e, _errors.Error) or isinstance(e, _DistBackendError):
        return e
    base = type(e)
    cls = _classes.get(base)
    if cls is None:
        extra = () if issubclass(base, ValueError) else (_DistBackendError,)
        cls = type(base.__name__, (base,) + extra, {"__module__": "tcomms.torch"})
        _classes[base] = cls
    out = cls.__new__(cls)
    out.status, out.message = e.status, e.message
    out.args = e.args
    return out


class Work(_TorchWork):
    """`works`: tcomms.Work handles (none for an operation that already completed); `stream`: the torch.cuda.Stream it
    was posted on (None on CPU); `after`: called once, after completion, to finish the torch call (copy results
    out of a staging buffer); `sync_host`: wait() blocks the host too (barrier)."""

    def __init__(self, works, result, stream=None, after=None, sync_host=False):
        super().__init__()
        self._works, self._result, self._stream, self._after = works, result, stream, after
        self._sync_host, self._done, self._error = sync_host, False, None

    def _finish(self, timeout_s):
        if self._error is not None:
            raise self._error
        if self._done:
            return True
        try:
            for w in self._works:
                if self._sync_host:
                    w.synchronize(timeout_s)
                else:
                    w.wait(timeout_s)
        except _errors.Timeout as e:
            if timeout_s is not None:  # a wait with its own bound: the operation goes on
                raise torch_error(e) from None
            self._error = torch_error(e)
            raise self._error from None
        except _errors.Error as e:
            self._error = torch_error(e)
            raise self._error from None
        if self._stream is not None:
            stream = self._stream
            if raw_stream(stream.device.index) != stream.cuda_stream:
                # tcomms ordered the posting stream after the operation; follow it from the current one
                torch.cuda.current_stream(stream.device.index).wait_stream(stream)
        self._done = True
        self._works = ()
        if self._after is not None:
            after, self._after = self._after, None
            after()
        return True

    def wait(self, timeout=None):
        seconds = None
        if timeout is not None and hasattr(timeout, "total_seconds") and timeout.total_seconds() > 0:
            seconds = timeout.total_seconds()
        return self._finish(seconds)

    def synchronize(self):
        self._sync_host = True
        self._finish(None)

    def block_current_stream(self):
        self._finish(None)

    def is_completed(self):
        if self._done or self._error is not None:
            return True
        try:
            return all(w.test() for w in self._works)
        except _errors.Error as e:
            self._error = torch_error(e)
            return True

    def is_success(self):
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def result(self):
        return list(self._result)

    def source_rank(self):
        return -1

    def get_future(self):
        # completed at once: on CUDA the wait is stream-ordered, so callbacks chained on the future see the result
        # in stream order; on CPU this blocks until the operation ends
        fut = torch.futures.Future()
        try:
            self._finish(None)
            fut.set_result(list(self._result))
        except Exception as e:  # noqa: BLE001 - delivered through the future
            fut.set_exception(e)
        return fut


def finished(result, stream=None):
    """The Work of a blocking call: it has completed (on CUDA: on `stream`, which wait() joins)."""
    return Work((), result, stream)
