#!/bin/sh
# Generates configure and Makefile.in.
set -e
cd "$(dirname "$0")"
mkdir -p config/aux
autoreconf -fi
