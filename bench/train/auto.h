/*
 * mesh-train --mesh auto: the layout from the planner (<mesh/plan.h>) for the ranks and nodes
 * of the run, restricted to what mesh-train runs.
 */
#ifndef MESH_TRAIN_AUTO_H
#define MESH_TRAIN_AUTO_H

#include "opts.h"

#include <mesh.h>
#include <stddef.h>

/* Collective over world. Fills the sizes, ZeRO stage, schedule, chunks and micro-batches of o
 * the user left open, the same on every rank (rank 0's choice, checked against each rank's
 * own). 0: done, why holds the line to print (chosen layout, predicted step time, reasons);
 * -1: nothing the trainer can run fits, or the ranks disagree: err says why, on every rank. */
int train_auto(train_opts_t *o, mesh_comm_h world, char *why, size_t whylen, char *err,
               size_t errlen);

#endif
