# SPDX-License-Identifier: BSD-3-Clause
"""A Python key/value store lent to libtcomms as its rendezvous store (tcomms_store_ops_t).

Any object with torch.distributed.Store's methods works: set(key, value), get(key), check(keys),
wait(keys, timedelta), add(key, delta), delete_key(key) (a torch TCPStore or PrefixStore, for instance). Every
callback catches every exception: none crosses into C.
"""
import ctypes
import datetime

from . import _lib

_OK, _TIMEOUT, _SYSTEM, _NOT_FOUND, _INVALID = 0, -4, -8, -13, -1


def _timed_out(exc):
    return isinstance(exc, TimeoutError) or "timeout" in str(exc).lower() or "timed out" in str(exc).lower()


class StoreAdapter:
    """Holds the C function table and the Python callbacks behind it; keep it alive as long as a communicator
    created with it (and its children) may use the store."""

    def __init__(self, store):
        self.store = store
        self.ops = _lib.StoreOps(_lib.STORE_SET(self._set), _lib.STORE_GET(self._get), _lib.STORE_WAIT(self._wait),
                                 _lib.STORE_ADD(self._add), _lib.STORE_DEL(self._del))

    def _set(self, _ctx, key, value, length):
        try:
            self.store.set(key.decode(), ctypes.string_at(value, length) if length else b"")
            return _OK
        except Exception:  # noqa: BLE001 - nothing may cross into C
            return _SYSTEM

    def _get(self, _ctx, key, buf, cap, length):
        try:
            k = key.decode()
            if not self._exists(k):
                return _NOT_FOUND
            value = self.store.get(k)
            length[0] = len(value)
            if len(value) > cap:
                return _INVALID
            ctypes.memmove(buf, value, len(value))
            return _OK
        except Exception:  # noqa: BLE001
            return _SYSTEM

    def _exists(self, key):
        if hasattr(self.store, "check"):
            return self.store.check([key])
        try:  # torch < 2.0: PrefixStore has no check(); libtcomms asks get() after a wait, or on an error path,
            # so a bound long enough for a loaded machine costs nothing on the way that matters
            self.store.wait([key], datetime.timedelta(seconds=1))
            return True
        except Exception as e:  # noqa: BLE001
            if _timed_out(e):
                return False
            raise

    def _wait(self, _ctx, keys, nkeys, timeout_ms):
        try:
            names = [keys[i].decode() for i in range(nkeys)]
            self.store.wait(names, datetime.timedelta(milliseconds=timeout_ms))
            return _OK
        except Exception as e:  # noqa: BLE001
            return _TIMEOUT if _timed_out(e) else _SYSTEM

    def _add(self, _ctx, key, delta, result):
        try:
            result[0] = self.store.add(key.decode(), delta)
            return _OK
        except Exception:  # noqa: BLE001
            return _SYSTEM

    def _del(self, _ctx, key):
        try:
            self.store.delete_key(key.decode())
            return _OK
        except Exception:  # noqa: BLE001
            return _SYSTEM
