# SPDX-License-Identifier: BSD-3-Clause
# Sourced by the device scripts (run.sh, fsdp.sh): where the carried build's libraries, modules and launcher are,
# exported for the programs they start. Sets build, prefix, launcher, LD_LIBRARY_PATH, TCOMMS_BACKEND_PATH.
#   TCOMMS_GPU_BUILD   build directory (default: _gpu/build)
#   TCOMMS_GPU_PREFIX  install prefix with bin/, lib/ and lib/tcomms/ (default: the build tree's .libs)
build=${TCOMMS_GPU_BUILD:-$PWD/_gpu/build}
prefix=${TCOMMS_GPU_PREFIX:-}
if [ -n "$prefix" ]; then
    libdirs="$prefix/lib"
    moddirs="$prefix/lib/tcomms"
    launcher="$prefix/bin/tcomms-run"
else
    libdirs="$build/lib/.libs"
    moddirs="$build/backends/nccl/.libs:$build/backends/gloo/.libs:$build/backends/ucx/.libs"
    launcher="$build/tools/run/tcomms-run"
fi
cudalibs=""
for flag in ${TCOMMS_GPU_CUDA_LDFLAGS:-}; do
    case $flag in -L*) cudalibs="$cudalibs:${flag#-L}" ;; esac
done
cudalibs="${cudalibs#:}${cudalibs:+:}${CUDA_HOME:-/usr/local/cuda}/lib64"
export LD_LIBRARY_PATH="$libdirs:$cudalibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export TCOMMS_BACKEND_PATH="$moddirs"
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
