// Copyright 2026 The ufspack Authors.
//
// Tests that no value can smuggle a header line into a request: the HTTP
// layer refuses a header with CR, LF or NUL whatever its source, and every
// credentials provider's answer -- the environment, the shared files,
// credential_process, container credentials and their authorization
// token, IMDS and its session token, STS -- is refused when a field holds
// a control character, naming the provider and the field, never the value.
// tests/remote/credserver.py counts every request that arrives with an
// X-Injected header: each value here carries CR LF "X-Injected: yes".
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "aws_config.h"
#include "cred_fixtures.h"
#include "credentials.h"
#include "credentials_cache.h"
#include "http.h"
#include "testutil.h"

namespace ufspack {
namespace remote {
namespace {

using namespace credtest;  // NOLINT(build/namespaces): the fixtures
using test::Contains;
using test::TempDir;
using test::WriteFile;

const std::string kInjection = "\r\nX-Injected: yes";

// --- the HTTP layer

// GET `server`/control/log with `headers` and a signer that adds `signed`.
Status Get(const CredServer& server, std::vector<Header> headers,
           std::vector<Header> signed_headers = {}) {
  Transfer t;
  t.url = server.url() + "/control/log";
  t.display = t.url;
  t.headers = std::move(headers);
  if (!signed_headers.empty()) {
    t.sign = [signed_headers](const Transfer&, std::vector<Header>* add) {
      add->insert(add->end(), signed_headers.begin(), signed_headers.end());
      return Status::OK();
    };
  }
  Transfer* list[] = {&t};
  Status s = RunTransfers(list, 1, RemoteOptions());
  EXPECT_EQ(s.ok(), t.status.ok());
  if (!s.ok()) {
    EXPECT_EQ(t.attempts, 0) << "refused after an attempt";
  }
  return s;
}

TEST(HttpHeaderTest, CrLfOrNulInAHeaderIsRefusedBeforeAnythingIsSent) {
  TempDir dir;
  CredServer server(dir, "x", 60);
  ASSERT_FALSE(server.url().empty());
  const std::string url = server.url() + "/control/log";
  const std::string values[] = {"a" + kInjection, "a\nX-Injected: yes",
                                "a\rX-Injected: yes",
                                std::string("a\0X-Injected: yes", 17)};
  for (const std::string& value : values) {
    for (bool by_signer : {false, true}) {
      const std::vector<Header> bad = {{"X-Token", value}};
      Status s =
          by_signer ? Get(server, {{"X-Fine", "1"}}, bad) : Get(server, bad);
      ASSERT_FALSE(s.ok());
      EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
      EXPECT_TRUE(Contains(s, "GET " + url +
                                  ": header 'X-Token': expected a "
                                  "value without CR, LF or NUL"))
          << s.ToString();
      EXPECT_TRUE(Contains(s, "the value is not shown")) << s.ToString();
      EXPECT_FALSE(Contains(s, "X-Injected")) << s.ToString();
    }
  }
  // A name with a line break: named with its bytes escaped.
  Status s = Get(server, {{"X-Injected: yes\r\nX-Token", "1"}});
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s,
                       "header 'X-Injected: yes\\x0d\\x0aX-Token': "
                       "expected a name without CR, LF or NUL"))
      << s.ToString();
  // Tabs, blanks and bytes above 0x7f are a header value's own.
  EXPECT_TRUE(Get(server, {{"X-Fine", "a\tb c \xc3\xa9"}}).ok());
  EXPECT_EQ(server.Count("injected"), 0);
}

// --- the one check every provider's credentials pass

class FixedProvider final : public CredentialsProvider {
 public:
  explicit FixedProvider(Credentials c) : c_(std::move(c)) {}
  Status Fetch(TimedCredentials* out) override {
    out->credentials = c_;
    out->expiration = 0;
    return Status::OK();
  }
  std::string Name() const override { return "fixed provider"; }

 private:
  const Credentials c_;
};

TEST(CredentialsCheckTest, AnyControlCharacterInAnyFieldIsRefused) {
  const Credentials good{"AKIDGOOD", kPlantedSecret, kPlantedToken};
  for (const char bad : {'\r', '\n', '\0', '\t', '\x01', '\x1f', '\x7f'}) {
    for (const char* field :
         {"AccessKeyId", "SecretAccessKey", "SessionToken"}) {
      Credentials c = good;
      const std::string name = field;
      std::string* value = name == "AccessKeyId"       ? &c.access_key_id
                           : name == "SecretAccessKey" ? &c.secret_access_key
                                                       : &c.session_token;
      value->insert(3, 1, bad);
      CredentialsCache cache(std::make_unique<FixedProvider>(c));
      std::shared_ptr<const Credentials> got;
      Status s = cache.Get(&got);
      ASSERT_FALSE(s.ok()) << field << " with byte " << int{bad};
      EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
      char expected[96];
      std::snprintf(expected, sizeof(expected),
                    "fixed provider: %s: expected no control characters; "
                    "found byte 0x%02x at offset 3",
                    field, static_cast<unsigned char>(bad));
      EXPECT_TRUE(Contains(s, expected)) << s.ToString();
      for (const char* secret : {kPlantedSecret, kPlantedToken, "AKID"}) {
        EXPECT_FALSE(Contains(s, secret)) << s.ToString();
      }
    }
  }
  CredentialsCache cache(std::make_unique<FixedProvider>(good));
  std::shared_ptr<const Credentials> got;
  ASSERT_TRUE(cache.Get(&got).ok());
  EXPECT_EQ(got->session_token, kPlantedToken);
}

// --- every provider, end to end

class InjectionTest : public ::testing::Test {
 protected:
  InjectionTest() : server_(dir_, MakeObject(), 60), env_(dir_.path()) {
    env_.Set("AWS_ENDPOINT_URL", server_.url());
    env_.Set("AWS_REGION", "us-east-1");
  }

  // Loads the settings and, when that succeeds, reads through S3 as a
  // reader would: the first error, which must name `provider` and
  // `field`, and not a byte of what was injected; the server must have
  // received no injected header.
  void ExpectRefused(const std::string& provider, const std::string& field) {
    auto settings = std::make_shared<AwsSettings>();
    Status s = LoadAwsSettings(env_.Lookup(), settings.get());
    if (s.ok()) {
      std::string got;
      s = ReadRange(settings, 0, 100, &got);
    }
    ASSERT_FALSE(s.ok()) << "accepted credentials with CR LF";
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    EXPECT_TRUE(Contains(s, provider)) << s.ToString();
    EXPECT_TRUE(Contains(s, field + ": expected no control characters; "
                                    "found byte 0x0"))
        << s.ToString();
    for (const char* secret : {"X-Injected", kPlantedSecret, kPlantedToken}) {
      EXPECT_FALSE(Contains(s, secret)) << s.ToString();
    }
    EXPECT_EQ(server_.Count("injected"), 0);
  }

  // Profile 'work' whose credential_process prints `json` (a fresh
  // script per call: the cache is per command).
  void Process(const std::string& json) {
    const std::string path =
        dir_ / ("proc" + std::to_string(scripts_++) + ".sh");
    WriteFile(path, "#!/bin/sh\ncat <<'EOF'\n" + json + "\nEOF\n");
    ::chmod(path.c_str(), 0755);
    WriteFile(dir_ / ".aws/config",
              "[profile work]\ncredential_process = " + path + "\n");
    env_.Set("AWS_PROFILE", "work");
  }

  TempDir dir_;
  CredServer server_;
  FakeEnv env_;
  int scripts_ = 0;
};

TEST_F(InjectionTest, Environment) {
  env_.Set("AWS_ACCESS_KEY_ID", "AKIDENV");
  env_.Set("AWS_SECRET_ACCESS_KEY", kPlantedSecret);
  env_.Set("AWS_SESSION_TOKEN", kPlantedToken + kInjection);
  ExpectRefused("AWS credentials for profile 'default': environment",
                "SessionToken");
  env_.Set("AWS_SESSION_TOKEN", kPlantedToken);
  env_.Set("AWS_ACCESS_KEY_ID", "AKIDENV" + kInjection);
  ExpectRefused("environment", "AccessKeyId");
}

TEST_F(InjectionTest, SharedCredentialsFile) {
  // Lines end at LF; a CR inside a value is a line break to many servers.
  WriteFile(dir_ / ".aws/credentials",
            "[default]\naws_access_key_id = AKIDFILE\n"
            "aws_secret_access_key = " +
                std::string(kPlantedSecret) + "\naws_session_token = " +
                kPlantedToken + "\rX-Injected: yes\n");
  ExpectRefused(dir_ / ".aws/credentials [default]", "SessionToken");
}

TEST_F(InjectionTest, CredentialProcess) {
  const std::string secret =
      std::string("\"SecretAccessKey\": \"") + kPlantedSecret + "\"";
  Process("{\"Version\": 1, \"AccessKeyId\": \"AKID\\r\\nX-Injected: yes\", " +
          secret + "}");
  ExpectRefused("credential_process of profile 'work'", "AccessKeyId");
  Process("{\"Version\": 1, \"AccessKeyId\": \"AKID\", " + secret +
          ", \"SessionToken\": \"" + kPlantedToken +
          "\\r\\nX-Injected: yes\"}");
  ExpectRefused("credential_process of profile 'work'", "SessionToken");
}

TEST_F(InjectionTest, ContainerAuthorizationTokenAndAnswer) {
  env_.Set("AWS_CONTAINER_CREDENTIALS_FULL_URI",
           server_.url() + "/container/creds");
  env_.Set("AWS_CONTAINER_AUTHORIZATION_TOKEN", kPlantedToken + kInjection);
  const std::string provider =
      "container credentials (" + server_.url() + "/container/creds)";
  ExpectRefused(provider, "AWS_CONTAINER_AUTHORIZATION_TOKEN");
  // The token file: CR and LF were refused already; NUL was not.
  env_.Unset("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  WriteFile(dir_ / "token",
            std::string(kPlantedToken) + std::string("\0X-Injected: yes", 16));
  env_.Set("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", dir_ / "token");
  ExpectRefused(provider,
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE " + (dir_ / "token"));
  // The endpoint's answer.
  env_.Unset("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  env_.Set("AWS_CONTAINER_CREDENTIALS_FULL_URI",
           server_.url() + "/container/creds?fresh");  // a new cache
  server_.Call("POST", "/control/mode", "inject-credentials");
  ExpectRefused("container credentials", "SessionToken");
}

TEST_F(InjectionTest, InstanceMetadataTokenAndAnswerAreErrorsNotAnonymous) {
  env_.UseImdsAndS3At(server_.url());
  server_.Call("POST", "/control/mode", "inject-token");
  ExpectRefused("EC2 instance metadata (IMDSv2, " + server_.url() + ")",
                "session token (PUT /latest/api/token)");
  server_.Call("POST", "/control/mode", "inject-credentials");
  env_.Set("AWS_EC2_METADATA_SERVICE_ENDPOINT", server_.url() + "/");
  ExpectRefused("EC2 instance metadata", "SessionToken");
}

TEST_F(InjectionTest, StsAnswer) {
  TempDir sts_dir;
  CredServer sts(sts_dir, "x", 60, "", kPlantedToken);
  WriteFile(dir_ / "web-token", kPlantedToken);
  env_.Set("AWS_WEB_IDENTITY_TOKEN_FILE", dir_ / "web-token");
  env_.Set("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/reader");
  env_.Set("AWS_ENDPOINT_URL_STS", sts.url());
  sts.Call("POST", "/control/mode", "inject-credentials");
  ExpectRefused("web identity (role arn:aws:iam::123456789012:role/reader",
                "SessionToken");
  EXPECT_EQ(sts.Count("injected"), 0);
}

TEST_F(InjectionTest, EndpointVariables) {
  env_.Set("AWS_ACCESS_KEY_ID", "AKIDENV");
  env_.Set("AWS_SECRET_ACCESS_KEY", kPlantedSecret);
  for (const char* variable :
       {"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_STS"}) {
    env_.Set(variable, server_.url() + kInjection);
    auto settings = std::make_shared<AwsSettings>();
    Status s = LoadAwsSettings(env_.Lookup(), settings.get());
    if (s.ok()) {
      std::string got;
      s = ReadRange(settings, 0, 100, &got);
    }
    ASSERT_FALSE(s.ok()) << variable;
    EXPECT_TRUE(Contains(s, std::string(variable) +
                                ": expected no control characters; found "
                                "byte 0x0d"))
        << s.ToString();
    EXPECT_FALSE(Contains(s, "X-Injected")) << s.ToString();
    env_.Set(variable, server_.url());
  }
  EXPECT_EQ(server_.Count("injected"), 0);
}

}  // namespace
}  // namespace remote
}  // namespace ufspack
