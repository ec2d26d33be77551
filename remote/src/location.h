// Copyright 2026 The ufspack Authors.
//
// Where an object named by a URL lives and how a request for it is made:
// s3://bucket/key through the S3 endpoint the AWS settings name (path
// style or virtual-hosted, SigV4-signed unless anonymous), http(s)://
// as given.
//
// Thread safety: an ObjectLocation is immutable once made; Prepare() may
// be called from any thread.
#ifndef UFSPACK_REMOTE_LOCATION_H_
#define UFSPACK_REMOTE_LOCATION_H_

#include <memory>
#include <string>
#include <vector>

#include "aws_config.h"
#include "http.h"
#include "sigv4.h"
#include "ufspack/status.h"

namespace ufspack {
namespace remote {

struct ObjectLocation {
  std::string url;      // the request URL without a query string (s3), or
                        // as given (http)
  std::string display;  // "s3://bucket/key", or the URL without its query
  bool s3 = false;
  std::string ca_bundle;  // TLS trust: a CA file, or empty for the system's
  // s3 only:
  std::string bucket;
  std::string key;
  std::string host;  // the Host header (authority of url)
  std::string path;  // url's path, percent-encoded, as signed
  std::shared_ptr<const AwsSettings> settings;
};

// Parses "s3://bucket/key" (key may be empty when `allow_empty_key`).
Status ParseS3Url(const std::string& url, std::string* bucket, std::string* key,
                  bool allow_empty_key = false);

// The location of s3://bucket/key under `settings`.
Status LocateS3(const std::string& url,
                std::shared_ptr<const AwsSettings> settings,
                ObjectLocation* location);

// The location of an http:// or https:// URL; its CA file comes from
// CURL_CA_BUNDLE, else SSL_CERT_FILE (the variables curl and OpenSSL read).
Status LocateHttp(const std::string& url, ObjectLocation* location);

// Fills t's url, display, headers and signer for a request to `location`
// with the given query parameters (decoded) and optional body.
void Prepare(const std::shared_ptr<const ObjectLocation>& location,
             const std::string& method, const std::vector<Header>& query,
             Transfer* t);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_LOCATION_H_
