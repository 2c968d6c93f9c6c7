// The one way tune writes a file the user named (a report, an sbatch script,
// an adapter): a regular file, replaced whole.
//
//   check_output_path("r.html", "the report");          // before the work: fail early
//   write_output_file("r.html", page, "the report");    // temp file beside it, then rename
//
// The temporary file is made with mkstemp (O_CREAT | O_EXCL: a random name, never an
// existing file or a symlink planted there) in the target's directory, so the rename is
// atomic, and it is removed on every failure (a full disk leaves the old file or none, never
// a truncated one). A path that names something other than a regular file (a directory,
// /dev/null, a FIFO) is refused: it is never replaced. `what` names the file in messages.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tune {

// The file could not be written where the user asked (exit 2): the path, not the data, is the problem.
class OutputFileError : public std::runtime_error {
public:
    explicit OutputFileError(const std::string& message) : std::runtime_error(message) {}
};

// Throws OutputFileError unless `path` can be written as a regular file; probes the directory
// with a temporary file, which it removes.
void check_output_path(const std::filesystem::path& path, std::string_view what);

// Writes `content` to `path` atomically; throws OutputFileError with the reason.
void write_output_file(const std::filesystem::path& path, std::string_view content, std::string_view what);

}  // namespace tune
