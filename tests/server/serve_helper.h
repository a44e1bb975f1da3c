// Starting `tune serve` / `tune worker` as real processes in the server tests.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/subprocess.h"
#include "tests/common/temp_dir.h"

namespace tune::test {

inline std::string TuneBinary() { return std::string(TUNE_BIN_DIR) + "/tune"; }

/// Polls `path` until `pattern` matches its contents (returning the first group, or the whole
/// match) or `limit_s` passes or `gave_up` (when given) says there is no point waiting
/// (returning ""). A safety limit, not a timing assertion.
inline std::string WaitForMatch(const std::string& path, const std::string& pattern, double limit_s = 30,
                                const std::function<bool()>& gave_up = {}) {
  std::regex re(pattern);
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(limit_s * 1000));
  while (std::chrono::steady_clock::now() < end) {
    std::smatch m;
    std::string text = ReadFileBytes(path);
    if (std::regex_search(text, m, re)) return m.size() > 1 ? m[1].str() : m[0].str();
    if (gave_up && gave_up()) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return "";
}

/// A loopback TCP port that was free a moment ago (for restarting a daemon on the same port).
inline int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

/// Starts `tune serve` on `listen` with `extra` flags, output in dir/NAME.out|err; returns
/// the port it printed, or "" when it did not come up (at once when it exited).
inline std::string StartServe(Subprocess& p, const TempDir& dir, const std::string& name, const std::string& listen,
                              const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {TuneBinary(), "serve", "--listen", listen};
  argv.insert(argv.end(), extra.begin(), extra.end());
  if (!p.Start(argv, dir.path(), dir.Join(name + ".out"), dir.Join(name + ".err"))) return "";
  return WaitForMatch(dir.Join(name + ".out"), "listening on 127\\.0\\.0\\.1:([0-9]+)", 30,
                      [&p] { return p.Finished(); });
}

/// Starts `tune serve` as StartServe does on a loopback port that was free a moment ago, and
/// on another when a process took that one meanwhile (parallel tests bind and connect on
/// loopback too); `address` becomes "127.0.0.1:PORT". For daemons started before anything
/// else knows their address. "" when the daemon did not come up.
inline std::string StartServeOnFreePort(Subprocess& p, const TempDir& dir, const std::string& name,
                                        std::string* address, const std::vector<std::string>& extra) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    *address = "127.0.0.1:" + std::to_string(FreePort());
    std::string port = StartServe(p, dir, name, *address, extra);
    if (!port.empty()) return port;
    if (!p.Finished() || ReadFileBytes(dir.Join(name + ".err")).find("already in use") == std::string::npos) return "";
  }
  return "";
}

}  // namespace tune::test
