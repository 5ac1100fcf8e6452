# MESH_CHECK_VERBS: --with-verbs (libibverbs). The transport reads GID types with
# ibv_query_gid_ex (rdma-core 36 and later); an older library builds without it.
AC_DEFUN([MESH_CHECK_VERBS], [
  AC_ARG_WITH([verbs], [AS_HELP_STRING([--with-verbs], [build the libibverbs transport (default: if found)])],
    [], [with_verbs=check])
  mesh_have_verbs=no
  AS_IF([test "x$with_verbs" != xno], [
    AC_CHECK_HEADER([infiniband/verbs.h],
      [AC_CHECK_LIB([ibverbs], [ibv_open_device], [mesh_have_verbs=yes; VERBS_LIBS="-libverbs"])])
    AS_IF([test "x$mesh_have_verbs" = xyes],
      [AC_CHECK_DECL([ibv_query_gid_ex], [], [mesh_have_verbs=no; VERBS_LIBS=""],
        [[#include <infiniband/verbs.h>]])])
    AS_IF([test "x$with_verbs" = xyes -a "x$mesh_have_verbs" = xno], [AC_MSG_ERROR([--with-verbs given but libibverbs (rdma-core 36 or later) not found])])
  ])
  AC_SUBST([VERBS_LIBS])
  AS_IF([test "x$mesh_have_verbs" = xyes], [AC_DEFINE([HAVE_VERBS], [1], [verbs transport])], [AC_DEFINE([HAVE_VERBS], [0], [verbs transport])])
  AM_CONDITIONAL([HAVE_VERBS], [test "x$mesh_have_verbs" = xyes])
])
