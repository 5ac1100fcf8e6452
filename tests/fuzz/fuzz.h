/* Fuzz targets: each file defines LLVMFuzzerTestOneInput. Built with libFuzzer by `make fuzz`
 * (tests/fuzz/run.sh); built with replay.c's main by default, so that `make check` replays the
 * corpus in tests/fuzz/corpus/<target>/ as a regression test. */
#ifndef MESH_FUZZ_H
#define MESH_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a NUL-terminated string (NULs inside cut it short), or NULL without memory. */
char *mesh_fuzz_string(const uint8_t *data, size_t size);

#endif
