// The delay line's AF_PACKET side (delayline.h): one socket per router veth, frames read by
// recv() or from an mmap'ed PACKET_RX_RING, sent by send() or in sendmmsg() batches.
// Everything here costs per frame, and the line's CPU per frame is the emulator's ceiling on
// this 2-vCPU machine (docs/benchmarks.md, "the emulator's ceiling"): a syscall saved per
// frame is forwarding rate gained.
#ifndef _GNU_SOURCE // meson defines it for the project; a bare gcc build of this file too
#define _GNU_SOURCE
#endif
#include "delayline.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>

// --rcvbuf: each input socket's buffer without a ring (the kernel doubles it). 16 MiB (32 in
// effect) dropped 40 thousand frames in 5 s at 20 ms under 64 unpaced BBR streams from a
// zero-copy sender (splice, sendfile) and none from a copying one (read_send, iperf3); 256 MiB
// dropped none of either at the same rate (h16j, docs/benchmarks.md): a frame whose data is
// page-cache pages is charged more against the buffer than its length, so the line's socket
// filled while the line kept up. Memory is only used by frames not yet read. A ring's slots are
// a fixed 2048 bytes whatever the frame's pages.
struct port_options g_port = {.rcvbuf = 256 << 20, .rx_ring = 256 << 20, .tx_batch = 64};

uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int open_port(const char* dev) {
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
    // What the line writes waits in the tbf, charged to this socket until it leaves. A send
    // buffer larger than any tbf queue here means a send never fails with EAGAIN while the
    // line runs, so a frame refused inside a sendmmsg batch (whose error the kernel does not
    // return) can only have been refused by the tbf (send_due).
    int buf = 1 << 30;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &g_port.rcvbuf, sizeof g_port.rcvbuf);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf);
    return fd;
}

// Slots of 2048 bytes hold a 1514-byte frame with its tpacket2_hdr; blocks of 1 MiB (the ring
// is allocated per block, so no large contiguous allocation is needed).
int map_rx_ring(int fd, struct rx_ring* ring) {
    enum { kSlot = 2048, kBlock = 1 << 20 };
    int v = TPACKET_V2;
    if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, sizeof v) != 0) return -1;
    size_t blocks = (g_port.rx_ring + kBlock - 1) / kBlock;
    struct tpacket_req req = {.tp_block_size = kBlock, .tp_block_nr = (unsigned)blocks, .tp_frame_size = kSlot,
                              .tp_frame_nr = (unsigned)(blocks * (kBlock / kSlot))};
    if (setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) != 0) return -1;
    size_t bytes = blocks * kBlock;
    void* map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED) return -1;
    *ring = (struct rx_ring){.map = map, .bytes = bytes, .slots = req.tp_frame_nr, .slot_size = kSlot, .next = 0};
    return 0;
}

void unmap_rx_ring(struct rx_ring* ring) {
    if (ring->map) munmap(ring->map, ring->bytes);
    ring->map = NULL;
}

// The queue's next free slot, or a scratch frame when the queue is full (the frame is read
// anyway, to drop it as overflow).
static struct frame* free_slot(struct direction* d, struct frame* scratch) {
    return d->count == d->cap ? scratch : &d->q[(d->head + d->count) % d->cap];
}

static void input_by_recv(struct direction* d) {
    static struct frame scratch;
    for (int i = 0; i < kBatch; ++i) {
        struct frame* f = free_slot(d, &scratch);
        ssize_t n = recv(d->in_fd, f->data, sizeof f->data, MSG_TRUNC);
        if (n < 0) return; // EAGAIN: nothing more now
        d->rx++;
        if (f == &scratch || n > kFrameMax) {
            d->overflow++;
            continue;
        }
        f->len = (uint16_t)n;
        admit(d, f);
    }
}

static void input_by_ring(struct direction* d) {
    static struct frame scratch;
    struct rx_ring* r = &d->ring;
    for (int i = 0; i < kBatch; ++i) {
        struct tpacket2_hdr* h = (struct tpacket2_hdr*)(r->map + r->next * r->slot_size);
        if (!(__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER)) return; // nothing more now
        d->rx++;
        struct frame* f = free_slot(d, &scratch);
        // A frame longer than its slot arrives cut (snaplen < len): as recv()'s MSG_TRUNC, overflow.
        if (f == &scratch || h->tp_snaplen < h->tp_len || h->tp_len > kFrameMax) {
            d->overflow++;
        } else {
            memcpy(f->data, (unsigned char*)h + h->tp_mac, h->tp_len);
            f->len = (uint16_t)h->tp_len;
            admit(d, f);
        }
        __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE); // the slot is the kernel's again
        r->next = (r->next + 1) % r->slots;
    }
}

// Reads what is waiting on d->in_fd (at most one batch) into d's queue.
void take_input(struct direction* d) {
    if (d->ring.map)
        input_by_ring(d);
    else
        input_by_recv(d);
}

static void sent(struct direction* d, size_t frames) {
    for (size_t i = 0; i < frames; ++i) {
        d->tx++;
        d->bytes_tx += d->q[d->head].len;
        d->head = (d->head + 1) % d->cap;
        d->count--;
    }
}

static void refused(struct direction* d, int err) {
    if (err == ENOBUFS)
        d->enobufs++; // the tbf's queue is full: the bottleneck dropped it
    else
        d->send_errors++; // ENETDOWN while tearing down
    d->head = (d->head + 1) % d->cap;
    d->count--;
}

// Sends every due frame, in order, up to g_port.tx_batch per syscall; returns the earliest due
// time still queued (0: none), or 0 with *blocked = 1 when the output socket is full (wait for
// POLLOUT).
uint64_t send_due(struct direction* d, int* blocked) {
    static struct mmsghdr msgs[kBatch];
    static struct iovec iov[kBatch];
    uint64_t now = now_ns();
    *blocked = 0;
    while (d->count) {
        size_t n = 0;
        while (n < g_port.tx_batch && n < d->count) {
            struct frame* f = &d->q[(d->head + n) % d->cap];
            if (f->due_ns > now) break;
            iov[n] = (struct iovec){.iov_base = f->data, .iov_len = f->len};
            msgs[n] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[n], .msg_iovlen = 1}};
            ++n;
        }
        if (!n) return d->q[d->head].due_ns;
        d->batches++;
        int r = n == 1 ? (int)(send(d->out_fd, iov[0].iov_base, iov[0].iov_len, 0) < 0 ? -1 : 1)
                       : sendmmsg(d->out_fd, msgs, (unsigned)n, 0);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            *blocked = 1;
            return 0;
        }
        if (r < 0) {
            refused(d, errno);
            continue;
        }
        sent(d, (size_t)r);
        // sendmmsg stops at the first frame refused and returns only how many went before
        // it, not the error. EAGAIN cannot be it (the send buffer outsizes any tbf queue:
        // open_port), so the frame was refused and freed: by the tbf while the line runs.
        if ((size_t)r < n) refused(d, ENOBUFS);
    }
    return 0;
}

// Frames dropped at in_fd because the line did not read them in time, or found its ring full
// (the counter resets on read).
void add_socket_drops(struct direction* d) {
    struct tpacket_stats st;
    socklen_t len = sizeof st;
    if (getsockopt(d->in_fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) d->sock_drops += st.tp_drops;
}
