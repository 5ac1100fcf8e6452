/*
 * mesh-info: what this build of mesh contains and how it is configured. It links the
 * convenience library, like the unit tests, to read the registries behind the public API: the
 * declared config tables, the transports and the algorithms.
 */
#include "config.h"
#include "collectives/algo.h"
#include "collectives/comm.h"
#include "collectives/route.h"
#include "libmesh/bootstrap.h"
#include "libmesh/config.h"
#include "libmesh/context.h"
#include "libmesh/log.h"
#include "libmesh/mem.h"
#include "libmesh/topo.h"
#include "transports/tl.h"
#include "tools/mesh-info-algo.h"
#include "tools/mesh-info-grid.h"
#include "tools/mesh-info-pp.h"

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char info_usage[] =
    "usage: mesh-info [-c [--markdown]] [-A [--comm-size N [--nodes K]]] [-t] [-a]\n"
    "                 [-T [--dump FILE]] [-h]\n"
    "\n"
    "Without options: version and what this build contains.\n"
    "  -c, --config       every knob: MESH_ name, effective value, default, source, doc\n"
    "      --markdown     with -c: the reference of docs/environment.md, one table per\n"
    "                     module (defaults; values set in the environment are not shown)\n"
    "  -A, --algorithms   the algorithms of each collective (MESH_TUNE names)\n"
    "      --comm-size N  with -A: which algorithm serves which message sizes on a\n"
    "      --nodes K        communicator of N ranks over K nodes (default 1)\n"
    "  -t, --transports   the transports built, whether they can run here, their capabilities\n"
    "  -a, --all          all of the above\n"
    "  --grid SIZES ...   a 5D mesh grid's groups and fit (mesh-info --grid --help)\n"
    "  --pp SCHEDULE ...  a pipeline schedule's timeline, bubble and stored activations\n"
    "                     (mesh-info --pp 1f1b --help)\n"
    "  -T, --topo         this node: packages, NUMA, cores, GPUs with nearest NIC and CPUs, NICs\n"
    "      --dump FILE    with --topo: also write the node's hwloc XML to FILE\n"
    "  -h, --help         this text\n";

/* Prints text wrapped to width columns; the first line starts where the cursor is (first
 * spaces of indent), the others after indent spaces. */
static void info_wrap_from(const char *text, int first, int indent, int width)
{
    const char *p = text;
    if (!*p)
        printf("\n");
    while (*p) {
        int room = width - indent, len = (int)strlen(p);
        if (len > room) {
            len = room;
            while (len > 0 && p[len] != ' ')
                len--;
            if (len == 0)
                len = room;
        }
        printf("%*s%.*s\n", first, "", len, p);
        first = indent;
        p += len;
        while (*p == ' ')
            p++;
    }
}

static void info_wrap(const char *text, int indent, int width)
{
    info_wrap_from(text, indent, indent, width);
}

static void info_version(void)
{
    printf("mesh %d.%d.%d (%s)\n", MESH_VERSION_MAJOR, MESH_VERSION_MINOR, MESH_VERSION_PATCH,
           PACKAGE_STRING);
    printf("  transports :");
    for (int i = 0; i < mesh_tl_count(); i++)
        printf(" %s", mesh_tl_get(i)->name);
    printf("\n  hwloc      : yes\n");
    printf("  pmix       : %s\n", HAVE_PMIX ? "yes" : "no");
    printf("  ucx        : %s\n", HAVE_UCX ? "yes" : "no");
    printf("  libfabric  : %s\n", HAVE_OFI ? "yes" : "no");
    printf("  verbs      : %s\n", HAVE_VERBS ? "yes" : "no");
    printf("  cuda       : %s\n", HAVE_CUDA ? "yes" : "no");
    mesh_info_memory();
    printf("  algorithms : %d in %d collectives (mesh-info -A)\n", mesh_coll_algo_count(),
           (int)MESH_COLL_TYPE_COUNT);
}

static const char *info_type_name(mesh_config_type_t t)
{
    switch (t) {
    case MESH_CFG_INT:
        return "int";
    case MESH_CFG_SIZE:
        return "size";
    case MESH_CFG_DOUBLE:
        return "double";
    case MESH_CFG_BOOL:
        return "bool";
    case MESH_CFG_STRING:
        return "string";
    case MESH_CFG_ENUM:
        return "enum";
    }
    return "?";
}

static void info_config_entry(const char *module, const mesh_config_entry_t *e, const char *value,
                              const char *source, void *arg)
{
    const char **last_module = arg;
    if (!*last_module || strcmp(*last_module, module) != 0) {
        printf("\n[%s]\n", module);
        *last_module = module;
    }
    printf("MESH_%s=%s\n", e->name, value ? value : "");
    printf("      %s, default '%s', from %s", info_type_name(e->type), e->dflt ? e->dflt : "",
           source ? source : "default");
    if (e->type == MESH_CFG_ENUM && e->choices)
        printf(", one of %s", e->choices);
    if (e->range)
        printf(", range %s", e->range);
    printf("\n");
    if (e->doc)
        info_wrap(e->doc, 6, 96);
}

static void info_config(void)
{
    const char *last_module = NULL;
    printf("# every knob: environment MESH_<NAME>, then MESH_CONFIG_FILE, then the default\n");
    mesh_config_foreach(info_config_entry, &last_module);
}

/* Markdown: '|' would end a table cell. */
static void info_md_cell(const char *text)
{
    for (const char *p = text ? text : ""; *p; p++) {
        if (*p == '|')
            putchar('\\');
        putchar(*p);
    }
}

static void info_md_entry(const char *module, const mesh_config_entry_t *e, const char *value,
                          const char *source, void *arg)
{
    const char **last_module = arg;
    (void)value;
    (void)source;
    if (!*last_module || strcmp(*last_module, module) != 0) {
        printf("\n## %s\n\n| variable | default | type | meaning |\n|---|---|---|---|\n", module);
        *last_module = module;
    }
    printf("| `MESH_%s` | ", e->name);
    if (e->dflt && *e->dflt) {
        printf("`");
        info_md_cell(e->dflt);
        printf("`");
    }
    printf(" | %s", info_type_name(e->type));
    if (e->type == MESH_CFG_ENUM && e->choices) {
        printf(": `");
        info_md_cell(e->choices);
        printf("`");
    }
    if (e->range)
        printf(", `%s`", e->range);
    printf(" | ");
    info_md_cell(e->doc);
    printf(" |\n");
}

/* docs/environment.md: what every build declares, independent of this process's environment,
 * so that the checked-in file can be compared with a fresh one (tests/docs/environment.sh). */
static void info_config_markdown(void)
{
    const char *last_module = NULL;
    printf("# Environment variables\n\n"
           "<!-- generated by `tools/mesh-info -c --markdown` from the config tables:\n"
           "     do not edit; `make docs-env` regenerates it -->\n\n"
           "Every knob is declared once, in the table of the module that reads it, with\n"
           "its type, default, range and doc; `mesh-info -c` prints them all by module\n"
           "with their effective values. Values come from the environment, then from the\n"
           "file named by `MESH_CONFIG_FILE` (`NAME=value` lines, `#` comments), then the\n"
           "default. A value that does not parse, lies outside its range or names\n"
           "something unknown (a subsystem, an algorithm) is refused when the library\n"
           "initialises, with the variable, the value and what is allowed;\n"
           "`mesh_config_get` reports the value in use. A `MESH_*` variable that no table\n"
           "declares gets one warning.\n\n"
           "Sizes take k, m, g suffixes (powers of 1024); booleans 1/0, y/n, yes/no,\n"
           "on/off, true/false; a range `a..b` bounds a number, either side open when\n"
           "empty. The tables of optional transports (verbs, ucx, ofi) are in builds that\n"
           "have them; `mesh-info -c` shows what a given build declares.\n");
    mesh_config_foreach(info_md_entry, &last_module);
}

static void info_caps(const mesh_tl_ops_t *ops)
{
    static const char *const scopes[] = {"self", "node", "net"};
    static const char *const flags[] = {"tagged",      "put",        "get",
                                        "single-copy", "device-mem", "multi-stream",
                                        "hw-net",      "signature",  "device-dmabuf"};
    char host[128] = "localhost";
    mesh_tl_open_params_t p = {
        .rank = 0, .size = 1, .comm_uid = (uint64_t)getpid(), .node = host, .timeout_s = 5};
    mesh_tl_iface_t *iface = NULL;
    mesh_tl_caps_t caps = {0};

    gethostname(host, sizeof(host) - 1);
    if (ops->open(&p, &iface) != MESH_OK) {
        printf("      (could not open one here: %s)\n", mesh_error_last());
        return;
    }
    ops->query(iface, &caps);
    ops->close(iface);
    char eager[32] = "any size";
    if (caps.eager_limit != SIZE_MAX)
        snprintf(eager, sizeof(eager), "%zu B", caps.eager_limit);
    printf("      scope %s, latency ~%.1f us, bandwidth ~%.1f GB/s, eager limit %s, priority %d\n",
           (unsigned)caps.scope < 3 ? scopes[caps.scope] : "?", caps.latency_us,
           caps.bandwidth_GBps, eager, caps.priority);
    printf("      capabilities:");
    for (unsigned i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        if (caps.flags & (1ull << i))
            printf(" %s", flags[i]);
    printf("\n");
}

/* The node as every communicator of this process sees it (MESH_TOPO_FILE or discovery). */
static int info_topo(const char *dump)
{
    const mesh_topo_t *t = NULL;
    if (mesh_topo_get(&t) != MESH_OK) {
        fprintf(stderr, "mesh-info: no topology: %s\n", mesh_error_last());
        return 1;
    }
    printf("# this node; MESH_TOPO_FILE loads a saved one, MESH_NODE_ID names it\n");
    mesh_topo_print(t, mesh_context_node_name(), stdout);
    /* what this process would tell the others: the launcher's local rank, else 0 */
    mesh_topo_summary_t s;
    if (mesh_topo_summary(0, &s) == MESH_OK)
        printf("process  : gpu %d, cpus %d-%d (%d), nic %s\n", s.gpu, s.cpu_first, s.cpu_last,
               s.cpu_count, s.nic[0] ? s.nic : "none");
    if (dump && mesh_topo_export(t, dump) != MESH_OK) {
        fprintf(stderr, "mesh-info: %s\n", mesh_error_last());
        return 1;
    }
    if (dump)
        printf("# written to %s (lstopo --input %s shows it)\n", dump, dump);
    return 0;
}

static void info_transports(void)
{
    const char *net = mesh_config_str("NET"), *tls = mesh_config_str("TLS");
    printf("# transports built into this library; the collectives layer picks one per peer:\n"
           "# same node: narrowest scope; other nodes: first of MESH_NET open on both sides\n"
           "# MESH_TLS=%s MESH_NET=%s\n",
           tls ? tls : "", net ? net : "");
    for (int i = 0; i < mesh_tl_count(); i++) {
        const mesh_tl_ops_t *ops = mesh_tl_get(i);
        mesh_tl_set_unusable("");
        int usable = ops->usable ? ops->usable() : 1;
        const char *why = mesh_tl_unusable_reason();
        printf("\n%-8s %s%s%s\n", ops->name, usable ? "usable here" : "not usable here",
               !usable && *why ? ": " : "", !usable ? why : "");
        if (ops->doc)
            info_wrap(ops->doc, 6, 96);
        if (usable && ops->open && ops->query && ops->close)
            info_caps(ops);
        else if (mesh_route_net_priority(ops->name) >= 0)
            printf("      scope net, priority %d\n", mesh_route_net_priority(ops->name));
    }
    int first = 1;
    for (int i = 0; mesh_route_known_net(i); i++) {
        if (mesh_tl_find(mesh_route_known_net(i)))
            continue;
        printf("%s%s", first ? "\n# network transports not built: " : ", ",
               mesh_route_known_net(i));
        first = 0;
    }
    if (!first)
        printf("\n");
    mesh_info_device_peers();
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {{"config", no_argument, NULL, 'c'},
                                             {"algorithms", no_argument, NULL, 'A'},
                                             {"transports", no_argument, NULL, 't'},
                                             {"all", no_argument, NULL, 'a'},
                                             {"help", no_argument, NULL, 'h'},
                                             {"topo", no_argument, NULL, 'T'},
                                             {"dump", required_argument, NULL, 'D'},
                                             {"comm-size", required_argument, NULL, 'N'},
                                             {"nodes", required_argument, NULL, 'K'},
                                             {"markdown", no_argument, NULL, 'M'},
                                             {NULL, 0, NULL, 0}};
    int comm_size = 0, nodes = 1;
    int topo = 0;
    const char *dump = NULL;
    int config = 0, algos = 0, tls = 0, markdown = 0, c;

    if (mesh_info_grid_wanted(argc, argv))
        return mesh_info_grid(argc, argv);
    if (mesh_info_pp_wanted(argc, argv))
        return mesh_info_pp(argc, argv);

    while ((c = getopt_long(argc, argv, "cAtahT", longopts, NULL)) != -1) {
        switch (c) {
        case 'T':
            topo = 1;
            break;
        case 'D':
            dump = optarg;
            break;
        case 'N':
        case 'K': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < 1 || v > 1 << 20) {
                fprintf(stderr, "mesh-info: --%s '%s' must be a positive number\n",
                        c == 'N' ? "comm-size" : "nodes", optarg);
                return 2;
            }
            *(c == 'N' ? &comm_size : &nodes) = (int)v;
            break;
        }
        case 'c':
            config = 1;
            break;
        case 'M':
            markdown = 1;
            break;
        case 'A':
            algos = 1;
            break;
        case 't':
            tls = 1;
            break;
        case 'a':
            config = algos = tls = 1;
            break;
        case 'h':
            fputs(info_usage, stdout);
            return 0;
        default:
            fputs(info_usage, stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "mesh-info: unexpected argument '%s'\n%s", argv[optind], info_usage);
        return 2;
    }
    /* every table registers here, so that -c shows all of them with their values */
    mesh_status_t st = mesh_coll_global_init();
    if (st != MESH_OK) {
        fprintf(stderr, "mesh-info: initialisation failed: %s: %s\n", mesh_status_string(st),
                mesh_error_last());
        return 1;
    }

    if (dump && !topo) {
        fprintf(stderr, "mesh-info: --dump goes with --topo\n%s", info_usage);
        return 2;
    }
    if (topo)
        return info_topo(dump);
    if (markdown && (!config || algos || tls)) {
        fprintf(stderr, "mesh-info: --markdown goes with -c alone\n%s", info_usage);
        return 2;
    }
    if (markdown) {
        info_config_markdown();
        return 0;
    }
    if (comm_size > 0 && !algos) {
        fprintf(stderr, "mesh-info: --comm-size goes with -A\n%s", info_usage);
        return 2;
    }
    if (!config && !algos && !tls) {
        info_version();
        return 0;
    }
    if (config)
        info_config();
    if (algos) {
        if (config)
            printf("\n");
        int rc = mesh_info_algorithms(comm_size, nodes, info_wrap_from);
        if (rc != 0)
            return rc;
    }
    if (tls) {
        if (config || algos)
            printf("\n");
        info_transports();
    }
    return 0;
}
