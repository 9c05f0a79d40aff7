// The delay line's shared types (bench/wan/README.md): delayline.c holds the loop, the loss
// model and the options; delayline_port.c the AF_PACKET side (input by recv or an mmap'ed
// ring, output by send or sendmmsg batches).
#ifndef SLUICE_BENCH_WAN_DELAYLINE_H
#define SLUICE_BENCH_WAN_DELAYLINE_H
#include <stddef.h>
#include <stdint.h>

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

// An input socket's PACKET_RX_RING (TPACKET_V2): the kernel copies each frame into the next
// slot and marks it TP_STATUS_USER; the line reads slots in order without a syscall.
struct rx_ring {
    unsigned char* map; // NULL: no ring, one recv() per frame
    size_t bytes, slots, slot_size, next;
};

struct direction {
    const char* name;
    int in_fd, out_fd;
    struct rx_ring ring;
    uint64_t delay_ns;
    double loss; // random loss, 0..1
    struct ge_model ge;
    // The line's own bottleneck (--rate-ab/--limit-ab; 0: none, a tbf may be on the veth):
    // a token bucket of this rate and `burst` bytes with a queue of `limit` bytes, drop-tail.
    double rate_bpns; // bytes per ns
    double burst, tokens;
    uint64_t limit, link_free_ns; // link_free_ns: when the last frame admitted leaves it
    struct frame* q; // ring of `cap` frames
    size_t cap, head, count;
    uint64_t last_due_ns;
    // counters (written to the stats file)
    uint64_t rx, lost, overflow, enobufs, send_errors, tx, bytes_tx;
    uint64_t queue_drops; // dropped by the line's own bottleneck: its queue was full
    uint64_t sock_drops; // frames the kernel dropped before we read them (PACKET_STATISTICS): our ceiling
    uint64_t batches;    // output syscalls (send or sendmmsg): tx / batches is the batching achieved
    int rcvbuf;          // in_fd's receive buffer in effect (SO_RCVBUF), for the stats
};

struct port_options {
    int rcvbuf;       // SO_RCVBUF of an input socket without a ring
    size_t rx_ring;   // bytes of PACKET_RX_RING per input socket; 0: recv() per frame
    unsigned tx_batch; // frames per sendmmsg at most; 1: send() per frame
};

extern struct port_options g_port;

uint64_t now_ns(void);
int open_port(const char* dev);
int map_rx_ring(int fd, struct rx_ring* ring);
void unmap_rx_ring(struct rx_ring* ring);
// A frame just read into the queue's next free slot (d->q[(head + count) % cap], len set):
// decides its fate (loss, due time) and keeps it or not; in delayline.c.
void admit(struct direction* d, struct frame* f);
void take_input(struct direction* d);
uint64_t send_due(struct direction* d, int* blocked);
void add_socket_drops(struct direction* d);

#endif
