/* cli.h -- what the files of the fmmkit command share: exit statuses, messages, option parsing.
 *
 * Exit statuses (every subcommand):
 *   0  success
 *   1  internal failure: out of memory, a CUDA error, a bug in fmmkit, an output write failed
 *   2  bad usage or bad input: unknown option, malformed number, unreadable or malformed .npy,
 *      or a library status FMK_ERR_ARG / NULL / NONFINITE / UNAVAILABLE / STATE
 */
#ifndef FMMKIT_CLI_H
#define FMMKIT_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "fmmkit.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* Prints "fmmkit CMD: message" on stderr. */
void cli_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Prints "fmmkit CMD: message" and the hint "Try 'fmmkit CMD --help'." on stderr; returns
 * CLI_USAGE so a usage error is one line: return cli_usage(cmd, "...", ...). */
int cli_usage(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Prints "fmmkit CMD: message" (bad input: no usage hint) and returns CLI_USAGE. */
int cli_input_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The exit status for a library status: 2 for the caller's mistakes, 1 for the rest. */
int cli_exit_status(fmk_status status);

/* Prints the library's message for a failed call (plan NULL: the thread's message) and returns
 * the exit status for it. */
int cli_library_error(const char *cmd, const fmk_plan *plan, fmk_status status);

/* Monotonic wall-clock seconds. */
double cli_now(void);

/* ---------------------------------------------------------------------------------------------
 * Options: every subcommand describes its options in a table and calls args_parse once.
 * "--name value" and "--name=value" are both accepted; "-h" and "--help" ask for help.
 * ------------------------------------------------------------------------------------------ */
typedef enum args_kind {
    ARGS_STRING, /* value: const char ** */
    ARGS_DOUBLE, /* value: double *, a finite number */
    ARGS_INT,    /* value: int64_t *, an integer >= min */
    ARGS_FLAG    /* value: int *, set to 1; takes no value */
} args_kind;

typedef struct args_opt {
    const char *name; /* without the leading "--" */
    args_kind kind;
    void *value;
    int64_t min; /* ARGS_INT only: the smallest value accepted */
    int given;   /* set by args_parse: the option appeared */
} args_opt;

/* Parses argv[0..argc) (the words after the subcommand) into the table. Returns CLI_OK, or
 * CLI_USAGE after printing a one-line message and a hint. When help was asked, prints usage to
 * stdout and sets *done: the subcommand then returns CLI_OK. */
int args_parse(const char *cmd, int argc, char **argv, args_opt *opts, int n_opts,
               const char *usage, int *done);

/* The table entry named name (it must exist). */
args_opt *args_find(args_opt *opts, int n_opts, const char *name);
/* CLI_OK when none of the n_names options was given, else the usage error "--NAME: why". */
int args_refuse(const char *cmd, args_opt *opts, int n_opts, const char *const *names,
                size_t n_names, const char *why);

/* Name lookups shared by the subcommands; each prints a usage error and returns CLI_USAGE for
 * an unknown name, else CLI_OK. */
int args_kernel(const char *cmd, const char *name, fmk_kernel *kernel);
int args_method(const char *cmd, const char *name, fmk_method *method);
int args_backend(const char *cmd, const char *name, fmk_backend *backend);
int args_precision(const char *cmd, const char *name, fmk_precision *precision);
int args_walk(const char *cmd, const char *name, fmk_walk *walk);

/* The treecode's options (--order, --leaf-size, --walk) into opts; CLI_OK or CLI_USAGE. */
int args_tree_opts(const char *cmd, int64_t order, int64_t leaf_size, const char *walk,
                   fmk_opts *opts);

/* The options eval and bench share, by name: kernel, method, backend, precision and the
 * treecode's; into *kernel and opts (filled with defaults first). CLI_OK or CLI_USAGE. */
typedef struct args_method_names {
    const char *kernel, *method, *backend, *precision, *walk;
    int64_t order, leaf_size;
} args_method_names;
int args_method_opts(const char *cmd, const args_method_names *names, fmk_kernel *kernel,
                     fmk_opts *opts);

/* The subcommands: argv holds the words after the subcommand's name. */
int cmd_eval(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_poisson(int argc, char **argv);
int cmd_sim(int argc, char **argv);

#endif /* FMMKIT_CLI_H */
