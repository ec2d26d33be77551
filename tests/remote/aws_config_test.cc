// Copyright 2026 The ufspack Authors.
//
// Tests for LoadAwsSettings: precedence of the environment over the shared
// files, profiles, the nested "s3 =" sub-section, endpoints, and the errors
// for missing profiles, unsupported credential sources and malformed files.
// Every test passes its own environment (never the process's) and writes
// its files under a TempDir.
#include "aws_config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>

#include "testutil.h"

namespace ufspack {
namespace remote {
namespace {

using test::Contains;
using test::TempDir;
using test::WriteFile;

constexpr char kSecret[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr char kToken[] = "IQoJb3JpZ2luX2VjEXAMPLETOKEN/+=";
constexpr char kAnonymous[] =
    "none (anonymous; EC2 instance metadata disabled by "
    "AWS_EC2_METADATA_DISABLED)";

// A fake environment: HOME is a fresh TempDir unless the test changes it.
class AwsConfigTest : public ::testing::Test {
 protected:
  AwsConfigTest() {
    env_["HOME"] = home_.path();
    env_["AWS_EC2_METADATA_DISABLED"] = "true";  // no metadata service
  }

  std::string CredentialsPath() const { return home_ / ".aws/credentials"; }
  std::string ConfigPath() const { return home_ / ".aws/config"; }
  void WriteCredentials(const std::string& text) {
    WriteFile(CredentialsPath(), text);
  }
  void WriteConfig(const std::string& text) { WriteFile(ConfigPath(), text); }
  void SetEnv(const std::string& name, const std::string& value) {
    env_[name] = value;
  }
  void UnsetEnv(const std::string& name) { env_.erase(name); }

  Status Load(AwsSettings* settings) const {
    return LoadAwsSettings(
        [this](const char* name) -> const char* {
          auto it = env_.find(name);
          return it == env_.end() ? nullptr : it->second.c_str();
        },
        settings);
  }
  // Loads and expects success.
  AwsSettings MustLoad() const {
    AwsSettings settings;
    Status s = Load(&settings);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return settings;
  }
  // Loads and expects an InvalidArgument; returns its message.
  std::string LoadError() const {
    AwsSettings settings;
    Status s = Load(&settings);
    EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
    return s.ToString();
  }

  TempDir home_;
  std::map<std::string, std::string> env_;
};

TEST_F(AwsConfigTest, NothingConfiguredIsAnonymousInUsEast1) {
  const AwsSettings s = MustLoad();
  EXPECT_TRUE(s.credentials.empty());
  EXPECT_EQ(s.profile, "default");
  EXPECT_EQ(s.region, "us-east-1");
  EXPECT_EQ(s.endpoint_url, "");
  EXPECT_EQ(s.addressing, Addressing::kAuto);
  EXPECT_EQ(s.ca_bundle, "");
  EXPECT_EQ(s.credentials_source, kAnonymous);

  UnsetEnv("HOME");  // no default file locations at all
  EXPECT_EQ(MustLoad().credentials_source, kAnonymous);
}

TEST_F(AwsConfigTest, EnvironmentKeysWinOverTheFiles) {
  WriteCredentials(
      "[default]\naws_access_key_id = AKIDFILE\n"
      "aws_secret_access_key = filesecret\n");
  SetEnv("AWS_ACCESS_KEY_ID", "AKIDENV");
  SetEnv("AWS_SECRET_ACCESS_KEY", kSecret);
  SetEnv("AWS_SESSION_TOKEN", kToken);
  const AwsSettings s = MustLoad();
  EXPECT_EQ(s.credentials.access_key_id, "AKIDENV");
  EXPECT_EQ(s.credentials.secret_access_key, kSecret);
  EXPECT_EQ(s.credentials.session_token, kToken);
  EXPECT_EQ(s.credentials_source, "environment");
}

TEST_F(AwsConfigTest, HalfAPairOfEnvironmentKeysIsAnError) {
  SetEnv("AWS_ACCESS_KEY_ID", "AKIDENV");
  EXPECT_TRUE(Contains(LoadError(), "found only AWS_ACCESS_KEY_ID"));
  UnsetEnv("AWS_ACCESS_KEY_ID");
  SetEnv("AWS_SECRET_ACCESS_KEY", kSecret);
  const std::string msg = LoadError();
  EXPECT_TRUE(Contains(msg, "found only AWS_SECRET_ACCESS_KEY")) << msg;
  EXPECT_FALSE(Contains(msg, kSecret)) << msg;
}

TEST_F(AwsConfigTest, DefaultProfileOfTheCredentialsFile) {
  WriteCredentials(
      "# comment\n"
      "[default]\n"
      "aws_access_key_id=AKIDFILE\n"
      "  aws_secret_access_key   =   filesecret  \n"
      "aws_session_token = filetoken\n");
  const AwsSettings s = MustLoad();
  EXPECT_EQ(s.credentials.access_key_id, "AKIDFILE");
  EXPECT_EQ(s.credentials.secret_access_key, "filesecret");
  EXPECT_EQ(s.credentials.session_token, "filetoken");
  EXPECT_EQ(s.credentials_source, CredentialsPath() + " [default]");
}

TEST_F(AwsConfigTest, AwsProfileSelectsSectionsInBothFiles) {
  WriteCredentials(
      "[default]\naws_access_key_id = AKIDDEFAULT\n"
      "aws_secret_access_key = s0\n"
      "[dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = s1\n"
      "[other]\naws_access_key_id = AKIDOTHER\naws_secret_access_key = s2\n");
  WriteConfig(
      "[default]\nregion = us-west-1\n"
      "[profile dev]\nregion = eu-west-1\n");
  SetEnv("AWS_DEFAULT_PROFILE", "other");
  SetEnv("AWS_PROFILE", "dev");  // wins over AWS_DEFAULT_PROFILE
  AwsSettings s = MustLoad();
  EXPECT_EQ(s.profile, "dev");
  EXPECT_EQ(s.credentials.access_key_id, "AKIDDEV");
  EXPECT_EQ(s.region, "eu-west-1");
  EXPECT_EQ(s.credentials_source, CredentialsPath() + " [dev]");

  UnsetEnv("AWS_PROFILE");
  s = MustLoad();
  EXPECT_EQ(s.profile, "other");
  EXPECT_EQ(s.credentials.access_key_id, "AKIDOTHER");
  EXPECT_EQ(s.region, "us-east-1");  // no [profile other] in the config
}

TEST_F(AwsConfigTest, ConfigFileKeysWhenTheCredentialsFileHasNone) {
  WriteCredentials("[dev]\n# nothing here\n");
  WriteConfig(
      "[profile dev]\naws_access_key_id = AKIDCONF\n"
      "aws_secret_access_key = confsecret\n");
  SetEnv("AWS_PROFILE", "dev");
  const AwsSettings s = MustLoad();
  EXPECT_EQ(s.credentials.access_key_id, "AKIDCONF");
  EXPECT_EQ(s.credentials_source, ConfigPath() + " [profile dev]");

  // The credentials file wins when both have keys.
  WriteCredentials(
      "[dev]\naws_access_key_id = AKIDCRED\n"
      "aws_secret_access_key = credsecret\n");
  EXPECT_EQ(MustLoad().credentials.access_key_id, "AKIDCRED");
}

TEST_F(AwsConfigTest, FileLocationsFromTheEnvironment) {
  WriteCredentials(
      "[default]\naws_access_key_id = AKIDHOME\n"
      "aws_secret_access_key = s\n");
  WriteFile(home_ / "elsewhere/creds",
            "[default]\naws_access_key_id = AKIDELSEWHERE\n"
            "aws_secret_access_key = s\n");
  WriteFile(home_ / "elsewhere/conf", "[default]\nregion = ap-south-1\n");
  SetEnv("AWS_SHARED_CREDENTIALS_FILE", home_ / "elsewhere/creds");
  SetEnv("AWS_CONFIG_FILE", "~/elsewhere/conf");  // ~ is HOME
  const AwsSettings s = MustLoad();
  EXPECT_EQ(s.credentials.access_key_id, "AKIDELSEWHERE");
  EXPECT_EQ(s.region, "ap-south-1");
}

TEST_F(AwsConfigTest, RegionPrecedence) {
  WriteConfig("[default]\nregion = eu-central-1\n");
  EXPECT_EQ(MustLoad().region, "eu-central-1");
  SetEnv("AWS_DEFAULT_REGION", "us-west-2");
  EXPECT_EQ(MustLoad().region, "us-west-2");
  SetEnv("AWS_REGION", "ap-northeast-1");
  EXPECT_EQ(MustLoad().region, "ap-northeast-1");
  SetEnv("AWS_REGION", "us east");
  EXPECT_TRUE(Contains(LoadError(), "AWS_REGION: expected a region name"));
}

// The nested "s3 =" sub-section, with the formatting variations the AWS CLI
// accepts: comments with '#' and ';', no spaces around '=', upper-case
// names, tabs, CRLF line endings.
TEST_F(AwsConfigTest, NestedS3SubSection) {
  WriteConfig(
      "; leading comment\r\n"
      "[profile minio]\r\n"
      "region=us-west-2\r\n"
      "S3 =\r\n"
      "  # a comment inside the sub-section\r\n"
      "  addressing_style = path\r\n"
      "\tEndpoint_URL=http://localhost:9000\r\n"
      "\r\n"
      "endpoint_url = https://global.example.com\r\n"
      "ca_bundle = /etc/ssl/minio.pem\r\n");
  SetEnv("AWS_PROFILE", "minio");
  const AwsSettings s = MustLoad();
  EXPECT_EQ(s.region, "us-west-2");
  EXPECT_EQ(s.addressing, Addressing::kPath);
  EXPECT_EQ(s.endpoint_url, "http://localhost:9000");
  EXPECT_EQ(s.ca_bundle, "/etc/ssl/minio.pem");
  EXPECT_TRUE(s.credentials.empty());

  SetEnv("AWS_CA_BUNDLE", "/env/ca.pem");
  EXPECT_EQ(MustLoad().ca_bundle, "/env/ca.pem");
}

TEST_F(AwsConfigTest, AddressingStyles) {
  const std::pair<const char*, Addressing> styles[] = {
      {"virtual", Addressing::kVirtual},
      {"auto", Addressing::kAuto},
      {"Path", Addressing::kPath}};
  for (const auto& [style, want] : styles) {
    WriteConfig(std::string("[default]\ns3 =\n  addressing_style = ") + style +
                "\n");
    EXPECT_EQ(MustLoad().addressing, want) << style;
  }
  WriteConfig(
      "[default]\nregion = us-east-1\ns3 =\n  addressing_style = dns\n");
  const std::string msg = LoadError();
  EXPECT_TRUE(Contains(msg, ConfigPath() + ":4: [default] s3.addressing_style"))
      << msg;
  EXPECT_TRUE(Contains(msg, "expected path, virtual or auto; found 'dns'"))
      << msg;
}

TEST_F(AwsConfigTest, EndpointPrecedence) {
  WriteConfig(
      "[default]\n"
      "services = custom\n"
      "endpoint_url = https://global.example.com\n"
      "[services custom]\n"
      "s3 =\n"
      "  endpoint_url = https://services.example.com\n");
  EXPECT_EQ(MustLoad().endpoint_url, "https://services.example.com");

  WriteConfig(
      "[default]\n"
      "endpoint_url = https://global.example.com\n");
  EXPECT_EQ(MustLoad().endpoint_url, "https://global.example.com");

  WriteConfig(
      "[default]\n"
      "services = custom\n"
      "s3 =\n"
      "  endpoint_url = https://profile-s3.example.com\n"
      "[services custom]\n"
      "s3 =\n"
      "  endpoint_url = https://services.example.com\n");
  EXPECT_EQ(MustLoad().endpoint_url, "https://profile-s3.example.com");

  SetEnv("AWS_ENDPOINT_URL", "http://env-global:9000");
  EXPECT_EQ(MustLoad().endpoint_url, "http://env-global:9000");
  SetEnv("AWS_ENDPOINT_URL_S3", "http://env-s3:9000");
  EXPECT_EQ(MustLoad().endpoint_url, "http://env-s3:9000");

  SetEnv("AWS_ENDPOINT_URL_S3", "env-s3:9000");
  EXPECT_TRUE(Contains(LoadError(),
                       "AWS_ENDPOINT_URL_S3: expected a URL starting with "
                       "http:// or https://; found 'env-s3:9000'"));
}

TEST_F(AwsConfigTest, MissingServicesSectionIsAnError) {
  WriteConfig("[default]\nservices = nowhere\n");
  const std::string msg = LoadError();
  EXPECT_TRUE(Contains(msg, ConfigPath() + ":2: [default] services")) << msg;
  EXPECT_TRUE(Contains(msg, "expected a [services nowhere] section")) << msg;
}

TEST_F(AwsConfigTest, IgnoreConfiguredEndpointUrls) {
  WriteConfig("[default]\ns3 =\n  endpoint_url = http://profile:9000\n");
  SetEnv("AWS_ENDPOINT_URL", "http://env:9000");
  SetEnv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true");
  EXPECT_EQ(MustLoad().endpoint_url, "");
  SetEnv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "TRUE");
  EXPECT_EQ(MustLoad().endpoint_url, "");
  SetEnv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "false");
  EXPECT_EQ(MustLoad().endpoint_url, "http://env:9000");
  SetEnv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "yes");
  EXPECT_TRUE(Contains(LoadError(),
                       "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS: expected true or "
                       "false; found 'yes'"));

  // The profile's own setting, when the variable is unset.
  UnsetEnv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
  UnsetEnv("AWS_ENDPOINT_URL");
  WriteConfig(
      "[default]\nignore_configured_endpoint_urls = true\n"
      "s3 =\n  endpoint_url = http://profile:9000\n");
  EXPECT_EQ(MustLoad().endpoint_url, "");
}

TEST_F(AwsConfigTest, MissingNamedProfileNamesBothFiles) {
  WriteCredentials("[default]\n");
  WriteConfig("[nope]\nregion = us-west-2\n");  // missing "profile "
  SetEnv("AWS_PROFILE", "nope");
  const std::string msg = LoadError();
  EXPECT_TRUE(Contains(msg, "AWS profile 'nope' (from AWS_PROFILE) not found"))
      << msg;
  EXPECT_TRUE(Contains(msg, "[nope] in " + CredentialsPath())) << msg;
  EXPECT_TRUE(Contains(msg, "[profile nope] in " + ConfigPath())) << msg;
  EXPECT_TRUE(Contains(msg, "write it [profile nope]")) << msg;

  // Missing files are named as such; AWS_DEFAULT_PROFILE is named too.
  test::RemoveAll(home_ / ".aws");
  UnsetEnv("AWS_PROFILE");
  SetEnv("AWS_DEFAULT_PROFILE", "ghost");
  const std::string msg2 = LoadError();
  EXPECT_TRUE(Contains(msg2, "'ghost' (from AWS_DEFAULT_PROFILE)")) << msg2;
  EXPECT_TRUE(Contains(msg2, CredentialsPath() + " (missing)")) << msg2;
  EXPECT_TRUE(Contains(msg2, ConfigPath() + " (missing)")) << msg2;
}

TEST_F(AwsConfigTest, UnsupportedCredentialSourcesAreErrors) {
  // (credential_process is supported: credentials_test.cc.)
  // (web_identity_token_file without role_arn: its own error, below.)
  // (role_arn: assume role, credentials_test.cc; alone, its own error.)
  const char* const keys[] = {"sso_session", "sso_start_url"};
  for (const char* key : keys) {
    SCOPED_TRACE(key);
    WriteConfig(std::string("[profile work]\nregion = us-east-2\n") + key +
                " = something\n");
    SetEnv("AWS_PROFILE", "work");
    const std::string msg = LoadError();
    EXPECT_TRUE(Contains(msg, ConfigPath() + ":3: [profile work]")) << msg;
    EXPECT_TRUE(Contains(msg, "profile 'work'")) << msg;
    EXPECT_TRUE(Contains(msg, std::string("'") + key + "'")) << msg;
    EXPECT_TRUE(Contains(msg, "not support")) << msg;
    EXPECT_TRUE(Contains(msg, "AWS_ACCESS_KEY_ID")) << msg;
    EXPECT_TRUE(Contains(msg,
                         "aws configure export-credentials --profile "
                         "work --format env"))
        << msg;
  }
  WriteConfig("[profile work]\nweb_identity_token_file = /t\n");
  const std::string web = LoadError();
  EXPECT_TRUE(Contains(web, ConfigPath() +
                                ":2: [profile work]: "
                                "web_identity_token_file needs role_arn"))
      << web;
  WriteConfig("[profile work]\nsso_start_url = something\n");
  // With keys in the environment, or static keys in the profile, there is
  // nothing to complain about.
  SetEnv("AWS_ACCESS_KEY_ID", "AKIDENV");
  SetEnv("AWS_SECRET_ACCESS_KEY", kSecret);
  EXPECT_EQ(MustLoad().credentials_source, "environment");
  UnsetEnv("AWS_ACCESS_KEY_ID");
  UnsetEnv("AWS_SECRET_ACCESS_KEY");
  WriteCredentials(
      "[work]\naws_access_key_id = AKIDWORK\n"
      "aws_secret_access_key = s\n");
  EXPECT_EQ(MustLoad().credentials.access_key_id, "AKIDWORK");
}

TEST_F(AwsConfigTest, MalformedLinesNameFileAndLine) {
  WriteConfig("[default]\nregion = us-east-1\nregion us-west-2\n");
  std::string msg = LoadError();
  EXPECT_TRUE(Contains(msg, ConfigPath() + ":3: expected 'name = value'"))
      << msg;

  WriteConfig("# header missing its bracket\n[profile x\n");
  msg = LoadError();
  EXPECT_TRUE(Contains(msg, ConfigPath() + ":2: expected ']'")) << msg;

  WriteConfig("region = us-east-1\n[default]\n");
  msg = LoadError();
  EXPECT_TRUE(Contains(msg, ConfigPath() + ":1: expected a section header"))
      << msg;

  WriteConfig("[default]\n = value\n");
  msg = LoadError();
  EXPECT_TRUE(Contains(msg, ConfigPath() + ":2: expected a setting name"))
      << msg;

  WriteConfig("[]\n");
  msg = LoadError();
  EXPECT_TRUE(Contains(msg, ConfigPath() + ":1: expected a section name"))
      << msg;

  // A malformed credentials line is not echoed: it may be a secret.
  WriteConfig("");
  WriteCredentials(std::string("[default]\naws_access_key_id = AKID\n") +
                   kSecret + "\n");
  msg = LoadError();
  EXPECT_TRUE(Contains(msg, CredentialsPath() + ":3: expected")) << msg;
  EXPECT_FALSE(Contains(msg, kSecret)) << msg;
}

TEST_F(AwsConfigTest, HalfAPairOfFileKeysIsAnError) {
  WriteCredentials("[default]\n\naws_secret_access_key = s\n");
  const std::string msg = LoadError();
  EXPECT_TRUE(Contains(msg, CredentialsPath() + ":3: [default]")) << msg;
  EXPECT_TRUE(Contains(msg, "found only aws_secret_access_key")) << msg;
}

TEST_F(AwsConfigTest, UnreadableFilesAreErrorsWithoutBlocking) {
  test::MakeDirs(home_ / "adir");
  SetEnv("AWS_CONFIG_FILE", home_ / "adir");
  EXPECT_TRUE(Contains(LoadError(), home_ / "adir" + ": expected a regular"));

  ASSERT_NO_FATAL_FAILURE(test::MakeFifo(home_ / "fifo"));
  SetEnv("AWS_CONFIG_FILE", home_ / "fifo");
  Status s;
  AwsSettings settings;
  EXPECT_TRUE(
      test::ReturnsWithin(10, [&] { s = Load(&settings); }, {home_ / "fifo"}));
  EXPECT_TRUE(s.IsInvalidArgument()) << s.ToString();
}

TEST_F(AwsConfigTest, DescribeNeverShowsSecretOrToken) {
  SetEnv("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE");
  SetEnv("AWS_SECRET_ACCESS_KEY", kSecret);
  SetEnv("AWS_SESSION_TOKEN", kToken);
  SetEnv("AWS_ENDPOINT_URL", "https://minio.example.com");
  const AwsSettings s = MustLoad();
  const std::string d = s.Describe();
  EXPECT_FALSE(Contains(d, kSecret)) << d;
  EXPECT_FALSE(Contains(d, kToken)) << d;
  EXPECT_FALSE(Contains(d, "AKIAIOSFODNN7EXAMPLE")) << d;  // masked
  EXPECT_EQ(d,
            "profile 'default', region us-east-1, endpoint "
            "https://minio.example.com, addressing auto, credentials: "
            "environment (access key id ****MPLE, with session token)");

  // The same for keys from a file.
  env_.clear();
  env_["HOME"] = home_.path();
  WriteCredentials(std::string("[default]\naws_access_key_id = AKIDFILE\n") +
                   "aws_secret_access_key = " + kSecret +
                   "\naws_session_token = " + kToken + "\n");
  const std::string d2 = MustLoad().Describe();
  EXPECT_FALSE(Contains(d2, kSecret)) << d2;
  EXPECT_FALSE(Contains(d2, kToken)) << d2;
  EXPECT_TRUE(Contains(d2, CredentialsPath() + " [default]")) << d2;

  env_.clear();
  env_["AWS_EC2_METADATA_DISABLED"] = "true";
  EXPECT_EQ(MustLoad().Describe(),
            "profile 'default', region us-east-1, endpoint AWS, addressing "
            "auto, credentials: " +
                std::string(kAnonymous));
}

}  // namespace
}  // namespace remote
}  // namespace ufspack
