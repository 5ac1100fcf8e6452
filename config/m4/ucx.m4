# MESH_CHECK_UCX: --with-ucx[=DIR]; detected through pkg-config by default (UCX 1.11 or newer:
# network-only worker addresses).
AC_DEFUN([MESH_CHECK_UCX], [
  AC_ARG_WITH([ucx], [AS_HELP_STRING([--with-ucx@<:@=DIR@:>@], [build the UCX transport (default: if found)])],
    [], [with_ucx=check])
  mesh_have_ucx=no
  AS_IF([test "x$with_ucx" != xno], [
    AS_IF([test "x$with_ucx" != xyes -a "x$with_ucx" != xcheck],
      [UCX_CFLAGS="-I$with_ucx/include"; UCX_LIBS="-L$with_ucx/lib -lucp -lucs"; mesh_have_ucx=yes],
      [PKG_CHECK_MODULES([UCX], [ucx >= 1.11], [mesh_have_ucx=yes], [mesh_have_ucx=no])])
    AS_IF([test "x$with_ucx" = xyes -a "x$mesh_have_ucx" = xno], [AC_MSG_ERROR([--with-ucx given but UCX not found])])
  ])
  AS_IF([test "x$mesh_have_ucx" = xyes], [AC_DEFINE([HAVE_UCX], [1], [UCX transport])], [AC_DEFINE([HAVE_UCX], [0], [UCX transport])])
  AM_CONDITIONAL([HAVE_UCX], [test "x$mesh_have_ucx" = xyes])
])
