# User documentation, shipped in the tarball.
EXTRA_DIST += docs/env.md docs/hints.md docs/backends.md docs/launching.md docs/api.md docs/perf.md docs/ucx.md
