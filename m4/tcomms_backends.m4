# SPDX-License-Identifier: BSD-3-Clause
# Detection of optional backend dependencies. Each macro honours --with-X[=DIR|yes|no]:
#   not given -> auto-detect, and a miss only removes the module;
#   yes/DIR   -> required: a miss is a configure error.
# Each sets have_X, X_summary (for the configure summary) and AM_CONDITIONAL BUILD_X.

# _TCOMMS_WITH(name, help): declare --with-NAME and normalise $with_NAME to auto|yes|no|DIR.
AC_DEFUN([_TCOMMS_WITH], [
  AC_ARG_WITH([$1], [AS_HELP_STRING([--with-$1@<:@=DIR@:>@], [$2 (default: auto-detect)])],
    [], [with_$1=auto])
])

# _TCOMMS_MISSING(name, why): fail if asked for explicitly, else record why it is skipped.
AC_DEFUN([_TCOMMS_MISSING], [
  AS_IF([test "x$with_$1" != xauto],
    [AC_MSG_ERROR([--with-$1 was given but $2])])
  have_$1=no
  $1_summary="no ($2)"
])

AC_DEFUN([TCOMMS_CHECK_GLOO], [
  _TCOMMS_WITH([gloo], [build the Gloo backend; DIR is Gloo's install prefix])
  have_gloo=no
  GLOO_CPPFLAGS=""
  GLOO_LDFLAGS=""
  AS_IF([test "x$with_gloo" = xno], [gloo_summary="no (--without-gloo)"], [
    AS_CASE([$with_gloo], [auto|yes], [], [
      GLOO_CPPFLAGS="-I$with_gloo/include"
      GLOO_LDFLAGS="-L$with_gloo/lib -Wl,-rpath,$with_gloo/lib"])
    # Debian's libgloo-dev ships no .pc file and installs into /usr/lib: probe with a link test.
    AC_LANG_PUSH([C++])
    save_CPPFLAGS="$CPPFLAGS"
    save_LDFLAGS="$LDFLAGS"
    save_LIBS="$LIBS"
    save_CXXFLAGS="$CXXFLAGS"
    CPPFLAGS="$CPPFLAGS $GLOO_CPPFLAGS"
    LDFLAGS="$LDFLAGS $GLOO_LDFLAGS"
    CXXFLAGS="$CXXFLAGS -std=c++17"
    LIBS="-lgloo $LIBS"
    # A DIR must hold Gloo itself: the compiler would otherwise fall back to the system copy.
    AS_CASE([$with_gloo], [auto|yes], [gloo_in_dir=yes],
      [AS_IF([test -f "$with_gloo/include/gloo/allreduce.h"], [gloo_in_dir=yes], [gloo_in_dir=no])])
    AS_IF([test "x$gloo_in_dir" = xyes], [AC_CHECK_HEADER([gloo/allreduce.h], [
      AC_MSG_CHECKING([for gloo::allreduce in -lgloo])
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <gloo/allreduce.h>]],
          [[gloo::AllreduceOptions *o = nullptr; if (o) gloo::allreduce(*o);]])],
        [have_gloo=yes], [])
      AC_MSG_RESULT([$have_gloo])])])
    CPPFLAGS="$save_CPPFLAGS"
    LDFLAGS="$save_LDFLAGS"
    LIBS="$save_LIBS"
    CXXFLAGS="$save_CXXFLAGS"
    AC_LANG_POP([C++])
    AS_IF([test "x$have_gloo" = xyes], [gloo_summary="yes"],
      [_TCOMMS_MISSING([gloo], [gloo/allreduce.h or libgloo was not found (Debian: libgloo-dev)])])
  ])
  AC_SUBST([GLOO_CPPFLAGS])
  AC_SUBST([GLOO_LDFLAGS])
  AM_CONDITIONAL([BUILD_GLOO], [test "x$have_gloo" = xyes])
])

AC_DEFUN([TCOMMS_CHECK_UCX], [
  _TCOMMS_WITH([ucx], [build the UCX backend; DIR is UCX's install prefix])
  have_ucx=no
  AS_IF([test "x$with_ucx" = xno], [ucx_summary="no (--without-ucx)"], [
    # With a DIR, look there only: a system copy must not stand in for the one asked for.
    save_PKG_CONFIG_LIBDIR="${PKG_CONFIG_LIBDIR-unset}"
    AS_CASE([$with_ucx], [auto|yes], [], [
      PKG_CONFIG_LIBDIR="$with_ucx/lib/pkgconfig:$with_ucx/lib64/pkgconfig"
      export PKG_CONFIG_LIBDIR])
    PKG_CHECK_MODULES([UCX], [ucx >= 1.10], [have_ucx=yes], [have_ucx=no])
    AS_IF([test "x$save_PKG_CONFIG_LIBDIR" = xunset], [unset PKG_CONFIG_LIBDIR],
          [PKG_CONFIG_LIBDIR="$save_PKG_CONFIG_LIBDIR"])
    AS_IF([test "x$have_ucx" = xyes],
      [ucx_summary="yes ($($PKG_CONFIG --modversion ucx 2>/dev/null))"],
      [_TCOMMS_MISSING([ucx], [ucx >= 1.10 was not found by pkg-config (Debian: libucx-dev)])])
  ])
  AM_CONDITIONAL([BUILD_UCX], [test "x$have_ucx" = xyes])
])

AC_DEFUN([TCOMMS_CHECK_CUDA], [
  _TCOMMS_WITH([cuda], [use the CUDA toolkit at DIR (e.g. /usr/local/cuda)])
  have_cuda=no
  CUDA_CPPFLAGS=""
  CUDA_LDFLAGS=""
  AS_IF([test "x$with_cuda" = xno], [cuda_summary="no (--without-cuda)"], [
    cuda_dir="$with_cuda"
    AS_CASE([$with_cuda], [auto|yes], [cuda_dir=/usr/local/cuda])
    save_CPPFLAGS="$CPPFLAGS"
    save_LDFLAGS="$LDFLAGS"
    CPPFLAGS="$CPPFLAGS -I$cuda_dir/include"
    LDFLAGS="$LDFLAGS -L$cuda_dir/lib64"
    AC_CHECK_HEADER([cuda_runtime_api.h],
      [AC_CHECK_LIB([cudart], [cudaGetDeviceCount], [have_cuda=yes])])
    CPPFLAGS="$save_CPPFLAGS"
    LDFLAGS="$save_LDFLAGS"
    AS_IF([test "x$have_cuda" = xyes],
      [CUDA_CPPFLAGS="-I$cuda_dir/include"
       CUDA_LDFLAGS="-L$cuda_dir/lib64"
       cuda_summary="yes ($cuda_dir)"],
      [_TCOMMS_MISSING([cuda], [cuda_runtime_api.h or libcudart was not found in $cuda_dir])])
  ])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  # The CUDA shim (lib/cuda) takes its prototypes from the toolkit's headers when found, else declares its own.
  AM_CONDITIONAL([HAVE_CUDA], [test "x$have_cuda" = xyes])
  # nvcc builds the FSDP runtime's device kernels (as PTX the driver loads) and the CUDA example and benchmark;
  # cuBLAS is their compute. Both optional: without them the CUDA parts are left out, the rest builds.
  have_nvcc=no
  have_cublas=no
  AC_ARG_VAR([NVCC], [the CUDA compiler (default: nvcc in the CUDA toolkit's bin)])
  AS_IF([test "x$have_cuda" = xyes], [
    AC_PATH_PROG([NVCC], [nvcc], [], [$cuda_dir/bin$PATH_SEPARATOR$PATH])
    AS_IF([test -n "$NVCC"], [have_nvcc=yes])
    save_LDFLAGS="$LDFLAGS"
    LDFLAGS="$LDFLAGS -L$cuda_dir/lib64"
    AC_CHECK_LIB([cublas], [cublasCreate_v2], [have_cublas=yes])
    LDFLAGS="$save_LDFLAGS"
    cuda_summary="$cuda_summary, nvcc: $have_nvcc, cublas: $have_cublas"
  ])
  AM_CONDITIONAL([HAVE_NVCC], [test "x$have_nvcc" = xyes])
  AM_CONDITIONAL([HAVE_CUBLAS], [test "x$have_nvcc" = xyes && test "x$have_cublas" = xyes])
])

AC_DEFUN([TCOMMS_CHECK_NCCL], [
  _TCOMMS_WITH([nccl], [build the NCCL backend; DIR is NCCL's install prefix (default: the CUDA toolkit)])
  have_nccl=no
  NCCL_CPPFLAGS=""
  NCCL_LIBS=""
  AS_IF([test "x$with_nccl" = xno], [nccl_summary="no (--without-nccl)"],
        [test "x$have_cuda" != xyes], [_TCOMMS_MISSING([nccl], [CUDA was not found (see --with-cuda)])], [
    nccl_dir="$with_nccl"
    AS_CASE([$with_nccl], [auto|yes], [nccl_dir="$cuda_dir"])
    nccl_libdir="$nccl_dir/lib64"
    AS_IF([test -d "$nccl_libdir"], [], [nccl_libdir="$nccl_dir/lib"])
    save_CPPFLAGS="$CPPFLAGS"
    save_LDFLAGS="$LDFLAGS"
    CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS -I$nccl_dir/include"
    LDFLAGS="$LDFLAGS $CUDA_LDFLAGS -L$nccl_libdir"
    AS_CASE([$with_nccl], [auto|yes], [nccl_in_dir=yes],
      [AS_IF([test -f "$nccl_dir/include/nccl.h"], [nccl_in_dir=yes], [nccl_in_dir=no])])
    # ncclCommInitRankConfig (NCCL 2.14) is the oldest entry point the module needs; newer ones are guarded by
    # NCCL_VERSION_CODE in the sources.
    AS_IF([test "x$nccl_in_dir" = xyes],
      [AC_CHECK_HEADER([nccl.h], [AC_CHECK_LIB([nccl], [ncclCommInitRankConfig], [have_nccl=yes], [], [-lcudart])])])
    AS_IF([test "x$have_nccl" = xyes], [
      AC_MSG_CHECKING([for the NCCL version in nccl.h])
      AC_COMPUTE_INT([nccl_major], [NCCL_MAJOR], [[#include <nccl.h>]], [nccl_major=0])
      AC_COMPUTE_INT([nccl_minor], [NCCL_MINOR], [[#include <nccl.h>]], [nccl_minor=0])
      AC_COMPUTE_INT([nccl_patch], [NCCL_PATCH], [[#include <nccl.h>]], [nccl_patch=0])
      AC_MSG_RESULT([$nccl_major.$nccl_minor.$nccl_patch])])
    CPPFLAGS="$save_CPPFLAGS"
    LDFLAGS="$save_LDFLAGS"
    # The module records libnccl.so.2 and libcudart by soname; the run path (DT_RUNPATH) lets it load where they
    # were found, and a machine with them elsewhere finds them through the usual search (ld.so.conf,
    # LD_LIBRARY_PATH).
    AS_IF([test "x$have_nccl" = xyes],
      [NCCL_CPPFLAGS="-I$nccl_dir/include $CUDA_CPPFLAGS"
       nccl_rpath="-Wl,-rpath,$nccl_libdir"
       AS_IF([test "x$nccl_libdir" != "x$cuda_dir/lib64"], [nccl_rpath="$nccl_rpath -Wl,-rpath,$cuda_dir/lib64"])
       NCCL_LIBS="-L$nccl_libdir $CUDA_LDFLAGS $nccl_rpath -lnccl -lcudart"
       nccl_summary="yes ($nccl_dir, NCCL $nccl_major.$nccl_minor.$nccl_patch)"],
      [_TCOMMS_MISSING([nccl], [nccl.h or libnccl (with ncclCommInitRankConfig, NCCL >= 2.14) was not found in $nccl_dir])])
  ])
  AC_SUBST([NCCL_CPPFLAGS])
  AC_SUBST([NCCL_LIBS])
  AM_CONDITIONAL([BUILD_NCCL], [test "x$have_nccl" = xyes])
])
