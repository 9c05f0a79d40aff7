#pragma once
// A small command-line parser: long options with values (--opt V or --opt=V), flags, and
// positionals. Unknown options are usage errors naming the option.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sluice/sluice.hpp"

namespace sluice::cli {

class Args {
public:
    // value_options take a value; flag_options do not.
    Args(int argc, char** argv, std::set<std::string> value_options, std::set<std::string> flag_options);
    std::optional<std::string> value(const std::string& name) const;
    bool flag(const std::string& name) const { return flags_.count(name) > 0; }
    const std::vector<std::string>& positionals() const { return positionals_; }
    // Every (option, value) given, in command-line order (for repeatable options such as
    // --exclude, where the order is the meaning).
    const std::vector<std::pair<std::string, std::string>>& in_order() const { return in_order_; }
    unsigned uint_value(const std::string& name, unsigned fallback, unsigned lo, unsigned hi) const;

private:
    std::map<std::string, std::string> values_;
    std::set<std::string> flags_;
    std::vector<std::string> positionals_;
    std::vector<std::pair<std::string, std::string>> in_order_;
};

// --encrypt / --no-encrypt (at most one of them).
Encrypt encrypt_option(const Args& a);

// --cert, --key, --ca, --crl and --pin (repeatable): certificate mode, checked by the library.
Certificates certificates_option(const Args& a);

} // namespace sluice::cli
