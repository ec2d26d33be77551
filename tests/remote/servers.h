// Copyright 2026 The ufspack Authors.
//
// Real servers for the remote tests, started on loopback and stopped (their
// whole process group killed) when the object goes out of scope:
//   StaticServer  tests/remote/static_server.py: a directory over HTTP or
//                 HTTPS with byte ranges and ETags (any static web server).
// Startup waits are bounded; a server that does not come up fails the test
// with the tail of its log.
#ifndef UFSPACK_TESTS_REMOTE_SERVERS_H_
#define UFSPACK_TESTS_REMOTE_SERVERS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace ufspack {
namespace test {

// A child process in its own process group, killed with its group on
// destruction.
class ServerProcess {
 public:
  ServerProcess() = default;
  ~ServerProcess() { Stop(); }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Starts argv with stdout and stderr to `log`, then waits up to
  // `seconds` for `ready_file` to exist and returns its contents ("" and
  // a test failure on timeout or early exit).
  std::string Start(const std::vector<std::string>& argv,
                    const std::string& log, const std::string& ready_file,
                    int seconds);
  void Stop();
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

// The value of "key" in a one-line JSON object of strings and numbers.
std::string JsonField(const std::string& json, const std::string& key);

// Serves `dir` over http (or https with `cert` and `key`).
class StaticServer {
 public:
  explicit StaticServer(const std::string& dir, const std::string& cert = "",
                        const std::string& key = "");
  const std::string& url() const { return url_; }  // "http://127.0.0.1:PORT"
  void Stop() { process_.Stop(); }

 private:
  ServerProcess process_;
  std::string url_;
};

// Makes a self-signed certificate for 127.0.0.1 (openssl CLI) into
// dir/cert.pem and dir/key.pem.
void MakeSelfSignedCert(const std::string& dir);

}  // namespace test
}  // namespace ufspack

#endif  // UFSPACK_TESTS_REMOTE_SERVERS_H_
