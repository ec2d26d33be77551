// Copyright 2026 The ufspack Authors.
//
// EC2 instance metadata credentials: IMDSv2, with an IMDSv1 fallback only
// when configured.
#ifndef UFSPACK_REMOTE_IMDS_CREDENTIALS_H_
#define UFSPACK_REMOTE_IMDS_CREDENTIALS_H_

#include <memory>
#include <string>

#include "credentials.h"
#include "ufspack/status.h"

namespace ufspack {
namespace remote {

// PUT /latest/api/token, then GET /latest/meta-data/iam/security-credentials/
// and .../<role> with the token.  Endpoint AWS_EC2_METADATA_SERVICE_ENDPOINT,
// else http://169.254.169.254 (http://[fd00:ec2::254] with
// AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6).  Each request: 1 s to
// connect, 1 s of stall, 2 attempts.
//
// IMDSv1 (the same GETs without a token) is tried only when the token
// request is answered 403, 404 or 405 (the SDKs' rule) and IMDSv1 is
// explicitly allowed: AWS_EC2_METADATA_V1_DISABLED=false, else the
// profile's ec2_metadata_v1_disabled = false (`profile_v1_disabled`, with
// `profile_v1_where` naming it in messages).  Unset means disabled: unlike
// the older SDKs, ufspack never falls back unasked.
//
// *provider is null when AWS_EC2_METADATA_DISABLED is true; *key identifies
// the configuration (for SharedCredentialsCache).
Status MakeImdsProvider(const EnvLookup& env,
                        const std::string& profile_v1_disabled,
                        const std::string& profile_v1_where,
                        std::unique_ptr<CredentialsProvider>* provider,
                        std::string* key);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_IMDS_CREDENTIALS_H_
