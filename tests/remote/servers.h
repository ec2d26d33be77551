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

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ufspack {
namespace test {

// A record of the packs the remote tests serve.
struct Item {
  std::string name;
  std::string bytes;
};
// `n` records of 1..max_size bytes, every third compressible (stored as
// zstd), in two classes "a" and "b" (names "a/1000.bin", ...).
std::vector<Item> MakeItems(int n, size_t max_size, uint64_t seed);
// Writes them as a pack at `dir` (zstd where it saves space).
void WritePack(const std::string& dir, const std::vector<Item>& items);

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

// A real S3 server (SeaweedFS or moto) from tests/remote/s3server.py, in
// the venv of scripts/s3-test-env.sh, optionally behind its fault-injecting
// proxy.  Stopped on destruction.
class S3Server {
 public:
  // kind: "seaweedfs" or "moto".  Check ok() (and skip_reason(): the venv
  // could not be installed, e.g. no network) before use.
  S3Server(const std::string& kind, const std::string& dir, bool proxy);
  ~S3Server();
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;

  bool ok() const { return !endpoint_.empty(); }
  const std::string& skip_reason() const { return skip_reason_; }
  const std::string& endpoint() const { return endpoint_; }
  const std::string& proxy() const { return proxy_; }  // "" without
  const std::string& access_key() const { return access_key_; }
  const std::string& secret_key() const { return secret_key_; }
  const std::string& bucket() const { return bucket_; }

  // Sets AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and
  // AWS_ENDPOINT_URL (the proxy's when `via_proxy`) in this process, and
  // clears the other AWS_* variables that would take precedence.
  void ExportEnv(bool via_proxy = false) const;
  // Uploads a local file with boto3 (another tool than ufspack).
  void Put(const std::string& local_path, const std::string& key) const;
  // Deletes an object with boto3.
  void Delete(const std::string& key) const;
  // Proxy control (see s3server.py): adds fault rules (JSON), returns the
  // request log (a JSON array), drops rules and log.
  void Faults(const std::string& rules_json) const;
  std::string Log() const;
  void Reset() const;

 private:
  std::string Boto3(const std::string& code) const;
  std::string dir_, venv_python_, skip_reason_;
  std::string endpoint_, proxy_, control_, access_key_, secret_key_, bucket_;
};

// Clears the AWS_* variables of this process (settings come only from what
// a test sets).
void ClearAwsEnv();

// Makes a self-signed certificate for 127.0.0.1 (openssl CLI) into
// dir/cert.pem and dir/key.pem.
void MakeSelfSignedCert(const std::string& dir);

}  // namespace test
}  // namespace ufspack

#endif  // UFSPACK_TESTS_REMOTE_SERVERS_H_
