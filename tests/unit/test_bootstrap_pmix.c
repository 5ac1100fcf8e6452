/* One rank of the PMIx bootstrap test, started by mpirun from test_bootstrap_pmix.sh:
 * `test_bootstrap_pmix N` checks it is one of N ranks and runs the allgather checks.
 * `test_bootstrap_pmix --probe` exits 0 when built with PMIx, 77 otherwise. */
#include <config.h>
#include "tests/unit/test_bootstrap.h"

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    if (!HAVE_PMIX)
        return MESH_TEST_SKIP;
    if (strcmp(argv[1], "--probe") == 0)
        return 0;
    alarm(TB_WATCHDOG_S);
    int n = atoi(argv[1]);
    const char *pr = getenv("PMIX_RANK");
    CHECK_MSG(pr != NULL && getenv("PMIX_NAMESPACE") != NULL, "not started by a PMIx launcher");
    /* The environment path picks PMIx when no MESH_* or torchrun variables are set. */
    mesh_bootstrap_t *bs = NULL;
    mesh_status_t st = mesh_bootstrap_env_create(30, &bs);
    CHECK_MSG(st == MESH_OK, "%s: %s", mesh_status_string(st), mesh_error_last());
    CHECK_MSG(bs->rank == atoi(pr) && bs->size == n, "rank %d size %d, PMIX_RANK %s, want %d",
              bs->rank, bs->size, pr, n);
    int rc = tb_check_allgather(bs);
    bs->destroy(bs);
    if (rc == 0)
        printf("ok pmix rank %s of %d\n", pr, n);
    return rc;
}
