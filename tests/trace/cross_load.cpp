// Loads BPF objects built for other architectures into this kernel's verifier, without
// attaching them: their bytecode is the same BPF whatever CPU they were built for, so this
// shows that, say, the arm64 build passes the verifier, and its CO-RE relocations resolve
// against a real kernel's BTF. Root only (exit 77: skipped otherwise).
#include <bpf/libbpf.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

int main(int argc, char** argv) {
    if (geteuid() != 0) {
        std::puts("SKIP: loading BPF programs needs root");
        return 77;
    }
    int failed = 0;
    for (int i = 1; i < argc; ++i) {
        bpf_object* obj = bpf_object__open_file(argv[i], nullptr);
        int err = obj ? bpf_object__load(obj) : -errno;
        std::printf("%s: %s\n", argv[i], err ? std::strerror(-err) : "loads");
        failed += err != 0;
        bpf_object__close(obj);
    }
    return failed ? 1 : 0;
}
