# MESH_CHECK_TORCH: --with-torch[=PYTHON]: the PyTorch backend (python/), built against the torch
# that PYTHON imports. By default the first of $PYTHON, python3 on the PATH and /usr/bin/python3
# whose torch has torch.distributed, whose headers are installed (libtorch-dev) and beside which
# Python's and pybind11's headers are found; several interpreters may be on a machine and only
# one of them may have torch (python/setup-torch.sh installs the pinned PyTorch 2.x into a
# virtual environment and prints its interpreter). --with-torch-pythondir=DIR: where make
# install puts the package (default: the interpreter's site folder under the prefix).
AC_DEFUN([MESH_CHECK_TORCH], [
  AC_ARG_WITH([torch], [AS_HELP_STRING([--with-torch@<:@=PYTHON@:>@],
    [build the PyTorch backend mesh_torch for the torch of PYTHON (default: if found)])],
    [], [with_torch=check])
  AC_ARG_WITH([torch-pythondir], [AS_HELP_STRING([--with-torch-pythondir=DIR],
    [install mesh_torch into DIR (default: the site folder of the interpreter under the prefix)])],
    [], [with_torch_pythondir=])
  mesh_have_torch=no
  mesh_torch_why=
  TORCH_PYTHON=
  AS_CASE([$with_torch],
    [no], [mesh_torch_why="disabled"],
    [yes|check], [mesh_torch_cands="$PYTHON python3 /usr/bin/python3"],
    [mesh_torch_cands="$with_torch"])
  mesh_torch_prefix=$prefix
  test "x$mesh_torch_prefix" = xNONE && mesh_torch_prefix=$ac_default_prefix
  AS_IF([test "x$with_torch" != xno], [
    AC_MSG_CHECKING([for a Python interpreter with torch.distributed and its headers])
    for mesh_py in $mesh_torch_cands; do
      mesh_py_path=`command -v "$mesh_py" 2>/dev/null` || continue
      mesh_torch_vars=`"$mesh_py_path" "$srcdir/python/torch_flags.py" "$mesh_torch_prefix" 2>/dev/null` || {
        mesh_torch_why="$mesh_torch_why $mesh_py_path: no torch.distributed;"; continue; }
      eval "$mesh_torch_vars"
      AS_IF([test ! -f "$mesh_torch_include/torch/csrc/distributed/c10d/ProcessGroup.hpp"],
        [mesh_torch_why="$mesh_torch_why $mesh_py_path: no c10d headers (libtorch-dev);"; continue])
      AS_IF([test ! -f "$mesh_torch_python_include/Python.h"],
        [mesh_torch_why="$mesh_torch_why $mesh_py_path: no Python.h (python3-dev);"; continue])
      AS_IF([test ! -f "$mesh_torch_include/pybind11/pybind11.h" -a ! -f /usr/include/pybind11/pybind11.h],
        [mesh_torch_why="$mesh_torch_why $mesh_py_path: no pybind11 headers (pybind11-dev);"; continue])
      TORCH_PYTHON=$mesh_py_path
      mesh_have_torch=yes
      break
    done
    AS_IF([test "x$mesh_have_torch" = xyes],
      [AC_MSG_RESULT([$TORCH_PYTHON, torch $mesh_torch_version])],
      [AC_MSG_RESULT([no])])
    AS_IF([test "x$mesh_have_torch" = xno -a "x$with_torch" != xcheck],
      [AC_MSG_ERROR([--with-torch given but no usable torch:$mesh_torch_why])])
  ])
  AS_IF([test "x$mesh_have_torch" = xyes], [
    AS_IF([test -z "$CXX" -o "x$CXX" = xno], [AC_MSG_ERROR([the PyTorch backend needs a C++ compiler])])
    # what torch.utils.cpp_extension passes: torch's headers, its C++ ABI, pybind11's identity
    # (so that torch's Python types are shared) and the extension's name
    TORCH_CPPFLAGS="-I$mesh_torch_include -I$mesh_torch_api_include -I$mesh_torch_python_include"
    TORCH_CPPFLAGS="$TORCH_CPPFLAGS -DTORCH_API_INCLUDE_EXTENSION_H $mesh_torch_pybind11"
    TORCH_CPPFLAGS="$TORCH_CPPFLAGS -DTORCH_EXTENSION_NAME=_C -D_GLIBCXX_USE_CXX11_ABI=$mesh_torch_cxx11_abi"
    # hidden by default, as pybind11 declares its own namespace (the module's entry is exported)
    TORCH_CXXFLAGS="-std=c++17 -fvisibility=hidden -Wall -Wno-deprecated-declarations"
    TORCH_CXXFLAGS="$TORCH_CXXFLAGS -Wno-unused-parameter"
    TORCH_LIBS="-L$mesh_torch_libdir -lc10 -ltorch -ltorch_cpu -ltorch_python"
    TORCH_EXT_SUFFIX=$mesh_torch_ext_suffix
    TORCH_VERSION=$mesh_torch_version
    TORCH_PYTHONDIR=${with_torch_pythondir:-$mesh_torch_site}
    mesh_torch_summary="yes (torch $TORCH_VERSION, $TORCH_PYTHON; installs into $TORCH_PYTHONDIR)"
  ], [
    mesh_torch_summary="no${mesh_torch_why:+ (}$mesh_torch_why${mesh_torch_why:+)}"
  ])
  AC_SUBST([TORCH_PYTHON])
  AC_SUBST([TORCH_CPPFLAGS])
  AC_SUBST([TORCH_CXXFLAGS])
  AC_SUBST([TORCH_LIBS])
  AC_SUBST([TORCH_EXT_SUFFIX])
  AC_SUBST([TORCH_VERSION])
  AC_SUBST([TORCH_PYTHONDIR])
  AM_CONDITIONAL([HAVE_TORCH], [test "x$mesh_have_torch" = xyes])
])
