#include "core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace tune {
namespace {

// Owns a temporary file from mkstemp until it is renamed into place; unlinks it otherwise.
class TempFile {
public:
    TempFile(const std::filesystem::path& target, std::string_view what) {
        const std::filesystem::path dir = target.parent_path().empty() ? "." : target.parent_path();
        name_ = (dir / ("." + target.filename().string() + ".XXXXXX")).string();
        fd_ = ::mkstemp(name_.data());
        if (fd_ < 0)
            throw OutputFileError(fmt::format("cannot write {} to {}: cannot create a file in {}: {}", what,
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
void check_target(const std::filesystem::path& path, std::string_view what) {
    const std::string p = path.string();
    if (p.empty()) throw OutputFileError(fmt::format("the path of {} is empty", what));
    if (p.back() == '/' || !path.has_filename() || path.filename() == "." || path.filename() == "..")
        throw OutputFileError(fmt::format("cannot write {} to {}: the path names a directory, not a file", what, p));
    struct stat st {};
    // stat follows a symlink at the final name: the rename replaces the link, but a link to a
    // device or a directory still says the user pointed at something that is not a file to replace.
    if (::stat(p.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode))
            throw OutputFileError(fmt::format("cannot write {} to {}: it is a directory", what, p));
        if (!S_ISREG(st.st_mode))
            throw OutputFileError(
                fmt::format("cannot write {} to {}: it is not a regular file (a device, "
                            "FIFO or socket is never replaced)",
                            what, p));
    } else if (errno != ENOENT) {
        throw OutputFileError(fmt::format("cannot write {} to {}: {}", what, p, std::strerror(errno)));
    }
}

}  // namespace

void check_output_path(const std::filesystem::path& path, std::string_view what) {
    check_target(path, what);
    TempFile probe(path, what);  // can a file be created beside it? removed when it goes out of scope
}

void write_output_file(const std::filesystem::path& path, std::string_view content, std::string_view what) {
    check_target(path, what);
    TempFile tmp(path, what);
    // mkstemp creates 0600; the file is meant to be shared like any other.
    if (::fchmod(tmp.fd(), 0644) != 0 || !write_all(tmp.fd(), content) || !tmp.close())
        throw OutputFileError(fmt::format("writing {} to {} failed: {}", what, path.string(), std::strerror(errno)));
    if (::rename(tmp.name().c_str(), path.c_str()) != 0)
        throw OutputFileError(
            fmt::format("cannot move {} into place at {}: {}", what, path.string(), std::strerror(errno)));
    tmp.keep();
}

}  // namespace tune
