// SPDX-License-Identifier: GPL-2.0
/* sluice trace: count the bytes a process tree moves, by syscall and io_uring opcode and by
 * what the fd is, plus syscalls, context switches and on-CPU time.
 *
 * One object, built twice (meson.build here), each with its own skeleton:
 *   trace.bpf.o       knows what an fd is by reading the kernel's file table (kernel_reads.bpf.h);
 *   trace_nokr.bpf.o  with -DSL_NO_KERNEL_READS: reads only tracepoint arguments and the traced
 *                     process's memory, so it loads under lockdown=confidentiality; it knows what
 *                     an fd is from the syscall that created it (fd_table.bpf.h, fd_create.bpf.h).
 * Only tracepoints: fentry/fexit are refused on the target machine and kprobes are not built.
 * Each piece below does one job and reads alone; the order is the order of their dependencies. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "trace.h"
#include "syscall_nr.h"

char LICENSE[] SEC("license") = "GPL";

#include "maps.bpf.h" /* procs, threads, flows, the event ring */
#ifndef SL_NO_KERNEL_READS
#include "kernel_reads.bpf.h" /* fd class from the inode */
#else
#include "fd_table.bpf.h"  /* fd class from the creating syscall ... */
#include "fd_create.bpf.h" /* ... which these programs follow */
#endif
#include "syscalls.bpf.h" /* bytes per syscall */
#include "uring.bpf.h"    /* bytes per io_uring request */
#include "sched.bpf.h"    /* processes, threads, CPU */
