// Copyright 2026 The ufspack Authors.
//
// A downstream program that links the installed ufspack::remote: including
// ufspack/remote.h registers s3://, http:// and https:// with the reader, so
// a URL with nobody listening is a connection error naming it (IOError),
// not "no storage for this scheme" (NotSupported).
#include <iostream>
#include <memory>

#include "ufspack/reader.h"
#include "ufspack/remote.h"

int main() {
  ufspack::RemoteOptions o;
  o.max_attempts = 1;
  ufspack::RegisterRemoteStorage(o);
  std::unique_ptr<ufspack::Reader> reader;
  ufspack::Status s =
      ufspack::Reader::Open("http://127.0.0.1:9/p.ufspack", {}, &reader);
  if (!s.IsIOError() ||
      s.ToString().find("http://127.0.0.1:9/p.ufspack/index.ufs") ==
          std::string::npos) {
    std::cerr << "unexpected: " << s.ToString() << "\n";
    return 1;
  }
  std::cout << "remote from an installed ufspack\n";
  return 0;
}
