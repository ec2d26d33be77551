// Copyright 2026 The ufspack Authors.
//
// The subcommands of the `ufspack` tool.  Each takes its arguments (after
// the subcommand name) and returns the process exit code (see util.h).
#ifndef UFSPACK_CLI_COMMANDS_H_
#define UFSPACK_CLI_COMMANDS_H_

#include <string>
#include <vector>

namespace ufspack {
namespace cli {

using Argv = std::vector<std::string>;

int CmdBuild(const Argv& args);
int CmdInfo(const Argv& args);
int CmdLs(const Argv& args);
int CmdCat(const Argv& args);
int CmdExtract(const Argv& args);
int CmdVerify(const Argv& args);

// Help text of a subcommand, or nullptr if there is no such subcommand.
const char* HelpFor(const std::string& command);
// The top-level help.
const char* MainHelp();

}  // namespace cli
}  // namespace ufspack

#endif  // UFSPACK_CLI_COMMANDS_H_
