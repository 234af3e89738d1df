#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Generate configure and Makefile.in from a git checkout.
set -e
cd "$(dirname "$0")"
mkdir -p config m4
autoreconf --install --force --warnings=all
