/*
 * Starting and supervising the ranks. Every rank leads its own process group so that signals
 * reach what it started too, and so that a terminal's Ctrl-C reaches only meshrun, which
 * forwards it once. Signals arrive through a signalfd in the same poll loop as the ranks'
 * output, which keeps the supervisor single-threaded and free of async handlers.
 */
#include "config.h"
#include "tools/meshrun.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define MESHRUN_LINE_MAX 8192

typedef struct {
    char buf[MESHRUN_LINE_MAX];
    size_t len;
} meshrun_line_t;

typedef struct {
    const meshrun_opts_t *o;
    meshrun_rank_t *ranks;
    meshrun_line_t *lines; /* [nranks][2] for --tag-output */
    int alive;
    int exit_code;
    int failed_rank; /* first rank that failed, -1 while none */
    int signalled;   /* signal meshrun received and forwarded, 0 if none */
    int timed_out;
    double kill_at; /* when the SIGKILL follows the SIGTERM; 0 while none is due */
    int killed;
} meshrun_sup_t;

static void meshrun_write_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return; /* closed output: nothing sensible to do */
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
}

static void meshrun_emit(int rank, int stream, const char *line, size_t len, int add_newline)
{
    char prefix[24];
    int plen = snprintf(prefix, sizeof(prefix), "[%d] ", rank);
    struct iovec iov[3] = {{prefix, (size_t)plen}, {(void *)line, len}, {"\n", 1}};
    meshrun_write_all(stream == 0 ? STDOUT_FILENO : STDERR_FILENO, iov, add_newline ? 3 : 2);
}

/* Reads what a rank wrote and prints whole lines with their prefix; 0 once at EOF. */
static int meshrun_pump(meshrun_sup_t *s, int r, int stream)
{
    meshrun_rank_t *rk = &s->ranks[r];
    meshrun_line_t *l = &s->lines[2 * r + stream];
    for (;;) {
        ssize_t n = read(rk->out[stream], l->buf + l->len, sizeof(l->buf) - l->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 1;
        if (n <= 0) {
            if (l->len)
                meshrun_emit(r, stream, l->buf, l->len, 1);
            l->len = 0;
            close(rk->out[stream]);
            rk->out[stream] = -1;
            return 0;
        }
        l->len += (size_t)n;
        size_t start = 0;
        char *nl;
        while ((nl = memchr(l->buf + start, '\n', l->len - start)) != NULL) {
            size_t end = (size_t)(nl - l->buf) + 1;
            meshrun_emit(r, stream, l->buf + start, end - start, 0);
            start = end;
        }
        memmove(l->buf, l->buf + start, l->len - start);
        l->len -= start;
        if (l->len == sizeof(l->buf)) { /* a very long line: print it in pieces */
            meshrun_emit(r, stream, l->buf, l->len, 1);
            l->len = 0;
        }
    }
}

static void meshrun_signal_all(meshrun_sup_t *s, int sig)
{
    for (int r = 0; r < s->o->nranks; r++) {
        pid_t pid = s->ranks[r].pid;
        if (pid > 0 && kill(-pid, sig) < 0)
            kill(pid, sig);
    }
}

/* SIGTERM now, SIGKILL after the grace period. */
static void meshrun_terminate(meshrun_sup_t *s)
{
    meshrun_signal_all(s, SIGTERM);
    if (s->kill_at == 0)
        s->kill_at = meshrun_now() + MESHRUN_GRACE_S;
}

static void meshrun_child(const meshrun_opts_t *o, const meshrun_rank_t *rk,
                          const meshrun_netns_t *ns, const char *addr, const char *secret,
                          int pipes[2][2], pid_t parent)
{
    sigset_t none;
    char v[32];

    setpgid(0, 0);
    /* should meshrun itself be killed (SIGKILL skips every cleanup), its ranks follow */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    signal(SIGPIPE, SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (meshrun_netns_enter(ns, rk->node))
        _exit(127);

    /* Ranks in their own process groups must not read a terminal (SIGTTIN would stop them);
     * piped input goes to rank 0 only. */
    if (rk->rank != 0 || isatty(STDIN_FILENO)) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
    }
    if (o->tag_output) {
        dup2(pipes[0][1], STDOUT_FILENO);
        dup2(pipes[1][1], STDERR_FILENO);
    }

    snprintf(v, sizeof(v), "%d", rk->rank);
    setenv("MESH_RANK", v, 1);
    snprintf(v, sizeof(v), "%d", o->nranks);
    setenv("MESH_SIZE", v, 1);
    setenv("MESH_ADDR", addr, 1);
    setenv("MESH_SECRET", secret, 1);
    snprintf(v, sizeof(v), "node%d", rk->node);
    setenv("MESH_NODE_ID", v, 1);
    snprintf(v, sizeof(v), "%d", rk->local_rank);
    setenv("MESH_LOCAL_RANK", v, 1);
    snprintf(v, sizeof(v), "%d", rk->local_size);
    setenv("MESH_LOCAL_SIZE", v, 1);

    execvp(o->argv[0], o->argv);
    fprintf(stderr, "meshrun: rank %d: cannot execute '%s': %m\n", rk->rank, o->argv[0]);
    _exit(127);
}

static int meshrun_spawn(meshrun_sup_t *s, int r, const meshrun_netns_t *ns, const char *addr,
                         const char *secret)
{
    meshrun_rank_t *rk = &s->ranks[r];
    int pipes[2][2] = {{-1, -1}, {-1, -1}};

    if (s->o->tag_output) {
        if (pipe2(pipes[0], O_CLOEXEC) < 0 || pipe2(pipes[1], O_CLOEXEC) < 0) {
            meshrun_err("error: pipe for rank %d failed: %m", r);
            return -1;
        }
    }
    fflush(stdout);
    fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        meshrun_err("error: fork for rank %d failed: %m", r);
        return -1;
    }
    if (pid == 0)
        meshrun_child(s->o, rk, ns, addr, secret, pipes, parent);
    setpgid(pid, pid); /* also here, so that signals sent right away reach the group */
    rk->pid = pid;
    s->alive++;
    for (int i = 0; i < 2 && s->o->tag_output; i++) {
        close(pipes[i][1]);
        rk->out[i] = pipes[i][0];
        fcntl(rk->out[i], F_SETFL, O_NONBLOCK);
    }
    return 0;
}

static void meshrun_reap(meshrun_sup_t *s)
{
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        int r;
        for (r = 0; r < s->o->nranks && s->ranks[r].pid != pid; r++)
            ;
        if (r == s->o->nranks)
            continue;
        meshrun_rank_t *rk = &s->ranks[r];
        rk->pid = 0;
        rk->status = st;
        s->alive--;
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            continue;
        if (s->failed_rank >= 0 || s->signalled || s->timed_out)
            continue;

        s->failed_rank = r;
        if (WIFEXITED(st)) {
            s->exit_code = WEXITSTATUS(st);
            meshrun_err("rank %d (node%d, pid %d) exited with status %d", r, rk->node, (int)pid,
                        s->exit_code);
        } else {
            s->exit_code = 128 + WTERMSIG(st);
            meshrun_err("rank %d (node%d, pid %d) was killed by signal %d (%s)", r, rk->node,
                        (int)pid, WTERMSIG(st), strsignal(WTERMSIG(st)));
        }
        if (s->alive > 0) {
            meshrun_err("terminating the other %d running rank%s", s->alive,
                        s->alive == 1 ? "" : "s");
            meshrun_terminate(s);
        }
    }
}

static void meshrun_on_signal(meshrun_sup_t *s, int sig)
{
    if (sig == SIGCHLD) {
        meshrun_reap(s);
        return;
    }
    if (s->signalled) { /* a second interrupt: no more waiting */
        meshrun_err("received SIG%s again; killing every rank", sigabbrev_np(sig));
        meshrun_signal_all(s, SIGKILL);
        s->killed = 1;
        return;
    }
    s->signalled = sig;
    s->exit_code = 128 + sig;
    meshrun_err("received SIG%s; forwarding it to %d rank%s", sigabbrev_np(sig), s->alive,
                s->alive == 1 ? "" : "s");
    meshrun_signal_all(s, sig);
    if (s->kill_at == 0)
        s->kill_at = meshrun_now() + MESHRUN_GRACE_S;
}

static void meshrun_loop(meshrun_sup_t *s, int sfd)
{
    int n = s->o->nranks;
    struct pollfd *pfd = calloc((size_t)(1 + 2 * n), sizeof(*pfd));
    int *who = calloc((size_t)(1 + 2 * n), sizeof(int));
    double deadline = s->o->timeout_s > 0 ? meshrun_now() + s->o->timeout_s : 0;

    if (!pfd || !who) {
        meshrun_err("error: out of memory");
        meshrun_signal_all(s, SIGKILL);
        s->exit_code = 1;
        deadline = 0;
    }
    while (s->alive > 0) {
        double now = meshrun_now(), next = INFINITY;
        int npfd = 0, timeout_ms;

        if (deadline > 0 && !s->timed_out)
            next = deadline;
        if (s->kill_at > 0 && !s->killed && s->kill_at < next)
            next = s->kill_at;
        timeout_ms = isinf(next) ? -1 : (int)ceil(fmax(0, next - now) * 1000);
        if (pfd) {
            pfd[npfd++] = (struct pollfd){.fd = sfd, .events = POLLIN};
            for (int r = 0; r < n; r++)
                for (int i = 0; i < 2; i++)
                    if (s->ranks[r].out[i] >= 0) {
                        who[npfd] = 2 * r + i;
                        pfd[npfd++] = (struct pollfd){.fd = s->ranks[r].out[i], .events = POLLIN};
                    }
            if (poll(pfd, (nfds_t)npfd, timeout_ms) < 0 && errno != EINTR) {
                meshrun_err("error: poll failed: %m");
                break;
            }
        } else {
            struct pollfd one = {.fd = sfd, .events = POLLIN};
            poll(&one, 1, 100);
        }

        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            meshrun_on_signal(s, (int)si.ssi_signo);
        for (int i = 1; i < npfd; i++)
            if (pfd[i].revents)
                meshrun_pump(s, who[i] / 2, who[i] % 2);

        now = meshrun_now();
        if (deadline > 0 && !s->timed_out && now >= deadline) {
            s->timed_out = 1;
            s->exit_code = 124;
            meshrun_err("timeout after %g s; killing %d running rank%s", s->o->timeout_s, s->alive,
                        s->alive == 1 ? "" : "s");
            meshrun_terminate(s);
        }
        if (s->kill_at > 0 && !s->killed && now >= s->kill_at) {
            s->killed = 1;
            if (s->alive > 0) {
                meshrun_err("%d rank%s still running %g s after SIGTERM; sending SIGKILL", s->alive,
                            s->alive == 1 ? "" : "s", MESHRUN_GRACE_S);
                meshrun_signal_all(s, SIGKILL);
            }
        }
    }
    /* what the ranks wrote last */
    for (int r = 0; r < n; r++)
        for (int i = 0; i < 2; i++)
            if (s->ranks[r].out[i] >= 0 && meshrun_pump(s, r, i)) {
                /* still open (a process the rank started holds it): take what is there */
                meshrun_line_t *l = &s->lines[2 * r + i];
                if (l->len)
                    meshrun_emit(r, i, l->buf, l->len, 1);
                close(s->ranks[r].out[i]);
                s->ranks[r].out[i] = -1;
            }
    free(pfd);
    free(who);
}

void meshrun_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGCHLD);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGQUIT);
}

int meshrun_supervise(const meshrun_opts_t *o, meshrun_rank_t *ranks, const meshrun_netns_t *ns,
                      const char *addr, const char *secret)
{
    meshrun_sup_t s = {.o = o, .ranks = ranks, .failed_rank = -1};
    sigset_t set;

    meshrun_signals(&set);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        meshrun_err("error: signalfd failed: %m");
        return 1;
    }
    if (o->tag_output) {
        s.lines = calloc((size_t)o->nranks * 2, sizeof(*s.lines));
        if (!s.lines) {
            meshrun_err("error: out of memory for output buffers");
            close(sfd);
            return 1;
        }
    }
    for (int r = 0; r < o->nranks; r++) {
        if (meshrun_spawn(&s, r, ns, addr, secret)) {
            s.exit_code = 1;
            s.failed_rank = r;
            meshrun_terminate(&s);
            break;
        }
    }
    meshrun_loop(&s, sfd);
    close(sfd);
    free(s.lines);
    return s.exit_code;
}
