// Entry point of the `tune` executable.
#include <cstdio>

int main() {
  std::fprintf(stderr, "tune: the command line is being assembled\n");
  return 1;
}
