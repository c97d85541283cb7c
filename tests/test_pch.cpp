// The one source of larmor_test_pch, which exists to build tests/test_pch.h into the precompiled header
// that every test executable reuses (tests/CMakeLists.txt, LARMOR_TEST_PCH).
