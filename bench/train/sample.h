/* mesh-train's --sample (sample.c) and the loss plot beside the CSV (plot.c). */
#ifndef MESH_TRAIN_SAMPLE_H
#define MESH_TRAIN_SAMPLE_H

#include "run.h"

/* --sample: the parameters gathered whole on world rank 0 (collective), which generates
 * --sample tokens after --prompt and prints them. */
int sample_text(run_t *r);
/* Rank 0, --data with --csv: FILE.png beside FILE.csv (FILE.csv.png if it does not end in
 * .csv), the train loss of steps[0, n) and the validation loss where it is not NaN against the
 * step, drawn by gnuplot (said and skipped without it). */
int plot_losses(const run_t *r, const int64_t *steps, const double *loss, const double *val, int n);

#endif
