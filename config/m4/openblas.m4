# MESH_CHECK_OPENBLAS: OpenBLAS (sgemm through cblas) for bench/mesh-train, never for the library.
# Without it the trainer is not built and its tests skip.
AC_DEFUN([MESH_CHECK_OPENBLAS], [
  AC_ARG_WITH([openblas], [AS_HELP_STRING([--with-openblas],
    [build bench/mesh-train with OpenBLAS (default: if found; Debian: libopenblas-dev)])],
    [], [with_openblas=check])
  mesh_have_openblas=no
  AS_IF([test "x$with_openblas" != xno], [
    PKG_CHECK_MODULES([OPENBLAS], [openblas], [mesh_have_openblas=yes], [
      AC_CHECK_LIB([openblas], [openblas_set_num_threads],
        [mesh_have_openblas=yes; OPENBLAS_LIBS=-lopenblas; OPENBLAS_CFLAGS=])])
    AS_IF([test "x$mesh_have_openblas" = xyes], [
      mesh_save_CPPFLAGS=$CPPFLAGS
      CPPFLAGS="$CPPFLAGS $OPENBLAS_CFLAGS"
      AC_CHECK_HEADER([cblas.h], [], [mesh_have_openblas=no])
      CPPFLAGS=$mesh_save_CPPFLAGS])
    AS_IF([test "x$with_openblas" = xyes -a "x$mesh_have_openblas" = xno],
      [AC_MSG_ERROR([--with-openblas given but OpenBLAS was not found (apt-get install libopenblas-dev)])])
  ])
  AC_SUBST([OPENBLAS_CFLAGS])
  AC_SUBST([OPENBLAS_LIBS])
  AM_CONDITIONAL([HAVE_OPENBLAS], [test "x$mesh_have_openblas" = xyes])
])
