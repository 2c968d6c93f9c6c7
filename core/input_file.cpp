#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "core/config_error.h"
#include "core/units.h"

namespace tune {
namespace {

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    int get() const { return fd_; }
    int release() { return std::exchange(fd_, -1); }

private:
    int fd_;
};

// Opens `name` for reading, refusing what read_input_file and InputFile refuse: something that
// cannot be opened, a directory, a device, FIFO or socket, more than `max_bytes`.
int open_checked(const std::string& name, std::uint64_t max_bytes, std::string_view what, std::uint64_t& size) {
    auto refuse = [&](const std::string& why) { return ConfigError(name, 0, 0, why); };
    // O_NONBLOCK: opening a FIFO with no writer must not hang; a regular file ignores the flag.
    Fd fd(::open(name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
    if (fd.get() < 0) throw refuse(fmt::format("cannot open: {}", std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw refuse(fmt::format("cannot read: {}", std::strerror(errno)));
    if (S_ISDIR(st.st_mode)) throw refuse(fmt::format("is a directory, not a {}", what));
    if (!S_ISREG(st.st_mode))
        throw refuse(fmt::format("is not a regular file: a {} is never read from a device, FIFO or socket", what));
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
        throw refuse(fmt::format("the {} is {}, more than the {} this tune reads", what,
                                 format_bytes(static_cast<std::uint64_t>(st.st_size)), format_bytes(max_bytes)));
    size = static_cast<std::uint64_t>(st.st_size);
    return fd.release();
}

}  // namespace

InputFile::InputFile(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view what)
    : name_(path.string()) {
    fd_ = open_checked(name_, max_bytes, what, size_);  // in the body: it sets size_ too
}

InputFile::~InputFile() {
    if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(std::uint64_t offset, void* out, std::uint64_t bytes) const {
    auto* p = static_cast<char*>(out);
    std::uint64_t done = 0;
    while (done < bytes) {
        const ssize_t n = ::pread(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw ConfigError(name_, 0, 0, fmt::format("cannot read: {}", std::strerror(errno)));
        if (n == 0)
            throw ConfigError(
                name_, 0, 0,
                fmt::format("ended at byte {}, before the {} bytes at {} it names", offset + done, bytes, offset));
        done += static_cast<std::uint64_t>(n);
    }
}

std::string read_input_file(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view what) {
    const std::string name = path.string();
    auto refuse = [&](const std::string& why) { return ConfigError(name, 0, 0, why); };
    std::uint64_t size = 0;
    const Fd fd(open_checked(name, max_bytes, what, size));
    // The size can change after fstat (a file still being written): read at most one byte more
    // than the limit, so growth is noticed and still bounded.
    std::string text;
    text.resize(static_cast<std::size_t>(size) + 1);
    std::size_t used = 0;
    for (;;) {
        if (used == text.size()) {
            if (used > max_bytes)
                throw refuse(fmt::format("the {} grew past the {} this tune reads", what, format_bytes(max_bytes)));
            text.resize(std::min<std::uint64_t>(max_bytes + 1, used * 2 + 4096));
        }
        const ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw refuse(fmt::format("cannot read: {}", std::strerror(errno)));
        if (n == 0) break;
        used += static_cast<std::size_t>(n);
    }
    if (used > max_bytes)
        throw refuse(fmt::format("the {} grew past the {} this tune reads", what, format_bytes(max_bytes)));
    text.resize(used);
    return text;
}

}  // namespace tune
