#!/bin/sh
# Installs the pinned PyTorch 2.x from PyPI into a virtual environment of its own, once, and
# prints the path of its interpreter (the last line of stdout), for
#   ./configure --with-torch="$(python/setup-torch.sh)"
# The environment is plain (no system site packages), so Debian's python3-torch 1.13 stays
# out of it and keeps serving /usr/bin/python3. PyPI's Linux wheel is the CUDA build: it
# pulls NVIDIA's libraries (about 2.6 GB to download, 4.6 GB installed) and runs on the CPU
# without a GPU or driver.
#
# Where: $MESH_TORCH_VENV, by default ${XDG_CACHE_HOME:-$HOME/.cache}/mesh/torch-VERSION, so
# every clone and build tree of the machine shares it and a second run reuses it. A run whose
# environment already holds the pinned versions and imports torch.distributed with gloo does
# nothing; a broken or different one is made again. Needs python3-venv and network access to
# PyPI.
set -eu

torch_version=2.11.0
# numpy: torch imports it when present, and DTensor and the tests use it
requirements="torch==$torch_version numpy==2.3.5"
# Debian's interpreter (python3-venv), else the first python3 on the PATH
base=${MESH_TORCH_BASE_PYTHON:-}
if [ -z "$base" ]; then
    base=python3
    [ -x /usr/bin/python3 ] && base=/usr/bin/python3
fi
venv=${MESH_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/mesh/torch-$torch_version}
py=$venv/bin/python
stamp=$venv/mesh-requirements

usable() {
    [ -x "$py" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$requirements" ] &&
        "$py" -c 'import torch.distributed as d; assert d.is_available() and d.is_gloo_available()' \
            >/dev/null 2>&1
}

if ! usable; then
    echo "setup-torch: installing $requirements into $venv" >&2
    start=$(date +%s)
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    "$base" -m venv "$venv" >&2
    "$py" -m pip install --quiet --disable-pip-version-check $requirements >&2
    echo "$requirements" >"$stamp"
    if ! usable; then
        echo "setup-torch: $py cannot import torch.distributed with gloo" >&2
        exit 1
    fi
    echo "setup-torch: done in $(($(date +%s) - start)) s, $(du -sh "$venv" | cut -f1) in $venv" >&2
fi
echo "$py"
