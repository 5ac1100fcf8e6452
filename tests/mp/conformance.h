/* Shared by the conformance program's files: its state, the expected values, and buffers whose
 * every byte outside the data is checked. */
#ifndef MESH_TEST_CONFORMANCE_H
#define MESH_TEST_CONFORMANCE_H

#include "mesh.h"
#include "collectives/algo.h"
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

extern int rank, size, failures, calls, used, reps, rep;
extern const char *algo;
extern mesh_comm_h comm;
extern size_t sum_mod;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "[rank %d] FAIL: ", rank);                                                 \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        if (++failures > 20)                                                                       \
            exit(1);                                                                               \
    } while (0)

int dtype_selected(mesh_dtype_t d);
double exact_range(mesh_dtype_t d);
double red_input(mesh_op_t op, int r, size_t i);
double red_expect(mesh_op_t op, size_t i, double premul);
double move_value(mesh_dtype_t d, int r, size_t i);
void fill(mesh_dtype_t d, void *buf, size_t off, size_t n, double (*f)(mesh_dtype_t, int, size_t),
          int r);
void note_call(void);
int check_status(mesh_status_t st, const char *what, mesh_dtype_t d, size_t n, int inplace);
void compare(const char *what, mesh_dtype_t d, mesh_op_t op, size_t n, int inplace, const void *buf,
             size_t off, size_t i, double want);
/* Runs fn(type, dtype, user op, op to pass, premul scalar) for every op, the pre-multiplied sum
 * (scalar 2, user op MESH_OP_COUNT) included. */
void for_each_op(mesh_coll_type_t type, mesh_dtype_t d,
                 void (*fn)(mesh_coll_type_t, mesh_dtype_t, mesh_op_t, mesh_op_t, double, void *),
                 void *arg);

/* Buffers: GUARD poison bytes, one more (the data starts at an odd address: algorithms must not
 * assume alignment), the data, GUARD poison bytes. Nothing but the data may change, and of the
 * data only what the call writes. Every rank has a poison of its own, so that bytes another rank
 * sent from outside its blocks (the gaps of a v-layout) do not pass for untouched ones. */
#define GUARD              64
#define POISON_BYTE        ((unsigned char)(0xa5 + 6 * rank))
#define BUF(p)             ((void *)((char *)(p) + GUARD + 1))
#define ALLOC_BYTES(bytes) ((bytes) + 2 * GUARD + 1)
#define POISON(p, bytes)   memset((p), POISON_BYTE, ALLOC_BYTES(bytes))
void *xalloc(size_t bytes);
void xfree(void *p);

/* Device mode (-D): buffers are device memory of the active table (cuda, or emu with
 * MESH_DEVICE_EMU=1), each with a host copy that the checks read and write: xalloc returns the
 * host copy, and a call gets DEV(pointer into it), which first copies every live buffer to the
 * device. Every call is ordered on a stream of the table and returns once enqueued; done_call
 * waits for the call (through its request with -R, else through the stream), copies the buffers
 * back and returns its status. Host mode: DEV is the pointer itself, STREAM and REQ are NULL and
 * done_call returns st. */
extern int device_mode, use_requests;
extern void *test_stream;
extern mesh_request_h cur_req;
void *dev_ptr(void *p);
#define DEV(p) dev_ptr(p)
#define STREAM test_stream
#define REQ    (cur_req = NULL, use_requests ? &cur_req : NULL)
mesh_status_t done_call(mesh_status_t st);
/* A copy of the whole allocation (guards included), to check later that nothing changed. */
unsigned char *snapshot(const void *p, size_t bytes);
void check_same(const void *p, const unsigned char *copy, size_t bytes, const char *what,
                const char *name);
/* Every byte of the allocation outside the n byte ranges [off[k], off[k] + len[k]) of the data
 * still holds poison: the guards, and the gaps between the blocks a call writes. */
void check_outside(const void *p, size_t bytes, int n, const size_t *off, const size_t *len,
                   const char *what, const char *name);
#define CHECK_GUARDS(p, bytes, what, name)                                                         \
    do {                                                                                           \
        size_t o_ = 0, l_ = (bytes);                                                               \
        check_outside((p), (bytes), 1, &o_, &l_, (what), (name));                                  \
    } while (0)

/* conformance_v.c: the v-collectives with caller-chosen layouts */
void run_v(mesh_coll_type_t type, mesh_dtype_t d, size_t n);

#endif
