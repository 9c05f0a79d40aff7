#include "core/tls/openssl_text.hpp"

#include <openssl/err.h>

#include "sluice/printable.hpp"

namespace sluice::tls {

std::string openssl_reason() {
    const unsigned long e = ERR_peek_last_error();
    char text[256] = {};
    if (e) ERR_error_string_n(e, text, sizeof text);
    ERR_clear_error();
    return e ? text : "no reason given";
}

std::string name_text(const X509_NAME* name) {
    char buf[256] = {};
    if (name) X509_NAME_oneline(name, buf, sizeof buf);
    return printable(buf);
}

} // namespace sluice::tls
