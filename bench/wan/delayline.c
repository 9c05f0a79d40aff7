// The WAN emulator's delay line (bench/wan/README.md): runs in the router namespace between two
// veths, reads every frame that arrives on one with an AF_PACKET socket and sends it out of
// the other once its delay has passed. The kernel here has no netem, so delay and loss come
// from here; the bottleneck is a tbf on the outgoing veth (ENOBUFS from it counts as a drop).
//
//   delayline --a DEV --b DEV [--delay-ab MS] [--delay-ba MS] [--jitter MS]
//             [--loss-ab PCT] [--loss-ba PCT] [--ge-ab P,R,LOSS_BAD] [--ge-ba ...]
//             [--queue FRAMES] [--rcvbuf BYTES] [--rx-ring BYTES] [--tx-batch N] [--cpu N]
//             [--slack-us US] [--rate-ab MBIT --limit-ab BYTES [--burst-ab BYTES]]
//             [--seed N] --stats FILE
//
// Direction ab is what arrives on --a (from the sending end) and leaves by --b. Jitter adds
// a uniform 0..MS to each frame's delay but never lets a frame overtake the one before it
// (no reordering). Gilbert-Elliott loss: per frame, a good state moves to bad with
// probability P, bad to good with R, and a frame in the bad state is lost with LOSS_BAD
// (none in the good state): mean loss P/(P+R)*LOSS_BAD. SIGUSR1 writes the counters to the
// stats file (JSON); SIGTERM/SIGINT write them and exit. Drops that are not the settings' are
// counted apart: overflow (the line's queue), enobufs (the tbf), sock_drops (frames the
// kernel dropped because the line did not read them in time: past its ceiling).
//
// Cost per frame (the emulator's ceiling; docs/benchmarks.md "the emulator's ceiling"):
// --rx-ring BYTES reads input from an mmap'ed PACKET_RX_RING of that size instead of one
// recv() per frame (0: recv, into a socket buffer of --rcvbuf); --tx-batch N sends up to N due
// frames per sendmmsg() (1: one send() each); --cpu N pins the line to one CPU; --slack-us US
// lets a wake-up wait up to US past the earliest due time so that frames due close together
// leave in one batch (each frame then leaves at most US late, and never more than 1% of the
// shorter delay; 0: exact). Defaults: a 256 MiB ring, batches of 64, 50 us (measured:
// docs/benchmarks.md; at 80 ms, 1 Gbit/s the slack took the line from 95% to 59% of a CPU); --rate-ab MBIT with
// --limit-ab BYTES (and --burst-ab BYTES, default 0) is the bottleneck on direction ab inside
// the line, a tbf's token bucket of that rate, queue and burst (drop-tail: queue_drops), instead
// of a tbf on the veth.
#ifndef _GNU_SOURCE // meson defines it for the project; a bare gcc build of this file too
#define _GNU_SOURCE
#endif
#include "delayline.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_dump, g_stop;
static uint64_t g_rng;
static uint64_t g_jitter_ns;

static void on_signal(int sig) {
    if (sig == SIGUSR1)
        g_dump = 1;
    else
        g_stop = 1;
}

// xorshift64*: fast and good enough for loss decisions; seeded from getrandom or --seed.
static uint64_t rng_next(void) {
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 0x2545F4914F6CDD1Dull;
}

static double rng_unit(void) { return (double)(rng_next() >> 11) / (double)(1ull << 53); }

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

// Loss is decided per frame on arrival; the due time is the arrival plus the delay (plus
// jitter), never earlier than the frame before it: no reordering.
void admit(struct direction* d, struct frame* f) {
    if (lose(d)) {
        d->lost++;
        return;
    }
    uint64_t due = now_ns() + d->delay_ns;
    if (g_jitter_ns) due += (uint64_t)(rng_unit() * (double)g_jitter_ns);
    if (due < d->last_due_ns) due = d->last_due_ns;
    d->last_due_ns = due;
    if (d->rate_bpns > 0) {
        // The bottleneck at the far end of the delay, the token bucket a tbf on the outgoing
        // veth was: the frame reaches it at `due` and waits behind the frames ahead of it (the
        // previous one leaves at link_free_ns); it leaves once the tokens, which grow at the
        // rate up to `burst` bytes, cover its length. The bytes ahead of it are the queue
        // (exact to within one frame: the frames queued behind an empty bucket leave one
        // length's worth of time apart); a frame that does not fit `limit` is dropped, as the
        // tbf's queue drops it. Decided here on arrival, as the delay is known then: the
        // line's queue keeps one ordered list of departures and the kernel needs no timer per
        // frame (a tbf's watchdog fired once per frame: the emulator's ceiling, README.md).
        uint64_t start = due > d->link_free_ns ? due : d->link_free_ns;
        double backlog = (double)(start - due) * d->rate_bpns;
        if (backlog + f->len > (double)d->limit) {
            d->queue_drops++;
            return;
        }
        double tokens = d->tokens + (double)(start - d->link_free_ns) * d->rate_bpns;
        if (tokens > d->burst) tokens = d->burst;
        if (tokens >= f->len) {
            tokens -= f->len;
        } else {
            start += (uint64_t)((f->len - tokens) / d->rate_bpns);
            tokens = 0;
        }
        d->tokens = tokens;
        d->link_free_ns = start;
        due = start;
    }
    f->due_ns = due;
    d->count++;
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
                "\"queued\":%zu,\"rcvbuf\":%d,\"rx_ring\":%zu,\"batches\":%llu,\"queue_drops\":%llu}",
                i ? "," : "", d->name, (unsigned long long)d->rx, (unsigned long long)d->lost,
                (unsigned long long)d->overflow, (unsigned long long)d->enobufs, (unsigned long long)d->send_errors, (unsigned long long)d->sock_drops, (unsigned long long)d->tx,
                (unsigned long long)d->bytes_tx, d->count, d->rcvbuf, d->ring.bytes,
                (unsigned long long)d->batches, (unsigned long long)d->queue_drops);
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
                    "[--rcvbuf BYTES] [--rx-ring BYTES] [--tx-batch N] [--cpu N] [--slack-us US] [--rate-ab MBIT --limit-ab BYTES [--burst-ab BYTES]] "
                    "[--seed N] --stats FILE\n",
            why);
    exit(2);
}

int main(int argc, char** argv) {
    const char *dev_a = NULL, *dev_b = NULL, *stats = NULL;
    double delay_ab = 0, delay_ba = 0, jitter = 0, loss_ab = 0, loss_ba = 0;
    size_t cap = 32768;
    int cpu = -1;
    double rate_ab = 0, limit_ab = 0, burst_ab = 0;
    uint64_t slack_ns = 50000; // 4 frames at 1 Gbit/s; capped at 1% of the delay below
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
        else if (!strcmp(k, "--rcvbuf") && x >= 1 << 16 && x <= 1 << 30) g_port.rcvbuf = (int)x;
        else if (!strcmp(k, "--rx-ring") && (x == 0 || (x >= 1 << 20 && x <= 1u << 31))) g_port.rx_ring = (size_t)x;
        else if (!strcmp(k, "--tx-batch") && x >= 1 && x <= kBatch) g_port.tx_batch = (unsigned)x;
        else if (!strcmp(k, "--rate-ab")) rate_ab = x;
        else if (!strcmp(k, "--limit-ab") && x >= 2048) limit_ab = x;
        else if (!strcmp(k, "--burst-ab") && x <= 1 << 30) burst_ab = x;
        else if (!strcmp(k, "--cpu") && x < CPU_SETSIZE) cpu = (int)x;
        else if (!strcmp(k, "--slack-us") && x <= 1000) slack_ns = (uint64_t)(x * 1000);
        else usage("unknown option or value out of range");
    }
    if (!dev_a || !dev_b || !stats) usage("--a, --b and --stats are required");
    if ((rate_ab > 0) != (limit_ab > 0)) usage("--rate-ab and --limit-ab go together");
    // A frame may leave up to the slack late: never more than 1% of either direction's delay
    // (at 0.2 ms RTT 1 us; at 80 ms the 50 us default, 0.06%).
    uint64_t shortest = (uint64_t)((delay_ab < delay_ba ? delay_ab : delay_ba) * 1e6);
    if (slack_ns > shortest / 100) slack_ns = shortest / 100;
    d[0].rate_bpns = rate_ab * 1e6 / 8 / 1e9, d[0].limit = (uint64_t)limit_ab, d[0].burst = burst_ab;
    g_jitter_ns = (uint64_t)(jitter * 1e6);
    int fa = open_port(dev_a), fb = open_port(dev_b);
    d[0].in_fd = fa, d[0].out_fd = fb, d[0].delay_ns = (uint64_t)(delay_ab * 1e6), d[0].loss = loss_ab / 100;
    d[1].in_fd = fb, d[1].out_fd = fa, d[1].delay_ns = (uint64_t)(delay_ba * 1e6), d[1].loss = loss_ba / 100;
    for (int i = 0; i < 2; ++i) {
        if (g_port.rx_ring && map_rx_ring(d[i].in_fd, &d[i].ring) != 0) {
            fprintf(stderr, "delayline: a PACKET_RX_RING of %zu bytes on %s: %s\n", g_port.rx_ring,
                    i ? dev_b : dev_a, strerror(errno));
            return 1;
        }
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
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) {
            fprintf(stderr, "delayline: --cpu %d: %s\n", cpu, strerror(errno));
            return 1;
        }
    }
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
            uint64_t wait = next > now ? next - now + slack_ns : 0;
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
    for (int i = 0; i < 2; ++i) { // a sanitized build's LeakSanitizer counts them otherwise
        free(d[i].q);
        unmap_rx_ring(&d[i].ring);
    }
    return 0;
}
