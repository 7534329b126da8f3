#include "cli/commands.h"

int main(int argc, char** argv) { return burst::RunCli(argc, argv); }
