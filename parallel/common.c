/* Helpers shared by the parallel layers. */
#include "common.h"

mesh_status_t mesh_par_fail(mesh_comm_h comm, mesh_status_t status, const char *what)
{
    return mesh_error_report(status, "%s: %s", what, mesh_comm_last_error(comm));
}
