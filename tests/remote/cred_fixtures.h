// Copyright 2026 The ufspack Authors.
//
// What the credentials tests share: planted secrets to grep for, a fake
// environment for LoadAwsSettings, tests/remote/credserver.py (IMDS,
// container, STS and a SigV4-checking S3 on loopback) and a read of its
// object through the S3 code path.
#ifndef UFSPACK_TESTS_REMOTE_CRED_FIXTURES_H_
#define UFSPACK_TESTS_REMOTE_CRED_FIXTURES_H_

#include <gtest/gtest.h>

#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "aws_config.h"
#include "http.h"
#include "location.h"
#include "servers.h"
#include "testutil.h"

namespace ufspack {
namespace remote {
namespace credtest {

using ::ufspack::test::TempDir;
using ::ufspack::test::WriteFile;

inline constexpr char kPlantedSecret[] =
    "PLANTEDsecretKEY0123456789abcdefghijkl";
inline constexpr char kPlantedToken[] = "PLANTEDsessionTOKEN0123456789";

inline std::string IsoIn(int64_t seconds) {
  const time_t t = ::time(nullptr) + seconds;
  std::tm tm;
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A fake process environment for LoadAwsSettings.
class FakeEnv {
 public:
  explicit FakeEnv(const std::string& home) {
    vars_["HOME"] = home;
    vars_["AWS_EC2_METADATA_DISABLED"] = "true";
  }
  void Set(const std::string& k, const std::string& v) { vars_[k] = v; }
  void Unset(const std::string& k) { vars_.erase(k); }
  // Instance metadata and S3 both at the emulator's `url`.
  void UseImdsAndS3At(const std::string& url) {
    Unset("AWS_EC2_METADATA_DISABLED");
    Set("AWS_EC2_METADATA_SERVICE_ENDPOINT", url);
    Set("AWS_ENDPOINT_URL", url);
  }
  EnvLookup Lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars_.find(name);
      return it == vars_.end() ? nullptr : it->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> vars_;
};

class CredServer {
 public:
  CredServer(const TempDir& dir, const std::string& object, double lifetime,
             const std::string& auth_token = "",
             const std::string& web_token = "",
             const std::string& source_key = "") {
    WriteFile(dir / "object.bin", object);
    const std::string ready = dir / "credserver.json";
    std::vector<std::string> argv = {
        "python3",
        std::string(UFSPACK_SOURCE_DIR) + "/tests/remote/credserver.py",
        "--object",
        dir / "object.bin",
        "--port-file",
        ready,
        "--lifetime",
        std::to_string(lifetime)};
    if (!auth_token.empty()) {
      argv.push_back("--auth-token");
      argv.push_back(auth_token);
    }
    if (!web_token.empty()) {
      argv.push_back("--web-token");
      argv.push_back(web_token);
    }
    if (!source_key.empty()) {
      argv.push_back("--source-key");
      argv.push_back(source_key);
    }
    url_ = ::ufspack::test::JsonField(
        process_.Start(argv, dir / "credserver.log", ready, 30), "url");
  }
  const std::string& url() const { return url_; }
  // One request with RunTransfers; returns the body.
  std::string Call(const std::string& method, const std::string& path,
                   const std::string& body = "") const {
    Transfer t;
    t.method = method;
    t.url = url_ + path;
    t.display = t.url;
    if (method != "GET") {
      t.upload = body.data();
      t.upload_size = body.size();
    }
    Transfer* list[] = {&t};
    Status s = RunTransfers(list, 1, RemoteOptions());
    EXPECT_TRUE(s.ok()) << s.ToString();
    return t.body;
  }
  int Count(const std::string& what) const {
    const std::string log = Call("GET", "/control/log");
    const std::string v = ::ufspack::test::JsonField(log, what);
    return v.empty() ? 0 : std::stoi(v);
  }

 private:
  ::ufspack::test::ServerProcess process_;
  std::string url_;
};

// Reads bytes [first, first+n) of the emulator's object through the S3
// code path (LocateS3, Prepare's SigV4 signer, RunTransfers).
inline Status ReadRange(const std::shared_ptr<const AwsSettings>& settings,
                        uint64_t first, uint64_t n, std::string* out) {
  auto loc = std::make_shared<ObjectLocation>();
  UFSPACK_RETURN_IF_ERROR(
      LocateS3("s3://ufspack-test/object.bin", settings, loc.get()));
  Transfer t;
  Prepare(loc, "GET", {}, &t);
  t.has_range = true;
  t.range_begin = first;
  t.range_length = n;
  Transfer* list[] = {&t};
  RemoteOptions o;
  o.max_attempts = 1;
  UFSPACK_RETURN_IF_ERROR(RunTransfers(list, 1, o));
  *out = t.body;
  return Status::OK();
}

inline std::string MakeObject() {
  std::string object(100000, '\0');
  for (size_t i = 0; i < object.size(); ++i) {
    object[i] = static_cast<char>((i * 131) >> 3);
  }
  return object;
}

}  // namespace credtest
}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_TESTS_REMOTE_CRED_FIXTURES_H_
