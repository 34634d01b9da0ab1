// XML documents served through qXfer (threads, libraries-svr4).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "target/native_target.h"

namespace gdbtrace {

std::string xml_escape(std::string_view text);
std::string threads_xml(const std::vector<ThreadInfo>& threads, bool multiprocess);
std::string libraries_svr4_xml(const std::vector<LibraryInfo>& libraries, uint64_t main_lm);

} // namespace gdbtrace
