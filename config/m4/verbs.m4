# MESH_CHECK_VERBS: --with-verbs (libibverbs).
AC_DEFUN([MESH_CHECK_VERBS], [
  AC_ARG_WITH([verbs], [AS_HELP_STRING([--with-verbs], [build the libibverbs transport (default: if found)])],
    [], [with_verbs=check])
  mesh_have_verbs=no
  AS_IF([test "x$with_verbs" != xno], [
    AC_CHECK_HEADER([infiniband/verbs.h],
      [AC_CHECK_LIB([ibverbs], [ibv_open_device], [mesh_have_verbs=yes; VERBS_LIBS="-libverbs"])])
    AS_IF([test "x$with_verbs" = xyes -a "x$mesh_have_verbs" = xno], [AC_MSG_ERROR([--with-verbs given but libibverbs not found])])
  ])
  AC_SUBST([VERBS_LIBS])
  AS_IF([test "x$mesh_have_verbs" = xyes], [AC_DEFINE([HAVE_VERBS], [1], [verbs transport])], [AC_DEFINE([HAVE_VERBS], [0], [verbs transport])])
  AM_CONDITIONAL([HAVE_VERBS], [test "x$mesh_have_verbs" = xyes])
])
