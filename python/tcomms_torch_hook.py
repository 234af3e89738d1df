# SPDX-License-Identifier: BSD-3-Clause
"""TCOMMS_TORCH=1: run an unchanged PyTorch script's gloo and nccl process groups on tcomms.

The tcomms-torch.pth file installed beside the package imports this module at interpreter start-up when
TCOMMS_TORCH=1, and only then. It imports neither torch nor tcomms (a Python that never uses torch starts as fast
as without it): it places a finder on sys.meta_path, and once torch.distributed has finished importing, it calls
tcomms.torch._route.enable(), which registers the backend and turns routing on.
"""
import importlib.abc
import os
import sys

_TARGET = "torch.distributed"


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module):
            run(module)
            sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
            if module.is_available():
                from tcomms.torch._route import enable
                enable()
        loader.exec_module = exec_module
        return spec


if os.environ.get("TCOMMS_TORCH") == "1":
    if _TARGET in sys.modules:
        from tcomms.torch._route import enable
        enable()
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
