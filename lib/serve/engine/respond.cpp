// The HTTP semantics of one request: method, target, token, then a file (validators,
// conditional request, range), a directory (redirect or listing) or /_stats.
#include <sys/stat.h>

#include <ctime>

#include "serve/engine/file_cache.hpp"
#include "serve/engine/worker.hpp"
#include "serve/http/listing.hpp"
#include "serve/http/response.hpp"
#include "serve/http/target.hpp"

namespace sluice::serve {

namespace {

// Compares without returning early on the first difference, so a client cannot find the
// token a byte at a time from response times.
bool same_secret(std::string_view a, std::string_view b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    const size_t n = a.size() < b.size() ? a.size() : b.size();
    for (size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0 && !b.empty();
}

enum class Auth { ok_header, ok_query, missing, wrong };

Auth check_token(const http::Request& req, std::string_view query, const std::string& token) {
    std::string_view a = req.authorization;
    if (!a.empty()) {
        if (a.size() > 7 && http::iequals(a.substr(0, 7), "Bearer ")) {
            std::string_view given = a.substr(7);
            while (!given.empty() && given.front() == ' ') given.remove_prefix(1);
            return same_secret(given, token) ? Auth::ok_header : Auth::wrong;
        }
        return Auth::wrong;
    }
    std::string given;
    if (http::query_value(query, "token", given)) return same_secret(given, token) ? Auth::ok_query : Auth::wrong;
    return Auth::missing;
}

bool wants_json(const http::Request& req, std::string_view query) {
    std::string fmt;
    if (http::query_value(query, "format", fmt)) return fmt == "json";
    return req.accept.find("application/json") != std::string_view::npos;
}

} // namespace

std::string_view Worker::date() {
    const time_t now = ::time(nullptr);
    if (now != date_sec_) {
        http::format_date(now, date_);
        date_sec_ = now;
    }
    return date_;
}

void Worker::respond_body(Conn& k, int status, bool keep_alive, std::string_view type, std::unique_ptr<std::string> body,
                          bool head_only) {
    http::Head h;
    h.status = status;
    h.content_length = body ? body->size() : 0;
    h.content_type = type;
    h.date = date();
    h.keep_alive = keep_alive;
    size_t n = http::write_head(h, head_, sizeof head_);
    k.keep_alive = keep_alive;
    k.status = status;
    k.body_off = 0;
    if (!head_only && body && !body->empty()) k.body = std::move(body);
    start(k, n);
}

void Worker::respond_simple(Conn& k, int status, bool keep_alive, std::string_view text, bool www_auth) {
    auto body = std::make_unique<std::string>(text);
    body->push_back('\n');
    http::Head h;
    h.status = status;
    h.content_length = body->size();
    h.content_type = "text/plain; charset=utf-8";
    h.date = date();
    h.keep_alive = keep_alive && !draining_;
    h.www_authenticate = www_auth;
    if (status == 405) h.allow = sh_.opt.allow_upload ? "GET, HEAD, PUT, POST" : "GET, HEAD";
    size_t n = http::write_head(h, head_, sizeof head_);
    k.keep_alive = h.keep_alive;
    k.status = status;
    k.body_off = 0;
    k.body = std::move(body);
    start(k, n);
}

void Worker::handle(Conn& k, const http::Request& req) {
    const bool keep = req.keep_alive && !draining_ && !k.peer_done;
    const bool upload = req.method == http::Method::put || req.method == http::Method::post;
    if (upload && !sh_.opt.allow_upload) {
        cnt_.add(cnt_.uploads_failed);
        return respond_simple(k, 403, false, "uploads are not allowed here (sluice serve --allow-upload)");
    }
    // A body cannot be skipped safely without reading it: refuse and close.
    if (req.has_body && !upload)
        return respond_simple(k, req.chunked ? 501 : 413, false, "request bodies are accepted only by PUT and POST");
    if (req.method == http::Method::unknown) return respond_simple(k, 501, keep, "method not implemented");
    if (req.method == http::Method::other_known)
        return respond_simple(k, 405, keep, sh_.opt.allow_upload ? "only GET, HEAD, PUT and POST are served"
                                                                 : "only GET and HEAD are served");
    const bool head_only = req.method == http::Method::head;
    http::Target& t = target_; // reused: its strings keep their capacity, no allocation per request
    if (int st = http::parse_target(req.target, t)) return respond_simple(k, st, false, "bad request target");

    Auth auth = Auth::ok_header;
    if (!sh_.opt.public_reads || upload) { // --public is for reads: an upload always needs the token
        auth = check_token(req, t.query, sh_.opt.token);
        if (auth == Auth::missing || auth == Auth::wrong) {
            if (upload) cnt_.add(cnt_.uploads_failed);
            return respond_simple(k, 401, keep && !upload,
                                  auth == Auth::missing ? "a token is required" : "wrong token", true);
        }
    }
    if (upload) return begin_upload(k, req, t);
    if (t.rel == "_stats" && !t.trailing_slash) {
        auto body = std::make_unique<std::string>(sh_.snapshot().to_json());
        body->push_back('\n');
        return respond_body(k, 200, keep, "application/json", std::move(body), head_only);
    }
    UniqueFd dir;
    int open_status = 0;
    files_.drop_if_changed(sh_.upload_gen.load(std::memory_order_relaxed));
    std::shared_ptr<const CachedFile> file = files_.get(t.rel, now_ms_, &dir, &open_status);
    if (open_status) {
        return respond_simple(k, open_status, keep,
                              open_status == 404   ? "not found"
                              : open_status == 403 ? "forbidden (outside the directory, or not a readable file)"
                                                   : "cannot open");
    }
    if (!file) {
        if (!t.trailing_slash) { // so that the listing's relative links resolve beneath it
            std::string loc = http::percent_encode_path(t.path) + "/";
            if (!t.query.empty()) loc += "?" + std::string(t.query);
            if (loc.size() > 512) return respond_simple(k, 414, keep, "path too long to redirect");
            http::Head h;
            h.status = 301;
            h.date = date();
            h.location = loc;
            h.content_length = 0;
            h.keep_alive = keep;
            k.keep_alive = keep;
            k.status = 301;
            return start(k, http::write_head(h, head_, sizeof head_));
        }
        std::string link_query;
        if (auth == Auth::ok_query) link_query = "token=" + http::percent_encode_path(sh_.opt.token);
        const bool json = wants_json(req, t.query);
        auto body = std::make_unique<std::string>();
        if (!http::make_listing(dir.get(), t.path, link_query, json ? http::ListingFormat::json : http::ListingFormat::html,
                                *body))
            return respond_simple(k, 403, keep, "cannot list the directory");
        return respond_body(k, 200, keep, json ? "application/json" : "text/html; charset=utf-8", std::move(body),
                            head_only);
    }
    const struct stat& st = file->st;
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const std::string_view etag = file->etag, last_modified = file->last_modified;
    http::Head h;
    h.date = date();
    h.etag = etag;
    h.last_modified = last_modified;
    h.accept_ranges = true;
    h.keep_alive = keep;
    h.content_type = http::content_type_for(t.rel);

    // RFC 9110 13.2.2: If-None-Match first; If-Modified-Since only without it.
    bool not_modified = false;
    if (!req.if_none_match.empty()) {
        not_modified = http::etag_list_matches(req.if_none_match, etag);
    } else if (!req.if_modified_since.empty()) {
        time_t ims = http::parse_date(req.if_modified_since);
        not_modified = ims >= 0 && st.st_mtim.tv_sec <= ims;
    }
    k.keep_alive = keep;
    if (not_modified) {
        h.status = 304;
        k.status = 304;
        return start(k, http::write_head(h, head_, sizeof head_));
    }
    http::ByteRange r{0, size ? size - 1 : 0};
    http::RangeResult rr = http::RangeResult::none;
    // If-Range: the range applies only to the version the client has (an exact validator).
    if (!req.range.empty() && (req.if_range.empty() || req.if_range == etag || req.if_range == last_modified))
        rr = http::parse_range(req.range, size, r);
    if (rr == http::RangeResult::unsatisfiable) {
        h.status = 416;
        h.full_size = size;
        h.content_length = 0;
        k.status = 416;
        return start(k, http::write_head(h, head_, sizeof head_));
    }
    if (rr == http::RangeResult::ok) {
        h.status = 206;
        h.range = &r;
        h.full_size = size;
        h.content_length = r.last - r.first + 1;
    } else {
        h.status = 200;
        h.content_length = size;
        r.first = 0;
        r.last = size ? size - 1 : 0;
    }
    k.status = h.status;
    if (!head_only && h.content_length > 0) {
        k.file = file;
        k.file_fd = file->fd.get();
        k.file_off = r.first;
        k.file_end = r.first + h.content_length;
    }
    start(k, http::write_head(h, head_, sizeof head_));
}

} // namespace sluice::serve
