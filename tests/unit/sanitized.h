/* sanitized.h -- SANITIZED: 1 in the ASan build (make test-asan), where the tests that run long
 * (many points, many steps) run smaller; 0 otherwise. */
#ifndef FMMKIT_TESTS_SANITIZED_H
#define FMMKIT_TESTS_SANITIZED_H

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

#endif /* FMMKIT_TESTS_SANITIZED_H */
