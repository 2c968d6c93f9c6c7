// The one way a report reaches the disk: a regular file, replaced whole.
//
//   check_output_path("r.html");          // before a sweep's first trial: fail early
//   write_output_file("r.html", page);    // temp file beside it, then rename
//
// The temporary file is made with mkstemp (O_CREAT | O_EXCL: a random name, never an
// existing file or a symlink planted there) in the target's directory, so the rename is
// atomic, and it is removed on every failure. A path that names something other than a
// regular file (a directory, /dev/null, a FIFO) is refused: a report never replaces it.
#pragma once

#include <filesystem>
#include <string_view>

namespace tune {

// Throws ReportError unless `path` can be written as a regular file; probes the directory
// with a temporary file, which it removes.
void check_output_path(const std::filesystem::path& path);

// Writes `content` to `path` atomically; throws ReportError with the reason.
void write_output_file(const std::filesystem::path& path, std::string_view content);

}  // namespace tune
