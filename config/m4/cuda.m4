# MESH_CHECK_CUDA: --with-cuda[=DIR], default /usr/local/cuda when present.
AC_DEFUN([MESH_CHECK_CUDA], [
  AC_ARG_WITH([cuda], [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@], [build the CUDA path (default: /usr/local/cuda if found)])],
    [], [with_cuda=check])
  mesh_have_cuda=no
  AS_CASE([$with_cuda], [no], [], [yes|check], [mesh_cuda_dir=/usr/local/cuda], [mesh_cuda_dir=$with_cuda])
  AS_IF([test "x$with_cuda" != xno -a -f "$mesh_cuda_dir/include/cuda_runtime_api.h"], [
    mesh_have_cuda=yes
    CUDA_CFLAGS="-I$mesh_cuda_dir/include"
    CUDA_LDFLAGS="-L$mesh_cuda_dir/lib64"
    AC_PATH_PROG([NVCC], [nvcc], [], [$mesh_cuda_dir/bin:$PATH])
  ])
  AS_IF([test "x$with_cuda" = xyes -a "x$mesh_have_cuda" = xno], [AC_MSG_ERROR([--with-cuda given but CUDA not found])])
  AC_SUBST([CUDA_CFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  AS_IF([test "x$mesh_have_cuda" = xyes], [AC_DEFINE([HAVE_CUDA], [1], [CUDA path])], [AC_DEFINE([HAVE_CUDA], [0], [CUDA path])])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$mesh_have_cuda" = xyes])
])
