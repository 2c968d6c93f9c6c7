// The `tune` binary: everything is in run_cli() so tests can call it in-process.
#include "cli/commands.h"

int main(int argc, char** argv) { return tune::cli::run_cli(argc, argv); }
