#include "cli_args.hpp"

#include <charconv>

#include "sluice/error.hpp"

namespace sluice::cli {

Args::Args(int argc, char** argv, std::set<std::string> value_options, std::set<std::string> flag_options) {
    bool only_positionals = false;
    for (int i = 0; i < argc; ++i) {
        std::string a = argv[i];
        if (only_positionals || a == "-" || a.size() < 2 || a[0] != '-') {
            positionals_.push_back(a);
            continue;
        }
        if (a == "--") {
            only_positionals = true;
            continue;
        }
        std::string name = a, val;
        bool has_val = false;
        if (auto eq = a.find('='); eq != std::string::npos) {
            name = a.substr(0, eq);
            val = a.substr(eq + 1);
            has_val = true;
        }
        if (value_options.count(name)) {
            if (!has_val) {
                if (i + 1 >= argc) throw Error(ErrorCode::usage, "option " + name + " needs a value");
                val = argv[++i];
            }
            values_[name] = val;
            in_order_.emplace_back(name, val);
        } else if (flag_options.count(name) && !has_val) {
            flags_.insert(name);
        } else {
            throw Error(ErrorCode::usage, "unknown option '" + a + "' (see --help)");
        }
    }
}

std::optional<std::string> Args::value(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) return std::nullopt;
    return it->second;
}

unsigned Args::uint_value(const std::string& name, unsigned fallback, unsigned lo, unsigned hi) const {
    auto v = value(name);
    if (!v) return fallback;
    unsigned out = 0;
    auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
    if (ec != std::errc() || p != v->data() + v->size() || out < lo || out > hi)
        throw Error(ErrorCode::usage,
                    name + " '" + *v + "': expected a whole number from " + std::to_string(lo) + " to " + std::to_string(hi));
    return out;
}

Encrypt encrypt_option(const Args& a) {
    if (a.flag("--encrypt") && a.flag("--no-encrypt")) throw Error(ErrorCode::usage, "--encrypt and --no-encrypt: give one of them");
    if (a.flag("--encrypt")) return Encrypt::on;
    if (a.flag("--no-encrypt")) return Encrypt::off;
    return Encrypt::automatic;
}

Certificates certificates_option(const Args& a) {
    Certificates c;
    c.cert_file = a.value("--cert").value_or("");
    c.key_file = a.value("--key").value_or("");
    c.ca_file = a.value("--ca").value_or("");
    c.crl_file = a.value("--crl").value_or("");
    for (const auto& [name, value] : a.in_order())
        if (name == "--pin") c.pins.push_back(value);
    return c;
}

} // namespace sluice::cli
