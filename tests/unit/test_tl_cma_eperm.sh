#!/bin/sh
# shm where the kernel refuses cross-memory attach between the ranks (no CAP_SYS_PTRACE and
# non-dumpable processes): the first large message gets EPERM and falls back to the rings.
TEST_TL_NO_PTRACE=1 exec "${top_builddir:-.}/tests/unit/test_tl" shm
