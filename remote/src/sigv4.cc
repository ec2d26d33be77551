// Copyright 2026 The ufspack Authors.
//
// SigV4 as the IAM user guide describes it ("Create a signed AWS API
// request") and as AWS's test suite checks it; S3's variant as the S3 API
// reference describes it ("Signature Calculations for the Authorization
// Header: Transferring Payload in a Single Chunk").
#include "sigv4.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ufspack/text.h"

namespace ufspack {
namespace remote {

namespace {

constexpr char kAlgorithm[] = "AWS4-HMAC-SHA256";
constexpr char kHexDigits[] = "0123456789abcdef";
constexpr char kUpperHexDigits[] = "0123456789ABCDEF";

std::string Hex(const unsigned char* p, size_t n) {
  std::string out(2 * n, '\0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHexDigits[p[i] >> 4];
    out[2 * i + 1] = kHexDigits[p[i] & 0xf];
  }
  return out;
}

// HMAC-SHA256(key, data), 32 raw bytes.
std::string HmacSha256(const std::string& key, const std::string& data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(),
           mac, &mac_len) == nullptr) {
    // Only on allocation failure inside libcrypto; a signature computed
    // from garbage would be a silent authentication failure instead.
    std::abort();
  }
  return std::string(reinterpret_cast<const char*>(mac), mac_len);
}

bool IsUnreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~';
}

void AppendEncoded(unsigned char c, std::string* out) {
  if (IsUnreserved(c)) {
    out->push_back(static_cast<char>(c));
  } else {
    out->push_back('%');
    out->push_back(kUpperHexDigits[c >> 4]);
    out->push_back(kUpperHexDigits[c & 0xf]);
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f';
}

std::string Lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// Leading and trailing whitespace removed, inner runs folded into one
// space (the spec's "Trimall"; a folded multi-line value becomes one line).
std::string TrimAll(const std::string& value) {
  std::string out;
  bool pending_space = false;
  for (char c : value) {
    if (IsSpace(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(c);
  }
  return out;
}

// The generic rule: RFC 3986 dot-segment removal plus collapsing of empty
// segments ("//"); a trailing slash is kept, the result is absolute.
std::string NormalizePath(const std::string& path) {
  std::vector<std::string_view> segments;
  for (std::string_view segment : SplitPath(path)) {
    if (segment == "..") {
      if (!segments.empty()) segments.pop_back();
    } else if (!segment.empty() && segment != ".") {
      segments.push_back(segment);
    }
  }
  std::string out = "/";
  for (size_t i = 0; i < segments.size(); ++i) {
    if (i > 0) out.push_back('/');
    out += segments[i];
  }
  if (out.size() > 1 && !path.empty() && path.back() == '/') {
    out.push_back('/');
  }
  return out;
}

// S3: the path as sent, in SigV4's encoding.  A correctly encoded path
// comes back unchanged; %XX escapes of unreserved bytes are decoded, escapes
// get uppercase digits, and bytes that should have been escaped are
// (S3 decodes the key and encodes it once to check the signature).  "%2F"
// stays an escape: it is part of a key, not a separator.
std::string CanonicalS3Path(const std::string& path) {
  std::string out;
  if (path.empty() || path[0] != '/') out.push_back('/');
  for (size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (c == '/') {
      out.push_back('/');
    } else if (c == '%' && i + 2 < path.size() && HexValue(path[i + 1]) >= 0 &&
               HexValue(path[i + 2]) >= 0) {
      AppendEncoded(static_cast<unsigned char>(HexValue(path[i + 1]) * 16 +
                                               HexValue(path[i + 2])),
                    &out);
      i += 2;
    } else {
      AppendEncoded(static_cast<unsigned char>(c), &out);
    }
  }
  return out;
}

std::string CanonicalUri(const std::string& path, bool s3) {
  if (s3) return CanonicalS3Path(path);
  return UriEncode(NormalizePath(path), /*keep_slash=*/true);
}

std::string CanonicalQuery(const std::vector<Header>& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const Header& q : query) {
    encoded.emplace_back(UriEncode(q.first, false), UriEncode(q.second, false));
  }
  // By encoded name, then encoded value (not by the joined "name=value":
  // "Param-3=" would then sort before "Param=").
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (size_t i = 0; i < encoded.size(); ++i) {
    if (i > 0) out.push_back('&');
    out += encoded[i].first;
    out.push_back('=');
    out += encoded[i].second;
  }
  return out;
}

// Lowercase name -> values in the order given, each trimmed.  A name given
// several times is signed once with its values joined by ','.
std::map<std::string, std::string> CanonicalHeaderMap(
    const std::vector<Header>& headers) {
  std::map<std::string, std::string> out;
  for (const Header& h : headers) {
    std::string name = Lower(h.first);
    auto it = out.find(name);
    if (it == out.end()) {
      out.emplace(std::move(name), TrimAll(h.second));
    } else {
      it->second.push_back(',');
      it->second += TrimAll(h.second);
    }
  }
  return out;
}

std::string SignedHeaderList(const std::map<std::string, std::string>& map) {
  std::string out;
  for (const auto& entry : map) {
    if (!out.empty()) out.push_back(';');
    out += entry.first;
  }
  return out;
}

const std::string& EmptyPayloadHash() {
  static const std::string* const hash = new std::string(Sha256Hex(""));
  return *hash;
}

std::string PayloadHash(const SigningRequest& request) {
  return request.payload_hash.empty() ? EmptyPayloadHash()
                                      : request.payload_hash;
}

std::string DateOf(const SigningScope& scope) {
  return scope.amz_date.substr(0, 8);
}

std::string CredentialScope(const SigningScope& scope) {
  return DateOf(scope) + "/" + scope.region + "/" + scope.service +
         "/aws4_request";
}

}  // namespace

std::string Sha256Hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &md_len, EVP_sha256(),
                 nullptr) != 1) {
    std::abort();  // as in HmacSha256
  }
  return Hex(md, md_len);
}

std::string UriEncode(const std::string& s, bool keep_slash) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (keep_slash && c == '/') {
      out.push_back('/');
    } else {
      AppendEncoded(static_cast<unsigned char>(c), &out);
    }
  }
  return out;
}

std::string CanonicalRequest(const SigningRequest& request,
                             const SigningScope& scope) {
  const std::map<std::string, std::string> headers =
      CanonicalHeaderMap(request.headers);
  std::string out = request.method;
  out.push_back('\n');
  out += CanonicalUri(request.path, scope.s3);
  out.push_back('\n');
  out += CanonicalQuery(request.query);
  out.push_back('\n');
  for (const auto& h : headers) {
    out += h.first;
    out.push_back(':');
    out += h.second;
    out.push_back('\n');
  }
  out.push_back('\n');
  out += SignedHeaderList(headers);
  out.push_back('\n');
  out += PayloadHash(request);
  return out;
}

std::string StringToSign(const std::string& canonical_request,
                         const SigningScope& scope) {
  std::string out = kAlgorithm;
  out.push_back('\n');
  out += scope.amz_date;
  out.push_back('\n');
  out += CredentialScope(scope);
  out.push_back('\n');
  out += Sha256Hex(canonical_request);
  return out;
}

std::string Signature(const std::string& secret,
                      const std::string& string_to_sign,
                      const SigningScope& scope) {
  std::string key = "AWS4" + secret;
  std::string k_date = HmacSha256(key, DateOf(scope));
  std::string k_region = HmacSha256(k_date, scope.region);
  std::string k_service = HmacSha256(k_region, scope.service);
  std::string k_signing = HmacSha256(k_service, "aws4_request");
  const std::string mac = HmacSha256(k_signing, string_to_sign);
  // The derived keys are as good as the secret for a day; do not leave
  // them in freed memory.
  for (std::string* s : {&key, &k_date, &k_region, &k_service, &k_signing}) {
    OPENSSL_cleanse(s->data(), s->size());
  }
  return Hex(reinterpret_cast<const unsigned char*>(mac.data()), mac.size());
}

std::vector<Header> Sign(const SigningRequest& request,
                         const Credentials& credentials,
                         const SigningScope& scope) {
  if (credentials.empty()) return {};
  const bool with_token = !credentials.session_token.empty();

  std::vector<Header> added;
  added.emplace_back("x-amz-date", scope.amz_date);
  if (scope.s3)
    added.emplace_back("x-amz-content-sha256", PayloadHash(request));
  if (with_token) {
    added.emplace_back("x-amz-security-token", credentials.session_token);
  }

  // The caller's copies of the headers added here are replaced, and an
  // Authorization header is never signed.
  SigningRequest signed_request = request;
  signed_request.headers.clear();
  for (const Header& h : request.headers) {
    const std::string name = Lower(h.first);
    const bool replaced = name == "authorization" || name == "x-amz-date" ||
                          (scope.s3 && name == "x-amz-content-sha256") ||
                          (with_token && name == "x-amz-security-token");
    if (!replaced) signed_request.headers.push_back(h);
  }
  signed_request.headers.insert(signed_request.headers.end(), added.begin(),
                                added.end());

  const std::string canonical = CanonicalRequest(signed_request, scope);
  const std::string signature = Signature(
      credentials.secret_access_key, StringToSign(canonical, scope), scope);
  std::string authorization = kAlgorithm;
  authorization += " Credential=";
  authorization += credentials.access_key_id;
  authorization.push_back('/');
  authorization += CredentialScope(scope);
  authorization += ", SignedHeaders=";
  authorization += SignedHeaderList(CanonicalHeaderMap(signed_request.headers));
  authorization += ", Signature=";
  authorization += signature;
  added.emplace_back("Authorization", std::move(authorization));
  return added;
}

std::string AmzDateNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[sizeof("20150830T123600Z")];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &utc);
  return buf;
}

}  // namespace remote
}  // namespace ufspack
