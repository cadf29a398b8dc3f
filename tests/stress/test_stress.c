/* test_stress.c -- the accuracy-under-stress suite on the CPU (stress.h): every method, kernel,
 * precision and eps on the stress sets, each result within its bound of the compensated
 * direct sum or refused with a status and a message. Fewer points under the sanitizers. */
#include "stress.h"
#include "testutil.h"

int main(void)
{
    stress_config c;
    stress_config_default(&c, FMK_BACKEND_CPU, SANITIZED ? 400 : 1600);
    return stress_run(&c);
}
