// The `debugplane` command; everything but the process boundary is in cli.cc.
#include <iostream>

#include "client/cli.h"

int main(int argc, char** argv) {
  return debugplane::client::RunCli(argc, argv, std::cout, std::cerr);
}
