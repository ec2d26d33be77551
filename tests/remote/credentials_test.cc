// Copyright 2026 The ufspack Authors.
//
// Tests for the credentials providers and their cache: the parsing helpers,
// credential_process (real scripts), the cache's refresh, failure and fork
// behaviour (a scripted provider), and IMDSv2 and container credentials
// from tests/remote/credserver.py on loopback, whose S3 endpoint checks
// every request's SigV4 signature against the keys it issued and rejects
// expired ones.  Every wait is bounded.
#include "credentials.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "aws_config.h"
#include "cred_fixtures.h"
#include "credential_process.h"
#include "credentials_cache.h"
#include "credentials_json.h"
#include "http.h"
#include "location.h"
#include "servers.h"
#include "testutil.h"

namespace ufspack {
namespace remote {
namespace {

using namespace credtest;  // NOLINT(build/namespaces): the fixtures
using test::Contains;
using test::TempDir;
using test::WriteFile;

// --- helpers

TEST(SplitCommandTest, FollowsShlexPosixRules) {
  std::vector<std::string> w;
  ASSERT_TRUE(
      SplitCommand("  /bin/tool  --a 'b c' \"d \\\"e\\\"\" f\\ g ''", &w).ok());
  ASSERT_EQ(w.size(), 6u);
  EXPECT_EQ(w[0], "/bin/tool");
  EXPECT_EQ(w[1], "--a");
  EXPECT_EQ(w[2], "b c");
  EXPECT_EQ(w[3], "d \"e\"");
  EXPECT_EQ(w[4], "f g");
  EXPECT_EQ(w[5], "");
  EXPECT_TRUE(Contains(SplitCommand("tool 'open", &w), "closing '"));
  EXPECT_TRUE(Contains(SplitCommand("tool \"open", &w), "closing \""));
}

TEST(ParseJsonObjectTest, TopLevelScalarsAndErrorsWithoutText) {
  std::map<std::string, std::string> m;
  ASSERT_TRUE(ParseJsonObject(
                  "{\"Version\": 1, \"A\": \"x\\u00e9\\n\", \"N\": {\"B\": [1, "
                  "{}]}, \"T\": true, \"Z\": null}",
                  &m)
                  .ok());
  EXPECT_EQ(m["Version"], "1");
  EXPECT_EQ(m["A"], "x\xc3\xa9\n");
  EXPECT_EQ(m.count("N"), 0u);
  EXPECT_EQ(m["T"], "true");
  EXPECT_EQ(m.count("Z"), 0u);
  Status s = ParseJsonObject(std::string("{\"A\": \"") + kPlantedSecret, &m);
  EXPECT_TRUE(Contains(s, "invalid JSON at byte")) << s.ToString();
  EXPECT_FALSE(Contains(s, kPlantedSecret));
  EXPECT_FALSE(ParseJsonObject("{} trailing", &m).ok());
  EXPECT_FALSE(ParseJsonObject("[]", &m).ok());
}

TEST(ParseIso8601Test, ZuluOffsetsAndFractions) {
  int64_t t = 0;
  ASSERT_TRUE(ParseIso8601("1970-01-02T00:00:00Z", &t));
  EXPECT_EQ(t, 86400);
  ASSERT_TRUE(ParseIso8601("1970-01-02T01:00:00.123+01:00", &t));
  EXPECT_EQ(t, 86400);
  EXPECT_FALSE(ParseIso8601("1970-01-02 00:00:00Z", &t));
  EXPECT_FALSE(ParseIso8601("1970-01-02T00:00:00", &t));
  EXPECT_FALSE(ParseIso8601("tomorrow", &t));
}

// --- credential_process

class ProcessTest : public ::testing::Test {
 protected:
  ProcessTest() : env_(home_.path()) {}

  // A profile 'work' whose credential_process runs a script printing
  // `stdout_text` and exiting with `code`; a fresh script name per call
  // (the cache is per command, and a failed one is not retried for 10 s).
  void Script(const std::string& stdout_text, int code = 0,
              const std::string& extra = "") {
    const std::string name = "cred proc " + std::to_string(counter_++) + ".sh";
    const std::string path = home_ / name;
    WriteFile(path, "#!/bin/sh\n" + extra + "cat <<'EOF'\n" + stdout_text +
                        "\nEOF\nexit " + std::to_string(code) + "\n");
    ::chmod(path.c_str(), 0755);
    WriteFile(home_ / ".aws/config",
              "[profile work]\nregion = us-east-2\ncredential_process = '" +
                  path + "' --profile 'a b'\n");
    env_.Set("AWS_PROFILE", "work");
  }
  Status Load(AwsSettings* s) { return LoadAwsSettings(env_.Lookup(), s); }
  std::string LoadError() {
    AwsSettings s;
    Status st = Load(&s);
    EXPECT_FALSE(st.ok());
    const std::string msg = st.ToString();
    EXPECT_FALSE(Contains(msg, kPlantedSecret)) << msg;
    EXPECT_FALSE(Contains(msg, kPlantedToken)) << msg;
    return msg;
  }

  TempDir home_;
  FakeEnv env_;
  int counter_ = 0;
};

TEST_F(ProcessTest, GivesExpiringCredentials) {
  Script(std::string("{\"Version\": 1, \"AccessKeyId\": \"AKIDPROC\", "
                     "\"SecretAccessKey\": \"") +
         kPlantedSecret + "\", \"SessionToken\": \"" + kPlantedToken +
         "\", \"Expiration\": \"" + IsoIn(3600) + "\"}");
  AwsSettings s;
  ASSERT_TRUE(Load(&s).ok());
  ASSERT_NE(s.provider, nullptr);
  EXPECT_TRUE(Contains(s.credentials_source,
                       "credential_process of profile 'work' (" +
                           (home_ / ".aws/config") + ":3 [profile work])"))
      << s.credentials_source;
  std::shared_ptr<const Credentials> c;
  ASSERT_TRUE(s.provider->Get(&c).ok());
  EXPECT_EQ(c->access_key_id, "AKIDPROC");
  EXPECT_EQ(c->secret_access_key, kPlantedSecret);
  EXPECT_EQ(c->session_token, kPlantedToken);
  EXPECT_FALSE(Contains(s.Describe(), kPlantedSecret));
  EXPECT_FALSE(Contains(s.Describe(), kPlantedToken));
  // Shared: a second load uses the same cache, no second run.
  AwsSettings again;
  ASSERT_TRUE(Load(&again).ok());
  EXPECT_EQ(again.provider, s.provider);
  EXPECT_EQ(s.provider->fetches(), 1);
}

TEST_F(ProcessTest, WithoutExpirationTheyNeverExpire) {
  Script(std::string("{\"Version\": 1, \"AccessKeyId\": \"AKIDSTATIC\", "
                     "\"SecretAccessKey\": \"") +
         kPlantedSecret + "\"}");
  AwsSettings s;
  ASSERT_TRUE(Load(&s).ok());
  for (int i = 0; i < 3; ++i) {
    std::shared_ptr<const Credentials> c;
    ASSERT_TRUE(s.provider->Get(&c).ok());
    EXPECT_EQ(c->access_key_id, "AKIDSTATIC");
    EXPECT_TRUE(c->session_token.empty());
  }
  EXPECT_EQ(s.provider->fetches(), 1);
}

TEST_F(ProcessTest, FailuresNameTheProfileAndNeverEchoTheOutput) {
  const std::string good_keys = std::string("\"AccessKeyId\": \"AKID\", ") +
                                "\"SecretAccessKey\": \"" + kPlantedSecret +
                                "\"";
  Script("{\"Version\": 1, " + good_keys + "}", 1,
         "echo 'cred proc: token expired, run login' >&2\n");
  std::string msg = LoadError();
  EXPECT_TRUE(Contains(msg, "credential_process of profile 'work'")) << msg;
  EXPECT_TRUE(Contains(msg, "exited with status 1")) << msg;

  Script(std::string("{\"Version\": 1, \"SecretAccessKey\": \"") +
         kPlantedSecret + "\" oops");
  msg = LoadError();
  EXPECT_TRUE(Contains(msg, "profile 'work'")) << msg;
  EXPECT_TRUE(Contains(msg, "expected a JSON object of credentials")) << msg;
  EXPECT_TRUE(Contains(msg, "invalid JSON at byte")) << msg;

  Script(std::string("{\"Version\": 1, \"AccessKeyId\": \"AKID\"}"));
  msg = LoadError();
  EXPECT_TRUE(Contains(msg, "expected a non-empty \"SecretAccessKey\"")) << msg;

  Script("{\"Version\": 2, " + good_keys + "}");
  msg = LoadError();
  EXPECT_TRUE(Contains(msg, "expected \"Version\": 1")) << msg;

  Script("{\"Version\": 1, " + good_keys + ", \"Expiration\": \"soon\"}");
  msg = LoadError();
  EXPECT_TRUE(Contains(msg, "expected \"Expiration\" as an ISO 8601")) << msg;

  Script("{\"Version\": 1, " + good_keys + ", \"Expiration\": \"" + IsoIn(-60) +
         "\"}");
  msg = LoadError();
  EXPECT_TRUE(Contains(msg, "Expiration already past")) << msg;

  env_.Set("UFSPACK_CREDENTIAL_PROCESS_TIMEOUT_SECONDS", "1");
  const auto start = std::chrono::steady_clock::now();
  Script("{}", 0, "exec sleep 20\n");
  msg = LoadError();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(Contains(msg, "expected it to finish within 1 s; killed it"))
      << msg;

  WriteFile(home_ / ".aws/config",
            "[profile work]\ncredential_process = /nonexistent/cred-tool\n");
  msg = LoadError();
  EXPECT_TRUE(Contains(msg, "cannot run '/nonexistent/cred-tool'")) << msg;
}

// --- the cache, with a scripted provider

class ScriptedProvider final : public CredentialsProvider {
 public:
  explicit ScriptedProvider(int seconds) : lifetime(seconds) {}
  Status Fetch(TimedCredentials* out) override {
    if (delay_ms.load() > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms.load()));
    }
    const int n = ++calls;
    if (fail.load()) {
      return Status::IOError("scripted provider: refused (call " +
                             std::to_string(n) + ")");
    }
    out->credentials.access_key_id = "AKID" + std::to_string(n);
    out->credentials.secret_access_key = kPlantedSecret;
    out->expiration = ::time(nullptr) + lifetime.load();
    return Status::OK();
  }
  std::string Name() const override { return "scripted provider"; }

  std::atomic<int> calls{0};
  std::atomic<bool> fail{false};
  std::atomic<int> delay_ms{0};
  std::atomic<int> lifetime;
};

TEST(CredentialsCacheTest, RefreshFailureKeepsValidCredentialsAndLogsOnce) {
  auto owned = std::make_unique<ScriptedProvider>(4);
  ScriptedProvider* p = owned.get();
  CredentialsCache cache(std::move(owned));
  std::shared_ptr<const Credentials> c;
  ASSERT_TRUE(cache.Get(&c).ok());
  EXPECT_EQ(c->access_key_id, "AKID1");
  p->fail = true;
  testing::internal::CaptureStderr();
  // Refresh is due after 2 s; until expiry at 4 s the old keys serve.
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start <
         std::chrono::milliseconds(3000)) {
    ASSERT_TRUE(cache.Get(&c).ok());
    EXPECT_EQ(c->access_key_id, "AKID1");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_LE(p->calls.load(), 4);  // 1 + failed retries >= 1 s apart
  EXPECT_GE(p->calls.load(), 2);
  size_t lines = 0;
  for (size_t at = 0; (at = err.find("refreshing AWS credentials failed",
                                     at)) != std::string::npos;
       ++at) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << err;
  EXPECT_TRUE(Contains(err, "scripted provider: refused")) << err;
  EXPECT_FALSE(Contains(err, kPlantedSecret));
  // Past expiry the failure is the answer, retried at most every 10 s.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  Status s = cache.Get(&c);
  EXPECT_TRUE(Contains(s, "scripted provider: refused")) << s.ToString();
  const int calls = p->calls.load();
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(cache.Get(&c).ok());
  EXPECT_LE(p->calls.load(), calls + 1);
  p->fail = false;
}

TEST(CredentialsCacheTest, ThreadsShareOneRefreshPerPeriod) {
  auto owned = std::make_unique<ScriptedProvider>(4);
  ScriptedProvider* p = owned.get();
  p->delay_ms = 100;
  CredentialsCache cache(std::move(owned));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      while (std::chrono::steady_clock::now() - start <
             std::chrono::milliseconds(4500)) {
        std::shared_ptr<const Credentials> c;
        if (!cache.Get(&c).ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  // Refreshed 2 s after each fetch (half of 4 s; whole seconds): 1 + 2
  // or so in 4.5 s, never one per request or per thread.
  EXPECT_GE(p->calls.load(), 2);
  EXPECT_LE(p->calls.load(), 4);
}

TEST(CredentialsCacheTest, ForkedChildRefreshesOnItsOwnOnce) {
  auto owned = std::make_unique<ScriptedProvider>(2);
  ScriptedProvider* p = owned.get();
  CredentialsCache cache(std::move(owned));
  std::shared_ptr<const Credentials> c;
  ASSERT_TRUE(cache.Get(&c).ok());
  ASSERT_EQ(cache.fetches(), 1);
  // A parent thread is mid-refresh (slow) when the process forks.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  p->delay_ms = 1500;
  std::thread refresher([&] {
    std::shared_ptr<const Credentials> mine;
    (void)cache.Get(&mine);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(10);  // a child stuck on the parent's refresh dies here
    p->delay_ms = 0;
    p->lifetime = 60;  // the child's own credentials are not due again
    int code = 0;
    std::shared_ptr<const Credentials> mine;
    // Due: the child fetches itself, once, however often it asks.
    for (int i = 0; i < 100; ++i) {
      if (!cache.Get(&mine).ok()) code = 2;
    }
    if (cache.fetches() != 1) code = 3;
    // The parent's first fetch, then the child's own (the parent's second,
    // asleep in a thread the child does not have, never counts here).
    if (p->calls.load() != 2) code = 4;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int i = 0; i < 100; ++i) (void)cache.Get(&mine);
    if (cache.fetches() != 1) code = 5;
    ::_exit(code);
  }
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  refresher.join();
  ASSERT_TRUE(WIFEXITED(status))
      << "child killed by signal "
      << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(cache.fetches(), 2);  // the parent's own count
}

// --- IMDSv2 and container credentials on loopback

TEST(ImdsTest, ReadsAcrossSeveralExpiriesRefreshingOncePerPeriod) {
  TempDir dir;
  const std::string object = MakeObject();
  CredServer server(dir, object, 4);
  ASSERT_FALSE(server.url().empty());
  FakeEnv env(dir.path());
  env.UseImdsAndS3At(server.url());
  env.Set("AWS_REGION", "us-east-1");
  auto settings = std::make_shared<AwsSettings>();
  testing::internal::CaptureStderr();
  Status s = LoadAwsSettings(env.Lookup(), settings.get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Contains(settings->credentials_source, "IMDSv2"))
      << settings->credentials_source;
  std::atomic<int> failures{0}, reads{0};
  std::string first_failure;
  std::mutex mu;
  std::vector<std::thread> threads;
  const auto start = std::chrono::steady_clock::now();
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      uint64_t first = static_cast<uint64_t>(k) * 1000;
      while (std::chrono::steady_clock::now() - start <
             std::chrono::seconds(9)) {
        std::string got;
        Status r = ReadRange(settings, first, 777, &got);
        if (!r.ok() || got != object.substr(first, 777)) {
          std::lock_guard<std::mutex> lock(mu);
          if (failures++ == 0) first_failure = r.ToString();
        }
        ++reads;
        first = (first + 4099) % 90000;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
  }
  for (auto& t : threads) t.join();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  EXPECT_GT(reads.load(), 100);
  EXPECT_EQ(server.Count("s3_denied"), 0);
  // 9 s of 4-second credentials refreshed at half-life: 1 + about 4.
  const int fetched = server.Count("imds_credentials");
  EXPECT_GE(fetched, 3);
  EXPECT_LE(fetched, 6);
  EXPECT_EQ(server.Count("imds_token"), fetched);
  // No secret or token anywhere in what ufspack printed or described.
  std::shared_ptr<const Credentials> c;
  ASSERT_TRUE(settings->provider->Get(&c).ok());
  for (const std::string& text : {err, settings->Describe(), first_failure}) {
    EXPECT_FALSE(Contains(text, c->secret_access_key)) << text;
    EXPECT_FALSE(Contains(text, c->session_token)) << text;
  }
}

TEST(ImdsTest, FailuresFallBackToAnonymousSayingWhy) {
  TempDir dir;
  CredServer server(dir, "x", 60);
  ASSERT_FALSE(server.url().empty());
  FakeEnv env(dir.path());
  env.Unset("AWS_EC2_METADATA_DISABLED");

  server.Call("POST", "/control/mode", "no-role");
  env.Set("AWS_EC2_METADATA_SERVICE_ENDPOINT", server.url());
  AwsSettings s;
  ASSERT_TRUE(LoadAwsSettings(env.Lookup(), &s).ok());
  EXPECT_EQ(s.provider, nullptr);
  EXPECT_TRUE(Contains(s.credentials_source, "none (anonymous; tried"))
      << s.credentials_source;
  EXPECT_TRUE(Contains(s.credentials_source,
                       "EC2 instance metadata (IMDSv2, " + server.url() +
                           "): the instance has no IAM role attached"))
      << s.credentials_source;

  // A hung endpoint: bounded (1 s stall, 2 attempts), then anonymous.
  server.Call("POST", "/control/mode", "hang");
  env.Set("AWS_EC2_METADATA_SERVICE_ENDPOINT", server.url() + "/");  // new key
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(LoadAwsSettings(env.Lookup(), &s).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(s.provider, nullptr);
  EXPECT_TRUE(Contains(s.credentials_source,
                       "PUT " + server.url() + "/latest/api/token"))
      << s.credentials_source;

  // Disabled: not asked at all.
  server.Call("POST", "/control/mode", "ok");
  const int before = server.Count("imds_token");
  env.Set("AWS_EC2_METADATA_DISABLED", "true");
  env.Set("AWS_EC2_METADATA_SERVICE_ENDPOINT", server.url() + "//");
  ASSERT_TRUE(LoadAwsSettings(env.Lookup(), &s).ok());
  EXPECT_EQ(s.provider, nullptr);
  EXPECT_EQ(server.Count("imds_token"), before);
}

TEST(ContainerTest, TokenFileCredentialsSignRequests) {
  TempDir dir;
  const std::string object = MakeObject();
  const std::string token = std::string("Bearer ") + kPlantedToken;
  CredServer server(dir, object, 3, token);
  ASSERT_FALSE(server.url().empty());
  WriteFile(dir / "token", token + "\n");
  FakeEnv env(dir.path());
  env.Set("AWS_CONTAINER_CREDENTIALS_FULL_URI",
          server.url() + "/container/creds");
  env.Set("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", dir / "token");
  env.Set("AWS_ENDPOINT_URL", server.url());
  auto settings = std::make_shared<AwsSettings>();
  Status s = LoadAwsSettings(env.Lookup(), settings.get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Contains(settings->credentials_source, "container credentials ("))
      << settings->credentials_source;
  const auto start = std::chrono::steady_clock::now();
  int reads = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    std::string got;
    Status r = ReadRange(settings, 500, 1000, &got);
    ASSERT_TRUE(r.ok()) << r.ToString();
    ASSERT_EQ(got, object.substr(500, 1000));
    ++reads;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GT(reads, 20);
  const int fetched = server.Count("container");
  EXPECT_GE(fetched, 2);  // refreshed past the first expiry
  EXPECT_LE(fetched, 5);
  EXPECT_EQ(server.Count("s3_denied"), 0);
  EXPECT_FALSE(Contains(settings->Describe(), kPlantedToken));

  // A missing token file: the provider, the variable and the path.
  env.Set("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", dir / "missing-token");
  AwsSettings bad;
  s = LoadAwsSettings(env.Lookup(), &bad);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(
      s, "container credentials (" + server.url() + "/container/creds)"))
      << s.ToString();
  EXPECT_TRUE(Contains(s, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE " +
                              (dir / "missing-token") +
                              ": expected a readable file"))
      << s.ToString();

  // A wrong token: the endpoint's 401, never the token.
  WriteFile(dir / "wrong-token", std::string("Bearer wrong") + kPlantedToken);
  env.Set("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", dir / "wrong-token");
  s = LoadAwsSettings(env.Lookup(), &bad);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s, "container credentials")) << s.ToString();
  EXPECT_TRUE(Contains(s, "401")) << s.ToString();
  EXPECT_FALSE(Contains(s, kPlantedToken)) << s.ToString();

  // Plain http to a host that is not a container agent is refused.
  env.Set("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://example.com/creds");
  s = LoadAwsSettings(env.Lookup(), &bad);
  EXPECT_TRUE(Contains(s,
                       "AWS_CONTAINER_CREDENTIALS_FULL_URI: expected an "
                       "https:// URL"))
      << s.ToString();
}

TEST(WebIdentityTest, StsCredentialsSignRequestsAndFailuresNameTheRole) {
  TempDir dir;
  const std::string object = MakeObject();
  CredServer server(dir, object, 3, "", kPlantedToken);
  ASSERT_FALSE(server.url().empty());
  WriteFile(dir / "web-token", std::string(kPlantedToken) + "\n");
  FakeEnv env(dir.path());
  env.Set("AWS_WEB_IDENTITY_TOKEN_FILE", dir / "web-token");
  env.Set("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/reader");
  env.Set("AWS_ROLE_SESSION_NAME", "test session");
  env.Set("AWS_ENDPOINT_URL", server.url());  // S3 and STS
  auto settings = std::make_shared<AwsSettings>();
  Status s = LoadAwsSettings(env.Lookup(), settings.get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Contains(settings->credentials_source,
                       "web identity (role arn:aws:iam::123456789012:role/"
                       "reader, token file " +
                           (dir / "web-token") + " from the environment"))
      << settings->credentials_source;
  const auto start = std::chrono::steady_clock::now();
  int reads = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    std::string got;
    Status r = ReadRange(settings, 100, 2000, &got);
    ASSERT_TRUE(r.ok()) << r.ToString();
    ASSERT_EQ(got, object.substr(100, 2000));
    ++reads;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GT(reads, 20);
  EXPECT_GE(server.Count("sts"), 2);  // refreshed past the first expiry
  EXPECT_LE(server.Count("sts"), 5);
  EXPECT_EQ(server.Count("s3_denied"), 0);

  // A token STS refuses: the provider, the role and STS's code, no token.
  WriteFile(dir / "bad-token", "not-the-token\n");
  env.Set("AWS_WEB_IDENTITY_TOKEN_FILE", dir / "bad-token");
  AwsSettings bad;
  s = LoadAwsSettings(env.Lookup(), &bad);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s,
                       "web identity (role arn:aws:iam::123456789012:role/"
                       "reader"))
      << s.ToString();
  EXPECT_TRUE(Contains(s, "InvalidIdentityToken")) << s.ToString();
  EXPECT_FALSE(Contains(s, "not-the-token")) << s.ToString();

  // A missing token file, and a token file without a role.
  env.Set("AWS_WEB_IDENTITY_TOKEN_FILE", dir / "missing");
  s = LoadAwsSettings(env.Lookup(), &bad);
  EXPECT_TRUE(Contains(s, (dir / "missing") + ": expected a readable file"))
      << s.ToString();
  env.Unset("AWS_ROLE_ARN");
  s = LoadAwsSettings(env.Lookup(), &bad);
  EXPECT_TRUE(Contains(s, "expected AWS_ROLE_ARN with it")) << s.ToString();

  // The same from a profile.
  env.Unset("AWS_WEB_IDENTITY_TOKEN_FILE");
  env.Unset("AWS_ROLE_SESSION_NAME");
  WriteFile(dir / ".aws/config",
            "[default]\nrole_arn = arn:aws:iam::123456789012:role/p\n"
            "web_identity_token_file = " +
                (dir / "web-token") + "\n");
  auto from_profile = std::make_shared<AwsSettings>();
  s = LoadAwsSettings(env.Lookup(), from_profile.get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Contains(from_profile->credentials_source,
                       "from " + (dir / ".aws/config") + ":3 [default]"))
      << from_profile->credentials_source;
  std::string got;
  s = ReadRange(from_profile, 0, 10, &got);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  AwsSettings later;
  ASSERT_TRUE(LoadAwsSettings(env.Lookup(), &later).ok());
  EXPECT_EQ(later.provider, from_profile->provider);  // shared, not re-fetched
}

TEST(AssumeRoleTest, SourceProfileKeysSignAssumeRoleAcrossExpiries) {
  TempDir dir;
  const std::string object = MakeObject();
  CredServer server(dir, object, 3, "", "",
                    std::string("AKIDSOURCE:") + kPlantedSecret);
  ASSERT_FALSE(server.url().empty());
  WriteFile(dir / ".aws/credentials",
            std::string("[base]\naws_access_key_id = AKIDSOURCE\n"
                        "aws_secret_access_key = ") +
                kPlantedSecret +
                "\n[badbase]\naws_access_key_id = AKIDSOURCE\n"
                "aws_secret_access_key = wrong" +
                kPlantedSecret + "\n");
  WriteFile(dir / ".aws/config",
            "[profile dev]\nrole_arn = arn:aws:iam::123456789012:role/dev\n"
            "source_profile = base\n"
            "[profile devbad]\nrole_arn = arn:aws:iam::123456789012:role/dev\n"
            "source_profile = badbase\n"
            "[profile lonely]\nrole_arn = arn:aws:iam::123456789012:role/x\n"
            "[profile chained]\nrole_arn = arn:aws:iam::123456789012:role/y\n"
            "source_profile = dev\n"
            "[profile nosource]\nrole_arn = arn:aws:iam::123456789012:role/z\n"
            "source_profile = ghost\n");
  FakeEnv env(dir.path());
  env.Set("AWS_PROFILE", "dev");
  env.Set("AWS_ENDPOINT_URL", server.url());  // S3 and STS
  auto settings = std::make_shared<AwsSettings>();
  Status s = LoadAwsSettings(env.Lookup(), settings.get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Contains(settings->credentials_source,
                       "assume role (role arn:aws:iam::123456789012:role/dev "
                       "from " +
                           (dir / ".aws/config") + ":2 [profile dev]"))
      << settings->credentials_source;
  const auto start = std::chrono::steady_clock::now();
  int reads = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    std::string got;
    Status r = ReadRange(settings, 300, 3000, &got);
    ASSERT_TRUE(r.ok()) << r.ToString();
    ASSERT_EQ(got, object.substr(300, 3000));
    ++reads;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GT(reads, 20);
  EXPECT_GE(server.Count("assume_role_ok"), 2);  // refreshed past expiry
  EXPECT_LE(server.Count("assume_role_ok"), 5);
  EXPECT_EQ(server.Count("sts"), server.Count("assume_role_ok"));
  EXPECT_EQ(server.Count("s3_denied"), 0);
  EXPECT_FALSE(Contains(settings->Describe(), kPlantedSecret));
  // Opens seconds later share the cache (the default session name holds
  // the time, the cache key does not).
  AwsSettings later;
  ASSERT_TRUE(LoadAwsSettings(env.Lookup(), &later).ok());
  EXPECT_EQ(later.provider, settings->provider);

  AwsSettings bad;
  env.Set("AWS_PROFILE", "devbad");
  s = LoadAwsSettings(env.Lookup(), &bad);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s,
                       "assume role (role arn:aws:iam::123456789012:role/"
                       "dev from " +
                           (dir / ".aws/config") + ":5 [profile devbad]"))
      << s.ToString();
  EXPECT_TRUE(Contains(s, "SignatureDoesNotMatch")) << s.ToString();
  EXPECT_FALSE(Contains(s, kPlantedSecret)) << s.ToString();

  env.Set("AWS_PROFILE", "lonely");
  s = LoadAwsSettings(env.Lookup(), &bad);
  EXPECT_TRUE(Contains(s,
                       "[profile lonely]: role_arn needs source_profile "
                       "or credential_source"))
      << s.ToString();
  env.Set("AWS_PROFILE", "nosource");
  s = LoadAwsSettings(env.Lookup(), &bad);
  EXPECT_TRUE(Contains(s, "source_profile 'ghost': expected [ghost] in "))
      << s.ToString();
}

}  // namespace
}  // namespace remote
}  // namespace ufspack
