// Copyright 2026 The ufspack Authors.
#include "servers.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

#include "gtest/gtest.h"
#include "testutil.h"
#include "ufspack/builder.h"

namespace ufspack {
namespace test {

std::vector<Item> MakeItems(int n, size_t max_size, uint64_t seed) {
  std::vector<Item> items;
  for (int i = 0; i < n; ++i) {
    const size_t size = 1 + static_cast<size_t>((i * 7919 + seed) % max_size);
    std::string bytes = (i % 3 == 0) ? CompressibleBytes(size, i + seed)
                                     : RandomBytes(size, i + seed);
    items.push_back(
        {(i < n / 2 ? "a/" : "b/") + std::to_string(1000 + i) + ".bin",
         std::move(bytes)});
  }
  return items;
}

void WritePack(const std::string& dir, const std::vector<Item>& items) {
  std::unique_ptr<PackWriter> w;
  PackWriterOptions o;
  o.compress = true;
  ASSERT_TRUE(PackWriter::Create(dir, o, &w).ok());
  ASSERT_TRUE(w->AddClass("a").ok());
  ASSERT_TRUE(w->AddClass("b").ok());
  for (const Item& it : items) {
    ASSERT_TRUE(w->Add(it.name, it.name[0] == 'a' ? 0 : 1, it.bytes).ok());
  }
  ASSERT_TRUE(w->Finish(nullptr).ok());
}

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

namespace {

// One HTTP request with libcurl's easy interface; returns the body.
std::string Http(const std::string& method, const std::string& url,
                 const std::string& body) {
  CURL* c = curl_easy_init();
  std::string out;
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "POST") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  curl_easy_setopt(
      c, CURLOPT_WRITEFUNCTION,
      +[](char* p, size_t size, size_t n, void* user) -> size_t {
        static_cast<std::string*>(user)->append(p, size * n);
        return size * n;
      });
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  const CURLcode rc = curl_easy_perform(c);
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_easy_cleanup(c);
  EXPECT_EQ(rc, CURLE_OK) << method << " " << url;
  EXPECT_EQ(code, 200) << method << " " << url << ": " << out;
  return out;
}

}  // namespace

void ClearAwsEnv() {
  for (const char* v : {"AWS_ACCESS_KEY_ID",
                        "AWS_SECRET_ACCESS_KEY",
                        "AWS_SESSION_TOKEN",
                        "AWS_PROFILE",
                        "AWS_DEFAULT_PROFILE",
                        "AWS_REGION",
                        "AWS_DEFAULT_REGION",
                        "AWS_ENDPOINT_URL",
                        "AWS_ENDPOINT_URL_S3",
                        "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
                        "AWS_CONFIG_FILE",
                        "AWS_SHARED_CREDENTIALS_FILE",
                        "AWS_WEB_IDENTITY_TOKEN_FILE",
                        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                        "AWS_EC2_METADATA_SERVICE_ENDPOINT",
                        "AWS_ROLE_ARN",
                        "AWS_ROLE_SESSION_NAME",
                        "AWS_ENDPOINT_URL_STS",
                        "AWS_EC2_METADATA_V1_DISABLED"}) {
    ::unsetenv(v);
  }
  // Anonymous tests must not ask a metadata service.
  ::setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
  // No ~/.aws of the machine's user.
  ::setenv("AWS_CONFIG_FILE", "/nonexistent/ufspack-test/config", 1);
  ::setenv("AWS_SHARED_CREDENTIALS_FILE",
           "/nonexistent/ufspack-test/credentials", 1);
}

S3Server::S3Server(const std::string& kind, const std::string& dir, bool proxy)
    : dir_(dir) {
  const std::string src = UFSPACK_SOURCE_DIR;
  const char* venv_env = ::getenv("UFSPACK_S3_VENV");
  std::vector<std::string> env_cmd = {"/bin/bash",
                                      src + "/scripts/s3-test-env.sh"};
  if (venv_env != nullptr && *venv_env != '\0') env_cmd.push_back(venv_env);
  CommandResult r = Run(env_cmd);
  if (r.exit_code == 77) {
    skip_reason_ = "S3 test servers not installable here: " + r.err;
    return;
  }
  if (r.exit_code != 0) {
    ADD_FAILURE() << "s3-test-env.sh failed (" << r.exit_code << "): " << r.err;
    return;
  }
  std::string venv = r.out;
  while (!venv.empty() && (venv.back() == '\n' || venv.back() == ' ')) {
    venv.pop_back();
  }
  venv = venv.substr(
      venv.rfind('\n') == std::string::npos ? 0 : venv.rfind('\n') + 1);
  venv_python_ = venv + "/bin/python";
  std::vector<std::string> argv = {
      venv_python_, src + "/tests/remote/s3server.py",
      "start",      "--kind",
      kind,         "--dir",
      dir};
  if (proxy) argv.push_back("--proxy");
  r = Run(argv);
  if (r.exit_code != 0) {
    ADD_FAILURE() << "s3server.py start failed: " << r.out << r.err;
    return;
  }
  const std::string json = r.out;
  access_key_ = JsonField(json, "access_key");
  secret_key_ = JsonField(json, "secret_key");
  proxy_ = JsonField(json, "proxy");
  if (proxy_ == "null") proxy_.clear();
  control_ = JsonField(json, "proxy_control");
  bucket_ = "ufspack-test";
  endpoint_ = JsonField(json, "endpoint");
}

S3Server::~S3Server() {
  if (venv_python_.empty() || endpoint_.empty()) return;
  Run({venv_python_,
       std::string(UFSPACK_SOURCE_DIR) + "/tests/remote/s3server.py", "stop",
       "--dir", dir_});
}

void S3Server::ExportEnv(bool via_proxy) const {
  ClearAwsEnv();
  ::setenv("AWS_ACCESS_KEY_ID", access_key_.c_str(), 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", secret_key_.c_str(), 1);
  ::setenv("AWS_REGION", "us-east-1", 1);
  ::setenv("AWS_ENDPOINT_URL", (via_proxy ? proxy_ : endpoint_).c_str(), 1);
}

std::string S3Server::Boto3(const std::string& code) const {
  const std::string prelude =
      "import boto3, sys\n"
      "s3 = boto3.client('s3', endpoint_url='" +
      endpoint_ + "', aws_access_key_id='" + access_key_ +
      "', aws_secret_access_key='" + secret_key_ +
      "', region_name='us-east-1')\n";
  CommandResult r = Run({venv_python_, "-c", prelude + code});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.out;
}

void S3Server::Put(const std::string& local_path,
                   const std::string& key) const {
  Boto3("s3.upload_file('" + local_path + "', '" + bucket_ + "', '" + key +
        "')");
}

void S3Server::Delete(const std::string& key) const {
  Boto3("s3.delete_object(Bucket='" + bucket_ + "', Key='" + key + "')");
}

void S3Server::Faults(const std::string& rules_json) const {
  Http("POST", control_ + "/faults", rules_json);
}

std::string S3Server::Log() const { return Http("GET", control_ + "/log", ""); }

void S3Server::Reset() const { Http("POST", control_ + "/reset", ""); }

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
