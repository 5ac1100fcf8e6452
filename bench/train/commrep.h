/*
 * --comm-report: per step and per axis, the bytes this rank handed to the transports on the
 * axis's communicators and the wall time spent blocked in the axis's calls (exposed: not under
 * compute). Calls are timed by a stack: time goes to the region on top, so the pipeline's
 * exposed time is the executor's run less the stages' compute and the tp, cp, ep and dp calls
 * inside them. Off (the default) every call is one test of a flag.
 */
#ifndef MESH_TRAIN_COMMREP_H
#define MESH_TRAIN_COMMREP_H

#include "layout.h"

#include <mesh.h>
#include <stdint.h>

/* The regions: the axes, the optimizer's step (with ZeRO 1 and 2 its parameter all-gather),
 * compute (the base, and the pipeline's stage work). */
enum { CR_TP, CR_CP, CR_PP, CR_EP, CR_DP, CR_NORM, CR_OPT, CR_COMPUTE, CR_REGIONS };
#define CR_AXES CR_OPT /* the regions that are communicators' axes */

extern int commrep_on;

/* Enters and leaves a region (nesting; no-ops when off). commrep_pop returns its argument, so
 * that CR(axis, call) times a call and gives its status. */
void commrep_push(int region);
mesh_status_t commrep_pop(mesh_status_t s);
#define CR(region, call) (commrep_push(region), commrep_pop(call))

typedef struct {
    double ms[CR_REGIONS]; /* exclusive wall time per region */
    uint64_t bytes[CR_AXES];
    uint64_t ep_rows;  /* expert rows from other ep ranks */
    uint64_t dp_at[2]; /* dp bytes before and after the wait for the reductions */
    double step_ms;
} commrep_step_t;

/* The axes' communicators (each counted once, on the first axis holding it): tp, cp, pp, ep,
 * dp (the dense optimizer's cp-dp-ep, dp-ep and the experts' edp), norm (the optimizers' tp-pp
 * and etp-ep norm sums); and the ZeRO flat buffers summed over the ranks (collective). */
int commrep_setup(const layout_t *lo);
/* A line on the ZeRO flat buffers the dp bytes follow from: their bytes summed over the ranks
 * and their groups' sizes. */
void commrep_describe(char *buf, size_t len);
/* Expert rows a routing brings from other ep ranks, counted into the step's. */
void commrep_ep_rows(uint64_t rows);
/* Before (done 0) and after (1) the step's wait for the gradient reductions: the dp bytes sent
 * by then, whose ratio is the share of the reductions sent under the passes' compute. */
void commrep_dp_wait(int done);
/* Around a step: zeroes the times and reads the counters; then the differences. */
void commrep_step_begin(void);
void commrep_step_end(commrep_step_t *s);
/* The step's figures over the world (bytes summed, times averaged, the largest exposed time as
 * well), printed when say and written to csv (the CSV's columns) when not NULL; collective. */
int commrep_report(mesh_comm_h world, int64_t step, const commrep_step_t *s, int say, char *csv,
                   size_t csv_len);
/* After the run: this rank's peak resident memory (VmHWM) and the model's own account (the
 * optimizer's states, act_bytes of activations) over the world, the largest and the mean,
 * printed when say; collective. */
int commrep_memory(mesh_comm_h world, const optim_t *opt, size_t act_bytes, int say);
/* The CSV header's added columns. */
const char *commrep_csv_header(void);

#endif
