#include "launch/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

namespace tune {
namespace {

static_assert(sizeof(sigset_t) <= sizeof(std::uint64_t) * 16, "sigset_t storage too small");

sigset_t interrupt_set() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);  // the terminal closed: stop as SIGTERM does, leaving nothing running
    return set;
}

// Keeps only the last `limit` bytes.
void append_tail(std::string& buffer, const char* data, std::size_t n, std::size_t limit) {
    buffer.append(data, n);
    if (buffer.size() > limit) buffer.erase(0, buffer.size() - limit);
}

struct Pipe {
    int read = -1, write = -1;
};

Pipe make_pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(fmt::format("pipe2: {}", std::strerror(errno)));
    return {fds[0], fds[1]};
}

// The child's environment, built before fork: setenv() after fork may deadlock on a lock
// another of the parent's threads held (the driver forks trials from several threads).
std::vector<std::string> child_environment(const ProcessSpec& spec) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        const std::string_view entry(*e);
        bool replaced = false;
        for (const auto& [key, value] : spec.env)
            replaced = replaced ||
                       (entry.size() > key.size() && entry.substr(0, key.size()) == key && entry[key.size()] == '=');
        if (!replaced) env.emplace_back(entry);
    }
    for (const auto& [key, value] : spec.env) env.push_back(key + "=" + value);
    return env;
}

// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_child(Pipe out, Pipe err, const std::vector<char*>& argv, const std::vector<char*>& envp,
                             const cpu_set_t* affinity, pid_t parent) {
    // Its own session: every process it starts stays in the session even when it takes a
    // process group of its own (OpenMPI puts each rank in one) or is orphaned, so
    // end_session() finds them all. setsid() also makes it a process group leader.
    ::setsid();
    // If the driver dies (even by SIGKILL), the trial must not live on holding
    // a GPU: SIGTERM, which mpirun passes on to its ranks. The parent may
    // already be gone before this line runs.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) _exit(126);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(out.write, STDOUT_FILENO);
    ::dup2(err.write, STDERR_FILENO);
    if (affinity) ::sched_setaffinity(0, sizeof(cpu_set_t), affinity);
    ::execvpe(argv[0], argv.data(), envp.data());
    const char prefix[] = "cannot start: ";
    (void)!::write(STDERR_FILENO, prefix, sizeof(prefix) - 1);
    (void)!::write(STDERR_FILENO, argv[0], std::strlen(argv[0]));
    _exit(127);
}

// The session of a process from /proc/PID/stat ("pid (comm) state ppid pgrp session ...";
// comm may hold spaces and parentheses, so fields are counted after the last ')').
// -1 when it is gone or already a zombie (dead, waiting to be reaped).
pid_t session_of(const char* pid_dir) {
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%s/stat", pid_dir);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buffer[1024];
    const ssize_t n = ::read(fd, buffer, sizeof(buffer) - 1);
    ::close(fd);
    if (n <= 0) return -1;
    buffer[n] = '\0';
    const char* close_paren = std::strrchr(buffer, ')');
    if (!close_paren) return -1;
    char state = 0;
    long ppid = 0, pgrp = 0, session = 0;
    if (std::sscanf(close_paren + 1, " %c %ld %ld %ld", &state, &ppid, &pgrp, &session) != 4) return -1;
    return state == 'Z' ? -1 : static_cast<pid_t>(session);
}

// SIGKILLs every live process of session `sid` but ours; returns how many it found.
int kill_session_members(pid_t sid) {
    DIR* proc = ::opendir("/proc");
    if (!proc) return 0;
    const pid_t self = ::getpid();
    int found = 0;
    while (const dirent* entry = ::readdir(proc)) {
        if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
        const pid_t pid = static_cast<pid_t>(std::atol(entry->d_name));
        if (pid == self || session_of(entry->d_name) != sid) continue;
        ::kill(pid, SIGKILL);
        ++found;
    }
    ::closedir(proc);
    return found;
}

// Ends the child and everything it started. Killing mpirun's group is not enough: each
// rank has its own group, and once mpirun dies the ranks are orphans nobody would stop.
// The child leads a session (setsid in exec_child) that all of them share, so the session
// is swept until no live member is left (a member may fork between two sweeps).
// `pid` is killed directly only while unreaped, when its number cannot have been reused.
void end_session(pid_t pid, bool reaped) {
    if (!reaped) ::kill(pid, SIGKILL);  // also before setsid() ran in the child
    ::kill(-pid, SIGKILL);
    for (int sweep = 0; sweep < 200 && kill_session_members(pid) > 0; ++sweep) ::usleep(5000);
}

}  // namespace

InterruptWatcher::InterruptWatcher() {
    sigset_t set = interrupt_set();
    auto* saved = reinterpret_cast<sigset_t*>(saved_mask_);
    if (::sigprocmask(SIG_BLOCK, &set, saved) != 0)
        throw std::runtime_error(fmt::format("sigprocmask: {}", std::strerror(errno)));
    fd_ = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error(fmt::format("signalfd: {}", std::strerror(errno)));
}

InterruptWatcher::~InterruptWatcher() {
    if (fd_ >= 0) ::close(fd_);
    ::sigprocmask(SIG_SETMASK, reinterpret_cast<sigset_t*>(saved_mask_), nullptr);
}

int InterruptWatcher::poll() {
    signalfd_siginfo info{};
    while (::read(fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) ++count_;
    return count_;
}

std::string ProcessOutcome::describe() const {
    if (spawn_failed) return "could not start";
    if (timed_out) return fmt::format("timed out after {:.0f}s", wall_s);
    if (interrupted) return "stopped by an interrupt";
    if (term_signal != 0) return fmt::format("killed by signal {} ({})", term_signal, ::strsignal(term_signal));
    return fmt::format("exit {}", exit_code);
}

ProcessOutcome run_process(const ProcessSpec& spec) {
    ProcessOutcome outcome;
    if (spec.argv.empty()) throw std::invalid_argument("run_process: empty argv");
    std::vector<char*> argv;
    for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const std::vector<std::string> env = child_environment(spec);
    std::vector<char*> envp;
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    cpu_set_t affinity;
    CPU_ZERO(&affinity);
    for (int c : spec.cpu_affinity)
        if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &affinity);

    const Pipe out = make_pipe(), err = make_pipe();
    const auto start = std::chrono::steady_clock::now();
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(fmt::format("fork: {}", std::strerror(errno)));
    if (pid == 0) exec_child(out, err, argv, envp, spec.cpu_affinity.empty() ? nullptr : &affinity, parent);
    ::close(out.write);
    ::close(err.write);

    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    std::vector<pollfd> fds{{out.read, POLLIN, 0}, {err.read, POLLIN, 0}};
    if (spec.interrupts) fds.push_back({spec.interrupts->fd(), POLLIN, 0});
    int open_pipes = 2;
    bool killed = false;
    bool reaped = false;
    int status = 0;
    char buffer[65536];
    while (open_pipes > 0) {
        // A child that exited while something it started still holds the pipes
        // (an orphaned rank): end the rest of its group, then drain.
        if (!reaped && ::waitpid(pid, &status, WNOHANG) == pid) {
            reaped = true;
            end_session(pid, true);
        }
        int wait_ms = 200;
        if (spec.timeout_s > 0 && !killed) {
            const double left = spec.timeout_s - elapsed();
            if (left <= 0) {
                outcome.timed_out = killed = true;
                end_session(pid, reaped);
            } else {
                wait_ms = static_cast<int>(std::min(left * 1000.0 + 1, 200.0));
            }
        }
        if (::poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) break;
        for (std::size_t i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            const ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
            if (n > 0) {
                if (i == 0)
                    append_tail(outcome.stdout_text, buffer, static_cast<std::size_t>(n), spec.stdout_limit_bytes);
                else
                    append_tail(outcome.stderr_tail, buffer, static_cast<std::size_t>(n), spec.stderr_tail_bytes);
            } else if (n == 0 || errno != EINTR) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open_pipes;
            }
        }
        const bool cancelled = spec.cancel && spec.cancel->load();
        if (!killed && (cancelled || (spec.interrupts && spec.interrupts->poll() >= spec.kill_at_interrupt))) {
            outcome.interrupted = killed = true;
            end_session(pid, reaped);
        }
    }
    if (!reaped) {
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        end_session(pid, true);  // a grandchild that closed its pipes must not linger either
    }
    outcome.wall_s = elapsed();
    if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) outcome.term_signal = WTERMSIG(status);
    if (outcome.exit_code == 127 && outcome.stderr_tail.rfind("cannot start: ", 0) == 0) outcome.spawn_failed = true;
    return outcome;
}

}  // namespace tune
