// Copyright 2026 The ufspack Authors.
//
// ExplainCredentials (ufspack/remote.h): `--explain-credentials`.
#include <cstdlib>
#include <string>

#include "aws_config.h"
#include "location.h"
#include "ufspack/remote.h"

namespace ufspack {

Status ExplainCredentials(const std::string& url, std::string* text) {
  text->clear();
  if (url.compare(0, 5, "s3://") != 0) {
    *text =
        "credentials: none (" +
        (url.compare(0, 7, "http://") == 0 || url.compare(0, 8, "https://") == 0
             ? remote::Redact(url) + " is read with unsigned requests"
             : std::string("not an s3:// URL")) +
        ")\n";
    return Status::OK();
  }
  std::string bucket, key;
  UFSPACK_RETURN_IF_ERROR(remote::ParseS3Url(url, &bucket, &key, true));
  return remote::ExplainAwsSettings(
      [](const char* name) { return std::getenv(name); }, text);
}

}  // namespace ufspack
