// Copyright 2026 The ufspack Authors.
//
// Bounded HTTP calls and token files for the credential providers (see
// credentials_http.h).
#include "credentials_http.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "http.h"

namespace ufspack {
namespace remote {

namespace {

constexpr size_t kMaxTokenBytes = 65536;

// Options for one request at a time with these bounds.
RemoteOptions OneRequest(int attempts, double retry_seconds,
                         int connect_timeout_ms, int stall_seconds) {
  RemoteOptions o;
  o.max_in_flight = 1;
  o.max_attempts = attempts;
  o.retry_seconds = retry_seconds;
  o.connect_timeout_ms = connect_timeout_ms;
  o.stall_seconds = stall_seconds;
  return o;
}

}  // namespace

RemoteOptions MetadataOptions() { return OneRequest(2, 3, 1000, 1); }

RemoteOptions StsOptions() { return OneRequest(3, 10, 3000, 5); }

Status HttpCall(const std::string& method, const std::string& url,
                std::vector<Header> headers, const std::string& what,
                const RemoteOptions& options, std::string* body,
                const std::string& request_body, long* http_code) {
  Transfer t;
  t.method = method;
  t.url = url;
  t.display = Redact(url);
  t.headers = std::move(headers);
  if (!request_body.empty()) {
    t.upload = request_body.data();
    t.upload_size = request_body.size();
  }
  Transfer* list[] = {&t};
  Status s = RunTransfers(list, 1, options);
  if (http_code != nullptr) *http_code = t.http_code;
  *body = std::move(t.body);
  if (!s.ok()) return s.WithContext(what);
  return Status::OK();
}

Status ReadTokenFile(const std::string& path, const std::string& what,
                     std::string* token) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return Status::InvalidArgument(what + ": expected a readable file; " +
                                   std::strerror(errno));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<size_t>(st.st_size) > kMaxTokenBytes) {
    ::close(fd);
    return Status::InvalidArgument(what +
                                   ": expected a regular file of at most " +
                                   std::to_string(kMaxTokenBytes) + " bytes");
  }
  token->clear();
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Status::InvalidArgument(what + ": " + std::strerror(err));
    }
    token->append(buf, static_cast<size_t>(n));
    if (token->size() > kMaxTokenBytes) break;
  }
  ::close(fd);
  while (!token->empty() && (token->back() == '\n' || token->back() == '\r' ||
                             token->back() == ' ')) {
    token->pop_back();
  }
  if (token->empty() || token->size() > kMaxTokenBytes ||
      token->find_first_of("\r\n") != std::string::npos) {
    return Status::InvalidArgument(
        what + ": expected one line holding the token; found " +
        (token->empty() ? "an empty file" : "several lines (not shown)"));
  }
  return Status::OK();
}

}  // namespace remote
}  // namespace ufspack
