#include "reports/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "reports/report_error.h"

namespace tune {
namespace {

// Owns a temporary file from mkstemp until it is renamed into place; unlinks it otherwise.
class TempFile {
public:
    explicit TempFile(const std::filesystem::path& target) {
        const std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
        name_ = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
        fd_ = ::mkstemp(name_.data());
        if (fd_ < 0)
            throw ReportError(fmt::format("cannot write the report to {}: cannot create a file in {}: {}",
                                          target.string(), dir.string(), std::strerror(errno)));
    }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    ~TempFile() {
        if (fd_ >= 0) ::close(fd_);
        if (!kept_) ::unlink(name_.c_str());
    }

    int fd() const { return fd_; }
    const std::string& name() const { return name_; }
    // Closes the file and reports whether everything written reached it.
    bool close() {
        const int rc = ::close(fd_);
        fd_ = -1;
        return rc == 0;
    }
    void keep() { kept_ = true; }

private:
    std::string name_;
    int fd_ = -1;
    bool kept_ = false;
};

bool write_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd, bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
}

// Refuses a path that cannot name a regular file, or names something else already.
void check_target(const std::filesystem::path& path) {
    const std::string p = path.string();
    if (p.empty()) throw ReportError("the report path is empty");
    if (p.back() == '/' || !path.has_filename() || path.filename() == "." || path.filename() == "..")
        throw ReportError(fmt::format("cannot write the report to {}: the path names a directory, not a file", p));
    struct stat st {};
    // stat follows a symlink at the final name: the rename replaces the link, but a link to a
    // device or a directory still says the user pointed at something that is not a report.
    if (::stat(p.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode))
            throw ReportError(fmt::format("cannot write the report to {}: it is a directory", p));
        if (!S_ISREG(st.st_mode))
            throw ReportError(fmt::format("cannot write the report to {}: it is not a regular file (a device, "
                                          "FIFO or socket is never replaced)",
                                          p));
    } else if (errno != ENOENT) {
        throw ReportError(fmt::format("cannot write the report to {}: {}", p, std::strerror(errno)));
    }
}

}  // namespace

void check_output_path(const std::filesystem::path& path) {
    check_target(path);
    TempFile probe(path);  // can a file be created beside it? removed when it goes out of scope
}

void write_output_file(const std::filesystem::path& path, std::string_view content) {
    check_target(path);
    TempFile tmp(path);
    // mkstemp creates 0600; a report is meant to be shared like any other file.
    if (::fchmod(tmp.fd(), 0644) != 0 || !write_all(tmp.fd(), content) || !tmp.close())
        throw ReportError(fmt::format("writing the report to {} failed: {}", path.string(), std::strerror(errno)));
    if (::rename(tmp.name().c_str(), path.c_str()) != 0)
        throw ReportError(
            fmt::format("cannot move the report into place at {}: {}", path.string(), std::strerror(errno)));
    tmp.keep();
}

}  // namespace tune
