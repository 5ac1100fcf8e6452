"""Prints, as shell assignments, what configure needs to build mesh_torch against the torch of
this interpreter: torch's version and folders (as torch.utils.cpp_extension lays them out), its
C++ ABI and pybind11 identity, Python's headers and extension suffix, and the site folder under
the prefix given as the only argument. Exits non-zero when torch or torch.distributed is absent."""
import os
import site
import sys
import sysconfig

try:
    import torch
    import torch.distributed as dist
except Exception as e:  # any failure means: no usable torch here
    sys.stderr.write("cannot import torch: %s\n" % e)
    sys.exit(1)
if not dist.is_available():
    sys.stderr.write("torch.distributed is not available in this torch\n")
    sys.exit(1)

prefix = sys.argv[1] if len(sys.argv) > 1 else sys.prefix
root = os.path.dirname(torch.__file__)
inc = os.path.join(root, "include")
site_dir = None
for d in site.getsitepackages():
    if d.startswith(prefix.rstrip("/") + "/"):
        site_dir = d
        break
if site_dir is None:
    site_dir = sysconfig.get_path("platlib", "posix_prefix", vars={"base": prefix, "platbase": prefix})


def q(v):
    return "'" + str(v).replace("'", "'\\''") + "'"


out = {
    "torch_version": torch.__version__,
    "torch_include": inc,
    "torch_api_include": os.path.join(inc, "torch", "csrc", "api", "include"),
    "torch_libdir": os.path.join(root, "lib"),
    "torch_cxx11_abi": int(torch._C._GLIBCXX_USE_CXX11_ABI),
    "torch_pybind11": " ".join(
        "-DPYBIND11_%s='\"%s\"'" % (k, getattr(torch._C, "_PYBIND11_" + k))
        for k in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI")
        if getattr(torch._C, "_PYBIND11_" + k, None) is not None
    ),
    "torch_python_include": sysconfig.get_paths()["include"],
    "torch_ext_suffix": sysconfig.get_config_var("EXT_SUFFIX") or ".so",
    "torch_site": site_dir,
}
for k, v in out.items():
    print("mesh_%s=%s" % (k, q(v)))
