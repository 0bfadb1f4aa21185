// What a crash in the middle of a run leaves on stderr: the scenario that was running and the
// command that replays it. A signal handler (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) and, in
// sanitizer builds, the sanitizers' death callback write the note set for the current run, so
// a crash or a sanitizer report never loses the replay line.
#pragma once

#include <string>

namespace doorbell::tools {

void crash_note_install();                   // once, before the first run
void crash_note_set(const std::string& text);  // printed as is if the process dies; "" clears

}  // namespace doorbell::tools
