// Copyright 2026 The ufspack Authors.
//
// The ECS / EKS Pod Identity container credentials endpoint.
#ifndef UFSPACK_REMOTE_CONTAINER_CREDENTIALS_H_
#define UFSPACK_REMOTE_CONTAINER_CREDENTIALS_H_

#include <memory>
#include <string>

#include "credentials.h"
#include "ufspack/status.h"

namespace ufspack {
namespace remote {

// From AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (on http://169.254.170.2) or
// AWS_CONTAINER_CREDENTIALS_FULL_URI (https://, or http:// to a loopback
// address or 169.254.170.2 / 169.254.170.23 / [fd00:ec2::23]), with the
// Authorization header from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (read at
// every fetch) or AWS_CONTAINER_AUTHORIZATION_TOKEN.  *provider is null
// when neither URI variable is set; an unusable URI is InvalidArgument.
// *key identifies the configuration (for SharedCredentialsCache).
Status MakeContainerProvider(const EnvLookup& env,
                             std::unique_ptr<CredentialsProvider>* provider,
                             std::string* key);

}  // namespace remote
}  // namespace ufspack

#endif  // UFSPACK_REMOTE_CONTAINER_CREDENTIALS_H_
