// Copyright 2026 The ufspack Authors.
//
// ufspack: pack a directory of small files into one data file and an index,
// inspect, read, verify and extract packs, and fill and inspect node-local
// caches of them.  See docs/cli.md.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"
#ifdef UFSPACK_HAVE_REMOTE
#include "ufspack/remote.h"  // registers s3://, http://, https://
#endif
#include "ufspack/types.h"
#include "ufspack/version.h"  // generated from CMake's project(), its one source
#include "util.h"

int main(int argc, char** argv) {
  using namespace ufspack::cli;
  if (argc < 2) {
    std::fputs(MainHelp(), stderr);
    return kExitUsage;
  }
  const std::string cmd = argv[1];
  Argv args(argv + 2, argv + argc);
  if (cmd == "-h" || cmd == "--help") {
    std::fputs(MainHelp(), stdout);
    return kExitOk;
  }
  if (cmd == "help") {
    if (args.empty()) {
      std::fputs(MainHelp(), stdout);
      return kExitOk;
    }
    // "help cache stat": the cache's subcommands have their own help.
    const std::string topic =
        args[0] == "cache" && args.size() > 1 ? "cache " + args[1] : args[0];
    const char* h = HelpFor(topic);
    if (h == nullptr) {
      std::fprintf(stderr, "ufspack: no such command '%s'\n", topic.c_str());
      return kExitUsage;
    }
    std::fputs(h, stdout);
    return kExitOk;
  }
  if (cmd == "-V" || cmd == "--version" || cmd == "version") {
    std::printf("ufspack %s (pack format %u)\n", UFSPACK_VERSION_STRING,
                static_cast<unsigned>(ufspack::kFormatVersion));
    return kExitOk;
  }
  if (cmd == "build") return CmdBuild(args);
  if (cmd == "info") return CmdInfo(args);
  if (cmd == "ls") return CmdLs(args);
  if (cmd == "cat") return CmdCat(args);
  if (cmd == "extract") return CmdExtract(args);
  if (cmd == "verify") return CmdVerify(args);
  if (cmd == "merge") return CmdMerge(args);
  if (cmd == "append") return CmdAppend(args);
  if (cmd == "warmup") return CmdWarmup(args);
  if (cmd == "cache") return CmdCache(args);
  if (cmd == "mount") return CmdMount(args);
  if (cmd == "umount") return CmdUmount(args);
  std::fprintf(stderr, "ufspack: unknown command '%s' (see 'ufspack --help')\n",
               cmd.c_str());
  return kExitUsage;
}
