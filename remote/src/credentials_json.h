// Copyright 2026 The ufspack Authors.
//
// The JSON and times of credentials documents (credential_process's
// output, the container and IMDS endpoints' answers, STS's Expiration).
// Errors give byte offsets and field names, never the text parsed.
#ifndef UFSPACK_REMOTE_CREDENTIALS_JSON_H_
#define UFSPACK_REMOTE_CREDENTIALS_JSON_H_

#include <cstdint>
#include <map>
#include <string>

#include "credentials.h"
#include "ufspack/status.h"

namespace ufspack {
namespace remote {

// The top-level string, number and boolean members of a JSON object
// (numbers and booleans as written).
Status ParseJsonObject(const std::string& json,
                       std::map<std::string, std::string>* members);

// "2026-11-27T10:42:30Z", with optional fractional seconds and a
// "+HH:MM" / "-HH:MM" offset instead of "Z", to Unix seconds.
bool ParseIso8601(const std::string& text, int64_t* seconds);

// A credentials document: AccessKeyId, SecretAccessKey, the session token
// under `token_field`, an optional ISO 8601 Expiration.  `what` names the
// source in messages, which never hold the document.
Status CredentialsFromJson(const std::string& body, const std::string& what,
                           const char* token_field, TimedCredentials* out);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_CREDENTIALS_JSON_H_
