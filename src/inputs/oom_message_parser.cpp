#include "inputs/oom_message_parser.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>
#include <regex>
#include <string>

#include "inputs/text_file.h"
#include "util/bytes.h"

namespace fragscope::inputs {

namespace {

// A message is a few hundred characters; text past this is not part of it (and would only
// make the figure search slow).
constexpr std::size_t kMaxMessageChars = 8192;

// How PyTorch's C shim (torch/csrc/inductor/aoti_torch/utils.h) logs an exception it turns into an error code.
constexpr std::string_view kCShimLogPrefix = "Exception in aoti_torch";

struct LogLine {
  std::optional<int> rank;
  std::string text;  // without colour codes, '\r' and rank prefix
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string strip_control(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '\x1b') {  // ANSI escape: CSI "ESC [ params final" or a two-byte sequence
      if (i + 1 < raw.size() && raw[i + 1] == '[') {
        i += 2;
        while (i < raw.size() && !(raw[i] >= 0x40 && raw[i] <= 0x7e)) ++i;
      } else {
        ++i;
      }
      continue;
    }
    out.push_back(c == '\r' || c == '\t' ? ' ' : c);
  }
  return out;
}

std::optional<int> parse_int(std::string_view digits) {
  int value = 0;
  const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || ptr != digits.data() + digits.size()) return std::nullopt;
  return value;
}

// "[rank3]:", "[default3]:" (torchrun) or "[1,3]<stderr>:" (mpirun) at the start of a line.
LogLine split_rank_prefix(std::string text) {
  LogLine line;
  std::size_t start = 0;
  while (start < text.size() && text[start] == ' ') ++start;
  std::string_view view(text);
  view.remove_prefix(start);
  std::size_t consumed = 0;
  for (std::string_view tag : {std::string_view("[rank"), std::string_view("[default")}) {
    if (!view.starts_with(tag)) continue;
    std::size_t end = tag.size();
    while (end < view.size() && is_digit(view[end])) ++end;
    if (end > tag.size() && end < view.size() && view[end] == ']') {
      line.rank = parse_int(view.substr(tag.size(), end - tag.size()));
      consumed = end + 1;
      if (consumed < view.size() && view[consumed] == ':') ++consumed;
    }
    break;
  }
  if (!consumed && view.starts_with('[')) {  // mpirun: [job,rank]<stdout|stderr>:
    const auto comma = view.find(',');
    const auto close = view.find("]<std");
    if (comma != std::string_view::npos && close != std::string_view::npos && comma < close) {
      const auto colon = view.find(">:", close);
      if (colon != std::string_view::npos) {
        line.rank = parse_int(view.substr(comma + 1, close - comma - 1));
        if (line.rank) consumed = colon + 2;
      }
    }
  }
  if (consumed && consumed < view.size() && view[consumed] == ' ') ++consumed;
  line.text = std::string(view.substr(consumed));
  if (!consumed) line.text = text;
  return line;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

std::string collapse_spaces(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out.push_back(c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

bool message_complete(std::string_view joined) {
  if (joined.find("See documentation for Memory Management") == std::string_view::npos) return false;
  joined = trim(joined);
  return joined.ends_with(')') || joined.ends_with("PYTORCH_CUDA_ALLOC_CONF") ||
         joined.ends_with("')");
}

bool ends_sentence(std::string_view joined) {
  joined = trim(joined);
  return !joined.empty() && (joined.back() == '.' || joined.back() == ')' || joined.back() == ';');
}

// Lines that carry on a message after a sentence end (a wrap exactly at a sentence boundary).
bool starts_continuation(std::string_view line) {
  static constexpr std::array<std::string_view, 14> kPhrases = {
      "GPU ",          "Including non-PyTorch", "Process ",    "this process",
      "Of the allocated", "If reserved",        "See documentation", "(https",
      "(GPU ",         "and PYTORCH",           "PYTORCH_",    "with ",
      "and ",          "allocated by PyTorch"};
  for (const auto phrase : kPhrases)
    if (line.starts_with(phrase)) return true;
  return !line.empty() && is_digit(line.front());  // "17.69 GiB allowed; ..."
}

bool starts_new_record(std::string_view line) {
  return line.starts_with("Traceback") || line.starts_with("File \"") ||
         line.starts_with("During handling") || line.find("out of memory") != std::string_view::npos;
}

// At most 20 digits a part (no size has more): std::regex backtracks, and unbounded runs made a log of long
// digit strings quadratic (a 600 KB log of 10 such lines took 50 s).
#define FS_SIZE R"(([0-9]{1,20}(?:\.[0-9]{1,20})?) ?(bytes|B|[KMGTP]i?B))"

std::optional<std::uint64_t> size_of(const std::smatch& m, std::size_t group) {
  return parse_bytes(m[group].str() + " " + m[group + 1].str());
}

void parse_fields(const std::string& text, OomMessage& msg) {
  static const std::regex kBackend(R"((CUDA|HIP|XPU) out of memory)");
  static const std::regex kTried("Tried to allocate " FS_SIZE);
  static const std::regex kGpuCurrent(R"(GPU ([0-9]+) has a total capac[a-z]*ty of )" FS_SIZE
                                      " of which " FS_SIZE " is free");
  static const std::regex kThisProcess("this process has " FS_SIZE " memory in use");
  static const std::regex kOtherProcess("Process ([0-9]+) has " FS_SIZE " memory in use");
  static const std::regex kAllowed(FS_SIZE " allowed;");
  static const std::regex kAllocated("Of the allocated memory " FS_SIZE " is allocated by PyTorch");
  static const std::regex kPrivate("with " FS_SIZE " allocated in private pools");
  static const std::regex kUnallocated(FS_SIZE " is reserved by PyTorch but unallocated");
  static const std::regex kGpuOld(R"(\(GPU ([0-9]+); )" FS_SIZE " total capacity; " FS_SIZE
                                  " already allocated; " FS_SIZE " free;");
  static const std::regex kReservedTotal(FS_SIZE " reserved in total by PyTorch");
  static const std::regex kCached(FS_SIZE " cached");

  std::smatch m;
  if (std::regex_search(text, m, kBackend)) msg.backend = m[1].str();
  if (std::regex_search(text, m, kTried)) msg.tried_to_allocate = size_of(m, 1);
  if (std::regex_search(text, m, kGpuOld)) {
    msg.gpu = parse_int(m[1].str());
    msg.total_capacity = size_of(m, 2);
    msg.allocated_by_pytorch = size_of(m, 4);
    msg.free = size_of(m, 6);
    if (std::regex_search(text, m, kReservedTotal)) {
      msg.format = OomFormat::kReservedInTotal;
      msg.reserved_by_pytorch = size_of(m, 1);
      if (msg.reserved_by_pytorch && msg.allocated_by_pytorch &&
          *msg.reserved_by_pytorch >= *msg.allocated_by_pytorch)
        msg.reserved_unallocated = *msg.reserved_by_pytorch - *msg.allocated_by_pytorch;
    } else if (std::regex_search(text, m, kCached)) {
      msg.format = OomFormat::kCached;
      msg.reserved_unallocated = size_of(m, 1);
      if (msg.reserved_unallocated && msg.allocated_by_pytorch)
        msg.reserved_by_pytorch = *msg.allocated_by_pytorch + *msg.reserved_unallocated;
    }
    return;
  }
  msg.format = OomFormat::kCurrent;
  if (std::regex_search(text, m, kGpuCurrent)) {
    msg.gpu = parse_int(m[1].str());
    msg.total_capacity = size_of(m, 2);
    msg.free = size_of(m, 4);
  }
  if (std::regex_search(text, m, kThisProcess)) msg.process_in_use = size_of(m, 1);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), kOtherProcess);
       it != std::sregex_iterator(); ++it) {
    const auto pid = parse_int((*it)[1].str());
    const auto bytes = parse_bytes((*it)[2].str() + " " + (*it)[3].str());
    if (pid && bytes) msg.other_processes.push_back({*pid, *bytes});
  }
  if (std::regex_search(text, m, kAllowed)) msg.allowed = size_of(m, 1);
  if (std::regex_search(text, m, kAllocated)) msg.allocated_by_pytorch = size_of(m, 1);
  if (std::regex_search(text, m, kPrivate)) msg.private_pools = size_of(m, 1);
  if (std::regex_search(text, m, kUnallocated)) msg.reserved_unallocated = size_of(m, 1);
  if (msg.allocated_by_pytorch && msg.reserved_unallocated)
    msg.reserved_by_pytorch = *msg.allocated_by_pytorch + *msg.reserved_unallocated;
}

#undef FS_SIZE

// Where the message proper starts within a line: at its backend word when there is one.
std::size_t message_start(std::string_view text, std::size_t oom_at) {
  for (std::string_view backend : {"CUDA ", "HIP ", "XPU "}) {
    if (oom_at >= backend.size() && text.substr(oom_at - backend.size(), backend.size()) == backend)
      return oom_at - backend.size();
  }
  return oom_at;
}

}  // namespace

void OomMessageScanner::add(std::string_view raw) {
  ring_[(first_ + count_) % ring_.size()].assign(raw);
  if (++count_ == ring_.size()) judge_first();
}

std::vector<OomMessage> OomMessageScanner::finish() {
  while (count_ > 0) judge_first();
  return std::move(found_);
}

const std::string& OomMessageScanner::at(std::size_t i) const { return ring_[(first_ + i) % ring_.size()]; }

void OomMessageScanner::judge_first() {
  judge(at(0));
  first_ = (first_ + 1) % ring_.size();
  --count_;
  ++line_no_;
}

void OomMessageScanner::judge(std::string_view raw) {
  if (found_.size() >= kMaxOomMessages) return;  // enough kept: the rest is not parsed at all
  if (raw.find("out of memory") == std::string_view::npos) return;  // fast path
  const LogLine first = split_rank_prefix(strip_control(raw));
  const auto oom_at = first.text.find("out of memory");
  if (oom_at == std::string::npos) return;
  std::string joined = first.text.substr(message_start(first.text, oom_at));
  for (std::size_t n = 1; n < count_; ++n) {
    if (message_complete(joined)) break;
    const LogLine next = split_rank_prefix(strip_control(at(n)));
    if (next.rank != first.rank && next.rank && first.rank) continue;  // another rank's line
    const std::string_view content = trim(next.text);
    if (content.empty() || starts_new_record(content)) break;
    if (ends_sentence(joined) && !starts_continuation(content)) break;
    joined += ' ';
    joined += content;
  }
  auto msg = parse_oom_message(joined);
  if (!msg) return;  // not an allocator OOM
  msg->line = line_no_;
  msg->rank = first.rank;
  msg->raised_in_c_shim = first.text.substr(0, oom_at).find(kCShimLogPrefix) != std::string::npos;
  found_.push_back(std::move(*msg));
}

std::optional<OomMessage> parse_oom_message(std::string_view text) {
  const std::string clean = collapse_spaces(strip_control(text));
  const auto oom_at = clean.find("out of memory");
  if (oom_at == std::string::npos) return std::nullopt;
  if (clean.find("Tried to allocate", oom_at) == std::string::npos) return std::nullopt;
  OomMessage msg;
  msg.text = clean.substr(message_start(clean, oom_at), kMaxMessageChars);
  parse_fields(msg.text, msg);
  return msg;
}

std::optional<int> rank_prefix_of(std::string_view line) { return split_rank_prefix(strip_control(line)).rank; }

std::vector<OomMessage> find_oom_messages(std::string_view log) {
  OomMessageScanner scanner;
  for (std::size_t pos = 0; pos < log.size();) {
    const auto end = std::min(log.find('\n', pos), log.size());
    scanner.add(log.substr(pos, end - pos));
    pos = end + 1;
  }
  return scanner.finish();
}

}  // namespace fragscope::inputs
