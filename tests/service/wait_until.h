// The end-to-end tests' polling helper is the tests' one WaitUntil: they
// poll for what the real server, agent or training command makes true, as
// those processes' clocks cannot be advanced.

#ifndef DEBUGPLANE_TESTS_SERVICE_WAIT_UNTIL_H_
#define DEBUGPLANE_TESTS_SERVICE_WAIT_UNTIL_H_

#include "tests/support/wait_until.h"  // IWYU pragma: export

#endif  // DEBUGPLANE_TESTS_SERVICE_WAIT_UNTIL_H_
