# MESH_CHECK_OFI: --with-ofi[=DIR] (libfabric).
AC_DEFUN([MESH_CHECK_OFI], [
  AC_ARG_WITH([ofi], [AS_HELP_STRING([--with-ofi@<:@=DIR@:>@], [build the libfabric transport (default: if found)])],
    [], [with_ofi=check])
  mesh_have_ofi=no
  AS_IF([test "x$with_ofi" != xno], [
    AS_IF([test "x$with_ofi" != xyes -a "x$with_ofi" != xcheck],
      [OFI_CFLAGS="-I$with_ofi/include"; OFI_LIBS="-L$with_ofi/lib -lfabric"; mesh_have_ofi=yes],
      [PKG_CHECK_MODULES([OFI], [libfabric], [mesh_have_ofi=yes], [mesh_have_ofi=no])])
    AS_IF([test "x$with_ofi" = xyes -a "x$mesh_have_ofi" = xno], [AC_MSG_ERROR([--with-ofi given but libfabric not found])])
  ])
  AS_IF([test "x$mesh_have_ofi" = xyes], [AC_DEFINE([HAVE_OFI], [1], [libfabric transport])], [AC_DEFINE([HAVE_OFI], [0], [libfabric transport])])
  AM_CONDITIONAL([HAVE_OFI], [test "x$mesh_have_ofi" = xyes])
])
