# SPDX-License-Identifier: BSD-3-Clause
# What every backend module's build shares (backends/*/local.mk use these): a shared object the core dlopens
# (-module, no version: the ABI header inside says which it is), exporting the tcomms_backend_module table alone
# so that two modules' internals, or a module's and the program's, never bind to each other.
MODULE_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
MODULE_CXXFLAGS = $(AM_CXXFLAGS) -fvisibility=hidden
MODULE_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared -export-symbols-regex '^tcomms_backend_module$$'
