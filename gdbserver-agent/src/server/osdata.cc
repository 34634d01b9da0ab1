// The <osdata> tables of `info os`, read from /proc and /sys as gdbserver 13
// does (gdb/nat/linux-osdata.c): same annexes, titles, column names, column
// order and value formats. Text values are XML-escaped; numbers are not.
#include "server/osdata.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fstream>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "server/xml_documents.h"

namespace gdbtrace {

namespace {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

bool all_digits(const char* s) {
  if (!*s)
    return false;
  for (; *s; ++s)
    if (!std::isdigit(static_cast<unsigned char>(*s)))
      return false;
  return true;
}

// Numeric entries of DIR (pids in /proc, tids in /proc/PID/task, fds), in
// directory order as gdbserver lists them.
std::vector<std::string> numeric_entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (!d)
    return names;
  while (dirent* e = readdir(d))
    if (all_digits(e->d_name) && std::strlen(e->d_name) <= 10)
      names.push_back(e->d_name);
  closedir(d);
  return names;
}

bool is_directory(const std::string& path, struct stat* st = nullptr) {
  struct stat local;
  struct stat* s = st ? st : &local;
  return stat(path.c_str(), s) == 0 && S_ISDIR(s->st_mode);
}

// "<column name=\"NAME\">VALUE</column>" with VALUE escaped.
std::string column(const char* name, std::string_view value) {
  return std::string("<column name=\"") + name + "\">" + xml_escape(value) + "</column>";
}

std::string column(const char* name, long long value) {
  return column(name, std::to_string(value));
}

// The command name from /proc/PID/stat (the comm in parentheses, at most
// 15 characters as the kernel keeps it); the pid itself when there is no
// such process, as gdbserver prints.
std::string command_from_pid(long long pid) {
  auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat)
    return std::to_string(pid);
  long long stat_pid = 0;
  char cmd[18] = {};
  if (std::sscanf(stat->c_str(), "%lld %17s", &stat_pid, cmd) != 2 || stat_pid != pid)
    return "";
  std::string c(cmd);
  if (c.size() >= 2)
    return c.substr(1, c.size() - 2);
  return "";
}

// The command line with NULs as spaces; "[comm]" for kernel threads (empty
// cmdline); "" when the process is gone.
std::string commandline_from_pid(long long pid) {
  auto cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  if (!cmdline)
    return "";
  if (cmdline->empty())
    return "[" + command_from_pid(pid) + "]";
  std::replace(cmdline->begin(), cmdline->end(), '\0', ' ');
  return *cmdline;
}

std::string user_from_uid(uid_t uid) {
  char buf[1024];
  passwd pwd;
  passwd* entry = nullptr;
  getpwuid_r(uid, &pwd, buf, sizeof buf, &entry);
  return entry ? entry->pw_name : "";
}

std::string group_from_gid(gid_t gid) {
  char buf[1024];
  group grp;
  group* entry = nullptr;
  getgrgid_r(gid, &grp, buf, sizeof buf, &entry);
  return entry ? entry->gr_name : "";
}

// ctime() text (with its newline, as gdbserver keeps it); "" for 0.
std::string time_text(long long seconds) {
  if (!seconds)
    return "";
  time_t t = static_cast<time_t>(seconds);
  char buf[32];
  return ctime_r(&t, buf) ? buf : "";
}

std::string octal(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%o", v);
  return buf;
}

// Field 39 of /proc/PID/task/TID/stat ("processor"), counted after the
// command's closing parenthesis; -1 when unreadable.
int core_of_thread(long long pid, long long tid) {
  auto stat = read_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat");
  if (!stat)
    return -1;
  size_t pos = stat->find_last_of(')');
  if (pos == std::string::npos)
    return -1;
  for (int i = 0; i < 37; ++i) {
    pos = stat->find_first_of(' ', pos);
    if (pos == std::string::npos)
      return -1;
    pos = stat->find_first_not_of(' ', pos);
    if (pos == std::string::npos)
      return -1;
  }
  int core = -1;
  if (std::sscanf(stat->c_str() + pos, "%d", &core) != 1)
    return -1;
  return core;
}

// Highest possible CPU number + 1, from /sys/devices/system/cpu/possible
// ("0-3,8"), else the online count.
size_t core_array_size() {
  if (auto possible = read_file("/sys/devices/system/cpu/possible")) {
    unsigned long max_id = 0;
    const char* p = possible->c_str();
    while (*p) {
      char* end = nullptr;
      unsigned long id = std::strtoul(p, &end, 10);
      if (end == p)
        break;
      max_id = std::max(max_id, id);
      p = *end ? end + 1 : end;
    }
    return max_id + 1;
  }
  return static_cast<size_t>(sysconf(_SC_NPROCESSORS_ONLN));
}

std::string processes() {
  std::string out = "<osdata type=\"processes\">\n";
  size_t ncores = core_array_size();
  for (const auto& name : numeric_entries("/proc")) {
    long long pid = std::stoll(name);
    std::string command = commandline_from_pid(pid);
    struct stat st;
    std::string user = is_directory("/proc/" + name, &st) ? user_from_uid(st.st_uid) : "?";
    // Cores the process's threads run on, each once, in ascending order.
    std::vector<int> used(ncores, 0);
    for (const auto& tid : numeric_entries("/proc/" + name + "/task")) {
      int core = core_of_thread(pid, std::stoll(tid));
      if (core >= 0 && static_cast<size_t>(core) < ncores)
        used[core] = 1;
    }
    std::string cores;
    for (size_t i = 0; i < ncores; ++i)
      if (used[i])
        cores += (cores.empty() ? "" : ",") + std::to_string(i);
    out += "<item>" + column("pid", pid) + column("user", user) + column("command", command) +
           column("cores", cores) + "</item>";
  }
  return out + "</osdata>\n";
}

// Process groups, leaders first within a group, groups by pgid.
std::string process_groups() {
  struct Entry {
    long long pid, pgid;
    bool leader() const { return pid == pgid; }
  };
  std::vector<Entry> entries;
  for (const auto& name : numeric_entries("/proc")) {
    long long pid = std::stoll(name);
    pid_t pgid = getpgid(static_cast<pid_t>(pid));
    if (pgid > 0)
      entries.push_back({pid, pgid});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.pgid != b.pgid)
      return a.pgid < b.pgid;
    if (a.leader() != b.leader())
      return a.leader();
    return a.pid < b.pid;
  });
  std::string out = "<osdata type=\"process groups\">\n";
  for (const auto& e : entries)
    out += "<item>" + column("pgid", e.pgid) + column("leader command", command_from_pid(e.pgid)) +
           column("pid", e.pid) + column("command line", commandline_from_pid(e.pid)) + "</item>";
  return out + "</osdata>\n";
}

std::string threads() {
  std::string out = "<osdata type=\"threads\">\n";
  for (const auto& name : numeric_entries("/proc")) {
    if (!is_directory("/proc/" + name))
      continue;
    long long pid = std::stoll(name);
    std::string command = command_from_pid(pid);
    for (const auto& tid_name : numeric_entries("/proc/" + name + "/task")) {
      long long tid = std::stoll(tid_name);
      out += "<item>" + column("pid", pid) + column("command", command) + column("tid", tid) +
             column("core", core_of_thread(pid, tid)) + "</item>";
    }
  }
  return out + "</osdata>\n";
}

// /proc/cpuinfo, one item per "processor" line; keys and values up to the
// first tab, as gdbserver cuts them.
std::string cpus() {
  std::string out = "<osdata type=\"cpus\">\n";
  bool first = true;
  for (const auto& line : read_lines("/proc/cpuinfo")) {
    size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0)
      continue;
    std::string key = line.substr(0, colon);
    // strtok(":") as gdbserver: the value runs to the next ':' and keeps
    // the line's newline when it reaches the end.
    std::string rest = line.substr(colon + 1) + "\n";
    size_t start = rest.find_first_not_of(':');
    if (start == std::string::npos)
      continue;
    std::string value = rest.substr(start, rest.find(':', start) - start);
    key = key.substr(0, key.find('\t'));
    value = value.substr(0, value.find('\t'));
    if (key == "processor") {
      out += first ? "<item>" : "</item><item>";
      first = false;
    }
    out += "<column name=\"" + xml_escape(key) + "\">" + xml_escape(value) + "</column>";
  }
  if (!first)
    out += "</item>";
  return out + "</osdata>\n";
}

std::string file_descriptors() {
  std::string out = "<osdata type=\"files\">\n";
  for (const auto& name : numeric_entries("/proc")) {
    if (!is_directory("/proc/" + name))
      continue;
    std::string command = command_from_pid(std::stoll(name));
    std::string dir = "/proc/" + name + "/fd";
    for (const auto& fd : numeric_entries(dir)) {
      char buf[1000];
      ssize_t n = readlink((dir + "/" + fd).c_str(), buf, sizeof buf - 1);
      std::string target = n >= 0 ? std::string(buf, n) : fd;
      out += "<item>" + column("pid", name) + column("command", command) +
             column("file descriptor", fd) + column("name", target) + "</item>";
    }
  }
  return out + "</osdata>\n";
}

const char* tcp_state(unsigned state) {
  static const char* const names[] = {"(unknown)",  "ESTABLISHED", "SYN_SENT",  "SYN_RECV",
                                      "FIN_WAIT1",  "FIN_WAIT2",   "TIME_WAIT", "CLOSE",
                                      "CLOSE_WAIT", "LAST_ACK",    "LISTEN",    "CLOSING"};
  return state < std::size(names) ? names[state] : "(unknown)";
}

// One /proc/net/{tcp,udp}{,6} table.
void append_sockets(int family, bool tcp, std::string& out) {
  std::string path =
      std::string("/proc/net/") + (tcp ? "tcp" : "udp") + (family == AF_INET6 ? "6" : "");
  for (const auto& line : read_lines(path)) {
    char local[64], remote[64];
    unsigned local_port, remote_port, state;
    unsigned uid;
    if (std::sscanf(line.c_str(), "%*d: %32[0-9A-F]:%X %32[0-9A-F]:%X %X %*X:%*X %*X:%*X %*X %u",
                    local, &local_port, remote, &remote_port, &state, &uid) != 6)
      continue;
    union {
      sockaddr sa;
      sockaddr_in sin;
      sockaddr_in6 sin6;
    } addr[2] = {};
    const char* hex[2] = {local, remote};
    unsigned ports[2] = {local_port, remote_port};
    socklen_t size = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    for (int i = 0; i < 2; ++i) {
      if (family == AF_INET) {
        std::sscanf(hex[i], "%X", &addr[i].sin.sin_addr.s_addr);
        addr[i].sin.sin_port = htons(ports[i]);
      } else {
        uint32_t* words = addr[i].sin6.sin6_addr.s6_addr32;
        std::sscanf(hex[i], "%8X%8X%8X%8X", &words[0], &words[1], &words[2], &words[3]);
        addr[i].sin6.sin6_port = htons(ports[i]);
      }
      addr[i].sa.sa_family = family;
    }
    char host[2][NI_MAXHOST], service[2][NI_MAXSERV];
    int flags = NI_NUMERICHOST | NI_NUMERICSERV | (tcp ? 0 : NI_DGRAM);
    if (getnameinfo(&addr[0].sa, size, host[0], sizeof host[0], service[0], sizeof service[0],
                    flags) ||
        getnameinfo(&addr[1].sa, size, host[1], sizeof host[1], service[1], sizeof service[1],
                    flags))
      continue;
    out += "<item>" + column("local address", host[0]) + column("local port", service[0]) +
           column("remote address", host[1]) + column("remote port", service[1]) +
           column("state", tcp_state(state)) + column("user", user_from_uid(uid)) +
           column("family", family == AF_INET ? "INET" : "INET6") +
           column("protocol", tcp ? "STREAM" : "DGRAM") + "</item>";
  }
}

std::string sockets() {
  std::string out = "<osdata type=\"I sockets\">\n";
  append_sockets(AF_INET, true, out);
  append_sockets(AF_INET, false, out);
  append_sockets(AF_INET6, true, out);
  append_sockets(AF_INET6, false, out);
  return out + "</osdata>\n";
}

std::string shared_memory() {
  std::string out = "<osdata type=\"shared memory\">\n";
  for (const auto& line : read_lines("/proc/sysvipc/shm")) {
    int key, shmid, size, nattch;
    unsigned perms, uid, gid, cuid, cgid;
    long long cpid, lpid, atime, dtime, ctime;
    if (std::sscanf(line.c_str(), "%d %d %o %d %lld %lld %d %u %u %u %u %lld %lld %lld", &key,
                    &shmid, &perms, &size, &cpid, &lpid, &nattch, &uid, &gid, &cuid, &cgid, &atime,
                    &dtime, &ctime) != 14)
      continue;
    out += "<item>" + column("key", key) + column("shmid", shmid) +
           column("permissions", octal(perms)) + column("size", size) +
           column("creator command", command_from_pid(cpid)) +
           column("last op. command", command_from_pid(lpid)) + column("num attached", nattch) +
           column("user", user_from_uid(uid)) + column("group", group_from_gid(gid)) +
           column("creator user", user_from_uid(cuid)) +
           column("creator group", group_from_gid(cgid)) +
           column("last shmat() time", time_text(atime)) +
           column("last shmdt() time", time_text(dtime)) +
           column("last shmctl() time", time_text(ctime)) + "</item>";
  }
  return out + "</osdata>\n";
}

std::string semaphores() {
  std::string out = "<osdata type=\"semaphores\">\n";
  for (const auto& line : read_lines("/proc/sysvipc/sem")) {
    int key, semid;
    unsigned perms, nsems, uid, gid, cuid, cgid;
    long long otime, ctime;
    if (std::sscanf(line.c_str(), "%d %d %o %u %u %u %u %u %lld %lld", &key, &semid, &perms, &nsems,
                    &uid, &gid, &cuid, &cgid, &otime, &ctime) != 10)
      continue;
    out += "<item>" + column("key", key) + column("semid", semid) +
           column("permissions", octal(perms)) + column("num semaphores", nsems) +
           column("user", user_from_uid(uid)) + column("group", group_from_gid(gid)) +
           column("creator user", user_from_uid(cuid)) +
           column("creator group", group_from_gid(cgid)) +
           column("last semop() time", time_text(otime)) +
           column("last semctl() time", time_text(ctime)) + "</item>";
  }
  return out + "</osdata>\n";
}

std::string message_queues() {
  std::string out = "<osdata type=\"message queues\">\n";
  for (const auto& line : read_lines("/proc/sysvipc/msg")) {
    int key, msqid;
    unsigned perms, cbytes, qnum, uid, gid, cuid, cgid;
    long long lspid, lrpid, stime, rtime, ctime;
    if (std::sscanf(line.c_str(), "%d %d %o %u %u %lld %lld %u %u %u %u %lld %lld %lld", &key,
                    &msqid, &perms, &cbytes, &qnum, &lspid, &lrpid, &uid, &gid, &cuid, &cgid,
                    &stime, &rtime, &ctime) != 14)
      continue;
    out += "<item>" + column("key", key) + column("msqid", msqid) +
           column("permissions", octal(perms)) + column("num used bytes", cbytes) +
           column("num messages", qnum) + column("last msgsnd() command", command_from_pid(lspid)) +
           column("last msgrcv() command", command_from_pid(lrpid)) +
           column("user", user_from_uid(uid)) + column("group", group_from_gid(gid)) +
           column("creator user", user_from_uid(cuid)) +
           column("creator group", group_from_gid(cgid)) +
           column("last msgsnd() time", time_text(stime)) +
           column("last msgrcv() time", time_text(rtime)) +
           column("last msgctl() time", time_text(ctime)) + "</item>";
  }
  return out + "</osdata>\n";
}

// /proc/modules: "name size uses deps status address".
std::string kernel_modules() {
  std::string out = "<osdata type=\"modules\">\n";
  for (const auto& line : read_lines("/proc/modules")) {
    char name[256], deps[4096], status[64];
    unsigned size;
    int uses;
    unsigned long long address;
    if (std::sscanf(line.c_str(), "%255s %u %d %4095s %63s %llx", name, &size, &uses, deps, status,
                    &address) != 6)
      continue;
    char addr[32];
    std::snprintf(addr, sizeof addr, "%llx", address);
    out += "<item>" + column("name", name) + column("size", size) + column("num uses", uses) +
           column("dependencies", deps) + column("status", status) + column("address", addr) +
           "</item>";
  }
  return out + "</osdata>\n";
}

struct OsDataType {
  const char* type;
  const char* title;
  const char* description;
  std::string (*snapshot)();
};

std::string types();

const OsDataType kTypes[] = {
    {"types", "Types", "Listing of info os types you can list", types},
    {"cpus", "CPUs", "Listing of all cpus/cores on the system", cpus},
    {"files", "File descriptors", "Listing of all file descriptors", file_descriptors},
    {"modules", "Kernel modules", "Listing of all loaded kernel modules", kernel_modules},
    {"msg", "Message queues", "Listing of all message queues", message_queues},
    {"processes", "Processes", "Listing of all processes", processes},
    {"procgroups", "Process groups", "Listing of all process groups", process_groups},
    {"semaphores", "Semaphores", "Listing of all semaphores", semaphores},
    {"shm", "Shared-memory regions", "Listing of all shared-memory regions", shared_memory},
    {"sockets", "Sockets", "Listing of all internet-domain sockets", sockets},
    {"threads", "Threads", "Listing of all threads", threads},
};

// The list `info os` prints without an argument (the "types" row itself
// is not listed).
std::string types() {
  std::string out = "<osdata type=\"types\">\n";
  for (size_t i = 1; i < std::size(kTypes); ++i)
    out += std::string("<item>") + column("Type", kTypes[i].type) +
           column("Description", kTypes[i].description) + column("Title", kTypes[i].title) +
           "</item>";
  return out + "</osdata>\n";
}

} // namespace

std::optional<std::string> osdata_document(const std::string& annex) {
  std::string type = annex.empty() ? "types" : annex;
  for (const auto& t : kTypes)
    if (type == t.type)
      return t.snapshot();
  return std::nullopt;
}

const std::string* OsDataSnapshots::read(const std::string& annex, uint64_t offset) {
  auto it = snapshots_.find(annex);
  if (offset == 0 || it == snapshots_.end()) {
    auto doc = osdata_document(annex);
    if (!doc)
      return nullptr;
    it = snapshots_.insert_or_assign(annex, std::move(*doc)).first;
  }
  return &it->second;
}

} // namespace gdbtrace
