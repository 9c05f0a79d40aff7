#include "serve/engine/file_cache.hpp"

#include <fcntl.h>

#include "serve/engine/doc_root.hpp"
#include "serve/http/response.hpp"

namespace sluice::serve {

std::shared_ptr<const CachedFile> FileCache::get(const std::string& rel, int64_t now_ms, UniqueFd* dir, int* status) {
    *status = 0;
    if (auto it = slots_.find(rel); it != slots_.end()) {
        if (it->second.expires_ms > now_ms) return it->second.file;
        slots_.erase(it);
    }
    Opened o = open_beneath(root_, rel);
    if (o.status) {
        *status = o.status;
        return nullptr;
    }
    auto f = std::make_shared<CachedFile>();
    if (::fstat(o.fd.get(), &f->st) != 0) {
        *status = 500;
        return nullptr;
    }
    if (S_ISDIR(f->st.st_mode)) {
        *dir = std::move(o.fd);
        return nullptr;
    }
    if (!S_ISREG(f->st.st_mode)) {
        *status = 403;
        return nullptr;
    }
    f->fd = std::move(o.fd);
    if (no_readahead_) ::posix_fadvise(f->fd.get(), 0, 0, POSIX_FADV_RANDOM); // advice: a refusal only costs a wait
    const int64_t mtime_ns = static_cast<int64_t>(f->st.st_mtim.tv_sec) * 1'000'000'000 + f->st.st_mtim.tv_nsec;
    http::format_etag(f->st.st_ino, static_cast<uint64_t>(f->st.st_size), mtime_ns, f->etag);
    http::format_date(f->st.st_mtim.tv_sec, f->last_modified);
    if (slots_.size() >= kMaxEntries) slots_.clear();
    slots_.emplace(rel, Slot{f, now_ms + kValidMs});
    return f;
}

} // namespace sluice::serve
