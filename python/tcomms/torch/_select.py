# SPDX-License-Identifier: BSD-3-Clause
"""What a torch backend string and pg_options mean for tcomms: which devices tcomms serves, which tcomms module
serves each, and the hints a process group's options become."""
import ctypes
import os

from ..errors import InvalidArgument

NAME = "tcomms"
_DEVICE_MODULES = {"cpu": ("ucx", "gloo"), "cuda": ("nccl",)}
_MODULE_DEVICE = {"ucx": "cpu", "gloo": "cpu", "nccl": "cuda"}


def device_map(backend):
    """{device: backend name} of a torch backend string ("tcomms", "cpu:gloo,cuda:tcomms")."""
    text = str(backend).lower()
    if ":" not in text:
        return {"cpu": text, "cuda": text}
    out = {}
    for part in text.split(","):
        dev, _, name = part.strip().partition(":")
        out[dev.strip()] = name.strip()
    return out


def tcomms_devices(backend):
    """The device types a torch backend string gives to tcomms, in a stable order."""
    m = device_map(backend)
    return [d for d in ("cpu", "cuda") if m.get(d) == NAME]


def _module_dirs():
    dirs = [d for d in os.environ.get("TCOMMS_BACKEND_PATH", "").split(":") if d]
    try:
        from .. import _config
        dirs.append(_config.MODULEDIR)
    except (ImportError, AttributeError):
        pass
    return dirs


def _loads(module):
    for d in _module_dirs():
        path = os.path.join(d, "tcomms_%s.so" % module)
        if os.path.exists(path):
            try:
                ctypes.CDLL(path)
                return True
            except OSError:
                return False
    return False


def selection(devices, bound):
    """(tcomms backend selection, the device types it serves) for the devices tcomms is to serve on a communicator
    bound to `bound` ("cpu" or "cuda"), following TCOMMS_BACKEND as tcomms does: a device-qualified entry names
    the module for that device, a bare name the module for the devices it serves; otherwise cpu takes the first of
    ucx, gloo that loads here (the same on every rank of a uniform job) and cuda takes nccl. Where no CPU module
    loads on a CUDA-bound group, tcomms serves cuda alone."""
    env = os.environ.get("TCOMMS_BACKEND", "").strip()
    chosen = {}
    for part in (p.strip() for p in env.split(",") if p.strip()):
        if ":" in part:
            dev, _, mod = part.partition(":")
            chosen[dev.strip()] = mod.strip()
        else:
            chosen[_MODULE_DEVICE.get(part, "cpu")] = part
    parts, served = [], []
    for dev in devices:
        if dev == "cuda" and bound != "cuda":
            continue
        mod = chosen.get(dev)
        if mod is None and dev == "cuda":
            mod = "nccl"
        elif mod is None:
            mod = next((m for m in _DEVICE_MODULES["cpu"] if _loads(m)), None)
            if mod is None and bound == "cuda":
                continue
            mod = mod or _DEVICE_MODULES["cpu"][0]  # let tcomms name what failed
        parts.append("%s:%s" % (dev, mod))
        served.append(dev)
    return ",".join(parts), served


_UNSET = -2147483648  # NCCL_CONFIG_UNDEF_INT: a ncclConfig_t field torch leaves to NCCL


def hints_from_options(options):
    """The tcomms hints of a new_group/split_group pg_options: torch's ProcessGroupNCCL.Options
    (is_high_priority_stream and config.blocking/cga_cluster_size/min_ctas/max_ctas), a tcomms.torch.Options, a
    dict, or None. Anything else is refused: an option is never dropped silently."""
    if options is None:
        return None
    if isinstance(options, dict):
        return dict(options)
    hints = getattr(options, "hints", None)
    if isinstance(hints, dict):
        return dict(hints)
    if hasattr(options, "is_high_priority_stream") or hasattr(options, "config"):
        out = {}
        if getattr(options, "is_high_priority_stream", False):
            out["high_priority_stream"] = "1"
        config = getattr(options, "config", None)
        for field in ("blocking", "cga_cluster_size", "min_ctas", "max_ctas"):
            value = getattr(config, field, _UNSET) if config is not None else _UNSET
            if value != _UNSET:
                out[field] = str(int(value))
        return out
    raise InvalidArgument("pg_options of type %s: tcomms takes torch's ProcessGroupNCCL.Options, "
                          "tcomms.torch.Options or a dict of hints" % type(options).__name__)
