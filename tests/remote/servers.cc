// Copyright 2026 The ufspack Authors.
#include "servers.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "testutil.h"

namespace ufspack {
namespace test {

std::string ServerProcess::Start(const std::vector<std::string>& argv,
                                 const std::string& log,
                                 const std::string& ready_file, int seconds) {
  Stop();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = ::open("/dev/null", O_RDONLY);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (in >= 0) ::dup2(in, 0);
    std::vector<char*> args;
    for (const std::string& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    return "";
  }
  ::setpgid(pid, pid);
  pid_ = pid;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (Exists(ready_file)) {
      std::string s = ReadFile(ready_file);
      if (!s.empty() && s.back() == '\n') return s;
    }
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      pid_ = -1;
      ADD_FAILURE() << argv[0] << " exited before it was ready; log:\n"
                    << (Exists(log) ? ReadFile(log) : "");
      return "";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << argv[0] << " not ready after " << seconds << " s; log:\n"
                << (Exists(log) ? ReadFile(log) : "");
  Stop();
  return "";
}

void ServerProcess::Stop() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string JsonField(const std::string& json, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  size_t p = json.find(k);
  if (p == std::string::npos) return "";
  p += k.size();
  while (p < json.size() && json[p] == ' ') ++p;
  if (p < json.size() && json[p] == '"') {
    const size_t e = json.find('"', p + 1);
    return json.substr(p + 1, e - p - 1);
  }
  size_t e = p;
  while (e < json.size() && json[e] != ',' && json[e] != '}') ++e;
  return json.substr(p, e - p);
}

StaticServer::StaticServer(const std::string& dir, const std::string& cert,
                           const std::string& key) {
  const std::string ready = dir + "/.server.json";
  ::unlink(ready.c_str());
  std::vector<std::string> argv = {
      "python3",
      std::string(UFSPACK_SOURCE_DIR) + "/tests/remote/static_server.py", dir,
      "--port-file", ready};
  if (!cert.empty()) {
    argv.push_back("--tls");
    argv.push_back(cert);
    argv.push_back(key);
  }
  const std::string json =
      process_.Start(argv, dir + "/.server.log", ready, 30);
  url_ = JsonField(json, "url");
}

void MakeSelfSignedCert(const std::string& dir) {
  CommandResult r =
      Run({"/usr/bin/env", "openssl", "req", "-x509", "-newkey", "rsa:2048",
           "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1", "-addext",
           "subjectAltName=IP:127.0.0.1", "-keyout", dir + "/key.pem", "-out",
           dir + "/cert.pem"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace test
}  // namespace ufspack
