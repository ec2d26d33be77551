// Copyright 2026 The ufspack Authors.
#include "location.h"

#include <cstdlib>
#include <utility>

namespace ufspack {
namespace remote {
namespace {

bool DnsCompatibleBucket(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) return false;  // dots break TLS names of virtual hosts
  }
  return b.front() != '-' && b.back() != '-';
}

// Splits "scheme://authority/base" into its parts (base without a
// trailing slash, "" when none).
Status SplitEndpoint(const std::string& endpoint, std::string* scheme,
                     std::string* authority, std::string* base) {
  const size_t sep = endpoint.find("://");
  if (sep == std::string::npos) {
    return Status::InvalidArgument("S3 endpoint '" + endpoint +
                                   "': expected http://host[:port] or "
                                   "https://host[:port]");
  }
  *scheme = endpoint.substr(0, sep);
  if (*scheme != "http" && *scheme != "https") {
    return Status::InvalidArgument("S3 endpoint '" + endpoint +
                                   "': scheme must be http or https");
  }
  const size_t slash = endpoint.find('/', sep + 3);
  *authority =
      endpoint.substr(sep + 3, slash == std::string::npos ? std::string::npos
                                                          : slash - sep - 3);
  *base = slash == std::string::npos ? "" : endpoint.substr(slash);
  while (!base->empty() && base->back() == '/') base->pop_back();
  if (authority->empty() || authority->find('@') != std::string::npos ||
      endpoint.find('?') != std::string::npos) {
    return Status::InvalidArgument("S3 endpoint '" + Redact(endpoint) +
                                   "': expected scheme://host[:port][/path]");
  }
  return Status::OK();
}

std::string EncodeQuery(const std::vector<Header>& query) {
  std::string q;
  for (const Header& kv : query) {
    q += q.empty() ? "?" : "&";
    q += UriEncode(kv.first, false) + "=" + UriEncode(kv.second, false);
  }
  return q;
}

}  // namespace

Status ParseS3Url(const std::string& url, std::string* bucket, std::string* key,
                  bool allow_empty_key) {
  if (url.compare(0, 5, "s3://") != 0) {
    return Status::InvalidArgument(Redact(url) + ": not an s3:// URL");
  }
  if (url.find('?') != std::string::npos ||
      url.find('#') != std::string::npos) {
    return Status::InvalidArgument(Redact(url) +
                                   ": an s3:// URL has no query string");
  }
  const size_t slash = url.find('/', 5);
  *bucket =
      url.substr(5, slash == std::string::npos ? std::string::npos : slash - 5);
  *key = slash == std::string::npos ? "" : url.substr(slash + 1);
  if (bucket->empty()) {
    return Status::InvalidArgument(url +
                                   ": no bucket (expected s3://BUCKET/KEY)");
  }
  for (char c : *bucket) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
    if (!ok) {
      return Status::InvalidArgument(url + ": bucket name '" + *bucket +
                                     "' has a character S3 does not allow");
    }
  }
  if (key->empty() && !allow_empty_key) {
    return Status::InvalidArgument(url + ": no key (expected s3://BUCKET/KEY)");
  }
  return Status::OK();
}

Status LocateS3(const std::string& url,
                std::shared_ptr<const AwsSettings> settings,
                ObjectLocation* loc) {
  UFSPACK_RETURN_IF_ERROR(ParseS3Url(url, &loc->bucket, &loc->key, true));
  std::string scheme = "https", authority, base;
  bool custom = !settings->endpoint_url.empty();
  if (custom) {
    UFSPACK_RETURN_IF_ERROR(
        SplitEndpoint(settings->endpoint_url, &scheme, &authority, &base));
  } else {
    authority = "s3." + settings->region + ".amazonaws.com";
  }
  bool path_style;
  switch (settings->addressing) {
    case Addressing::kPath:
      path_style = true;
      break;
    case Addressing::kVirtual:
      path_style = false;
      break;
    default:
      path_style = custom || !DnsCompatibleBucket(loc->bucket);
  }
  const std::string encoded_key = UriEncode(loc->key, true);
  if (path_style) {
    loc->host = authority;
    loc->path = base + "/" + UriEncode(loc->bucket, false) + "/" + encoded_key;
  } else {
    loc->host = loc->bucket + "." + authority;
    loc->path = base + "/" + encoded_key;
  }
  loc->url = scheme + "://" + loc->host + loc->path;
  loc->display = "s3://" + loc->bucket + "/" + loc->key;
  loc->s3 = true;
  loc->ca_bundle = settings->ca_bundle;
  loc->settings = std::move(settings);
  return Status::OK();
}

Status LocateHttp(const std::string& url, ObjectLocation* loc) {
  const size_t sep = url.find("://");
  const std::string scheme = sep == std::string::npos ? "" : url.substr(0, sep);
  if (scheme != "http" && scheme != "https") {
    return Status::InvalidArgument(Redact(url) + ": not an http(s) URL");
  }
  if (url.size() <= sep + 3 || url[sep + 3] == '/') {
    return Status::InvalidArgument(Redact(url) + ": no host");
  }
  loc->url = url;
  loc->display = Redact(url);
  loc->s3 = false;
  for (const char* name : {"CURL_CA_BUNDLE", "SSL_CERT_FILE"}) {
    const char* v = ::getenv(name);
    if (v != nullptr && *v != '\0') {
      loc->ca_bundle = v;
      break;
    }
  }
  return Status::OK();
}

void Prepare(const std::shared_ptr<const ObjectLocation>& loc,
             const std::string& method, const std::vector<Header>& query,
             Transfer* t) {
  t->method = method;
  t->display = loc->display;
  t->ca_bundle = loc->ca_bundle;
  if (!loc->s3) {
    t->url = loc->url;
    t->follow_redirects = true;
    return;
  }
  t->url = loc->url + EncodeQuery(query);
  t->headers.emplace_back("Host", loc->host);
  if (loc->settings->provider == nullptr) return;  // anonymous
  t->sign = [loc, query](const Transfer& tr,
                         std::vector<Header>* add) -> Status {
    // The credentials current now (cheap: a cached pointer, refreshed
    // by the first request that finds them due).
    std::shared_ptr<const Credentials> credentials;
    UFSPACK_RETURN_IF_ERROR(loc->settings->provider->Get(&credentials));
    static const std::string kEmptyHash =
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    SigningRequest req;
    req.method = tr.method;
    req.path = loc->path;
    req.query = query;
    req.headers.emplace_back("host", loc->host);
    for (const Header& h : tr.headers) {
      if (h.first.size() > 6 && (h.first.compare(0, 6, "x-amz-") == 0 ||
                                 h.first.compare(0, 6, "X-Amz-") == 0)) {
        req.headers.push_back(h);
      }
    }
    if (!tr.payload_sha256.empty()) {
      req.payload_hash = tr.payload_sha256;
    } else {
      req.payload_hash = tr.upload_size > 0
                             ? Sha256Hex(std::string(tr.upload, tr.upload_size))
                             : kEmptyHash;
    }
    SigningScope scope;
    scope.region = loc->settings->region;
    scope.service = "s3";
    scope.amz_date = AmzDateNow();
    scope.s3 = true;
    std::vector<Header> signed_headers = Sign(req, *credentials, scope);
    add->insert(add->end(), signed_headers.begin(), signed_headers.end());
    return Status::OK();
  };
}

}  // namespace remote
}  // namespace ufspack
