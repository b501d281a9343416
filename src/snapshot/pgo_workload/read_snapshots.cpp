// The workload that profiles the snapshot reader for GCC's profile-guided optimisation
// (src/snapshot/CMakeLists.txt): reads each snapshot named on the command line, as `analyze`
// does, with the instrumented reader.
#include <cstdio>

#include "snapshot/snapshot_reader.h"
#include "util/error.h"

int main(int argc, char** argv) {
  try {
    for (int i = 1; i < argc; ++i) (void)fragscope::snapshot::read_snapshot_file(argv[i]);
  } catch (const fragscope::InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  return 0;
}
