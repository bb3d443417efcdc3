// The program that builds the test programs' precompiled headers
// (Note [Test precompiled headers] in cmake/BackplaneTesting.cmake); it is
// built, never run.
int main() { return 0; }
