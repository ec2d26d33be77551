// Copyright 2026 The ufspack Authors.
//
// `ufspack merge`: one logical pack over several packs, without copying
// their records (MergePacks, ufspack/merge.h).
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "ufspack/merge.h"
#include "util.h"

namespace ufspack {
namespace cli {

const char kMergeHelp[] =
    R"(Usage: ufspack merge <part>... -o <out> [--json] [--quiet]

Publishes one pack over the packs <part>... without copying their records:
<out>/manifest.ufs names each part by its path relative to <out> and by its
pack id (docs/format.md, "Merged packs").  Every reader (ufspack info, ls,
cat, extract, verify, the C++ Reader, ufspack.Pack, MyImageFolder) opens
<out> as it opens a single pack.  Merging is fast (it reads each part's
header, metadata, first and last records and class table, nothing more),
so 1,000 parts merge in well under a second.

The parts are either all the parts of one `ufspack build --part <i>/<n>`
split, given in any order (they are put in part order; a missing, repeated
or foreign part is an error naming it), or packs built separately, joined
in the order given.  They must share one class table (or all be flat),
and each class's records must be contiguous across them.  Record names
must be unique across the parts: `ufspack verify <out>` checks that, and
every part, in full.

Keep the parts where they are: moving <out> and the parts together (same
relative layout) is fine; moving one alone breaks the merged pack, and
opening it then fails naming the missing part.  Rebuilding a part (another
pack id) makes opening the merged pack fail until it is merged again.
<out> is created if missing; an existing manifest there is replaced
atomically.  A directory holding a single pack (index.ufs) is refused.

Options:
  -o, --output <out>   the merged pack's directory (required)
      --json           one JSON object on stdout instead of the summary line
  -q, --quiet          no summary

Exit status: 0 merged, 1 failed (nothing written), 2 usage error, 3 a part
is damaged.

Examples:
  ufspack merge train.parts/part-* -o train.ufspack
  for i in $(seq 0 63); do ufspack build /nas/train --part $i/64 \
      -o /nas/train.parts/part-$i; done; ufspack merge /nas/train.parts/* \
      -o /nas/train.ufspack
)";

int CmdMerge(const Argv& argv) {
  CommandLine cl("merge");
  std::vector<std::string> parts;
  std::string out;
  bool json = false, quiet = false;
  cl.app()
      .add_option("part", parts)
      ->required()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cl.app().add_option("-o,--output", out)->required();
  cl.app().add_flag("--json", json);
  cl.app().add_flag("-q,--quiet", quiet);
  if (int rc = cl.Parse(argv); rc >= 0) return rc;
  MergeSummary summary;
  Status s = MergePacks(parts, out, &summary);
  if (!s.ok()) {
    PrintError(s);
    std::fprintf(stderr, "ufspack: nothing written; %s left as it was\n",
                 Printable(out).c_str());
    if (json) {
      std::fputs(
          JsonObject{{"ok", false}, {"error", s.message()}, {"output", out}}
              .Line()
              .c_str(),
          stdout);
    }
    return ExitCodeFor(s);
  }
  if (json) {
    const JsonObject j{
        {"ok", true},
        {"output", out},
        {"manifest", summary.manifest_path},
        {"pack_id", summary.pack_id.ToHex()},
        {"parts", summary.parts},
        {"split", summary.split},
        {"records", summary.records},
        {"classes", summary.classes},
        {"data_bytes", summary.data_bytes},
        {"manifest_bytes", summary.manifest_bytes},
        {"seconds", JsonObject::Value::Fixed(summary.seconds, 3)}};
    std::fputs(j.Line().c_str(), stdout);
  } else if (!quiet) {
    std::printf(
        "merged %s parts%s (%s records, %s classes, %s of data; manifest %s) "
        "in %s s -> %s\n",
        FormatCount(summary.parts).c_str(),
        summary.split ? " of one split" : "",
        FormatCount(summary.records).c_str(),
        FormatCount(summary.classes).c_str(),
        FormatBytes(summary.data_bytes).c_str(),
        FormatBytes(summary.manifest_bytes).c_str(),
        Fixed(summary.seconds, 3).c_str(), Printable(out).c_str());
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace ufspack
