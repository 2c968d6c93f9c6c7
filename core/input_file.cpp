#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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

private:
    int fd_;
};

}  // namespace

std::string read_input_file(const std::filesystem::path& path, std::uint64_t max_bytes, std::string_view what) {
    const std::string name = path.string();
    auto refuse = [&](const std::string& why) { return ConfigError(name, 0, 0, why); };
    // O_NONBLOCK: opening a FIFO with no writer must not hang; a regular file ignores the flag.
    const Fd fd(::open(name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
    if (fd.get() < 0) throw refuse(fmt::format("cannot open: {}", std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw refuse(fmt::format("cannot read: {}", std::strerror(errno)));
    if (S_ISDIR(st.st_mode)) throw refuse(fmt::format("is a directory, not a {}", what));
    if (!S_ISREG(st.st_mode)) throw refuse(fmt::format("is not a regular file: a {} is never read from a device, FIFO or socket", what));
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
        throw refuse(fmt::format("the {} is {}, more than the {} this tune reads", what, format_bytes(static_cast<std::uint64_t>(st.st_size)),
                                 format_bytes(max_bytes)));
    // The size can change after fstat (a file still being written): read at most one byte more
    // than the limit, so growth is noticed and still bounded.
    std::string text;
    text.resize(static_cast<std::size_t>(st.st_size) + 1);
    std::size_t used = 0;
    for (;;) {
        if (used == text.size()) {
            if (used > max_bytes) throw refuse(fmt::format("the {} grew past the {} this tune reads", what, format_bytes(max_bytes)));
            text.resize(std::min<std::uint64_t>(max_bytes + 1, used * 2 + 4096));
        }
        const ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw refuse(fmt::format("cannot read: {}", std::strerror(errno)));
        if (n == 0) break;
        used += static_cast<std::size_t>(n);
    }
    if (used > max_bytes) throw refuse(fmt::format("the {} grew past the {} this tune reads", what, format_bytes(max_bytes)));
    text.resize(used);
    return text;
}

}  // namespace tune
