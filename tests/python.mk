# SPDX-License-Identifier: BSD-3-Clause
# The Python package (python/tcomms) and its tests. `make install` puts the package under pythondir when configure
# found a Python >= 3.8, with a generated tcomms/_config.py naming the libdir libtcomms.so.0 went to, and
# tcomms-torch.pth, which imports tcomms.torch._route only in a process started with TCOMMS_TORCH=1.
# Each tests/python/test_*.py runs through tests/python/run.sh under tcomms-run, on every rank count and built
# backend its header names; it prints one Check-style "Checks:" line for .ci/run.
# Every module, by name (python/tcomms/torch too: a new file there needs its line here).
py_sources = python/tcomms/__init__.py python/tcomms/_lib.py python/tcomms/buffers.py python/tcomms/comm.py \
	python/tcomms/errors.py python/tcomms/store.py
py_torch_sources = python/tcomms/torch/__init__.py python/tcomms/torch/_backend.py python/tcomms/torch/_pg.py \
	python/tcomms/torch/_route.py python/tcomms/torch/_select.py python/tcomms/torch/_work.py
# python/tcomms-torch.pth: site.py runs its import line in every process of that Python; it imports nothing unless
# TCOMMS_TORCH=1.
EXTRA_DIST += $(py_sources) $(py_torch_sources) python/tcomms/_config.py.in python/tcomms-torch.pth \
	python/tcomms_torch_hook.py

if HAVE_PYTHON
tcommspydir = $(pythondir)/tcomms
tcommspy_PYTHON = $(py_sources)
nodist_tcommspy_PYTHON = python/tcomms/_config.py
tcommstorchdir = $(pythondir)/tcomms/torch
tcommstorch_PYTHON = $(py_torch_sources)
tcommspthdir = $(pythondir)
tcommspth_DATA = python/tcomms-torch.pth
python_PYTHON = python/tcomms_torch_hook.py
# built by `make`, not first at install time
nodist_noinst_DATA = python/tcomms/_config.py
endif

# libdir as make expands it (configure leaves it as ${exec_prefix}/lib). Checked on every make, so that
# `make install prefix=...` records where the library goes; rewritten only when it changed.
python/tcomms/_config.py: $(srcdir)/python/tcomms/_config.py.in tcomms-config-py-check
	@$(MKDIR_P) python/tcomms && \
	sed -e 's|@libdir[@]|$(libdir)|g' $(srcdir)/python/tcomms/_config.py.in >$@.tmp && \
	if cmp -s $@.tmp $@; then rm -f $@.tmp; else echo "  GEN      $@"; mv $@.tmp $@; fi
# (a target without a file or recipe: always out of date)
tcomms-config-py-check:
CLEANFILES += python/tcomms/_config.py

# The tests: TCOMMS_TEST_PYTHON is configure's choice; run.sh finds the package in the source tree and the library
# and modules in the build tree.
python_tests = tests/python/test_api.py tests/python/test_torch_coll.py tests/python/test_torch_groups.py \
	tests/python/test_torch_route.py tests/python/test_torch_errors.py tests/python/test_shrink_store.py
TESTS += $(python_tests)
TEST_EXTENSIONS = .py
PY_LOG_COMPILER = $(SHELL) $(srcdir)/tests/python/run.sh
EXTRA_DIST += $(python_tests) tests/python/run.sh tests/python/harness.py tests/python/torch_util.py \
	tests/python/routed_script.py
AM_TESTS_ENVIRONMENT += TCOMMS_TEST_PYTHON='$(TCOMMS_TEST_PYTHON)'; export TCOMMS_TEST_PYTHON; \
	TCOMMS_TOP_SRCDIR='$(abs_top_srcdir)'; export TCOMMS_TOP_SRCDIR; \
	TCOMMS_TOP_BUILDDIR='$(abs_top_builddir)'; export TCOMMS_TOP_BUILDDIR;
# A sanitizer build's libtcomms needs the ASan runtime loaded first, which a Python interpreter does not do.
if SANITIZERS
AM_TESTS_ENVIRONMENT += TCOMMS_TEST_PYTHON_SKIP='a sanitizer build (Python does not load the ASan runtime first)'; \
	export TCOMMS_TEST_PYTHON_SKIP;
endif
