# MESH_CHECK_CUDA: --with-cuda[=DIR], default /usr/local/cuda when present.
#
# The CUDA path needs the driver API's headers (cuda.h, cudaTypedefs.h) and nvcc, which builds
# the device kernels into a fatbin embedded in libmesh. Nothing links against CUDA: libmesh opens
# libcuda.so.1 at run time, so one build serves machines with and without a driver.
#
# NVCC_ARCHS: the compute capabilities to build machine code for (default "80 90 100"); the
# last one is also embedded as PTX, which newer devices compile when they load the kernels.
# Those nvcc does not know are left out, with a warning.
AC_DEFUN([MESH_CHECK_CUDA], [
  AC_ARG_WITH([cuda], [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the CUDA path (default: /usr/local/cuda if found)])],
    [], [with_cuda=check])
  AC_ARG_VAR([NVCC_ARCHS], [compute capabilities of the device kernels, e.g. "80 90 100"; PTX of the last])
  AC_ARG_VAR([NVCC_FLAGS], [extra flags for nvcc])
  mesh_have_cuda=no
  NVCC_GENCODE=
  AS_CASE([$with_cuda], [no], [], [yes|check], [mesh_cuda_dir=/usr/local/cuda], [mesh_cuda_dir=$with_cuda])
  AS_IF([test "x$with_cuda" != xno -a -f "$mesh_cuda_dir/include/cuda.h" -a -f "$mesh_cuda_dir/include/cudaTypedefs.h"], [
    AC_PATH_PROG([NVCC], [nvcc], [], [$mesh_cuda_dir/bin:$PATH])
    AS_IF([test -n "$NVCC"], [mesh_have_cuda=yes])
  ])
  AS_IF([test "x$with_cuda" != xno -a "x$with_cuda" != xcheck -a "x$mesh_have_cuda" = xno],
    [AC_MSG_ERROR([--with-cuda given but no cuda.h, cudaTypedefs.h and nvcc under $mesh_cuda_dir])])
  AS_IF([test "x$mesh_have_cuda" = xyes], [
    CUDA_CFLAGS="-I$mesh_cuda_dir/include"
    AC_MSG_CHECKING([for the architectures of the device kernels])
    mesh_nvcc_known=`$NVCC --list-gpu-arch 2>/dev/null`
    mesh_nvcc_last=
    for a in ${NVCC_ARCHS:-80 90 100}; do
      AS_IF([echo "$mesh_nvcc_known" | grep -qx "compute_$a"], [
        NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$a,code=sm_$a"
        mesh_nvcc_last=$a
      ], [AC_MSG_WARN([nvcc does not know compute_$a: left out])])
    done
    AS_IF([test -z "$mesh_nvcc_last"], [AC_MSG_ERROR([nvcc knows none of NVCC_ARCHS (${NVCC_ARCHS:-80 90 100})])])
    NVCC_GENCODE="$NVCC_GENCODE -gencode arch=compute_$mesh_nvcc_last,code=compute_$mesh_nvcc_last"
    AC_MSG_RESULT([${NVCC_ARCHS:-80 90 100}, PTX $mesh_nvcc_last])
    # fatbins compressed where nvcc can (CUDA 12.8 and later): smaller libmesh
    AS_IF([$NVCC --help 2>/dev/null | grep -q -- '--compress-mode'], [NVCC_GENCODE="$NVCC_GENCODE -compress-mode=size"])
    mesh_cuda_summary="yes ($NVCC; sm ${NVCC_ARCHS:-80 90 100}, PTX $mesh_nvcc_last)"
    # the driver is opened at run time
    AC_SEARCH_LIBS([dlopen], [dl])
  ], [mesh_cuda_summary=no])
  AC_SUBST([CUDA_CFLAGS])
  AC_SUBST([NVCC_GENCODE])
  AS_IF([test "x$mesh_have_cuda" = xyes], [AC_DEFINE([HAVE_CUDA], [1], [CUDA path])], [AC_DEFINE([HAVE_CUDA], [0], [CUDA path])])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$mesh_have_cuda" = xyes])
])
