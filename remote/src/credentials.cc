// Copyright 2026 The ufspack Authors.
//
// Static credentials and the small helpers every provider uses (see
// credentials.h).
#include "credentials.h"

#include <cstdio>
#include <utility>

namespace ufspack {
namespace remote {
namespace {

class StaticProvider final : public CredentialsProvider {
 public:
  StaticProvider(const Credentials& c, std::string name)
      : credentials_(c), name_(std::move(name)) {}
  Status Fetch(TimedCredentials* out) override {
    out->credentials = credentials_;
    out->expiration = 0;
    return Status::OK();
  }
  std::string Name() const override { return name_; }

 private:
  const Credentials credentials_;
  const std::string name_;
};

}  // namespace

std::string EnvValue(const EnvLookup& env, const char* name) {
  const char* v = env ? env(name) : nullptr;
  return v == nullptr ? std::string() : std::string(v);
}

std::string AsciiLower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

Status CheckNoControlCharacters(const std::string& value,
                                const std::string& source,
                                const std::string& field) {
  for (size_t i = 0; i < value.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c >= 0x20 && c != 0x7f) continue;
    char byte[8];
    std::snprintf(byte, sizeof(byte), "0x%02x", c);
    return Status::InvalidArgument(
        source + (field.empty() ? "" : ": " + field) +
        ": expected no control characters; found byte " + byte + " at offset " +
        std::to_string(i) + " (the value is not shown)");
  }
  return Status::OK();
}

Status CheckCredentials(const Credentials& credentials,
                        const std::string& source) {
  UFSPACK_RETURN_IF_ERROR(CheckNoControlCharacters(credentials.access_key_id,
                                                   source, "AccessKeyId"));
  UFSPACK_RETURN_IF_ERROR(CheckNoControlCharacters(
      credentials.secret_access_key, source, "SecretAccessKey"));
  return CheckNoControlCharacters(credentials.session_token, source,
                                  "SessionToken");
}

std::unique_ptr<CredentialsProvider> MakeStaticProvider(
    const Credentials& credentials, const std::string& name) {
  return std::make_unique<StaticProvider>(credentials, name);
}

}  // namespace remote
}  // namespace ufspack
