// Entry point of the `tune` executable.
#include "tuner/cli.h"

int main(int argc, char** argv) { return tune::tuner::RunCli(argc, argv); }
