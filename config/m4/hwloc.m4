# MESH_CHECK_HWLOC: hwloc is required.
AC_DEFUN([MESH_CHECK_HWLOC], [
  PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.0], [mesh_have_hwloc=yes],
    [AC_MSG_ERROR([hwloc >= 2.0 is required (Debian: apt-get install libhwloc-dev)])])
])
