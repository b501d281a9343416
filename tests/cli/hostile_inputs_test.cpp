// Issue 16, every reader under hostile and broken input, through the real binary: no input under
// 1 MB makes any command exceed 512 MB (measured as the process's peak RSS), and every special
// file gets a one-line error, never a hang.
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "../command_runner.h"

namespace fragscope {
namespace {

namespace fs = std::filesystem;

struct Measured {
  int exit_code = -1;
  long max_rss_kib = 0;
  std::string err;
};

/// Runs `fragscope ARGS...` (stdin /dev/null, stdout discarded) under a 60 s alarm and returns its
/// exit status, peak resident memory and stderr.
Measured run_measured(const std::vector<std::string>& args) {
  const fs::path err_path = fs::path(::testing::TempDir()) / ("hostile_err_" + std::to_string(::getpid()));
  const std::string bin = testing::fragscope_binary();
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(bin.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open("/dev/null", O_WRONLY);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    ::alarm(60);  // a hang is a failure, not a stuck test
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  ::wait4(child, &status, 0, &usage);
  Measured r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.max_rss_kib = usage.ru_maxrss;
  std::ifstream in(err_path);
  r.err.assign(std::istreambuf_iterator<char>(in), {});
  fs::remove(err_path);
  return r;
}

std::size_t lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

constexpr long kMaxRssKib = 512 * 1000;  // 512 MB

class HostileSnapshots : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(FRAGSCOPE_BINARY_DIR) / "hostile-snapshots";
    const bool made =
        std::all_of(std::begin(kFiles), std::end(kFiles), [](const char* f) { return fs::exists(dir_ / f); });
    if (made) return;  // by an earlier run
    const std::string command =
        "python3 " + testing::shell_quote(std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/cli/hostile_snapshots.py") +
        " bombs " + testing::shell_quote(dir_.string());
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  static constexpr const char* kFiles[] = {"ref_bomb_16M.pickle.zst", "stream_bomb.pickle.zst", "pool_bomb.pickle",
                                           "address_bomb.pickle", "dense_trace.pickle.zst"};
  static fs::path dir_;
};

fs::path HostileSnapshots::dir_;

// The bombs of issue 16 (a 3 KB .zst naming one trace entry 2^24 times: 1.0-2.3 GB; 12 KB: 4.1 GB;
// six 250 MiB strings in 48 KB: 2.0 GB; 512 MiB of opcodes from 48 KB), and the plain ones past
// the model budget: each command refuses each with one line, within 512 MB.
TEST_F(HostileSnapshots, EveryCommandRefusesEveryBombInBoundedMemory) {
  for (const char* bomb : {"ref_bomb_16M.pickle.zst", "ref_bomb_64M.pickle.zst", "string_bomb.pickle.zst",
                           "ratio_bomb.pickle.zst", "segment_bomb.pickle", "ref_bomb_4M.pickle"}) {
    const std::string path = (dir_ / bomb).string();
    if (!std::string(bomb).ends_with("4M.pickle")) {
      EXPECT_LT(fs::file_size(path), 1'000'000u) << bomb;
    }
    for (const char* command : {"analyze", "replay", "whatif", "doctor"}) {
      SCOPED_TRACE(std::string(command) + " " + bomb);
      const Measured r = run_measured({command, path});
      EXPECT_EQ(r.exit_code, 2) << r.err;
      EXPECT_EQ(lines(r.err), 1u) << r.err;
      EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
      EXPECT_TRUE(r.err.find("decompresses to more than 64 times its size plus 16.00 MiB") != std::string::npos ||
                  r.err.find("a model far larger than its file") != std::string::npos) << r.err;
      EXPECT_LT(r.max_rss_kib, kMaxRssKib) << r.err;
    }
  }
}

// Traces that read within the limits but whose replays would not fit: 60,000 streams (a 24 KiB
// free-block set per stream and replay: 1.4 GB), 300 streams that allocate, and 200 streams whose
// expandable ranges pass the device's address space (an internal error before). Every replay
// refuses them with one line; analyze, which replays nothing, reads them.
TEST_F(HostileSnapshots, TracesOfHundredsOfStreamsAreRefusedByEveryReplay) {
  const struct {
    const char* file;
    const char* refusal;
    std::vector<std::string> refusing;
  } bombs[] = {
      {"stream_bomb.pickle.zst", "names 60000 CUDA streams (at most 1024)", {"replay", "whatif", "doctor"}},
      {"pool_bomb.pickle", "allocates from 300 (memory pool, stream) pairs", {"replay", "whatif", "doctor"}},
      {"address_bomb.pickle", "pass 128 TiB of device address space", {"whatif", "doctor"}},
  };
  for (const auto& bomb : bombs) {
    const std::string path = (dir_ / bomb.file).string();
    EXPECT_LT(fs::file_size(path), 1'000'000u) << bomb.file;
    for (const char* command : {"analyze", "replay", "whatif", "doctor"}) {
      SCOPED_TRACE(std::string(command) + " " + bomb.file);
      std::vector<std::string> args = {command, path};
      const bool sweeps = command == std::string("whatif") || command == std::string("doctor");
      if (sweeps) args.insert(args.end(), {"--threads", "16"});
      const Measured r = run_measured(args);
      if (std::find(bomb.refusing.begin(), bomb.refusing.end(), command) != bomb.refusing.end()) {
        EXPECT_EQ(r.exit_code, 2) << r.err;
        EXPECT_EQ(lines(r.err), 1u) << r.err;
        EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
        EXPECT_NE(r.err.find(bomb.refusal), std::string::npos) << r.err;
      } else {
        EXPECT_LE(r.exit_code, 1) << r.err;
      }
      EXPECT_LT(r.max_rss_kib, kMaxRssKib) << r.err;
    }
  }
}

// Nearly the most a file under 1 MB can hold within the limits (2,000,000 trace entries, 72 MB of
// pickle that compress 72 times; 80 MiB at most): it is read, and every command, the doctor's
// what-if sweep included, stays under 512 MB,
// at the default threads (the cores) and at 16 (each replay holds about 50 MB: 16 at once took
// 700 MB before the replays ran within a memory budget, replay/replay_memory.h).
TEST_F(HostileSnapshots, TheDensestTraceUnder1MbStaysUnder512Mb) {
  const std::string path = (dir_ / "dense_trace.pickle.zst").string();
  ASSERT_LT(fs::file_size(path), 1'000'000u);
  const std::vector<std::vector<std::string>> commands = {
      {"analyze", path}, {"replay", path}, {"whatif", path}, {"whatif", path, "--threads", "16"},
      {"doctor", path},  {"doctor", path, "--threads", "16"}};
  for (const auto& args : commands) {
    SCOPED_TRACE(args[0] + (args.size() > 2 ? " --threads 16" : ""));
    const Measured r = run_measured(args);
    EXPECT_LE(r.exit_code, 1) << r.err;  // read and diagnosed
    EXPECT_LT(r.max_rss_kib, kMaxRssKib);
    std::printf("max RSS %-22s %ld KiB\n", (args[0] + (args.size() > 2 ? " --threads 16" : "")).c_str(),
                r.max_rss_kib);
  }
}

// Issue 16: `plan /dev/zero` reached 4.9 GB; `check` with /dev/zero 2.8-4.5 GB; a FIFO blocked.
// Every special file gets one line naming it, at once and in little memory.
TEST(SpecialFiles, EveryCommandGivesOneLine) {
  const fs::path dir = fs::path(::testing::TempDir()) / "hostile_special";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);  // no writer, ever
  const fs::path socket_path = dir / "socket";
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof address.sun_path - 1);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  const std::string steps = std::string(FRAGSCOPE_FIXTURES_DIR) + "/calib/steps.jsonl";
  for (const std::string& special : std::vector<std::string>{"/dev/zero", "/dev/urandom", "/proc/self/status",
                                                             fifo.string(), socket_path.string()}) {
    const std::vector<std::vector<std::string>> commands = {
        {"analyze", special}, {"replay", special}, {"whatif", special}, {"doctor", special}, {"plan", special},
        {"check", special}, {"check", steps, "--smi", special}, {"check", steps, "--criteria", special}};
    for (const auto& args : commands) {
      std::string what;
      for (const auto& a : args) what += a + " ";
      SCOPED_TRACE(what);
      const Measured r = run_measured(args);
      EXPECT_EQ(r.exit_code, 2) << r.err;
      EXPECT_EQ(lines(r.err), 1u) << r.err;
      EXPECT_NE(r.err.find(special), std::string::npos) << r.err;
      EXPECT_LT(r.max_rss_kib, 100 * 1000) << r.err;
    }
  }
  ::close(sock);
}

// Issue 16: an OOM message past the first GiB of a log was ignored, and the log was read whole.
TEST(LargeLogs, TheDoctorFindsAnOomPastTheFirstGibInLittleMemory) {
  const fs::path log = fs::path(::testing::TempDir()) / "hostile_long_train.log";
  {
    std::ofstream out(log);
    for (int i = 0; i < 4000; ++i) out << "[rank0]: step " << i << " loss 2.0 tokens/s 51234\n";
  }
  fs::resize_file(log, fs::file_size(log) + (std::uint64_t{1} << 30));  // 1 GiB of NULs, sparse: no disk
  std::ofstream(log, std::ios::app)
      << "\n[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.54 GiB. GPU 0 has a total "
         "capacity "
         "of 139.80 GiB of which 1017.12 MiB is free. Including non-PyTorch memory, this process has 138.80 GiB memory "
         "in "
         "use. Of the allocated memory 135.25 GiB is allocated by PyTorch, and 3.39 GiB is reserved by PyTorch but "
         "unallocated.\n";
  const Measured r = run_measured({"doctor", log.string()});
  fs::remove(log);
  EXPECT_EQ(r.exit_code, 1) << r.err;  // an OOM, diagnosed from its message
  EXPECT_LT(r.max_rss_kib, 64 * 1000);
}

// A steps.jsonl of records far smaller in the file than in memory (5 million `{"step":N}` lines, 84 MB, took
// 4.8 GB and a minute): every command that reads one refuses it with one line naming it, in little memory.
TEST(TinyRecords, EveryTelemetryReaderRefusesThemInLittleMemory) {
  const fs::path steps = fs::path(::testing::TempDir()) / "hostile_tiny_steps.jsonl";
  {
    std::ofstream out(steps);
    for (int i = 0; i < 1'000'000; ++i) out << "{\"step\":" << i << "}\n";  // 16.9 MB
  }
  for (const std::string command : {"check", "doctor"}) {
    SCOPED_TRACE(command);
    const Measured r = run_measured({command, steps.string()});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find(steps.string()), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("lines too short for step telemetry"), std::string::npos) << r.err;
    EXPECT_LT(r.max_rss_kib, 160 * 1000);
  }
  fs::remove(steps);
}

// Names in a snapshot are whoever wrote it's: a terminal's escapes, a carriage return, a forged line, a
// right-to-left override and a line separator are shown as '?' in every text report; names of 8 MiB are quoted cut
// (a 9 KB file took doctor --html to 1.44 GB and 336 MB of HTML).
TEST(HostileNames, TextReportsShowNoEscapesAndLongNamesCostLittle) {
  const fs::path dir = fs::path(FRAGSCOPE_BINARY_DIR) / "hostile-names";
  const std::string command =
      "python3 " + testing::shell_quote(std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/cli/hostile_snapshots.py") +
      " names " + testing::shell_quote(dir.string()) + " " +
      testing::shell_quote(std::string(FRAGSCOPE_SOURCE_DIR) + "/tests/data/field/lstm_edge/oom_snapshot.pickle.zst");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const std::string escapes = (dir / "escapes.pickle.zst").string();
  for (const char* report : {"analyze", "replay", "whatif", "doctor"}) {
    SCOPED_TRACE(report);
    const testing::CommandResult r = testing::run_fragscope({"-q", report, escapes});
    if (std::string_view(report) == "doctor") {
      EXPECT_NE(r.out.find("yp.exe.py:81 in step?[31m?"), std::string::npos) << r.out;  // shown, made safe
    }
    for (const std::string raw :
         {"\x1b", "\r", "\a", "\xe2\x80\xae", "\xe2\x80\xa8", "\nfragscope doctor · verdict: ok"})
      EXPECT_EQ(r.out.find(raw), std::string::npos) << r.out;
  }
  const fs::path html = dir / "long_names.html";
  const Measured r = run_measured({"-q", "doctor", (dir / "long_names.pickle.zst").string(), "--html", html.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;  // an OOM, diagnosed
  EXPECT_LT(r.max_rss_kib, 200 * 1000) << r.err;
  EXPECT_LT(fs::file_size(html), 1'000'000u);
}

}  // namespace
}  // namespace fragscope
