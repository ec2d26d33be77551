// Copyright 2026 The ufspack Authors.
//
// Static credentials and the small helpers every provider uses (see
// credentials.h).
#include "credentials.h"

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

std::unique_ptr<CredentialsProvider> MakeStaticProvider(
    const Credentials& credentials, const std::string& name) {
  return std::make_unique<StaticProvider>(credentials, name);
}

}  // namespace remote
}  // namespace ufspack
