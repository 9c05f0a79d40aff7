#pragma once
// --exclude / --include / --exclude-from: a documented subset of rsync's filter rules
// (docs/guarantees.md, "Filters"). In core/: the sender walks by them, and with --delete the
// receiver keeps what they exclude (as rsync does without --delete-excluded). Rules are tried in the order given; the first whose pattern
// matches decides; an entry no rule matches is sent. An excluded directory is not walked.
//   '/' at the start   anchors the pattern at the start of the path in the transfer
//                      (which begins with the source's own name, as rsync without a trailing '/')
//   '/' at the end     matches directories only
//   '/' inside, or '**' matches the whole path (any leading directories if not anchored);
//                      otherwise the pattern matches the last component only
//   '*' any run of characters except '/', '**' any run including '/', '?' one character
//   except '/', '[...]' a class ('!' or '^' negates, ranges a-z); '\' quotes the next character
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

class FilterRules {
public:
    void add(bool include, std::string pattern);
    // Reads rules from a file, one per line: "- PATTERN" / "+ PATTERN", or a bare pattern
    // (excluded); empty lines and lines starting with '#' or ';' are skipped. Throws
    // Error(usage) naming the file and line.
    void add_from_file(const std::string& path);
    // Parses "+ PATTERN" / "- PATTERN", or ". FILE" for the rules in FILE (the form
    // SendOptions carries rules in).
    void add_rule(std::string_view rule);
    bool empty() const { return rules_.empty(); }
    // The rules as "+ PATTERN" / "- PATTERN", files read: what TREE_OPTIONS carries.
    std::vector<std::string> texts() const;
    // rel: '/'-separated path in the transfer.
    bool excluded(std::string_view rel, bool is_dir) const;

private:
    struct Rule {
        bool include;
        bool anchored;
        bool dir_only;
        bool whole_path;
        std::string glob;
        std::string text; // as given
    };
    std::vector<Rule> rules_;
};

// Glob match of the whole text (the rules above); exposed for tests.
bool glob_match(std::string_view pattern, std::string_view text);

} // namespace sluice
