// Copyright 2026 The ufspack Authors.
//
// The shared files' credential_process: an external command that prints
// credentials as JSON (docs/remote.md, "credential_process").
#ifndef UFSPACK_REMOTE_CREDENTIAL_PROCESS_H_
#define UFSPACK_REMOTE_CREDENTIAL_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "credentials.h"
#include "ufspack/status.h"

namespace ufspack {
namespace remote {

// Runs `command` (split into words the way the AWS CLI does, with POSIX
// shell quoting rules -- Python's shlex.split -- and run without a shell,
// searched in PATH) and reads the JSON it prints on stdout:
//   {"Version": 1, "AccessKeyId": ..., "SecretAccessKey": ...,
//    "SessionToken": ... (optional), "Expiration": ISO 8601 (optional:
//    without it the credentials never expire)}
// Its stdin is /dev/null, its stderr the caller's.  It is killed after
// `timeout_seconds`; its output is never shown in messages.  `profile`
// and `where` ("file:line [profile p]") name it in messages.
std::unique_ptr<CredentialsProvider> MakeProcessProvider(
    const std::string& command, const std::string& profile,
    const std::string& where, int timeout_seconds);

// Splits a command line like Python's shlex.split (POSIX mode): words
// separated by blanks, '...' literal, "..." with \" \\ \$ \` escapes,
// backslash escapes outside quotes.  An unterminated quote is an error.
Status SplitCommand(const std::string& command,
                    std::vector<std::string>* words);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_CREDENTIAL_PROCESS_H_
