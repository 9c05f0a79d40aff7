// The WAN emulator's delay line (bench/wan/README.md): runs in the router namespace between two
// veths, reads every frame that arrives on one with an AF_PACKET socket and sends it out of
// the other once its delay has passed. The kernel here has no netem, so delay and loss come
// from here; the bottleneck is a tbf on the outgoing veth (ENOBUFS from it counts as a drop).
//
//   delayline --a DEV --b DEV [--delay-ab MS] [--delay-ba MS] [--jitter MS]
//             [--loss-ab PCT] [--loss-ba PCT] [--ge-ab P,R,LOSS_BAD] [--ge-ba ...]
//             [--queue FRAMES] [--rcvbuf BYTES] [--seed N] --stats FILE
//
// Direction ab is what arrives on --a (from the sending end) and leaves by --b. Jitter adds
// a uniform 0..MS to each frame's delay but never lets a frame overtake the one before it
// (no reordering). Gilbert-Elliott loss: per frame, a good state moves to bad with
// probability P, bad to good with R, and a frame in the bad state is lost with LOSS_BAD
// (none in the good state): mean loss P/(P+R)*LOSS_BAD. SIGUSR1 writes the counters to the
// stats file (JSON); SIGTERM/SIGINT write them and exit. Drops that are not the settings' are
// counted apart: overflow (the line's queue), enobufs (the tbf), sock_drops (frames the
// kernel dropped because the line did not read them in time: past its ceiling).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kFrameMax = 2048, kBatch = 256 };

struct frame {
    uint64_t due_ns;
    uint16_t len;
    unsigned char data[kFrameMax];
};

struct ge_model { // Gilbert-Elliott; p == 0: off
    double p, r, loss_bad;
    int bad;
};

struct direction {
    const char* name;
    int in_fd, out_fd;
    uint64_t delay_ns;
    double loss; // random loss, 0..1
    struct ge_model ge;
    struct frame* q; // ring of `cap` frames
    size_t cap, head, count;
    uint64_t last_due_ns;
    // counters (written to the stats file)
    uint64_t rx, lost, overflow, enobufs, send_errors, tx, bytes_tx;
    uint64_t sock_drops; // frames the kernel dropped before we read them (PACKET_STATISTICS): our ceiling
    int rcvbuf;          // in_fd's receive buffer in effect (SO_RCVBUF), for the stats
};

static volatile sig_atomic_t g_dump, g_stop;
static uint64_t g_rng;
static uint64_t g_jitter_ns;

static void on_signal(int sig) {
    if (sig == SIGUSR1)
        g_dump = 1;
    else
        g_stop = 1;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// xorshift64*: fast and good enough for loss decisions; seeded from getrandom or --seed.
static uint64_t rng_next(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1Dull;
}

static double rng_unit(void) { return (double)(rng_next() >> 11) / (double)(1ull << 53); }

// --rcvbuf: each input socket's buffer (the kernel doubles it). 16 MiB (32 in effect) dropped
// 40 thousand frames in 5 s at 20 ms under 64 unpaced BBR streams from a zero-copy sender
// (splice, sendfile) and none from a copying one (read_send, iperf3); 256 MiB dropped none of
// either at the same rate (h16j, docs/benchmarks.md): a frame whose data is page-cache pages is
// charged more against the buffer than its length, so the line's socket filled while the line
// kept up. Memory is only used by frames not yet read.
static int g_rcvbuf = 256 << 20;

static int open_port(const char* dev) {
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (fd < 0) {
        perror("delayline: socket(AF_PACKET)");
        exit(1);
    }
    unsigned idx = if_nametoindex(dev);
    if (!idx) {
        fprintf(stderr, "delayline: no interface '%s'\n", dev);
        exit(1);
    }
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = (int)idx};
    if (bind(fd, (struct sockaddr*)&sll, sizeof sll) != 0) {
        fprintf(stderr, "delayline: bind to %s: %s\n", dev, strerror(errno));
        exit(1);
    }
    int one = 1; // our own sends on this device must not come back as input
    if (setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0) {
        perror("delayline: PACKET_IGNORE_OUTGOING");
        exit(1);
    }
    struct packet_mreq mr = {.mr_ifindex = (int)idx, .mr_type = PACKET_MR_PROMISC};
    setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr);
    int buf = 16 << 20; // what the line writes out of this socket waits in the tbf, not here
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &g_rcvbuf, sizeof g_rcvbuf);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf);
    return fd;
}

static int lose(struct direction* d) {
    if (d->ge.p > 0) {
        if (d->ge.bad)
            d->ge.bad = rng_unit() >= d->ge.r;
        else
            d->ge.bad = rng_unit() < d->ge.p;
        if (d->ge.bad && rng_unit() < d->ge.loss_bad) return 1;
    }
    return d->loss > 0 && rng_unit() < d->loss;
}

// Reads what is waiting on d->in_fd (at most one batch) into d's queue.
static void take_input(struct direction* d) {
    for (int i = 0; i < kBatch; ++i) {
        struct frame* f = &d->q[(d->head + d->count) % d->cap];
        struct frame scratch;
        if (d->count == d->cap) f = &scratch; // full: read it anyway, to drop it
        ssize_t n = recv(d->in_fd, f->data, sizeof f->data, MSG_TRUNC);
        if (n < 0) return; // EAGAIN: nothing more now
        d->rx++;
        if (d->count == d->cap || n > kFrameMax) {
            d->overflow++;
            continue;
        }
        if (lose(d)) {
            d->lost++;
            continue;
        }
        uint64_t due = now_ns() + d->delay_ns;
        if (g_jitter_ns) due += (uint64_t)(rng_unit() * (double)g_jitter_ns);
        if (due < d->last_due_ns) due = d->last_due_ns; // never overtake: no reordering
        d->last_due_ns = due;
        f->due_ns = due;
        f->len = (uint16_t)n;
        d->count++;
    }
}

// Sends every due frame; returns the earliest due time still queued (0: none), or 1 when the
// output socket is full (wait for POLLOUT).
static uint64_t send_due(struct direction* d, int* blocked) {
    uint64_t now = now_ns();
    *blocked = 0;
    while (d->count) {
        struct frame* f = &d->q[d->head];
        if (f->due_ns > now) return f->due_ns;
        ssize_t n = send(d->out_fd, f->data, f->len, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            *blocked = 1;
            return 0;
        }
        if (n < 0) {
            if (errno == ENOBUFS)
                d->enobufs++; // the tbf's queue is full: the bottleneck dropped it
            else
                d->send_errors++; // ENETDOWN while tearing down
        } else {
            d->tx++;
            d->bytes_tx += f->len;
        }
        d->head = (d->head + 1) % d->cap;
        d->count--;
    }
    return 0;
}

// Frames dropped at in_fd because the line did not read them in time (the counter resets on read).
static void add_socket_drops(struct direction* d) {
    struct tpacket_stats st;
    socklen_t len = sizeof st;
    if (getsockopt(d->in_fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) d->sock_drops += st.tp_drops;
}

static void write_stats(const char* path, struct direction* dirs) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE* f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "{");
    for (int i = 0; i < 2; ++i) {
        struct direction* d = &dirs[i];
        add_socket_drops(d);
        fprintf(f,
                "%s\"%s\":{\"rx\":%llu,\"lost\":%llu,\"overflow\":%llu,\"enobufs\":%llu,\"send_errors\":%llu,\"sock_drops\":%llu,\"tx\":%llu,\"bytes_tx\":%llu,"
                "\"queued\":%zu,\"rcvbuf\":%d}",
                i ? "," : "", d->name, (unsigned long long)d->rx, (unsigned long long)d->lost,
                (unsigned long long)d->overflow, (unsigned long long)d->enobufs, (unsigned long long)d->send_errors, (unsigned long long)d->sock_drops, (unsigned long long)d->tx,
                (unsigned long long)d->bytes_tx, d->count, d->rcvbuf);
    }
    fprintf(f, "}\n");
    fclose(f);
    rename(tmp, path);
}

static int parse_ge(const char* s, struct ge_model* g) {
    double p, r, lb;
    if (sscanf(s, "%lf,%lf,%lf", &p, &r, &lb) != 3 || p < 0 || p > 1 || r <= 0 || r > 1 || lb < 0 || lb > 1) return -1;
    g->p = p;
    g->r = r;
    g->loss_bad = lb;
    return 0;
}

static void usage(const char* why) {
    fprintf(stderr, "delayline: %s\nusage: delayline --a DEV --b DEV [--delay-ab MS] [--delay-ba MS] [--jitter MS] "
                    "[--loss-ab PCT] [--loss-ba PCT] [--ge-ab P,R,LOSS_BAD] [--ge-ba P,R,LOSS_BAD] [--queue FRAMES] "
                    "[--rcvbuf BYTES] [--seed N] --stats FILE\n",
            why);
    exit(2);
}

int main(int argc, char** argv) {
    const char *dev_a = NULL, *dev_b = NULL, *stats = NULL;
    double delay_ab = 0, delay_ba = 0, jitter = 0, loss_ab = 0, loss_ba = 0;
    size_t cap = 32768;
    struct direction d[2] = {{.name = "ab"}, {.name = "ba"}};
    if (getrandom(&g_rng, sizeof g_rng, 0) != sizeof g_rng) g_rng = (uint64_t)now_ns();
    for (int i = 1; i < argc; ++i) {
        const char* k = argv[i];
        if (i + 1 >= argc) usage("an option lacks its value");
        const char* v = argv[++i];
        char* end = NULL;
        double x = strtod(v, &end);
        int numeric = end && *end == '\0' && x >= 0;
        if (!strcmp(k, "--a")) dev_a = v;
        else if (!strcmp(k, "--b")) dev_b = v;
        else if (!strcmp(k, "--stats")) stats = v;
        else if (!strcmp(k, "--ge-ab")) { if (parse_ge(v, &d[0].ge)) usage("bad --ge-ab"); }
        else if (!strcmp(k, "--ge-ba")) { if (parse_ge(v, &d[1].ge)) usage("bad --ge-ba"); }
        else if (!numeric) usage("a numeric option has a bad value");
        else if (!strcmp(k, "--delay-ab")) delay_ab = x;
        else if (!strcmp(k, "--delay-ba")) delay_ba = x;
        else if (!strcmp(k, "--jitter")) jitter = x;
        else if (!strcmp(k, "--loss-ab") && x <= 100) loss_ab = x;
        else if (!strcmp(k, "--loss-ba") && x <= 100) loss_ba = x;
        else if (!strcmp(k, "--queue") && x >= 16 && x <= 1 << 20) cap = (size_t)x;
        else if (!strcmp(k, "--seed")) g_rng = (uint64_t)x | 1;
        else if (!strcmp(k, "--rcvbuf") && x >= 1 << 16 && x <= 1 << 30) g_rcvbuf = (int)x;
        else usage("unknown option or value out of range");
    }
    if (!dev_a || !dev_b || !stats) usage("--a, --b and --stats are required");
    g_jitter_ns = (uint64_t)(jitter * 1e6);
    int fa = open_port(dev_a), fb = open_port(dev_b);
    d[0].in_fd = fa, d[0].out_fd = fb, d[0].delay_ns = (uint64_t)(delay_ab * 1e6), d[0].loss = loss_ab / 100;
    d[1].in_fd = fb, d[1].out_fd = fa, d[1].delay_ns = (uint64_t)(delay_ba * 1e6), d[1].loss = loss_ba / 100;
    for (int i = 0; i < 2; ++i) {
        socklen_t len = sizeof d[i].rcvbuf;
        if (getsockopt(d[i].in_fd, SOL_SOCKET, SO_RCVBUF, &d[i].rcvbuf, &len) != 0) d[i].rcvbuf = -1;
        d[i].cap = cap;
        d[i].q = calloc(cap, sizeof(struct frame));
        if (!d[i].q) {
            fprintf(stderr, "delayline: cannot allocate a queue of %zu frames\n", cap);
            return 1;
        }
    }
    // Real-time priority: on a busy machine an ordinary thread woke milliseconds late and the
    // RTT moved by up to 13 ms at 20 ms (measured). The kernel's RT throttling still leaves
    // others 5% of the CPU; the line sleeps whenever nothing is due.
    struct sched_param sp = {.sched_priority = 10};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
        fprintf(stderr, "delayline: no real-time priority (%s): delays will follow the machine's load\n",
                strerror(errno));
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    // Blocked except inside ppoll, which unblocks them atomically: none is lost between the
    // check of g_dump/g_stop and the wait.
    sigset_t ours, none;
    sigemptyset(&ours);
    sigaddset(&ours, SIGUSR1);
    sigaddset(&ours, SIGTERM);
    sigaddset(&ours, SIGINT);
    sigprocmask(SIG_BLOCK, &ours, NULL);
    sigemptyset(&none);
    write_stats(stats, d); // the file exists once the line runs: the script waits for it
    while (!g_stop) {
        if (g_dump) {
            g_dump = 0;
            write_stats(stats, d);
        }
        int blocked[2];
        uint64_t next = 0;
        for (int i = 0; i < 2; ++i) {
            uint64_t due = send_due(&d[i], &blocked[i]);
            if (due && (!next || due < next)) next = due;
        }
        struct pollfd p[2] = {{.fd = fa, .events = POLLIN | (blocked[1] ? POLLOUT : 0)},
                              {.fd = fb, .events = POLLIN | (blocked[0] ? POLLOUT : 0)}};
        struct timespec ts, *tsp = NULL;
        if (next) {
            uint64_t now = now_ns();
            uint64_t wait = next > now ? next - now : 0;
            ts.tv_sec = (time_t)(wait / 1000000000ull);
            ts.tv_nsec = (long)(wait % 1000000000ull);
            tsp = &ts;
        }
        if (ppoll(p, 2, tsp, &none) < 0 && errno != EINTR) {
            perror("delayline: ppoll");
            break;
        }
        if (p[0].revents & POLLIN) take_input(&d[0]);
        if (p[1].revents & POLLIN) take_input(&d[1]);
    }
    write_stats(stats, d);
    for (int i = 0; i < 2; ++i) free(d[i].q); // a sanitized build's LeakSanitizer counts them otherwise
    return 0;
}
