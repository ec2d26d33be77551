// Copyright 2026 The ufspack Authors.
//
// What the providers that fetch credentials over HTTP share: one bounded
// request (the container endpoint, IMDS, STS) and the reading of a token
// file (a container authorization token, a web identity token).
//
// Secrets: neither function puts a request or response body, a header or a
// file's contents in a message.
#ifndef UFSPACK_REMOTE_CREDENTIALS_HTTP_H_
#define UFSPACK_REMOTE_CREDENTIALS_HTTP_H_

#include <string>
#include <vector>

#include "sigv4.h"
#include "ufspack/remote.h"
#include "ufspack/status.h"

namespace ufspack {
namespace remote {

// The link-local metadata endpoints (IMDS, the container agent): 1 s to
// connect, 1 s of stall, 2 attempts, nothing started after 3 s.
RemoteOptions MetadataOptions();
// STS, a regional service across the network: 3 s to connect, 5 s of
// stall, 3 attempts, nothing started after 10 s.
RemoteOptions StsOptions();

// One request: `method` `url` with `headers` and `request_body`.  A 2xx
// answer's body goes to *body; an error's status is prefixed with `what`
// and, when `http_code` is given, the last HTTP status (0: none) goes to
// *http_code, and the error's body to *body.
Status HttpCall(const std::string& method, const std::string& url,
                std::vector<Header> headers, const std::string& what,
                const RemoteOptions& options, std::string* body,
                const std::string& request_body = "",
                long* http_code = nullptr);

// Reads a one-line secret (a token) from `path`: a regular file of at most
// 64 KiB, trailing blanks and line ends dropped.  `what` names the provider
// and variable in messages, which never show the contents.
Status ReadTokenFile(const std::string& path, const std::string& what,
                     std::string* token);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_CREDENTIALS_HTTP_H_
