// Copyright 2026 The ufspack Authors.
//
// Tests for the provider chain's choices (credential_chain.cc) against
// tests/remote/credserver.py on loopback: chained roles, their loops and
// depth limit, mfa_serial, credential_source, the IMDSv1 fallback only
// when allowed, STS's endpoint order, forked workers refreshing once per
// period each, --explain-credentials (never a secret), and the
// virtual-hosted URLs and region "auto" of Cloudflare R2 and GCS.
#include "credential_chain.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "aws_config.h"
#include "cred_fixtures.h"
#include "http.h"
#include "location.h"
#include "testutil.h"

namespace ufspack {
namespace remote {
namespace {

using namespace credtest;  // NOLINT(build/namespaces): the fixtures
using test::Contains;
using test::TempDir;
using test::WriteFile;

const std::string kSourceKey = std::string("AKIDSOURCE:") + kPlantedSecret;

// Loads the settings of `profile`; returns the outcome.
Status LoadProfile(FakeEnv* env, const char* profile) {
  env->Set("AWS_PROFILE", profile);
  AwsSettings settings;
  return LoadAwsSettings(env->Lookup(), &settings);
}

std::string Keys(const std::string& secret) {
  return "aws_access_key_id = AKIDSOURCE\naws_secret_access_key = " + secret +
         "\n";
}

TEST(ChainedRolesTest, EachRoleIsAssumedWithThePreviousOnesCredentials) {
  TempDir dir;
  const std::string object = MakeObject();
  CredServer server(dir, object, 60, "", "", kSourceKey);
  ASSERT_FALSE(server.url().empty());
  WriteFile(dir / ".aws/credentials", "[base]\n" + Keys(kPlantedSecret));
  std::string config =
      "[profile dev]\nrole_arn = arn:aws:iam::1:role/dev\n"
      "source_profile = base\n"
      "[profile ops]\nrole_arn = arn:aws:iam::1:role/ops\n"
      "source_profile = dev\n"
      "[profile self]\nrole_arn = arn:aws:iam::1:role/self\n"
      "source_profile = self\n" +
      Keys(kPlantedSecret) +
      "[profile loop1]\nrole_arn = arn:aws:iam::1:role/l1\n"
      "source_profile = loop2\n"
      "[profile loop2]\nrole_arn = arn:aws:iam::1:role/l2\n"
      "source_profile = loop1\n"
      "[profile mfa]\nrole_arn = arn:aws:iam::1:role/m\n"
      "source_profile = base\nmfa_serial = arn:aws:iam::1:mfa/me\n"
      "[profile mfachain]\nrole_arn = arn:aws:iam::1:role/mc\n"
      "source_profile = mfa\n";
  // deep0 -> deep1 -> ... -> deep5 -> base: six roles, one too many.
  for (int i = 0; i <= 5; ++i) {
    config += "[profile deep" + std::to_string(i) +
              "]\nrole_arn = arn:aws:iam::1:role/d" + std::to_string(i) +
              "\nsource_profile = " +
              (i == 5 ? std::string("base") : "deep" + std::to_string(i + 1)) +
              "\n";
  }
  WriteFile(dir / ".aws/config", config);
  FakeEnv env(dir.path());
  env.Set("AWS_ENDPOINT_URL", server.url());

  env.Set("AWS_PROFILE", "ops");
  auto settings = std::make_shared<AwsSettings>();
  Status s = LoadAwsSettings(env.Lookup(), settings.get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Contains(settings->credentials_source,
                       "assume role (role arn:aws:iam::1:role/ops from"))
      << settings->credentials_source;
  EXPECT_TRUE(Contains(settings->credentials_source,
                       "source credentials: assume role (role "
                       "arn:aws:iam::1:role/dev"))
      << settings->credentials_source;
  EXPECT_EQ(server.Count("assume_role_ok"), 2);  // dev with base, ops with dev
  std::string got;
  s = ReadRange(settings, 10, 100, &got);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(got, object.substr(10, 100));

  // A profile that names itself uses its own keys.
  env.Set("AWS_PROFILE", "self");
  AwsSettings other;
  s = LoadAwsSettings(env.Lookup(), &other);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(server.Count("assume_role_ok"), 3);

  s = LoadProfile(&env, "loop1");
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
  EXPECT_TRUE(Contains(s,
                       "source_profile 'loop1' leads back to a profile "
                       "already in the chain (loop1 -> loop2 -> loop1)"))
      << s.ToString();

  s = LoadProfile(&env, "deep0");
  EXPECT_TRUE(Contains(s,
                       "expected at most 5 chained roles; found more "
                       "(deep0 -> deep1 -> deep2 -> deep3 -> deep4 -> "
                       "deep5)"))
      << s.ToString();
  EXPECT_EQ(server.Count("assume_role_ok"), 3);  // nothing asked of STS

  for (const char* profile : {"mfa", "mfachain"}) {
    s = LoadProfile(&env, profile);
    EXPECT_TRUE(s.IsNotSupported()) << s.ToString();
    EXPECT_TRUE(Contains(s,
                         "[profile mfa]: mfa_serial: the role needs an "
                         "MFA code, and ufspack never prompts"))
        << s.ToString();
  }
  EXPECT_FALSE(Contains(s, kPlantedSecret));
}

TEST(ChainedRolesTest, CredentialSourceEnvironmentAndInstanceMetadata) {
  TempDir dir;
  CredServer server(dir, MakeObject(), 60, "", "", kSourceKey);
  ASSERT_FALSE(server.url().empty());
  WriteFile(dir / ".aws/config",
            "[profile env]\nrole_arn = arn:aws:iam::1:role/e\n"
            "credential_source = Environment\n"
            "[profile ec2]\nrole_arn = arn:aws:iam::1:role/i\n"
            "credential_source = Ec2InstanceMetadata\n"
            "[profile bad]\nrole_arn = arn:aws:iam::1:role/b\n"
            "credential_source = Laptop\n");
  FakeEnv env(dir.path());
  env.Set("AWS_ENDPOINT_URL", server.url());

  // Environment: the keys of the environment sign AssumeRole (without
  // credential_source they would be the credentials themselves).
  env.Set("AWS_PROFILE", "env");
  env.Set("AWS_ACCESS_KEY_ID", "AKIDSOURCE");
  env.Set("AWS_SECRET_ACCESS_KEY", kPlantedSecret);
  AwsSettings s1;
  Status s = LoadAwsSettings(env.Lookup(), &s1);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(s1.credentials_source, "environment");  // step 1 wins
  env.Unset("AWS_ACCESS_KEY_ID");
  env.Unset("AWS_SECRET_ACCESS_KEY");
  s = LoadAwsSettings(env.Lookup(), &s1);
  EXPECT_TRUE(Contains(s,
                       "credential_source = Environment: expected "
                       "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"))
      << s.ToString();

  // Ec2InstanceMetadata: IMDS's role credentials sign AssumeRole.
  env.Set("AWS_PROFILE", "ec2");
  env.Unset("AWS_EC2_METADATA_DISABLED");
  env.Set("AWS_EC2_METADATA_SERVICE_ENDPOINT", server.url());
  AwsSettings s2;
  s = LoadAwsSettings(env.Lookup(), &s2);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(Contains(s2.credentials_source,
                       "source credentials: EC2 instance metadata"))
      << s2.credentials_source;
  EXPECT_EQ(server.Count("imds_credentials"), 1);
  EXPECT_EQ(server.Count("assume_role_ok"), 1);

  s = LoadProfile(&env, "bad");
  EXPECT_TRUE(Contains(s,
                       "credential_source: expected Environment, "
                       "EcsContainer or Ec2InstanceMetadata; found "
                       "'Laptop'"))
      << s.ToString();
}

TEST(StsEndpointTest, StsVariableThenGeneralThenRegional) {
  std::map<std::string, std::string> vars;
  const EnvLookup env = [&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(StsEndpoint(env, "eu-west-3"),
            "https://sts.eu-west-3.amazonaws.com");
  vars["AWS_ENDPOINT_URL"] = "http://general:1";
  EXPECT_EQ(StsEndpoint(env, "eu-west-3"), "http://general:1");
  vars["AWS_ENDPOINT_URL_STS"] = "http://sts:2";
  EXPECT_EQ(StsEndpoint(env, "eu-west-3"), "http://sts:2");
  vars["AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"] = "true";
  EXPECT_EQ(StsEndpoint(env, "eu-west-3"),
            "https://sts.eu-west-3.amazonaws.com");
}

TEST(ImdsV1Test, FallbackOnlyWhenExplicitlyAllowed) {
  TempDir dir;
  CredServer server(dir, MakeObject(), 60);
  ASSERT_FALSE(server.url().empty());
  server.Call("POST", "/control/mode", "v1-only");
  FakeEnv env(dir.path());
  env.Unset("AWS_EC2_METADATA_DISABLED");
  env.Set("AWS_EC2_METADATA_SERVICE_ENDPOINT", server.url());

  AwsSettings s;
  ASSERT_TRUE(LoadAwsSettings(env.Lookup(), &s).ok());
  EXPECT_EQ(s.provider, nullptr);
  EXPECT_TRUE(Contains(s.credentials_source,
                       "IMDSv1 fallback is off (set "
                       "AWS_EC2_METADATA_V1_DISABLED=false to allow it)"))
      << s.credentials_source;
  EXPECT_EQ(server.Count("imds_role"), 0);  // no GET without a token

  env.Set("AWS_EC2_METADATA_V1_DISABLED", "false");
  ASSERT_TRUE(LoadAwsSettings(env.Lookup(), &s).ok());
  ASSERT_NE(s.provider, nullptr) << s.credentials_source;
  EXPECT_TRUE(Contains(s.credentials_source,
                       "EC2 instance metadata (IMDSv2, IMDSv1 fallback "
                       "allowed, "))
      << s.credentials_source;

  // The profile's setting, when the variable is unset.
  env.Unset("AWS_EC2_METADATA_V1_DISABLED");
  env.Set("AWS_EC2_METADATA_SERVICE_ENDPOINT", server.url() + "/");  // new key
  WriteFile(dir / ".aws/config", "[default]\nec2_metadata_v1_disabled = no\n");
  Status st = LoadAwsSettings(env.Lookup(), &s);
  EXPECT_TRUE(Contains(st,
                       ".aws/config:2: [default] ec2_metadata_v1_disabled: "
                       "expected true or false; found 'no'"))
      << st.ToString();
  WriteFile(dir / ".aws/config",
            "[default]\nec2_metadata_v1_disabled = false\n");
  ASSERT_TRUE(LoadAwsSettings(env.Lookup(), &s).ok());
  EXPECT_NE(s.provider, nullptr) << s.credentials_source;
}

// Forked workers (a DataLoader's) each refresh on their own, once per
// period: N workers make at most N refreshes per period, never one per
// request, and never reuse an expired parent copy.
TEST(ForkTest, WorkersRefreshOncePerPeriodEach) {
  TempDir dir;
  const std::string object = MakeObject();
  CredServer server(dir, object, 4);
  ASSERT_FALSE(server.url().empty());
  FakeEnv env(dir.path());
  env.UseImdsAndS3At(server.url());
  auto settings = std::make_shared<AwsSettings>();
  ASSERT_TRUE(LoadAwsSettings(env.Lookup(), settings.get()).ok());
  ASSERT_NE(settings->provider, nullptr) << settings->credentials_source;
  constexpr int kWorkers = 8;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWorkers; ++w) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::alarm(20);
      int code = 0;
      const auto start = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - start <
             std::chrono::milliseconds(4500)) {
        std::string got;
        if (!ReadRange(settings, 1000, 500, &got).ok() ||
            got != object.substr(1000, 500)) {
          code = 2;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      // 4.5 s of 4-second credentials, refreshed at half-life: 2 or 3.
      const int fetches = settings->provider->fetches();
      if (fetches < 1 || fetches > 3) code = 10 + fetches;
      ::_exit(code);
    }
    ASSERT_GT(pid, 0);
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "worker exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  const int fetched = server.Count("imds_credentials");
  EXPECT_GE(fetched, 1 + kWorkers);      // each worker refreshed itself
  EXPECT_LE(fetched, 1 + 3 * kWorkers);  // ... at most once per period
  EXPECT_EQ(server.Count("imds_token"), fetched);
  EXPECT_EQ(server.Count("s3_denied"), 0);
}

// A credential_process profile whose script prints planted secrets.
void ProcessProfile(const TempDir& dir, int exit_code) {
  const std::string script = dir / "creds.sh";
  WriteFile(script, std::string("#!/bin/sh\ncat <<'EOF'\n{\"Version\": 1, "
                                "\"AccessKeyId\": \"AKIDEXPLAIN1234\", "
                                "\"SecretAccessKey\": \"") +
                        kPlantedSecret + "\", \"SessionToken\": \"" +
                        kPlantedToken + "\", \"Expiration\": \"" + IsoIn(3600) +
                        "\"}\nEOF\nexit " + std::to_string(exit_code) + "\n");
  ::chmod(script.c_str(), 0755);
  WriteFile(dir / ".aws/config",
            "[profile work]\ncredential_process = " + script + " --x " +
                std::to_string(exit_code) + "\n");
}

TEST(ExplainTest, NamesEveryProviderAskedAndNeverASecret) {
  TempDir dir;
  ProcessProfile(dir, 0);
  FakeEnv env(dir.path());
  env.Set("AWS_PROFILE", "work");
  std::string text;
  Status s = ExplainAwsSettings(env.Lookup(), &text);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const char* line :
       {"AWS settings: profile 'work', region us-east-1, endpoint AWS",
        "  1. environment: not configured (AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY are not set)",
        "  2. web identity: not configured (AWS_WEB_IDENTITY_TOKEN_FILE is "
        "not set; profile 'work' has no web_identity_token_file)",
        "  3. assume role: not configured (profile 'work' has no role_arn",
        "  4. shared files, static keys: not configured",
        "  5. credential_process: chosen: credential_process of profile "
        "'work' (",
        "(access key id ****1234, with session token)",
        "expires: ", "min before expiry"}) {
    EXPECT_TRUE(Contains(text, line)) << line << "\n" << text;
  }
  EXPECT_FALSE(Contains(text, "6. container"));  // not asked
  EXPECT_FALSE(Contains(text, kPlantedSecret)) << text;
  EXPECT_FALSE(Contains(text, kPlantedToken)) << text;

  // Through the CLI, with the process failing: the failure is the last
  // step and the error; the exit status says so; no secret anywhere.
  ProcessProfile(dir, 1);
  const test::CommandResult r = test::Run(
      {"/usr/bin/env", "-i", "HOME=" + dir.path(), "PATH=/usr/bin:/bin",
       "AWS_PROFILE=work", "AWS_EC2_METADATA_DISABLED=true", UFSPACK_CLI_PATH,
       "info", "s3://bucket/some/pack.ufspack", "--explain-credentials"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(Contains(r.out,
                       "  5. credential_process: failed: AWS credentials "
                       "for profile 'work': credential_process of profile "
                       "'work'"))
      << r.out;
  EXPECT_TRUE(Contains(r.out, "exited with status 1")) << r.out;
  EXPECT_TRUE(Contains(r.out, "error: ")) << r.out;
  for (const std::string& out : {r.out, r.err}) {
    EXPECT_FALSE(Contains(out, kPlantedSecret)) << out;
    EXPECT_FALSE(Contains(out, kPlantedToken)) << out;
  }
}

// Cloudflare R2 (https://ACCOUNT.r2.cloudflarestorage.com, region "auto")
// and GCS's XML API with HMAC keys (https://storage.googleapis.com, region
// "auto"), virtual-hosted as both document: the URL, the Host header and
// the SigV4 scope, and the signature checked by the emulator's own SigV4
// code against the Host header it received.
TEST(EndpointsTest, R2AndGcsVirtualHostsSignWithRegionAuto) {
  TempDir dir;
  const std::string object = MakeObject();
  CredServer server(dir, object, 60, "", "", kSourceKey);
  ASSERT_FALSE(server.url().empty());
  struct Case {
    std::string endpoint, host;
  };
  const Case cases[] = {
      {"https://0123456789abcdef.r2.cloudflarestorage.com",
       "ufspack-test.0123456789abcdef.r2.cloudflarestorage.com"},
      {"https://storage.googleapis.com",
       "ufspack-test.storage.googleapis.com"}};
  for (const Case& c : cases) {
    TempDir home;
    WriteFile(home / ".aws/config",
              "[default]\nregion = auto\ns3 =\n  addressing_style = virtual\n");
    FakeEnv env(home.path());
    env.Set("AWS_ENDPOINT_URL", c.endpoint);
    env.Set("AWS_ACCESS_KEY_ID", "AKIDSOURCE");
    env.Set("AWS_SECRET_ACCESS_KEY", kPlantedSecret);
    auto settings = std::make_shared<AwsSettings>();
    ASSERT_TRUE(LoadAwsSettings(env.Lookup(), settings.get()).ok());
    EXPECT_EQ(settings->region, "auto");
    auto loc = std::make_shared<ObjectLocation>();
    ASSERT_TRUE(
        LocateS3("s3://ufspack-test/object.bin", settings, loc.get()).ok());
    EXPECT_EQ(loc->url, "https://" + c.host + "/object.bin");
    EXPECT_EQ(loc->host, c.host);
    Transfer t;
    Prepare(loc, "GET", {}, &t);
    t.has_range = true;
    t.range_begin = 7;
    t.range_length = 300;
    t.url = server.url() + "/object.bin";  // the same request, to loopback
    std::vector<Header> signed_headers;
    ASSERT_TRUE(t.sign(t, &signed_headers).ok());
    std::string authorization;
    for (const Header& h : signed_headers) {
      if (h.first == "Authorization") authorization = h.second;
    }
    EXPECT_TRUE(Contains(authorization, "Credential=AKIDSOURCE/"))
        << authorization;
    EXPECT_TRUE(Contains(authorization, "/auto/s3/aws4_request"))
        << authorization;
    Transfer* list[] = {&t};
    RemoteOptions o;
    o.max_attempts = 1;
    Status s = RunTransfers(list, 1, o);
    ASSERT_TRUE(s.ok()) << c.endpoint << ": " << s.ToString();
    EXPECT_EQ(t.body, object.substr(7, 300));
  }
  EXPECT_EQ(server.Count("s3_denied"), 0);
  EXPECT_EQ(server.Count("s3_ok"), 2);
}

// moto's STS (the server of scripts/s3-test-env.sh's venv) answers
// AssumeRole -- here for a chain of two roles -- and
// AssumeRoleWithWebIdentity; AWS_ENDPOINT_URL_STS wins over
// AWS_ENDPOINT_URL (which points nowhere).
TEST(MotoStsTest, AssumeRoleChainAndWebIdentity) {
  TempDir dir;
  test::S3Server moto("moto", dir / "moto", true);
  if (!moto.ok()) GTEST_SKIP() << moto.skip_reason();
  WriteFile(dir / ".aws/credentials", "[base]\n" + Keys(kPlantedSecret));
  WriteFile(dir / ".aws/config",
            "[profile dev]\nrole_arn = arn:aws:iam::123456789012:role/dev\n"
            "source_profile = base\nduration_seconds = 900\n"
            "[profile ops]\nrole_arn = arn:aws:iam::123456789012:role/ops\n"
            "source_profile = dev\nrole_session_name = ops-session\n");
  WriteFile(dir / "web-token", std::string(kPlantedToken) + "\n");
  FakeEnv env(dir.path());
  env.Set("AWS_ENDPOINT_URL_STS", moto.endpoint());
  env.Set("AWS_ENDPOINT_URL", "http://127.0.0.1:9");
  env.Set("AWS_PROFILE", "ops");
  const int64_t now = ::time(nullptr);
  AwsSettings s;
  Status st = LoadAwsSettings(env.Lookup(), &s);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(Contains(s.credentials_source, "STS " + moto.endpoint()))
      << s.credentials_source;
  EXPECT_EQ(s.credentials.access_key_id.compare(0, 4, "ASIA"), 0);
  EXPECT_FALSE(s.credentials.session_token.empty());
  EXPECT_GT(s.provider->expiration(), now + 600);  // STS's default hour

  env.Unset("AWS_PROFILE");
  env.Set("AWS_WEB_IDENTITY_TOKEN_FILE", dir / "web-token");
  env.Set("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/irsa");
  AwsSettings w;
  st = LoadAwsSettings(env.Lookup(), &w);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(Contains(w.credentials_source,
                       "web identity (role "
                       "arn:aws:iam::123456789012:role/"
                       "irsa"))
      << w.credentials_source;
  EXPECT_EQ(w.credentials.access_key_id.compare(0, 4, "ASIA"), 0);
  EXPECT_NE(w.credentials.access_key_id, s.credentials.access_key_id);
  EXPECT_GT(w.provider->expiration(), now);
  EXPECT_FALSE(Contains(w.Describe(), kPlantedToken));
}

}  // namespace
}  // namespace remote
}  // namespace ufspack
