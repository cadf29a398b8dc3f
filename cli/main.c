/* main.c -- the fmmkit command: dispatch to the subcommands, --help and --version. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_mpi.h"

static const char usage[] =
    "Usage: fmmkit COMMAND [options]\n"
    "\n"
    "Fast N-body summation: potentials and gradients of 3D (laplace, plummer, regularized)\n"
    "and 2D (log2d, cauchy2d) kernels.\n"
    "\n"
    "Commands:\n"
    "  eval     evaluate the potential and/or gradient of points and charges in .npy files\n"
    "  bench    time a method on generated points and check it against the direct sum\n"
    "  demo     a first run: a Plummer sphere on the best backend present, with a check\n"
    "  poisson  the grid Poisson solver on the vortex-rings test problem, with its errors\n"
    "  sim      an N-body simulation: Plummer, cold collapse, Kepler or a snapshot; files\n"
    "\n"
    "  fmmkit COMMAND --help   the options of a command\n"
    "  fmmkit --version        the version of fmmkit\n"
    "\n"
    "Exit status: 0 success, 1 internal failure, 2 bad usage or bad input.\n";

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"eval", cmd_eval},       {"bench", cmd_bench}, {"demo", cmd_demo},
    {"poisson", cmd_poisson}, {"sim", cmd_sim},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_USAGE;
    }
    const char *word = argv[1];
    if (strcmp(word, "-h") == 0 || strcmp(word, "--help") == 0 || strcmp(word, "help") == 0) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    if (strcmp(word, "--version") == 0 || strcmp(word, "-V") == 0) {
        int devices = fmk_cuda_device_count();
        printf("fmmkit %s (%d CUDA device%s usable)\n", fmk_version(), devices,
               devices == 1 ? "" : "s");
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(word, commands[i].name) == 0) {
            /* under mpirun: MPI for the command's life (a command that does not run
             * distributed runs the same on every rank) */
            int status = cli_mpi_begin(&argc, &argv);
            if (status == CLI_OK)
                status = cli_mpi_exit_status(commands[i].run(argc - 2, argv + 2));
            cli_mpi_end();
            return status;
        }
    if (word[0] == '-')
        return cli_usage(NULL, "unknown option '%s'", word);
    return cli_usage(NULL, "unknown command '%s' (eval, bench, demo, poisson, sim)", word);
}
