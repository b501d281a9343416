#pragma once
/// @file shown_text.h
/// @brief Text from an input (a snapshot's frame and file names, annotations, a log, a rank file), made safe to show.
///
/// Whoever wrote a snapshot chose its strings. A terminal acts on ESC and CSI (clearing the screen, setting its
/// title), a carriage return or a newline forges a line, a bidirectional override shows a name reversed, and bytes
/// that are not UTF-8 make an HTML page invalid. Thread-safety: pure functions.

#include <cstddef>
#include <string>
#include <string_view>

namespace fragscope {

/// What a report shows of one name from the inputs (a file, a function, an annotation): real ones are shorter.
inline constexpr std::size_t kShownNameBytes = 256;
/// What a report shows of a path (PATH_MAX): a file's own, quoted whole unless a writer made it absurd.
inline constexpr std::size_t kShownPathBytes = 4096;

/// @brief `text` with what a terminal would act on replaced by `?`: C0 controls but newline and tab, DEL, C1
/// controls (U+0080..U+009F), bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E, U+200F,
/// U+202A..U+202E, U+2066..U+2069), the line and paragraph separators (U+2028, U+2029), and each byte that does not
/// begin a valid UTF-8 sequence. Valid UTF-8 otherwise passes unchanged.
std::string terminal_safe(std::string_view text);

/// @brief `text` as valid UTF-8: each byte that does not begin a valid sequence, and each C0 control but newline and
/// tab, becomes U+FFFD (what a browser would show; NUL and stray bytes are parse errors in HTML).
std::string valid_utf8(std::string_view text);

/// @brief terminal_safe's text on one line: newline and tab shown as `?` too.
std::string one_line_safe(std::string_view text);

/// @brief `raw` with every byte that is not part of valid UTF-8, every control character (C0 with newline and tab,
/// DEL, C1) and what terminal_safe replaces besides, each replaced by U+FFFD: text from a rank file fit for a
/// Prometheus label value (a scrape is dropped whole over one value that is not UTF-8), a JSON event and a command
/// line. Idempotent; printable ASCII passes unchanged.
std::string printable_text(std::string_view raw);

/// @brief A name from the inputs (a file, a function, an annotation) as a report quotes it: on one line, every
/// control character (newline and tab too) and what terminal_safe replaces shown as `?`, and cut to about
/// `max_bytes`, its head and its tail kept around "…" (the cuts on character boundaries), so that a name quoted in
/// several lines costs a report little whatever its length.
std::string shown_name(std::string_view text, std::size_t max_bytes = kShownNameBytes);

}  // namespace fragscope
