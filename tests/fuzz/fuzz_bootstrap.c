/*
 * Fuzz target: what the bootstrap reads from outside the process. The first byte picks the
 * parser: 0 a hello on rank 0's listener (byte 1 gives the communicator size), 1 a message
 * header between the star's ranks, 2 the bytes of a unique id, 3 an address string as in
 * MESH_ADDR. Rank 0 accepts connections from anyone, so every byte of a hello is hostile.
 */
#include "config.h"
#include "tests/fuzz/fuzz.h"
#include "libmesh/bootstrap.h"

#include <stdlib.h>
#include <string.h>

/* the secret the corpus's hellos carry */
static const uint8_t fuzz_secret[32] = "mesh fuzz corpus secret 0123456";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char why[128], as[80];
    mesh_sockaddr_t addr;
    switch (data[0] % 4) {
    case 0: {
        if (size < 2)
            return 0;
        int csize = 1 + data[1] % 64;
        int rank = mesh_bootstrap_star_hello_parse(data + 2, size - 2, fuzz_secret, csize, why,
                                                   sizeof(why));
        if (rank == 0 || rank >= csize || (rank < 0 && strlen(why) == 0))
            abort(); /* the parser's contract: a joining rank in 1..size-1, or a reason */
        break;
    }
    case 1: {
        mesh_bootstrap_star_msg_t m;
        if (mesh_bootstrap_star_msg_parse(data + 1, size - 1, &m) == 0 && m.type == 3 &&
            (m.len > 512 || m.status >= 0))
            abort(); /* an abort's reason is bounded and its status an error */
        break;
    }
    case 2: {
        mesh_unique_id_t id;
        mesh_uid_layout_t u;
        memset(&id, 0, sizeof(id));
        memcpy(id.internal, data + 1, size - 1 < sizeof(id) ? size - 1 : sizeof(id));
        if (mesh_bootstrap_uid_parse(&id, &u, &addr) == MESH_OK)
            mesh_sock_addr_str(&addr, as, sizeof(as));
        break;
    }
    default: {
        char *text = mesh_fuzz_string(data + 1, size - 1);
        /* numeric hosts only: a name would send the fuzzer to the resolver */
        if (text != NULL && text[strspn(text, "0123456789.:[]")] == '\0' &&
            mesh_sock_parse_addr(text, &addr) == MESH_OK)
            mesh_sock_addr_str(&addr, as, sizeof(as));
        free(text);
        break;
    }
    }
    return 0;
}
