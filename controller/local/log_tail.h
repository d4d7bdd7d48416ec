#pragma once
// Reading engines' log files for `nibble logs` and for the message of an engine's exit: the last
// lines (reading at most the final 1 MiB, so a long-running engine's large log costs the same as
// a short one), the lines appended since an offset (`logs -f`), and the log of a recipe's
// previous replica (`logs --previous`).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace nibble::local {

// Up to `lines` final lines of the file (each ending in '\n'); "" when it cannot be read. `end`,
// when given, receives the offset just past what was read, from which lines_since follows.
std::string tail_lines(const std::filesystem::path& file, int lines, std::uintmax_t* end = nullptr);

// The complete lines written to the file after byte `offset` (at most 1 MiB of them), and
// `offset` moved past them; a line still being written waits for its newline. A file now
// shorter than `offset` was replaced and is read from its start.
std::string lines_since(const std::filesystem::path& file, std::uintmax_t& offset);

// The log of the recipe's most recent replica that is gone: the newest
// logs_dir/<recipe>-<suffix>.log (replica ids are the recipe's name, '-' and five characters)
// that is not in `current`. nullopt when there is none.
std::optional<std::filesystem::path> previous_replica_log(
    const std::filesystem::path& logs_dir, const std::string& recipe,
    const std::vector<std::filesystem::path>& current);

}  // namespace nibble::local
