// The program of the layering checks (CMakeLists.txt, dp_library): it does
// nothing. What matters is its link, which takes every object of one library
// and only the libraries that library declares, so that a reference from,
// say, a trial reader into core/ or from the agent into persistence/ is an
// undefined symbol and fails the build.
int main() { return 0; }
