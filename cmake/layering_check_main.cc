// The program of the rules engine's layering checks (CMakeLists.txt,
// dp_rules_room): it does nothing. What matters is its link, which takes every
// object of one room and only the libraries that room may use, so that a
// reference from, say, a trial reader into core/ is an undefined symbol and
// fails the build.
int main() { return 0; }
