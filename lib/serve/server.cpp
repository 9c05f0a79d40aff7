// sluice::Server: the directory, the listening sockets (one per thread, SO_REUSEPORT, so the
// kernel spreads connections and no thread waits on another's accept), the cold-read pool,
// and the ring threads (serve/engine/worker.cpp).
#include "sluice/server.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <exception>
#include <thread>

#include "core/io/socket.hpp"
#include "core/io/sys_error.hpp"
#include "core/tls/aes_gcm.hpp"
#include "core/tls/keys.hpp"
#include "serve/engine/cold_reads.hpp"
#include "serve/engine/shared.hpp"
#include "serve/engine/worker.hpp"
#include "serve/get/get_port.hpp"

namespace sluice {

struct Server::Impl {
    serve::Shared sh;
    std::vector<UniqueFd> listen_fds;
    uint16_t port = 0;
    std::unique_ptr<serve::GetPort> get_port; // with get_sessions only
    std::atomic<bool> ran{false};
};

Server::Server(const std::filesystem::path& dir, ServeOptions options) : impl_(std::make_unique<Impl>()) {
    serve::Shared& sh = impl_->sh;
    if (options.threads == 0) options.threads = static_cast<unsigned>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
    if (options.threads > 256) throw Error(ErrorCode::usage, "threads: at most 256");
    if (!options.public_reads && options.token.empty())
        throw Error(ErrorCode::usage, "serving needs a token, or public_reads for unauthenticated reads");
    if (options.allow_upload && options.token.empty())
        throw Error(ErrorCode::usage, "uploads need a token, even with public reads");
    if (options.allow_upload && (options.max_uploads == 0 || options.upload_timeout_ms <= 0))
        throw Error(ErrorCode::usage, "max_uploads and upload_timeout_ms must be more than 0");
    if (options.max_connections < options.threads)
        throw Error(ErrorCode::usage, "max_connections must be at least the number of threads");
    if (options.request_timeout_ms <= 0 || options.idle_timeout_ms <= 0 || options.send_timeout_ms <= 0)
        throw Error(ErrorCode::usage, "timeouts must be more than 0");
    sh.root_display = dir.string();
    sh.root.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!sh.root) throw_errno(ErrorCode::destination, "cannot serve '" + sh.root_display + "'");
    sh.opt = std::move(options);
    if (!sh.opt.cert_file.empty() || !sh.opt.key_file.empty()) {
        // Before any socket listens: a certificate or key that cannot serve is the user's
        // error at start-up, never a handshake that fails for every client later.
        sh.web_tls = std::make_unique<tls::WebContext>(sh.opt.cert_file, sh.opt.key_file);
        const tls::GcmChoice& g = tls::gcm_choice(); // throws usage for an SLUICE_RECORD_ENGINE it cannot run
        sh.tls_path = std::string("TLS 1.3 only (") + tls::kCipherSuite + ", ALPN http/1.1), handshakes stepped on the "
                      "ring threads; records sealed and opened by " + g.name + " (" + g.why + ")";
    }
    for (unsigned i = 0; i < sh.opt.threads; ++i) {
        // One listener per ring thread on one port (SO_REUSEPORT): the kernel spreads
        // connections over them, so no thread hands accepted sockets to another.
        impl_->listen_fds.push_back(listen_tcp(sh.opt.bind_address, i == 0 ? sh.opt.http_port : impl_->port,
                                               {.backlog = 4096, .reuse_port = true}));
        if (i == 0) impl_->port = local_port(impl_->listen_fds[0].get());
        sh.counters.push_back(std::make_unique<serve::Counters>());
        sh.wakes.push_back(std::make_unique<serve::WakeQueue>());
        sh.clients.push_back(std::make_unique<serve::ClientBoard>());
        sh.clients.back()->rows.reserve(serve::ClientTable::kMaxClients);
    }
    const bool client_certs = !sh.opt.ca_file.empty() || !sh.opt.pins.empty() || !sh.opt.crl_file.empty();
    if (client_certs && (!sh.opt.get_sessions || sh.opt.cert_file.empty()))
        throw Error(ErrorCode::usage, "--ca, --pin and --crl judge the sluice port's clients: they need --port and the "
                                      "server's own --cert and --key");
    if (sh.opt.get_sessions && !sh.opt.cert_file.empty()) {
        // The HTTPS certificate authenticates the sluice port too; loaded and checked (with
        // the client CA, pins and CRL) before anything listens, as the HTTPS one.
        sh.get_certs = std::make_shared<const tls::CertContext>(
            Certificates{sh.opt.cert_file, sh.opt.key_file, sh.opt.ca_file, sh.opt.pins, sh.opt.crl_file}, tls::Side::server);
    }
    if (sh.opt.get_sessions) {
        if (sh.opt.max_get_sessions == 0) throw Error(ErrorCode::usage, "max_get_sessions must be at least 1");
        if (sh.opt.allow_upload && sh.opt.max_pushes == 0) throw Error(ErrorCode::usage, "max_pushes must be at least 1");
        if (!sh.opt.allow_upload && sh.opt.push_trust != SenderTrust::none)
            throw Error(ErrorCode::usage, "push_trust (--push-keep-owners, --push-keep-privileges) needs allow_upload");
        impl_->get_port = std::make_unique<serve::GetPort>(sh);
    }
    const int err = serve::probe_cachestat();
    const int sink_err = serve::probe_null_sink();
    sh.null_sink = sink_err == 0;
    sh.cold_check = err == 0;
    sh.cold_check_text = err == 0 ? "cachestat: ranges not in the page cache are read by a pool of " +
                                        std::to_string(sh.opt.cold_read_threads) + " threads" +
                                        (sh.null_sink ? " (sendfile into /dev/null, no copy)"
                                                      : std::string(" (pread into a scratch buffer: sendfile into "
                                                                    "/dev/null refused: ") +
                                                            std::strerror(sink_err) + ")")
                                  : std::string("none: cachestat(2) refused (") + std::strerror(err) +
                                        "); a cold read blocks its ring thread";
    if (sh.opt.cold_read_threads == 0) {
        sh.cold_check = false;
        sh.cold_check_text = "none: no cold-read threads; a cold read (and an upload's fsync with --sync) blocks its ring thread";
    }
}

Server::~Server() = default;

uint16_t Server::port() const { return impl_->port; }

uint16_t Server::get_port() const { return impl_->get_port ? impl_->get_port->port() : 0; }

void Server::run() {
    if (impl_->ran.exchange(true)) throw Error(ErrorCode::usage, "Server::run: already run");
    serve::Shared& sh = impl_->sh;
    sh.cold = std::make_unique<serve::ColdReads>(sh.opt.cold_read_threads, sh.null_sink);
    std::mutex err_mu;
    std::exception_ptr first;
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < sh.opt.threads; ++i) {
        threads.emplace_back([&, i] {
            try {
                serve::Worker w(sh, i, std::move(impl_->listen_fds[i]));
                w.run();
            } catch (...) {
                {
                    std::lock_guard lock(err_mu);
                    if (!first) first = std::current_exception();
                }
                stop(); // one thread failed: the others drain and end
            }
        });
    }
    if (impl_->get_port) {
        threads.emplace_back([&] {
            try {
                impl_->get_port->run();
            } catch (...) {
                {
                    std::lock_guard lock(err_mu);
                    if (!first) first = std::current_exception();
                }
                stop();
            }
        });
    }
    if (sh.opt.verbose && sh.opt.log) {
        sh.opt.log("serving '" + sh.root_display + "' on port " + std::to_string(impl_->port) + " with " +
                   std::to_string(sh.opt.threads) + " threads");
    }
    for (auto& t : threads) t.join();
    sh.cold.reset(); // after the threads: no connection waits for a cold read any more
    if (first) std::rethrow_exception(first);
}

void Server::stop() {
    impl_->sh.stopping.store(true);
    for (auto& w : impl_->sh.wakes) w->poke();
}

ServeStats Server::stats() const { return impl_->sh.snapshot(); }

} // namespace sluice
