// Copyright 2026 The ufspack Authors.
//
// credential_process: spawn, read at most 64 KiB of stdout within a
// deadline, check the JSON contract (see credential_process.h).
#include "credential_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <utility>

#include "credentials_json.h"

extern char** environ;

namespace ufspack {
namespace remote {
namespace {

constexpr size_t kMaxOutput = 64 << 10;

// What reading a child's stdout ended with.
enum class ReadEnd { kEof, kTimedOut, kTooLong };

// Reads `fd` to its end into *output, giving up at `deadline` or past
// kMaxOutput bytes.
ReadEnd ReadUntil(int fd, std::chrono::steady_clock::time_point deadline,
                  std::string* output) {
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return ReadEnd::kTimedOut;
    pollfd p{fd, POLLIN, 0};
    const int n =
        ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (n <= 0) continue;  // EINTR or a second without output
    const ssize_t r = ::read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return ReadEnd::kEof;
    output->append(buf, static_cast<size_t>(r));
    if (output->size() > kMaxOutput) return ReadEnd::kTooLong;
  }
}

// Starts argv with stdin /dev/null and stdout to *read_fd; returns
// posix_spawnp's error (0: started).
int Spawn(const std::vector<std::string>& argv, pid_t* pid, int* read_fd) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errno;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  std::vector<char*> args;
  for (const std::string& a : argv) {
    args.push_back(const_cast<char*>(a.c_str()));
  }
  args.push_back(nullptr);
  const int rc =
      ::posix_spawnp(pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return rc;
  }
  *read_fd = fds[0];
  return 0;
}

class ProcessProvider final : public CredentialsProvider {
 public:
  ProcessProvider(std::string command, std::string profile, std::string where,
                  int timeout_seconds)
      : command_(std::move(command)),
        profile_(std::move(profile)),
        where_(std::move(where)),
        timeout_seconds_(timeout_seconds) {}

  std::string Name() const override {
    return "credential_process of profile '" + profile_ + "' (" + where_ + ")";
  }

  Status Fetch(TimedCredentials* out) override {
    std::vector<std::string> argv;
    Status s = SplitCommand(command_, &argv);
    if (!s.ok()) return s.WithContext(Name());
    if (argv.empty()) {
      return Status::InvalidArgument(Name() +
                                     ": expected a command; found "
                                     "an empty value");
    }
    std::string output;
    UFSPACK_RETURN_IF_ERROR(Run(argv, &output));
    TimedCredentials c;
    UFSPACK_RETURN_IF_ERROR(
        CredentialsFromJson(output, Name(), "SessionToken", &c));
    std::map<std::string, std::string> m;
    (void)ParseJsonObject(output, &m);  // parsed above
    if (m["Version"] != "1") {
      return Status::InvalidArgument(
          Name() + ": expected \"Version\": 1 in its JSON output; found " +
          (m.count("Version") ? "\"Version\": " + m["Version"]
                              : std::string("no \"Version\"")));
    }
    *out = std::move(c);
    return Status::OK();
  }

 private:
  Status Run(const std::vector<std::string>& argv, std::string* output) {
    pid_t pid = -1;
    int fd = -1;
    const int rc = Spawn(argv, &pid, &fd);
    if (rc != 0) {
      return Status::InvalidArgument(Name() + ": cannot run '" + argv[0] +
                                     "': " + std::strerror(rc));
    }
    const ReadEnd end = ReadUntil(fd,
                                  std::chrono::steady_clock::now() +
                                      std::chrono::seconds(timeout_seconds_),
                                  output);
    ::close(fd);
    if (end != ReadEnd::kEof) ::kill(pid, SIGKILL);
    int wstatus = 0;
    while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
    return Outcome(argv[0], end, wstatus);
  }

  Status Outcome(const std::string& program, ReadEnd end, int wstatus) const {
    if (end == ReadEnd::kTimedOut) {
      return Status::IOError(Name() + ": expected it to finish within " +
                             std::to_string(timeout_seconds_) +
                             " s; killed it");
    }
    if (end == ReadEnd::kTooLong) {
      return Status::InvalidArgument(Name() + ": expected at most " +
                                     std::to_string(kMaxOutput) +
                                     " bytes of JSON on stdout; found more");
    }
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0) {
      return Status::IOError(Name() + ": '" + program +
                             "' exited with status " +
                             std::to_string(WEXITSTATUS(wstatus)) +
                             " (its stderr is passed through; its stdout is "
                             "not shown)");
    }
    if (WIFSIGNALED(wstatus)) {
      return Status::IOError(Name() + ": '" + program +
                             "' was killed by signal " +
                             std::to_string(WTERMSIG(wstatus)));
    }
    return Status::OK();
  }

  const std::string command_, profile_, where_;
  const int timeout_seconds_;
};

// The characters a backslash escapes inside "...".
bool EscapedInDoubleQuotes(char c) {
  return c != '\0' && std::strchr("\"\\$`\n", c) != nullptr;
}

// Appends the body of a "..." word starting at command[*i] (after the
// opening quote) to *word.
Status DoubleQuoted(const std::string& command, size_t* i, std::string* word) {
  for (;;) {
    if (*i >= command.size()) {
      return Status::InvalidArgument(
          "expected a closing \" in the command; found none");
    }
    const char d = command[(*i)++];
    if (d == '"') return Status::OK();
    if (d == '\\' && *i < command.size() &&
        EscapedInDoubleQuotes(command[*i])) {
      if (command[*i] != '\n') word->push_back(command[*i]);
      ++*i;
      continue;
    }
    word->push_back(d);
  }
}

}  // namespace

Status SplitCommand(const std::string& command,
                    std::vector<std::string>* words) {
  words->clear();
  std::string word;
  bool in_word = false;
  size_t i = 0;
  while (i < command.size()) {
    const char c = command[i++];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) words->push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (i < command.size()) {
        if (command[i] != '\n') word.push_back(command[i]);
        ++i;
      }
    } else if (c == '\'') {
      const size_t end = command.find('\'', i);
      if (end == std::string::npos) {
        return Status::InvalidArgument(
            "expected a closing ' in the command; found none");
      }
      word.append(command, i, end - i);
      i = end + 1;
    } else if (c == '"') {
      UFSPACK_RETURN_IF_ERROR(DoubleQuoted(command, &i, &word));
    } else {
      word.push_back(c);
    }
  }
  if (in_word) words->push_back(std::move(word));
  return Status::OK();
}

std::unique_ptr<CredentialsProvider> MakeProcessProvider(
    const std::string& command, const std::string& profile,
    const std::string& where, int timeout_seconds) {
  return std::make_unique<ProcessProvider>(command, profile, where,
                                           timeout_seconds);
}

}  // namespace remote
}  // namespace ufspack
