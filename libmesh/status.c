#include "mesh.h"

const char *mesh_status_string(mesh_status_t status)
{
    switch (status) {
#define MESH_STATUS_CASE_(name, value, desc)                                                       \
    case name:                                                                                     \
        return desc;
        MESH_STATUS_TABLE(MESH_STATUS_CASE_)
#undef MESH_STATUS_CASE_
    }
    return "unknown status";
}
