# MESH_CHECK_PMIX: --with-pmix[=DIR] for launching under mpirun/srun.
AC_DEFUN([MESH_CHECK_PMIX], [
  AC_ARG_WITH([pmix], [AS_HELP_STRING([--with-pmix@<:@=DIR@:>@], [bootstrap through PMIx (default: if found)])],
    [], [with_pmix=check])
  mesh_have_pmix=no
  AS_IF([test "x$with_pmix" != xno], [
    PKG_CHECK_MODULES([PMIX], [pmix], [mesh_have_pmix=yes], [
      mesh_save_CPPFLAGS=$CPPFLAGS
      for d in $with_pmix /usr/lib/x86_64-linux-gnu/pmix2 /usr/lib/x86_64-linux-gnu/pmix; do
        AS_IF([test -f "$d/include/pmix.h"], [PMIX_CFLAGS="-I$d/include"; PMIX_LIBS="-L$d/lib -Wl,-rpath,$d/lib -lpmix"; mesh_have_pmix=yes; break])
      done
      AS_IF([test "x$mesh_have_pmix" = xno], [AC_CHECK_HEADER([pmix.h], [AC_CHECK_LIB([pmix], [PMIx_Init], [PMIX_LIBS=-lpmix; mesh_have_pmix=yes])])])
      CPPFLAGS=$mesh_save_CPPFLAGS])
    AS_IF([test "x$with_pmix" = xyes -a "x$mesh_have_pmix" = xno], [AC_MSG_ERROR([--with-pmix given but PMIx not found])])
  ])
  AC_SUBST([PMIX_CFLAGS])
  AC_SUBST([PMIX_LIBS])
  AS_IF([test "x$mesh_have_pmix" = xyes], [AC_DEFINE([HAVE_PMIX], [1], [PMIx bootstrap])], [AC_DEFINE([HAVE_PMIX], [0], [PMIx bootstrap])])
  AM_CONDITIONAL([HAVE_PMIX], [test "x$mesh_have_pmix" = xyes])
])
