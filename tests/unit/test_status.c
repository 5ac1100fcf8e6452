/* Every status has its own non-empty description; unknown values get a fixed one. */
#include "tests/harness/harness.h"
#include "mesh.h"

#include <string.h>

int main(void)
{
    static const mesh_status_t all[] = {
#define X(name, value, desc) name,
        MESH_STATUS_TABLE(X)
#undef X
    };
    static const char *const descs[] = {
#define X(name, value, desc) desc,
        MESH_STATUS_TABLE(X)
#undef X
    };
    size_t n = sizeof(all) / sizeof(all[0]);
    CHECK(n >= 13);
    for (size_t i = 0; i < n; i++) {
        const char *s = mesh_status_string(all[i]);
        CHECK(s != NULL);
        CHECK_MSG(s[0] != '\0', "status %d", (int)all[i]);
        CHECK_MSG(strcmp(s, descs[i]) == 0, "status %d: '%s'", (int)all[i], s);
        CHECK(strcmp(s, "unknown status") != 0);
        for (size_t j = 0; j < i; j++) {
            CHECK_MSG(all[i] != all[j], "value %d used twice", (int)all[i]);
            CHECK_MSG(strcmp(s, mesh_status_string(all[j])) != 0, "'%s' used twice", s);
        }
    }
    CHECK(mesh_status_string(MESH_OK) != mesh_status_string(MESH_ERR_INVALID_ARG));
    CHECK(strcmp(mesh_status_string((mesh_status_t)-1000), "unknown status") == 0);
    CHECK(strcmp(mesh_status_string((mesh_status_t)77), "unknown status") == 0);
    return 0;
}
