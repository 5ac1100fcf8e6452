# MESH_CHECK_MPI: mpicc for the side-by-side bench (bench/mpi), never for the library.
AC_DEFUN([MESH_CHECK_MPI], [
  AC_ARG_WITH([mpi], [AS_HELP_STRING([--with-mpi], [build the MPI comparison bench (default: if mpicc found)])],
    [], [with_mpi=check])
  mesh_have_mpi=no
  AS_IF([test "x$with_mpi" != xno], [
    AC_PATH_PROG([MPICC], [mpicc])
    AC_PATH_PROG([MPIRUN], [mpirun])
    AS_IF([test -n "$MPICC" -a -n "$MPIRUN"], [mesh_have_mpi=yes])
    AS_IF([test "x$with_mpi" = xyes -a "x$mesh_have_mpi" = xno], [AC_MSG_ERROR([--with-mpi given but mpicc/mpirun not found])])
  ])
  AM_CONDITIONAL([HAVE_MPI], [test "x$mesh_have_mpi" = xyes])
])
