// Copyright 2026 The ufspack Authors.
//
// AWS Signature Version 4 (SigV4) request signing, as specified in
// https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html
// and checked against AWS's published SigV4 test suite
// (tests/remote/sigv4_test.cc).
//
// Hashing and HMAC come from OpenSSL's libcrypto.  The signing itself is
// written here, not taken from libcurl's CURLOPT_AWS_SIGV4: that option
// cannot be checked against the test vectors on its own, does not add a
// session token, and its canonicalisation changed across libcurl releases
// (Debian 12 ships 7.88).
//
// Thread safety: pure functions.
// Secrets: nothing here logs or returns a secret key; the Authorization
// header holds only the access key id and the signature.
#ifndef UFSPACK_REMOTE_SIGV4_H_
#define UFSPACK_REMOTE_SIGV4_H_

#include <string>
#include <utility>
#include <vector>

namespace ufspack {
namespace remote {

using Header = std::pair<std::string, std::string>;

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty unless temporary credentials
  bool empty() const { return access_key_id.empty(); }
};

// The parts of an HTTP request that SigV4 signs.
struct SigningRequest {
  std::string method;  // "GET", "HEAD", "PUT", "POST", ...
  // The request path as sent on the wire (already percent-encoded), e.g.
  // "/bucket/train.ufspack/data.ufs".  Empty means "/".
  std::string path;
  // Query parameters, decoded (not yet percent-encoded), in any order.
  std::vector<Header> query;
  // Headers to sign, names in any case; "host" must be among them.
  // Values are trimmed and inner runs of spaces folded when signing.
  std::vector<Header> headers;
  // Hex SHA-256 of the body, or "UNSIGNED-PAYLOAD".  Empty means the hash
  // of an empty body.
  std::string payload_hash;
};

struct SigningScope {
  std::string region;    // "us-east-1"
  std::string service;   // "s3"
  std::string amz_date;  // "20150830T123600Z" (UTC, ISO 8601 basic)
  // S3 does not normalise paths (no removal of "." / ".." / "//") and
  // encodes each path segment once; the generic AWS rule (used by the
  // published test suite) normalises and encodes twice.
  //   s3:      the wire path in SigV4's encoding: a correctly encoded path
  //            is signed as it is ("/a%20b" -> "/a%20b"); escapes of
  //            unreserved bytes are decoded and bytes left unescaped are
  //            escaped ("/test$file.text" -> "/test%24file.text").
  //   generic: "." and ".." segments and empty segments removed (a
  //            trailing '/' kept), then UriEncode(path, keep_slash), which
  //            escapes the '%' of the wire encoding ("/a%20b" -> "/a%2520b").
  bool s3 = true;
};

// Lowercase hex SHA-256 of `data`.
std::string Sha256Hex(const std::string& data);

// The SigV4 steps, exposed for the test vectors.
std::string CanonicalRequest(const SigningRequest& request,
                             const SigningScope& scope);
std::string StringToSign(const std::string& canonical_request,
                         const SigningScope& scope);
// Hex signature of `string_to_sign` with the key derived from `secret`.
std::string Signature(const std::string& secret,
                      const std::string& string_to_sign,
                      const SigningScope& scope);

// Signs `request` and returns the headers to add to it, in this order:
// "x-amz-date", "x-amz-content-sha256" (only when scope.s3),
// "x-amz-security-token" (only with a session token) and "Authorization".
// The headers added are themselves signed (besides request.headers); a
// header of the same name in request.headers (any case) is left out in
// favour of the added one, and an "Authorization" there is never signed.
// Empty credentials (anonymous requests): returns no headers.
std::vector<Header> Sign(const SigningRequest& request,
                         const Credentials& credentials,
                         const SigningScope& scope);

// Percent-encodes `s` as SigV4 requires: unreserved characters
// (A-Z a-z 0-9 - _ . ~) as they are, every other byte as %XX (uppercase);
// '/' is kept when `keep_slash`.
std::string UriEncode(const std::string& s, bool keep_slash);

// The current time as SigV4's amz_date ("YYYYMMDDTHHMMSSZ").
std::string AmzDateNow();

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_SIGV4_H_
